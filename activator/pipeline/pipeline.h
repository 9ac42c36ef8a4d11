/* The per-host wake pipeline: an explicit state machine on an sd-event loop.
 *
 * A wake runs these steps, each an operation from a table the caller
 * supplies (the daemon's adapters over claims/, release/ and cgroup/, or a
 * test's fakes):
 *
 *   (refuse if an earlier generation is not proven stopped)
 *   read, admit, restore                               once per wake
 *   reserve, materialize, prepare, gate, exec, ready   per attempt, at most max_starts
 *   replicate, publish, healthy                        once, after a ready attempt
 *   failed                                             retires a started attempt (and,
 *                                                      in a swap, the generation replaced)
 *
 * Every operation is asynchronous: it is called with the wake and finishes by
 * calling pl_wake_complete (or pl_wake_retired for `failed`) exactly once,
 * either before it returns or later from the loop. The pipeline always moves
 * to the next step from the loop, never from inside a completion, so an
 * operation may complete synchronously without recursion.
 *
 * One wake is in flight per host: triggers arriving meanwhile join it and all
 * get its one outcome. Nothing here blocks; timers use
 * sd_event_add_time_relative on CLOCK_MONOTONIC.
 *
 * A swap (pl_host_swap) is a wake in swap mode on a serving host: the same
 * steps start generation N+1 beside the serving generation N, and on success
 * one more `failed` retires N gracefully. The host stays serving throughout,
 * because N serves until N+1 does; if N+1 does not make it, N serves on. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "activator/pipeline/backoff.h"
#include "activator/pipeline/budget.h"
#include "activator/pipeline/reason.h"
#include "common/error.h"

typedef enum pl_step {
    PL_STEP_NONE = 0, /* "start": before the first operation */
    PL_STEP_READ,
    PL_STEP_ADMIT,
    PL_STEP_RESTORE,
    PL_STEP_RESERVE,
    PL_STEP_MATERIALIZE,
    PL_STEP_PREPARE,
    PL_STEP_GATE,
    PL_STEP_EXEC,
    PL_STEP_READY,
    PL_STEP_REPLICATE,
    PL_STEP_PUBLISH,
    PL_STEP_HEALTHY,
    PL_STEP_FAILED,
    _PL_STEP_MAX,
} pl_step;

/* "start", "read", "admit", ..., "failed". */
const char *pl_step_to_string(pl_step step);

typedef struct pl_host pl_host;
typedef struct pl_wake pl_wake;

typedef void (*pl_step_fn)(pl_wake *wake, void *userdata);

/* The operations. A NULL entry is a step with nothing to do: it succeeds at
 * once (no ExecRestore=, no ExecReplicate=, or a test that does not care). */
typedef struct pl_ops {
    pl_step_fn read;        /* read the claim: not_owner, wrong_phase, store_error */
    pl_step_fn admit;       /* CAS the claim and verify it: claim_changed, store_error */
    pl_step_fn restore;     /* bring the state directory to the claim's checkpoint */
    pl_step_fn reserve;     /* the attempt's generation: number, cgroup leaf, record */
    pl_step_fn materialize; /* what the exec needs on disk: state directory, notify socket */
    pl_step_fn prepare;     /* resolve the live link once, open, hash, compare pin and manifest */
    pl_step_fn gate;        /* ownership, pin, held, build state, ownership again */
    pl_step_fn exec;        /* clone3 the verified fd into the generation's cgroup */
    pl_step_fn ready;       /* wait for readiness; the pipeline bounds it by ready_timeout */
    pl_step_fn replicate;   /* start ExecReplicate= */
    pl_step_fn publish;     /* same admission re-read, CAS the claim to serving */
    pl_step_fn healthy;     /* the health check of the published generation */
    /* Retires a generation (pl_wake_retirement says which and why) and
     * reports with pl_wake_retired whether it is proven stopped. */
    pl_step_fn failed;
    /* Called when the pipeline stops waiting for an operation that has not
     * completed (only `ready`: its window closed, or the wake was cancelled).
     * The operation must stop and must not complete afterwards. */
    void (*abandon)(pl_wake *wake, pl_step step, void *userdata);
} pl_ops;

