/* What the wake's operations share: one wake's state, the small accessors
 * over it, and what one of their files defines for another. Private to
 * wake/ops.c, wake/state.c, wake/admit.c, wake/start.c, wake/prepare.c,
 * wake/early_start.c, wake/notify.c, wake/gate.c, wake/probe.c, wake/pin_failure.c,
 * wake/publish.c and wake/supervise.c. */
#pragma once

#include <stdio.h>
#include <string.h>

#include "activator/daemon/wake/build_prepare.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/wake/pin_choice.h"
#include "activator/daemon/generations/record_writes.h"
#include "activator/daemon/wake/restore.h"
#include "activator/probe/probe.h"
#include "common/cleanup.h"

/* A refusal's message: a store's error (up to 1024 bytes) with our words. */
#define GATE_WHY_SIZE 1400

/* What a passing probe goes on to in the same step (wake/probe.c). */
typedef void ad_wake_passed_fn(ad_host *host);

/* What one wake knows, from `read` to its end. Kept apart from the host so
 * that 10,000 parked hosts do not each carry two claims and a build. */
struct ad_wake_state {
    ad_host *host;
    claim observed;              /* the claim read at `read` */
    bool observed_seen;          /* ... or the one this box saw last, not read (admit.c) */
    claim admitted;              /* our admission, revision = its fencing token; once the pin
                                  * failed in this wake, with that failure (wake/pin_failure.c) */
    rel_resolved resolved;       /* the verified build (exec_fd -1 when none) */
    probe_run *probe;            /* readiness or health probe in flight */
    ad_wake_passed_fn *passed;   /* ... what its step goes on to if it passes */
    pl_wake *waiting_wake;       /* an op waiting for an async answer */
    ad_restore *restore;         /* ExecRestore= in flight */
    struct early_prepare *early; /* prepare's work, begun beside the admission */
    ad_generation *early_gen;    /* the early start: N reserved, its child held */
    unsigned gate_answers_due;   /* the gate's fast path: its write and read in flight */
    pl_reason gate_failure;      /* ... the first of them that refused, and why */
    char gate_why[GATE_WHY_SIZE];
    bool admission_sent;         /* admit sent its compare-and-swap */
    struct {                     /* its answer, until the wake takes it */
        bool pending;
        int result;
        uint64_t revision;
        claim current;
        act_error err;
    } answer;
    unsigned admission_conflicts; /* admissions made again after a write got in first */
    struct ad_fetch *fetch;       /* the pinned build being fetched for prepare */
    sd_event_source *fetch_timer; /* ... BuildFetchTimeoutSec= for it */
    void (*fetch_again)(ad_host *host, pl_wake *wake); /* ... and prepare once it is staged */
    /* The build this wake fetched: not fetched again (the pin's, then its
     * fallback's, may each be fetched once). */
    rel_pin fetched;
    /* The pinned build's own failure in this wake, the first one: names
     * the pin and its failure_reason (empty: none). */
    claim_pin pin_failure;
};

/* prepare's file work (resolve, open, digest), begun as the admission's CAS
 * goes out, since it does not depend on the admission: the build to run is
 * the observed claim's choice, which the CAS either keeps or fails. The two
 * then overlap; prepare uses this answer when its choice is the same. */
typedef void ad_wake_checked_fn(ad_host *host, const ad_prepared *prepared);
typedef struct early_prepare {
    ad_wake_state *wake_state; /* NULL once the wake is gone: the answer is dropped */
    ad_pin_choice choice;
    rel_pin pin;
    bool done;
    bool awaited;                /* prepare waits for it (waiting_wake is set) */
    ad_wake_checked_fn *checked; /* restore waits to check it (and makes no early start) */
    ad_prepared prepared; /* once done; its exec fd is ours */
} early_prepare;

/* prepare's answer for a pinned build that is not staged here
 * (wake/fetch_wait.c): true when it took the wake, fetching the build from
 * the pin's source and calling again(host, wake) once it is staged, or
 * refusing build_unavailable; false when the answer is prepare's to give. */
typedef void ad_wake_fetched_fn(ad_host *host, pl_wake *wake);
bool ad_wake_fetch_missing_pin(ad_host *host, pl_wake *wake, int resolve_result,
                               ad_wake_fetched_fn *again);
/* The wake ends: a fetch in flight goes on without it. */
void ad_wake_fetch_forget(ad_wake_state *w);

/* gen's record as it stands, written with phase off the loop. */
static inline int write_record_async(ad_generation *gen, rec_generation_phase phase,
                              const rec_build_state *build_state, ad_record_written_fn written,
                              act_error *err)
{
    rec_generation_record record;
    ad_generation_fill_record(gen, phase, &record);
    return ad_record_write_async(gen->host, &record, build_state, written, err);
}

/* Takes the parked wake: the answer that arrives completes it exactly once. */
static inline pl_wake *take_wake(ad_host *host)
{
    return TAKE_PTR(host->wake_state->waiting_wake);
}

/* A claim store call that could not even be started ends the step. */
static inline void store_call_failed(pl_wake *wake, ad_host *host, const act_error *err)
{
    host->wake_state->waiting_wake = NULL;
    pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: %s", host->name, err->message);
}

/* wake/state.c: a compare-and-swap of the wake (what: "admission", "publication") that
 * answered CLAIMS_CHANGED with current: when current is the very write sent,
 * landed though its answer was lost (claim_is_landed_write), says so and
 * turns *result into a success at current's revision. */
void ad_wake_take_landed_write(const ad_host *host, const char *what, const claim *sent,
                               const claim *current, int *result, uint64_t *new_revision);

/* wake/state.c: host's wake state for wake, freed when the wake ends (by
 * ad_wake_state_free); NULL when out of memory. */
ad_wake_state *ad_wake_state_new(pl_wake *wake, ad_host *host);

/* wake/admit.c: read the claim and judge it; compare-and-swap the
 * admission over it. */
void ad_wake_op_read(pl_wake *wake, void *userdata);
void ad_wake_op_admit(pl_wake *wake, void *userdata);

/* wake/start.c: the generation started in its leaf (prepare and the gate
 * come between materialize and exec). */
void ad_wake_op_restore(pl_wake *wake, void *userdata);
void ad_wake_op_reserve(pl_wake *wake, void *userdata);
void ad_wake_op_materialize(pl_wake *wake, void *userdata);
void ad_wake_op_exec(pl_wake *wake, void *userdata);
void ad_wake_op_ready(pl_wake *wake, void *userdata);
void ad_wake_op_replicate(pl_wake *wake, void *userdata);

/* wake/prepare.c: the prepare step, the work it begins beside the
 * admission, and the checks of a build against a claim's pin and hold. */
void ad_wake_op_prepare(pl_wake *wake, void *userdata);
void ad_wake_begin_early_prepare(ad_host *host);
/* Lets go of the early work: freed now if it answered, else when it does. */
void ad_wake_early_forget(ad_wake_state *w);
bool ad_wake_pin_mismatch(const ad_host *host, const claim *c);
/* prepare's refusals of a resolved build: completes wake with the reason
 * (the resolve's failure, a hold on another version) and returns true; false
 * when prepared may run. */
bool ad_wake_prepared_refused(ad_host *host, pl_wake *wake, const ad_prepared *prepared);
/* What every check of a resolved build does: a pinned or held build not
 * staged here is fetched (then again(host, wake) checks once more), and a
 * refusal completes wake; true when either took the wake. */
bool ad_wake_prepared_stops(ad_host *host, pl_wake *wake, const ad_prepared *prepared,
                            ad_wake_fetched_fn *again);
/* A failed pin with no fallback: completes wake pin_failed, returns true. */
bool ad_wake_refuse_failed_pin(ad_host *host, pl_wake *wake);
/* The early answer for the admission's build, begun now if it was not, is
 * given to checked (once it answers, perhaps at once) without being taken:
 * prepare takes it later. False when it could not be begun. */
bool ad_wake_early_prepare_check(ad_host *host, ad_wake_checked_fn *checked);
bool ad_wake_held_mismatch(const claim *c, const char *version);

/* Fills build with the resolved build's names. */
static inline void ad_wake_fill_build(rec_build_ref *build, const rel_identity *id)
{
    snprintf(build->version, sizeof(build->version), "%s", id->version);
    snprintf(build->digest, sizeof(build->digest), "%s", id->digest);
    snprintf(build->build_digest, sizeof(build->build_digest), "%s", id->build_digest);
}

/* The prepared build's executable's path in the build when it is a "#!"
 * script, by which the generation runs it; "" otherwise. */
static inline void ad_wake_set_script(ad_generation *gen, const ad_prepared *prepared)
{
    snprintf(gen->script_path, sizeof(gen->script_path), "%s",
             prepared->is_script ? prepared->resolved.identity.exec_path : "");
}

/* Whether early was asked for the build choice and pin name. */
static inline bool ad_wake_early_is_for(const early_prepare *early, ad_pin_choice choice,
                                        const rel_pin *pin)
{
    return early->choice == choice &&
           (choice == AD_PIN_NONE || (strcmp(early->pin.version, pin->version) == 0 &&
                                      strcmp(early->pin.digest, pin->digest) == 0));
}

/* wake/pin_failure.c: from `failed`, notes the failure of gen when it ran
 * the pin and the build is to blame; before ready with a fallback named
 * (and not in a swap), the wake runs the fallback next. */
void ad_wake_note_pin_failure(pl_wake *wake, ad_host *host, const ad_generation *gen);
/* The publication next of the build published: clears the failure of the
 * pin when it is that build, or records this wake's pin failure (its
 * fallback serves). */
void ad_wake_pin_failure_onto(const ad_host *host, const rec_build_ref *published, claim *next);

/* wake/notify.c: the notify socket gen's build needs (Ready=notify,
 * WatchdogSec=), opened once. */
int ad_wake_open_notify(ad_generation *gen, act_error *err);

/* wake/early_start.c: the early start, a cold wake's generation made
 * ready beside its admission, its child held before the exec. begin
 * takes the early answer; adopt (at reserve) makes it the starting
 * generation when it still stands, else discards it. */
void ad_wake_early_start(ad_host *host, const ad_prepared *prepared);
bool ad_wake_early_start_adopt(ad_host *host);
void ad_wake_early_start_discard(ad_wake_state *w);

/* wake/gate.c: the gate, the checks just before every exec. */
void ad_wake_op_gate(pl_wake *wake, void *userdata);

/* wake/probe.c: runs spec's probe inside gen for the step wake is at. A
 * failed probe ends the step; a passing one too, unless passed is set:
 * then the step goes on with passed(host) (a move's publication). */
void ad_wake_start_probe(pl_wake *wake, ad_host *host, ad_generation *gen, const probe_spec *spec,
                         uint64_t timeout_usec, ad_wake_passed_fn *passed);

/* wake/publish.c: the claim's write naming the generation that serves;
 * then its health. */
void ad_wake_op_publish(pl_wake *wake, void *userdata);
void ad_wake_op_healthy(pl_wake *wake, void *userdata);