typedef struct pl_config {
    unsigned max_starts;             /* attempts per wake, 1 to 5 */
    uint64_t backoff_unit_usec;      /* attempt backoff unit: waits 1, 2, 4, 8 units */
    uint64_t ready_timeout_usec;     /* the ready window, above 0 and at most 30 s */
    /* WakeTimeoutSec=: from a wake's read, no attempt starts and no ready
     * window runs past it; 0 for no bound. */
    uint64_t wake_timeout_usec;
    uint64_t park_backoff_base_usec; /* failure-park backoff base (25 ms) */
    uint64_t park_backoff_max_usec;  /* failure-park backoff cap (30 s) */
    double start_rate_per_sec;       /* per-host token bucket rate; 0 for no limit */
    uint64_t budget_wait_max_usec;   /* longest a start waits for a budget before refusal */
    pl_start_cap *start_cap;         /* box-wide cap shared by all hosts; NULL for none */
} pl_config;

/* The defaults (man activatord.conf): 5 starts, 1 s unit, 30 s ready
 * window, 25 ms .. 30 s failure-park backoff, no rate limit, 30 s budget wait,
 * no cap. */
void pl_config_init(pl_config *config);

/* Checks every field and names the first bad one; -EINVAL or 0. */
int pl_config_check(const pl_config *config, act_error *err);

typedef enum pl_host_state {
    PL_HOST_PARKED,   /* nothing runs; a trigger starts a wake */
    PL_HOST_WAKING,   /* a wake is in flight */
    PL_HOST_SERVING,  /* a published, healthy generation serves (a swap may be starting
                       * its successor meanwhile) */
    PL_HOST_RETIRING, /* the serving generation is being retired */
    _PL_HOST_STATE_MAX,
} pl_host_state;

/* "parked", "waking", "serving", "retiring". */
const char *pl_host_state_to_string(pl_host_state state);

typedef enum pl_trigger {
    PL_TRIGGER_CONNECTION,   /* a connection on a parked host's socket */
    PL_TRIGGER_WARM,         /* activatorctl wake */
    PL_TRIGGER_CLAIM_CHANGE, /* a claim that newly names this box */
    _PL_TRIGGER_MAX,
} pl_trigger;

const char *pl_trigger_to_string(pl_trigger trigger);

typedef enum pl_wake_kind {
    PL_WAKE_SERVING,   /* the host serves */
    PL_WAKE_REFUSED,   /* a refusal: nothing of the build ran, nothing retried */
    PL_WAKE_FAILED,    /* starts failed and the wake gave up */
    PL_WAKE_CANCELLED, /* a park request or a lost claim stopped it */
} pl_wake_kind;

const char *pl_wake_kind_to_string(pl_wake_kind kind);

/* The one outcome of a wake, given to every trigger that joined it. */
typedef struct pl_wake_result {
    pl_wake_kind kind;
    pl_reason reason;    /* PL_REASON_NONE when serving */
    pl_step step;        /* the step that refused or failed */
    unsigned attempts;   /* starts begun (reserve called) */
    bool unproven;       /* a generation it started is not proven stopped */
    const char *message; /* one sentence; valid during the callback only */
} pl_wake_result;

typedef void (*pl_wake_done_fn)(pl_host *host, const pl_wake_result *result, void *userdata);

typedef enum pl_wake_event_type {
    PL_WAKE_EVENT_WAKING,    /* a wake began (trigger) */
    PL_WAKE_EVENT_JOINED,    /* a trigger joined the wake in flight (trigger) */
    PL_WAKE_EVENT_DEFERRED,  /* the wake waits out the failure-park backoff (delay_usec) */
    PL_WAKE_EVENT_STEP,      /* an operation was called (step, attempt) */
    PL_WAKE_EVENT_ADMITTED,  /* admit succeeded */
    PL_WAKE_EVENT_HELD,      /* a start waits for a budget (delay_usec, 0 when queued for a slot) */
    PL_WAKE_EVENT_EXECUTED,  /* exec succeeded: the build runs */
    PL_WAKE_EVENT_READY,     /* ready succeeded */
    PL_WAKE_EVENT_PUBLISHED, /* publish succeeded */
    PL_WAKE_EVENT_FAILED,    /* a step failed (step, attempt, reason) */
    PL_WAKE_EVENT_REFUSED,   /* a step refused (step, attempt, reason) */
    PL_WAKE_EVENT_RETIRING,  /* `failed` was called (reason) */
    PL_WAKE_EVENT_RETIRED,   /* the generation is proven stopped */
    PL_WAKE_EVENT_UNPROVEN,  /* the generation is not proven stopped */
    PL_WAKE_EVENT_BACKOFF,   /* next attempt after delay_usec */
    PL_WAKE_EVENT_SERVING,   /* the wake ended serving */
    PL_WAKE_EVENT_GAVE_UP,   /* the wake ended failed (reason) */
    PL_WAKE_EVENT_CANCELLED, /* the wake ended cancelled (reason) */
    PL_WAKE_EVENT_EXITED,    /* the serving generation exited (status) */
    PL_WAKE_EVENT_FAULTED,   /* the serving generation failed while it served (reason,
                              * message): it is retired and the host parks, as after a crash */
    PL_WAKE_EVENT_PARKING,   /* the serving generation is being retired (park_cause) */
    PL_WAKE_EVENT_PARKED,    /* the host is parked */
    PL_WAKE_EVENT_PROVEN,    /* a proof cleared the unproven stop */
    /* A swap's own milestones. They replace WAKING at its start and SERVING,
     * GAVE_UP or CANCELLED at its end, because none of those is true of a
     * host that serves all along; the daemon publishes them as swap.started,
     * swap.done and swap.failed. */
    PL_WAKE_EVENT_SWAP_STARTED, /* a swap began */
    PL_WAKE_EVENT_SWAP_DONE,    /* N+1 serves and N is retired */
    PL_WAKE_EVENT_SWAP_FAILED,  /* N+1 was refused, failed or cancelled (step, reason, message);
                                 * N serves on unless a park or N's exit ended the swap */
    /* The last event of every wake, swap and retirement, after its outcome
     * was delivered and its data freed (reason and step as in the outcome).
     * The host is at rest, or in the wake that followed. Unlike the events
     * above, its observer may call pl_host_wake, _park and _cancel. */
    PL_WAKE_EVENT_ENDED,
    _PL_WAKE_EVENT_MAX,
} pl_wake_event_type;

/* "waking", "joined", ..., "proven". */
const char *pl_wake_event_type_to_string(pl_wake_event_type type);

typedef struct pl_wake_event {
    pl_wake_event_type type;
    pl_step step;
    unsigned attempt; /* 1-based; 0 outside the attempt loop */
    pl_reason reason;
    pl_trigger trigger;
    pl_park_cause park_cause;
    int status;          /* PL_WAKE_EVENT_EXITED: the exit status */
    uint64_t delay_usec; /* DEFERRED, HELD, BACKOFF */
    uint64_t at_usec;    /* CLOCK_MONOTONIC when it happened */
    const char *message; /* a sentence or NULL; valid during the callback only */
    /* The transition belongs to a swap: it is about N+1 (or about N's
     * replacement) while N serves the host's sockets. A consumer that acts on
     * the sockets when a wake is refused or fails (closing the backlog,
     * watching for demand) must not do so for these. */
    bool swap;
} pl_wake_event;

/* Observes every transition. It may be called from inside the pl_host_*
 * calls as well as from the loop; it must not call back into the host,
 * except on PL_WAKE_EVENT_ENDED. */
typedef void (*pl_wake_event_fn)(pl_host *host, const pl_wake_event *event, void *userdata);

/* A host's pipeline. name is checked with act_name_check; config with
 * pl_config_check; both are copied. ops must outlive the host. */
int pl_host_new(sd_event *loop, const char *name, const pl_config *config, const pl_ops *ops,
                void *ops_userdata, pl_wake_event_fn on_event, void *event_userdata, pl_host **ret,
                act_error *err);

/* Frees a host with no wake or retirement in flight; -EBUSY (and nothing
 * freed) otherwise: cancel or park it and let the loop finish first. */
int pl_host_free(pl_host *host);

enum {
    PL_WAKE_STARTED = 0,         /* a new wake began; done is called with its outcome */
    PL_WAKE_JOINED = 1,          /* joined the wake in flight (or the one queued behind a
                                  * retirement); done is called with its outcome */
    PL_WAKE_ALREADY_SERVING = 2, /* the host serves; done is not called */
};

/* A trigger. Returns one of the PL_WAKE_* values, -EINVAL or -ENOMEM. done is never
 * called before this returns: outcomes are delivered from the loop. done may
 * be NULL. The callback must not free the host. During a swap the host serves
 * (N until N+1 replaces it), so a trigger gets PL_WAKE_ALREADY_SERVING. */
int pl_host_wake(pl_host *host, pl_trigger trigger, pl_wake_done_fn done, void *userdata);

/* Stops a wake in flight at its next step boundary (timers and budget waits
 * at once, a pending `ready` at once through abandon), runs `failed` for a
 * started attempt, and ends the wake cancelled with reason (PL_REASON_CANCELLED
 * for a park request, PL_REASON_NOT_OWNER for a claim taken over). Triggers
 * queued behind a retirement are cancelled too. A swap is cancelled the same
 * way: N+1 is retired and N serves on. Once N+1 is healthy and N is being
 * replaced there is nothing left to cancel (park the host instead). Returns 1
 * when something was cancelled, 0 when nothing was in flight. */
int pl_host_cancel(pl_host *host, pl_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parks the host: a serving generation is retired through `failed` (graceful
 * for idle and request), a wake in flight is cancelled. Updates the
 * failure-park streak by cause. During a swap the host turns RETIRING at once:
 * the swap is cancelled (N+1 retired), and when it has ended the generation
 * that serves then (N, or N+1 if N was already being replaced) is parked.
 * Returns 1 when something was started, queued or cancelled, 0 when the host
 * was already parked or retiring. */
int pl_host_park(pl_host *host, pl_park_cause cause);

/* The serving generation's main process exited with status (observed through
 * its pidfd). Status 0 is an idle park; anything else a failure park, whose
 * streak restarts when served_long_enough (it served for FailureResetSec).
 * The generation is retired through `failed` to prove its cgroup empty.
 * -ESRCH when the host is not serving.
 *
 * During a swap, before N+1 is healthy, the exit is N's: the swap is
 * cancelled (N+1 retired) and then N is retired as above, so the host parks.
 * The swap is not carried on in N's place because a crash is a failure park
 * whatever else is in flight (the streak and its backoff pace a crash loop),
 * N's leftover processes must be proven stopped now rather than after N+1's
 * ready window and retries, and `failed` retires one generation at a time.
 * Nothing is refused meanwhile: connections wait in the kept listening
 * sockets, and the next trigger wakes what the claim then names. While N is
 * being replaced (N+1 healthy, N's graceful retirement in flight) the exit is
 * not taken: -EBUSY. N exiting there is the SIGTERM doing its work and its
 * retirement proves it; a caller whose new generation exited reports it again
 * once the swap's done reported PL_WAKE_SERVING. */
int pl_host_generation_exited(pl_host *host, int status, bool served_long_enough);

/* The serving generation failed while it served, though its main process
 * runs: it missed its watchdog (PL_REASON_WATCHDOG) or its repeated health
 * checks (PL_REASON_UNHEALTHY); message says how. It is retired at once,
 * without the grace of a park (it is not serving anyway), and the host parks
 * as after a crash: a failure park, whose streak restarts when
 * served_long_enough, so the failure-park backoff paces the next wake. Emits
 * FAULTED. During a swap, before N+1 is healthy, the swap is cancelled first,
 * as for pl_host_generation_exited. -ESRCH when the host is not serving,
 * -EBUSY while N is being replaced, -EINVAL for PL_REASON_NONE, a refusal or
 * a value out of range. */
int pl_host_generation_failed(pl_host *host, pl_reason reason, bool served_long_enough,
                              const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Starts a swap on a SERVING host: a wake in swap mode runs read, admit,
 * restore, the attempt loop (reserve .. ready, with the usual retries, backoff
 * and budgets) and replicate, publish, healthy for generation N+1 while the
 * host stays PL_HOST_SERVING and N keeps serving. On success N is retired
 * through `failed` with pl_wake_retirement(wake)->cause == PL_RETIRE_REPLACED
 * (graceful: SIGTERM and StopTimeoutSec first), and then done gets
 * PL_WAKE_SERVING.
 *
 * If N+1 fails or is refused at any step, its attempt is retired through
 * `failed` as in a wake (PL_RETIRE_ATTEMPT, or PL_RETIRE_UNCERTAIN after
 * ready), N keeps serving untouched, the host stays SERVING and done gets the
 * failure (PL_WAKE_FAILED or PL_WAKE_REFUSED) with its reason. A refusal
 * (pin_mismatch at prepare, say) is not retried, as in a wake. A failure after
 * N+1 was published (healthy failed) is uncertain: N+1 is retired and N kept,
 * because N still serves while N+1 just failed its health check, and parking
 * both would turn one bad build into an outage; the claim then names N+1 until
 * the caller republishes N. A failed swap
 * leaves the failure-park streak alone: the host never stopped serving.
 *
 * Only one swap per host at a time, so the caller can refuse a second with a
 * clear reason. Returns PL_WAKE_STARTED; -EBUSY when a wake, swap or
 * retirement is in flight; -ESRCH when the host is not serving; -EINVAL
 * without a host; -ENOMEM. done may be NULL and is never called before this
 * returns. */
int pl_host_swap(pl_host *host, pl_wake_done_fn done, void *userdata);

/* A daemon restarted while its generations kept running (crash-only
 * design): a parked host that the daemon found serving, with a claim that
 * still names it, resumes as SERVING without a wake, so its clients never
 * notice the restart. Emits SERVING. -EBUSY unless the host is parked with
 * nothing in flight and no unproven stop. */
int pl_host_adopt_serving(pl_host *host);

/* A generation this pipeline did not start (one a previous daemon left
 * running and the daemon does not resume) is not proven stopped yet: wakes
 * and swaps are refused with unproven_stop until pl_host_report_proof, as
 * after a retirement of its own that was not proven. Nothing is emitted. */
void pl_host_mark_unproven(pl_host *host);

/* An earlier generation is now proven stopped (for example the daemon's sweep
 * found its cgroup empty): clears the unproven stop so wakes run again. */
void pl_host_report_proof(pl_host *host);

/* Replaces the host's configuration (checked as pl_host_new checks it; the
 * start cap must be the same one): what a wake reads from here on is the
 * new one, a wake in flight included. A changed start rate refills the
 * host's bucket at the new rate. May be called from an observer of any
 * event: nothing moves. */
int pl_host_set_config(pl_host *host, const pl_config *config, act_error *err);
/* The configuration in force. */
const pl_config *pl_host_config(const pl_host *host);

const char *pl_host_name(const pl_host *host);
pl_host_state pl_host_get_state(const pl_host *host);
bool pl_host_is_unproven(const pl_host *host);
unsigned pl_host_failure_streak(const pl_host *host);

/* What `failed` is asked to retire. */
typedef enum pl_retire_cause {
    PL_RETIRE_ATTEMPT,   /* a start of this wake failed, was refused or cancelled */
    PL_RETIRE_UNCERTAIN, /* a failure after ready: the claim may name it; give up */
    PL_RETIRE_EXITED,    /* the serving generation's main process exited */
    PL_RETIRE_PARK,      /* the serving generation is parked */
    PL_RETIRE_REPLACED,  /* a swap's N+1 is healthy: retire the generation it replaces */
} pl_retire_cause;

typedef struct pl_retirement {
    /* Also says which generation: ATTEMPT and UNCERTAIN the one this wake (or
     * swap) started, REPLACED the one the swap replaces, PARK and EXITED the
     * one serving. */
    pl_retire_cause cause;
    pl_reason reason;          /* why (PL_REASON_NONE for an idle park) */
    unsigned attempt;          /* the attempt retired; 0 for a serving generation */
    bool record_attempt;       /* record a failed attempt of the build */
    bool exec_started;         /* the build's process was started */
    bool graceful;             /* SIGTERM and StopTimeoutSec first (parks, a swap's attempts);
                                * else kill now */
    pl_park_cause park_cause;  /* PL_RETIRE_PARK and PL_RETIRE_EXITED */
} pl_retirement;

/* Completes the operation in flight: PL_REASON_NONE for success, otherwise
 * the refusal or failure with one sentence. Returns 0, or -ESTALE (and
 * ignores the call) when no operation of this wake is waiting for it. */
int pl_wake_complete(pl_wake *wake, pl_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int pl_wake_ok(pl_wake *wake)
{
    return pl_wake_complete(wake, PL_REASON_NONE, NULL);
}

/* Completes `failed`: proven says the generation is proven stopped (its
 * cgroup empty). Unproven leaves the host refusing wakes with unproven_stop
 * until pl_host_report_proof. Returns 0 or -ESTALE as pl_wake_complete. */
int pl_wake_retired(pl_wake *wake, bool proven, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

pl_host *pl_wake_host(const pl_wake *wake);
/* The operation in flight. */
pl_step pl_wake_step(const pl_wake *wake);
/* The current attempt, 1-based; 0 before the attempt loop. */
unsigned pl_wake_attempt(const pl_wake *wake);
/* What `failed` must retire; valid while `failed` runs. */
const pl_retirement *pl_wake_retirement(const pl_wake *wake);
/* The failure `failed` is retiring the attempt for, in words; valid while
 * `failed` runs. */
const char *pl_wake_failure_message(const pl_wake *wake);
/* From `failed`: the next attempt runs another build (a failed pin's
 * fallback), so it starts without the backoff, which paces retries of one
 * build. It still counts against max_starts and WakeTimeoutSec=. */
void pl_wake_next_attempt_at_once(pl_wake *wake);
/* From `prepare`: this attempt's build has a fallback that must still fit
 * in the wake's bound should it fail, so its ready window ends a fallback's
 * window (ReadyTimeoutSec=, at most half of WakeTimeoutSec=) before the
 * bound. Reset at every attempt. */
void pl_wake_keep_room_for_fallback(pl_wake *wake);
/* True for a wake started by pl_host_swap: ops use it to keep the serving
 * generation separate from the one being started (two generations of the host
 * run at once only during a swap). */
bool pl_wake_is_swap(const pl_wake *wake);

/* Per-wake data for the operations (the admitted claim, the generation's
 * handles...). destroy, if set, runs when the wake is freed. */
void pl_wake_set_data(pl_wake *wake, void *data, void (*destroy)(void *data));
void *pl_wake_get_data(const pl_wake *wake);
