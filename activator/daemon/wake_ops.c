/* The wake pipeline's operations, over claims/, release/ and cgroup/.
 *
 * Each operation either completes at once or starts one asynchronous call
 * (a claim read or CAS, a probe, a process, file work on a worker) and
 * parks the wake in state_of(host)->waiting_wake until that call answers on
 * the loop. Only one operation of a host is in flight at a time, so one slot
 * is enough. */
#include "activator/daemon/wake_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/daemon/announce.h"
#include "activator/daemon/build_prepare.h"
#include "activator/daemon/claim_report.h"
#include "activator/daemon/pin_choice.h"
#include "activator/daemon/record_writes.h"
#include "activator/daemon/restore.h"
#include "activator/probe/probe.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

/* A refusal's message: a store's error (up to 1024 bytes) with our words. */
#define GATE_WHY_SIZE 1400

/* What one wake knows, from `read` to its end. Kept apart from the host so
 * that 10,000 parked hosts do not each carry two claims and a build. */
struct ad_wake_state {
    ad_host *host;
    claim observed;              /* the claim read at `read` */
    claim admitted;              /* our admission, revision = its fencing token */
    rel_resolved resolved;       /* the verified build (exec_fd -1 when none) */
    probe_run *probe;            /* readiness or health probe in flight */
    pl_wake *waiting_wake;       /* an op waiting for an async answer */
    ad_restore *restore;         /* ExecRestore= in flight */
    struct early_prepare *early; /* prepare's work, begun beside the admission */
    unsigned gate_answers_due;   /* the gate's fast path: its write and read in flight */
    pl_reason gate_failure;      /* ... the first of them that refused, and why */
    char gate_why[GATE_WHY_SIZE];
    bool admission_sent;         /* admit sent its compare-and-swap */
    unsigned admission_conflicts; /* admissions made again after a write got in first */
};

/* prepare's file work (resolve, open, digest), begun as the admission's CAS
 * goes out, since it does not depend on the admission: the build to run is
 * the observed claim's choice, which the CAS either keeps or fails. The two
 * then overlap; prepare uses this answer when its choice is the same. */
typedef struct early_prepare {
    ad_wake_state *wake_state; /* NULL once the wake is gone: the answer is dropped */
    ad_pin_choice choice;
    rel_pin pin;
    bool done;
    bool awaited;         /* prepare waits for it (waiting_wake is set) */
    ad_prepared prepared; /* once done; its exec fd is ours */
} early_prepare;

static ad_host *host_of(void *userdata)
{
    return userdata;
}

static ad_wake_state *state_of(const ad_host *host)
{
    return ad_host_wake_state(host);
}

static ad_daemon *daemon_of(const ad_host *host)
{
    return ad_host_daemon(host);
}

static const cfg_host *config_of(const ad_host *host)
{
    return ad_host_config(host);
}

static const char *box_of(const ad_host *host)
{
    return daemon_of(host)->config.box;
}

static const char *name_of(const ad_host *host)
{
    return ad_host_name(host);
}

/* gen's record as it stands, written with phase off the loop. */
static int write_record_async(ad_generation *gen, rec_generation_phase phase,
                              const rec_build_state *build_state, ad_record_written_fn written,
                              act_error *err)
{
    rec_generation_record record;
    ad_generation_fill_record(gen, phase, &record);
    return ad_record_write_async(gen->host, &record, build_state, written, err);
}

/* Takes the parked wake: the answer that arrives completes it exactly once. */
static pl_wake *take_wake(ad_host *host)
{
    return TAKE_PTR(state_of(host)->waiting_wake);
}

/* A claim store call that could not even be started ends the step. */
static void store_call_failed(pl_wake *wake, ad_host *host, const act_error *err)
{
    state_of(host)->waiting_wake = NULL;
    pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: %s", name_of(host), err->message);
}

/* While the claim watch cannot list the claims, nothing is admitted: an
 * admission the store cannot fence must not start anything. */
static bool refused_for_the_store(pl_wake *wake, ad_host *host)
{
    const ad_store_state *store = &daemon_of(host)->store_state;
    if (!store->unavailable)
        return false;
    pl_wake_complete(wake, PL_REASON_STORE_UNAVAILABLE, "host %s: %s", name_of(host),
                     store->refusal);
    return true;
}

/* ---- read ---------------------------------------------------------------- */

/* Whether c lets this box wake the host now: another executor means not
 * ours, and the op's phase must allow a wake. PL_REASON_NONE, or the refusal
 * with its sentence in message. */
static pl_reason judge_claim(const ad_host *host, const claim *c, char *message, size_t size)
{
    act_error err = {0};
    if (!claim_owned_by(c, box_of(host))) {
        const char *executor = claim_executor(c);
        if (executor[0])
            snprintf(message, size, "host %s: claim names box %s as executor, this box is %s",
                     name_of(host), executor, box_of(host));
        else
            snprintf(message, size, "host %s: claim is released (no executor), this box is %s",
                     name_of(host), box_of(host));
        return PL_REASON_NOT_OWNER;
    }
    /* While this box is a move's target, a wake is the move's probe, and
     * only a probe of that very op may be admitted. */
    const char *probe_op = ad_host_probe_op(host);
    int r = probe_op ? claim_probe_allows_wake(c, box_of(host), probe_op, &err)
                     : claim_phase_allows_wake(c, box_of(host), false, &err);
    if (r < 0) {
        snprintf(message, size, "%s", err.message);
        /* A handover in progress: the box that held the host releases it
         * once its generation is proven stopped, and that write wakes the
         * host here (claim_watch.c). */
        return r == -EAGAIN ? PL_REASON_RELEASE_PENDING : PL_REASON_WRONG_PHASE;
    }
    return PL_REASON_NONE;
}

static void judge_observed(pl_wake *wake, ad_host *host)
{
    char message[sizeof(((act_error *)0)->message)];
    ad_host_set_claim_ours(host, claim_owned_by(&state_of(host)->observed, box_of(host)));
    pl_reason reason = judge_claim(host, &state_of(host)->observed, message, sizeof(message));
    if (reason != PL_REASON_NONE) {
        pl_wake_complete(wake, reason, "%s", message);
        return;
    }
    pl_wake_ok(wake);
}

static void on_unclaimed_created(claim_store *store, int result, uint64_t new_revision,
                                 const claim *current, const act_error *err, void *userdata)
{
    ad_host *host = host_of(userdata);
    pl_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        /* Someone created a claim at the same moment: judge theirs. */
        state_of(host)->observed = *current;
        judge_observed(wake, host);
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: cannot create its claim: %s",
                         name_of(host), err->message);
        return;
    }
    state_of(host)->observed.revision = new_revision;
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = name_of(host)},
                   "host %s: had no claim; claimed it for box %s (ClaimUnclaimed=yes)",
                   name_of(host), box_of(host));
    judge_observed(wake, host);
}

/* The claim a box writes for a configured host nobody has claimed yet. */
static void unclaimed_claim(const ad_host *host, claim *out)
{
    *out = (claim){0};
    snprintf(out->host, sizeof(out->host), "%s", name_of(host));
    snprintf(out->op.id, sizeof(out->op.id), "unclaimed");
    out->op.kind = CLAIM_OP_SERVING;
    snprintf(out->op.phase, sizeof(out->op.phase), "assigned");
    snprintf(out->op.exec, sizeof(out->op.exec), "%s", box_of(host));
}

static void on_read(claim_store *store, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    ad_host *host = host_of(userdata);
    if (result < 0) {
        pl_wake_complete(take_wake(host), PL_REASON_STORE_ERROR,
                         "host %s: cannot read its claim: %s", name_of(host), err->message);
        return;
    }
    if (result == 0) {
        if (!daemon_of(host)->config.claim_unclaimed) {
            pl_wake_complete(take_wake(host), PL_REASON_NOT_OWNER,
                             "host %s: no claim names this box (%s); assign it with "
                             "'activatorctl claim assign %s %s'",
                             name_of(host), box_of(host), name_of(host), box_of(host));
            return;
        }
        unclaimed_claim(host, &state_of(host)->observed);
        act_error call_err = {0};
        if (claims_cas_async(store, name_of(host), 0, &state_of(host)->observed,
                             on_unclaimed_created, host, &call_err) < 0)
            store_call_failed(take_wake(host), host, &call_err);
        return;
    }
    state_of(host)->observed = *c;
    judge_observed(take_wake(host), host);
}

const claim *ad_wake_ops_admitted(const ad_host *host)
{
    const ad_wake_state *w = state_of(host);
    return w && w->admitted.revision ? &w->admitted : NULL;
}

bool ad_wake_ops_admission_sent(const ad_host *host)
{
    const ad_wake_state *w = state_of(host);
    return w && w->admission_sent;
}

void ad_wake_state_free(void *data)
{
    ad_wake_state *w = data;
    if (!w)
        return;
    ad_host *host = w->host;
    ad_restore_abandon(w->restore);
    early_prepare *early = w->early;
    if (early && early->done) {
        rel_resolved_release(&early->prepared.resolved);
        free(early);
    } else if (early) {
        early->wake_state = NULL; /* freed with its answer */
    }
    rel_resolved_release(&w->resolved);
    probe_free(w->probe);
    if (state_of(host) == w)
        ad_host_set_wake_state(host, NULL);
    free(w);
}

static void read_claim(void *userdata)
{
    ad_host *host = host_of(userdata);
    act_error err = {0};
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

static void op_read(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_wake_state *w = calloc(1, sizeof(*w));
    if (!w) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: out of memory", name_of(host));
        return;
    }
    w->host = host;
    w->resolved.exec_fd = -1;
    ad_host_set_wake_state(host, w);
    pl_wake_set_data(wake, w, ad_wake_state_free);
    if (refused_for_the_store(wake, host))
        return;
    /* The archive must be of a state nothing writes: a wake waits until
     * the checkpoint is written (unless ExecCheckpoint= snapshots live). */
    if ((ad_host_checkpoint(host) || ad_host_checkpoint_request(host)) &&
        !config_of(host)->checkpoint_live) {
        pl_wake_complete(wake, PL_REASON_CHECKPOINTING,
                         "host %s: a checkpoint of its state is being written; wake it again "
                         "once it is (activatorctl checkpoints %s lists them)",
                         name_of(host), name_of(host));
        return;
    }
    state_of(host)->waiting_wake = wake;
    /* The write-back of the last wake or park goes first: the admission
     * this read leads to must not meet it in the store. */
    if (!ad_claim_report_defer(host, read_claim, host))
        read_claim(host);
}

/* ---- admit --------------------------------------------------------------- */

static void begin_early_prepare(ad_host *host);

/* An admission that lost its compare-and-swap is made again on the claim
 * now there, at most this many times, when the write that won still lets
 * this box serve (see admission_may_retry). */
#define ADMISSION_CONFLICTS_MAX 3

static void admit_on(pl_wake *wake, ad_host *host);

/* The write that won between our read and our admission only changed what
 * the next start runs or the op this box serves under (an operator's pin,
 * hold or unpin, a swap's pin, a claim written back): the same executor,
 * no other admission (the holder's incarnation and session as we read
 * them), and a phase that still allows this wake. Nothing of ours started
 * yet, so admitting on current is what a new wake would do, and the
 * trigger that is waiting is served instead of dropped. Anything else (a
 * new holder, another box, a move) is a real conflict and stays one. */
static bool admission_may_retry(const ad_host *host, const claim *observed, const claim *current,
                                char *why, size_t size)
{
    if (current->revision == 0) {
        snprintf(why, size, "the claim was deleted");
        return false;
    }
    if (strcmp(current->holder.incarnation, observed->holder.incarnation) != 0 ||
        current->holder.session != observed->holder.session) {
        snprintf(why, size, "another admission (session %" PRIu64 ") got in first",
                 current->holder.session);
        return false;
    }
    return judge_claim(host, current, why, size) == PL_REASON_NONE;
}

static void on_admitted(claim_store *store, int result, uint64_t new_revision, const claim *current,
                        const act_error *err, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_wake_state *w = state_of(host);
    pl_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        char why[sizeof(((act_error *)0)->message)];
        if (w->admission_conflicts < ADMISSION_CONFLICTS_MAX &&
            admission_may_retry(host, &w->observed, current, why, sizeof(why))) {
            w->admission_conflicts++;
            act_log_fields(LOG_INFO, &(act_log_ctx){.host = name_of(host)},
                           "host %s: the claim changed between read (revision %" PRIu64
                           ") and admission (now revision %" PRIu64
                           ") in a way that still lets this box serve; admitting again on it "
                           "(%u of %u)",
                           name_of(host), w->observed.revision, current->revision,
                           w->admission_conflicts, ADMISSION_CONFLICTS_MAX);
            w->observed = *current;
            admit_on(wake, host);
            return;
        }
        if (w->admission_conflicts >= ADMISSION_CONFLICTS_MAX)
            snprintf(why, sizeof(why), "it changed %u times in a row", w->admission_conflicts + 1);
        pl_wake_complete(wake, PL_REASON_CLAIM_CHANGED,
                         "host %s: the claim changed between read (revision %" PRIu64
                         ") and admission (now revision %" PRIu64 "): %s",
                         name_of(host), w->observed.revision, current->revision, why);
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: admission failed: %s",
                         name_of(host), err->message);
        return;
    }
    w->admitted.revision = new_revision;
    act_error check = {0};
    if (claim_admission_ok(&w->observed, &w->admitted, daemon_of(host)->incarnation, &check) < 0) {
        pl_wake_complete(wake, PL_REASON_CLAIM_CHANGED, "%s", check.message);
        return;
    }
    pl_wake_ok(wake);
}

/* CASes our admission over the observed claim. */
static void admit_on(pl_wake *wake, ad_host *host)
{
    ad_wake_state *w = state_of(host);
    /* A swap's admission fences N+1 with a new session, but N serves until
     * N+1 is published, and the claim keeps saying so. */
    if (pl_wake_is_swap(wake))
        claim_next_swap_admission(&w->observed, box_of(host), daemon_of(host)->incarnation,
                                  act_wallclock_usec(), &w->admitted);
    else
        claim_next_admission(&w->observed, box_of(host), daemon_of(host)->incarnation,
                             act_wallclock_usec(), &w->admitted);
    act_error err = {0};
    w->waiting_wake = wake;
    w->admission_sent = true;
    if (claims_cas_async(daemon_of(host)->store, name_of(host), w->observed.revision, &w->admitted,
                         on_admitted, host, &err) < 0) {
        store_call_failed(wake, host, &err);
        return;
    }
    begin_early_prepare(host);
}

static void op_admit(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    if (refused_for_the_store(wake, host))
        return;
    admit_on(wake, host);
}

/* ---- restore ------------------------------------------------------------- */

static void op_restore(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_wake_state *w = state_of(host);
    ad_restore_start(host, wake, &w->admitted.state, claim_admitted_generation(&w->admitted),
                     &w->restore);
}

/* ---- reserve, materialize ------------------------------------------------ */

static void op_reserve(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    act_error err = {0};
    ad_generation *gen = NULL;
    /* Every attempt of one admission is the same generation N: the
     * admission names N, and a failed attempt's leaf is removed before the
     * next. */
    int r = ad_generation_new(host, "g", claim_admitted_generation(&state_of(host)->admitted), &gen,
                              &err);
    if (r < 0) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host), err.message);
        return;
    }
    gen->session = state_of(host)->admitted.holder.session;
    gen->admission_revision = state_of(host)->admitted.revision;
    gen->on_exit = ad_wake_ops_on_generation_exit;
    gen->on_exit_userdata = host;
    ad_host_set_starting(host, gen);
    /* Its record is written at the gate, once the build is known and before
     * anything runs in the leaf; a successor daemon that finds an empty leaf
     * without a record retires it with proof. */
    pl_wake_ok(wake);
}

static void on_notify(ntf_socket *notify, const ntf_message *message, void *userdata)
{
    ad_generation *gen = userdata;
    ad_host *host = gen->host;
    /* With another Ready=, the socket is there for the watchdog, and the
     * probe in flight is what completes `ready`. */
    if (!message->ready || gen->ready || config_of(host)->ready.kind != PROBE_NOTIFY)
        return;
    gen->ready = true;
    if (gen == ad_host_starting(host) && state_of(host)->waiting_wake &&
        pl_wake_step(state_of(host)->waiting_wake) == PL_STEP_READY)
        pl_wake_ok(take_wake(host));
}

static void op_materialize(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_generation *gen = ad_host_starting(host);
    act_error err = {0};
    if (ad_host_state_directory(host, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host), err.message);
        return;
    }
    if (ad_generation_wants_notify(config_of(host)) && !gen->notify &&
        ad_generation_open_notify(gen, on_notify, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host), err.message);
        return;
    }
    pl_wake_ok(wake);
}

/* ---- prepare, gate ------------------------------------------------------- */

static pl_reason reason_of_resolve(int r)
{
    switch (r) {
    case -ENOENT:
        return PL_REASON_NOT_STAGED;
    case -EKEYREJECTED:
        return PL_REASON_PIN_MISMATCH;
    case -EBADMSG:
    case -EUCLEAN:
    case -ELOOP:
    case -EPERM:
        return PL_REASON_DIGEST_MISMATCH;
    default:
        return PL_REASON_SETUP_FAILED;
    }
}

/* The held version freezes the host: a build that is not it never runs. */
static bool held_mismatch(const ad_host *host, const claim *c)
{
    return c->held[0] && strcmp(c->held, state_of(host)->resolved.identity.version) != 0;
}

/* The pin, or the fallback of a pin that failed (pin_choice.h). */
static bool pin_mismatch(const ad_host *host, const claim *c)
{
    const rel_identity *id = &state_of(host)->resolved.identity;
    return ad_pin_mismatch(c, id->version, id->build_digest);
}

/* A cold wake does not run a pin that failed: it says which build stands in. */
static void announce_fallback(ad_host *host, const claim *admitted, const ad_generation *gen)
{
    char why[512];
    snprintf(why, sizeof(why), "pin %s failed (%s); running %s, the build that served last",
             admitted->pin.version, admitted->pin.failure_reason, gen->build.version);
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = name_of(host), .build = gen->build.version},
                   "host %s: %s", name_of(host), why);
    ad_publish(host, EV_EVENT_PIN_FALLBACK, gen, why);
}

static void on_prepared(ad_host *host, ad_prepared *prepared, void *userdata)
{
    (void)userdata;
    pl_wake *wake = take_wake(host);
    const claim *admitted = &state_of(host)->admitted;
    if (prepared->result < 0) {
        pl_wake_complete(wake,
                         prepared->script_problem ? PL_REASON_SETUP_FAILED
                                                  : reason_of_resolve(prepared->result),
                         "%s", prepared->err.message);
        return;
    }
    state_of(host)->resolved = prepared->resolved;
    prepared->resolved.exec_fd = -1; /* ours now */
    if (held_mismatch(host, admitted)) {
        pl_wake_complete(wake, PL_REASON_HELD_MISMATCH,
                         "host %s: held on version %s, but the build to run is %s", name_of(host),
                         admitted->held, state_of(host)->resolved.identity.version);
        return;
    }
    rec_build_ref *build = &ad_host_starting(host)->build;
    snprintf(build->version, sizeof(build->version), "%s",
             state_of(host)->resolved.identity.version);
    snprintf(build->digest, sizeof(build->digest), "%s", state_of(host)->resolved.identity.digest);
    snprintf(build->build_digest, sizeof(build->build_digest), "%s",
             state_of(host)->resolved.identity.build_digest);
    ad_host_starting(host)->exec_is_script = prepared->is_script;
    rel_pin unused;
    if (ad_pin_choose(admitted, &unused) == AD_PIN_FALLBACK)
        announce_fallback(host, admitted, ad_host_starting(host));
    pl_wake_ok(wake);
}

/* An early answer that prepare waits for or takes: on_prepared as usual. */
static void finish_with_early(ad_host *host, early_prepare *early)
{
    state_of(host)->early = NULL;
    act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = name_of(host)},
                   "host %s: prepare takes the build resolved beside the admission", name_of(host));
    on_prepared(host, &early->prepared, NULL);
    rel_resolved_release(&early->prepared.resolved);
    free(early);
}

static void on_early_prepared(ad_host *host, ad_prepared *prepared, void *userdata)
{
    early_prepare *early = userdata;
    if (!early->wake_state) {
        free(early); /* its wake is gone; complete_prepare closes the fd */
        return;
    }
    early->prepared = *prepared;
    prepared->resolved.exec_fd = -1; /* ours now */
    early->done = true;
    if (early->awaited)
        finish_with_early(host, early);
}

/* The daemon stops with the early work in flight: its wake, if still
 * there, forgets it. */
static void early_prepare_dropped(void *userdata)
{
    early_prepare *early = userdata;
    if (early->wake_state)
        early->wake_state->early = NULL;
    free(early);
}

static early_prepare *usable_early(ad_host *host, ad_pin_choice choice, const rel_pin *pin);

static void begin_early_prepare(ad_host *host)
{
    ad_wake_state *w = state_of(host);
    rel_pin pin;
    ad_pin_choice choice = ad_pin_choose(&w->admitted, &pin);
    /* An admission made again over a pin may run another build than the
     * first one resolved: that answer is dropped, and this one begun. */
    if (usable_early(host, choice, &pin))
        return; /* a retried attempt's admission: the first one's answer stands */
    early_prepare *early = calloc(1, sizeof(*early));
    if (!early)
        return; /* prepare then does the work itself */
    early->wake_state = w;
    early->prepared.resolved.exec_fd = -1;
    early->choice = choice;
    early->pin = pin;
    act_error err = {0};
    if (early->choice == AD_PIN_FAILED ||
        ad_build_prepare_async_droppable(host, early->choice == AD_PIN_NONE ? NULL : &early->pin,
                                         on_early_prepared, early_prepare_dropped, early,
                                         &err) < 0) {
        free(early);
        return;
    }
    w->early = early;
    act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = name_of(host)},
                   "host %s: resolving its build beside the admission", name_of(host));
}

/* The early answer, when it was asked for the build prepare chose. */
static early_prepare *usable_early(ad_host *host, ad_pin_choice choice, const rel_pin *pin)
{
    early_prepare *early = state_of(host)->early;
    if (!early)
        return NULL;
    bool same = early->choice == choice &&
                (choice == AD_PIN_NONE || (strcmp(early->pin.version, pin->version) == 0 &&
                                           strcmp(early->pin.digest, pin->digest) == 0));
    if (same)
        return early;
    /* Not the build to run after all: drop it when it answers. */
    state_of(host)->early = NULL;
    if (early->done) {
        rel_resolved_release(&early->prepared.resolved);
        free(early);
    } else {
        early->wake_state = NULL;
    }
    return NULL;
}

static void op_prepare(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    const claim *admitted = &state_of(host)->admitted;
    rel_resolved_release(&state_of(host)->resolved);
    rel_pin pin;
    ad_pin_choice choice = ad_pin_choose(admitted, &pin);
    if (choice == AD_PIN_FAILED) {
        pl_wake_complete(wake, PL_REASON_PIN_FAILED,
                         "host %s: the pinned build %s failed (%s: %s) and no build that served "
                         "can stand in; unpin it (activatorctl unpin %s), promote a build, or "
                         "swap to one",
                         name_of(host), admitted->pin.version, admitted->pin.failure_reason,
                         admitted->pin.failure_message, name_of(host));
        return;
    }
    early_prepare *early = usable_early(host, choice, &pin);
    if (early) {
        state_of(host)->waiting_wake = wake;
        early->awaited = true;
        if (early->done)
            finish_with_early(host, early);
        return;
    }
    act_error err = {0};
    state_of(host)->waiting_wake = wake;
    if (ad_build_prepare_async(host, choice == AD_PIN_NONE ? NULL : &pin, on_prepared, NULL, &err) <
        0) {
        state_of(host)->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host), err.message);
    }
}

/* The gate re-reads the claim twice: before and after the build state is
 * written. Between admission and exec another box may have taken the host;
 * if so nothing is exec'd. */
static void gate_second_read(ad_host *host);

/* What the gate's read of the claim says: PL_REASON_NONE when it is still
 * our admission, else why not (with the message in why). */
static pl_reason gate_claim_verdict(ad_host *host, int result, const claim *fresh,
                                    const act_error *err, char *why, size_t size)
{
    if (result < 0) {
        snprintf(why, size, "host %s: gate cannot read the claim: %s", name_of(host),
                 err->message);
        return PL_REASON_STORE_ERROR;
    }
    if (result == 0) {
        snprintf(why, size, "host %s: the claim was deleted before exec", name_of(host));
        return PL_REASON_NOT_OWNER;
    }
    if (fresh->revision == state_of(host)->admitted.revision)
        return PL_REASON_NONE;
    if (!claim_owned_by(fresh, box_of(host))) {
        snprintf(why, size,
                 "host %s: before exec, the claim names box %s as executor, this box is %s",
                 name_of(host), claim_executor(fresh), box_of(host));
        return PL_REASON_NOT_OWNER;
    }
    if (pin_mismatch(host, fresh)) {
        snprintf(why, size, "host %s: before exec, the pin changed to %s", name_of(host),
                 fresh->has_pin ? fresh->pin.version : "(none)");
        return PL_REASON_PIN_MISMATCH;
    }
    snprintf(why, size,
             "host %s: before exec, the claim moved from our admission (revision %" PRIu64
             ") to revision %" PRIu64,
             name_of(host), state_of(host)->admitted.revision, fresh->revision);
    return PL_REASON_CLAIM_CHANGED;
}

static bool gate_claim_still_ours(pl_wake *wake, ad_host *host, int result, const claim *fresh,
                                  const act_error *err)
{
    char why[GATE_WHY_SIZE];
    pl_reason reason = gate_claim_verdict(host, result, fresh, err, why, sizeof(why));
    if (reason == PL_REASON_NONE)
        return true;
    pl_wake_complete(wake, reason, "%s", why);
    return false;
}

static void on_gate_second_read(claim_store *store, int result, const claim *c,
                                const act_error *err, void *userdata)
{
    ad_host *host = host_of(userdata);
    pl_wake *wake = take_wake(host);
    if (gate_claim_still_ours(wake, host, result, c, err))
        pl_wake_ok(wake);
}

static void on_gate_written(ad_host *host, int result, const act_error *err);

/* The pin and held checks the gate makes of our admission. */
static bool gate_build_chosen(pl_wake *wake, ad_host *host)
{
    if (pin_mismatch(host, &state_of(host)->admitted)) {
        pl_wake_complete(wake, PL_REASON_PIN_MISMATCH,
                         "host %s: the resolved build %s is not the pinned %s", name_of(host),
                         state_of(host)->resolved.identity.version,
                         state_of(host)->admitted.pin.version);
        return false;
    }
    if (held_mismatch(host, &state_of(host)->admitted)) {
        pl_wake_complete(wake, PL_REASON_HELD_MISMATCH,
                         "host %s: held on version %s, but the build to run is %s", name_of(host),
                         state_of(host)->admitted.held, state_of(host)->resolved.identity.version);
        return false;
    }
    return true;
}

/* A hash of a build (FNV-1a over its names): the gate's note of what
 * build-state.json names. A collision only costs the fast path's order. */
static uint64_t build_mark(const rec_build_ref *build)
{
    uint64_t h = 1469598103934665603ull;
    const char *parts[] = {build->version, build->digest, build->build_digest};
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
        for (const char *p = parts[i];; p++) {
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
            if (!*p)
                break;
        }
    return h ? h : 1;
}

static void on_gate_first_read(claim_store *store, int result, const claim *c, const act_error *err,
                               void *userdata)
{
    ad_host *host = host_of(userdata);
    pl_wake *wake = take_wake(host);
    if (!gate_claim_still_ours(wake, host, result, c, err) || !gate_build_chosen(wake, host))
        return;
    ad_generation *gen = ad_host_starting(host);
    rec_build_state state = {
        .build = gen->build,
        .generation = gen->number,
        .session = gen->session,
        .written_usec = act_wallclock_usec(),
    };
    act_error write_err = {0};
    state_of(host)->waiting_wake = wake;
    if (write_record_async(gen, REC_GEN_STARTING, &state, on_gate_written, &write_err) < 0) {
        state_of(host)->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                         write_err.message);
    }
}

/* The build state and the record are durable: ownership once more, then
 * the exec. */
static void on_gate_written(ad_host *host, int result, const act_error *err)
{
    if (result < 0) {
        ad_host_set_build_state_mark(host, 0);
        pl_wake_complete(take_wake(host), PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                         err->message);
        return;
    }
    ad_host_set_build_state_mark(host, build_mark(&ad_host_starting(host)->build));
    gate_second_read(host);
}

/* The gate's fast path. When build-state.json already names the build, the
 * only write is the record, which does not depend on the claim: it and the
 * last read of the claim go out together, and the exec waits for both. (The
 * read is still the last thing before the exec; the first read only ever
 * kept a build state from being written for a claim that was no longer
 * ours.) */
static void gate_fast_answered(ad_host *host, pl_reason reason, const char *why)
{
    ad_wake_state *w = state_of(host);
    if (reason != PL_REASON_NONE && w->gate_failure == PL_REASON_NONE) {
        w->gate_failure = reason;
        snprintf(w->gate_why, sizeof(w->gate_why), "%s", why);
    }
    /* Both answers first: the wake ends with nothing of its own in flight. */
    if (--w->gate_answers_due > 0)
        return;
    if (w->gate_failure != PL_REASON_NONE)
        pl_wake_complete(take_wake(host), w->gate_failure, "%s", w->gate_why);
    else
        pl_wake_ok(take_wake(host));
}

static void on_gate_fast_written(ad_host *host, int result, const act_error *err)
{
    char why[GATE_WHY_SIZE] = "";
    if (result < 0)
        snprintf(why, sizeof(why), "host %s: %s", name_of(host), err->message);
    gate_fast_answered(host, result < 0 ? PL_REASON_SETUP_FAILED : PL_REASON_NONE, why);
}

static void on_gate_fast_read(claim_store *store, int result, const claim *c, const act_error *err,
                              void *userdata)
{
    ad_host *host = host_of(userdata);
    char why[GATE_WHY_SIZE] = "";
    pl_reason reason = gate_claim_verdict(host, result, c, err, why, sizeof(why));
    gate_fast_answered(host, reason, why);
}

static void gate_fast(pl_wake *wake, ad_host *host)
{
    ad_generation *gen = ad_host_starting(host);
    act_error err = {0};
    act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = name_of(host)},
                   "host %s: gate: build state unchanged; the record and the claim's read go out "
                   "together",
                   name_of(host));
    ad_wake_state *w = state_of(host);
    w->waiting_wake = wake;
    w->gate_answers_due = 2;
    w->gate_failure = PL_REASON_NONE;
    if (write_record_async(gen, REC_GEN_STARTING, NULL, on_gate_fast_written, &err) < 0) {
        w->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host), err.message);
        return;
    }
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_gate_fast_read, host, &err) <
        0) {
        char why[GATE_WHY_SIZE];
        snprintf(why, sizeof(why), "host %s: %s", name_of(host), err.message);
        gate_fast_answered(host, PL_REASON_STORE_ERROR, why);
    }
}

static void gate_second_read(ad_host *host)
{
    act_error err = {0};
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_gate_second_read, host, &err) <
        0)
        store_call_failed(take_wake(host), host, &err);
}

static void gate_first_read(ad_host *host)
{
    act_error err = {0};
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_gate_first_read, host, &err) <
        0)
        store_call_failed(take_wake(host), host, &err);
}

static void op_gate(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    if (ad_host_build_state_mark(host) == build_mark(&ad_host_starting(host)->build)) {
        if (gate_build_chosen(wake, host))
            gate_fast(wake, host);
        return;
    }
    state_of(host)->waiting_wake = wake;
    gate_first_read(host);
}

/* ---- exec, ready --------------------------------------------------------- */

static void op_exec(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_generation *gen = ad_host_starting(host);
    act_error err = {0};
    int r = ad_generation_spawn(gen, state_of(host)->resolved.exec_fd, &err);
    rel_resolved_release(&state_of(host)->resolved);
    if (r < 0) {
        pl_wake_complete(wake, PL_REASON_EXEC_FAILED, "host %s: %s", name_of(host), err.message);
        return;
    }
    /* The pid reaches the record at publication (phase serving), the only
     * phase a successor daemon resumes; no durable write delays readiness. */
    pl_wake_ok(wake);
}

static void publish_read(ad_host *host);

static void on_probe_done(probe_run *probe, bool ok, const char *why, void *userdata)
{
    ad_host *host = host_of(userdata);
    pl_wake *wake = take_wake(host);
    pl_step step = pl_wake_step(wake);
    bool health = step == PL_STEP_HEALTHY || step == PL_STEP_PUBLISH;
    if (ok && step == PL_STEP_PUBLISH) {
        /* A move's probe, healthy: now it may publish. */
        state_of(host)->waiting_wake = wake;
        publish_read(host);
    } else if (ok) {
        pl_wake_ok(wake);
    } else {
        pl_wake_complete(wake, health ? PL_REASON_UNHEALTHY : PL_REASON_READY_TIMEOUT,
                         "host %s: %s probe failed: %s", name_of(host),
                         health ? "health" : "readiness", why);
    }
    /* Last: why is the probe's own text. */
    probe_free(TAKE_PTR(state_of(host)->probe));
}

/* gen is the generation probed, from inside it: the one starting (ready),
 * or the one just published (healthy). */
static void start_probe(pl_wake *wake, ad_host *host, ad_generation *gen, const probe_spec *spec,
                        uint64_t timeout_usec)
{
    act_error err = {0};
    state_of(host)->waiting_wake = wake;
    probe_runner runner = ad_generation_probe_runner(gen);
    if (probe_start(daemon_of(host)->loop, spec, &runner, timeout_usec, 20 * 1000, on_probe_done,
                    host, &state_of(host)->probe, &err) < 0) {
        state_of(host)->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", name_of(host), err.message);
    }
}

static void op_ready(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_generation *gen = ad_host_starting(host);
    if (config_of(host)->ready.kind != PROBE_NOTIFY) {
        start_probe(wake, host, gen, &config_of(host)->ready, config_of(host)->ready_timeout_usec);
        return;
    }
    if (gen->ready) {
        pl_wake_ok(wake);
        return;
    }
    /* on_notify or on_process_exit completes it; the pipeline bounds the
     * wait by ReadyTimeoutSec and calls abandon when it closes. */
    state_of(host)->waiting_wake = wake;
}

static void op_abandon(pl_wake *wake, pl_step step, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_wake_state *w = state_of(host);
    if (!w)
        return;
    if (w->waiting_wake == wake)
        w->waiting_wake = NULL;
    probe_free(TAKE_PTR(w->probe));
    ad_restore_abandon(w->restore);
}

/* ---- replicate, publish, healthy ----------------------------------------- */

static void op_replicate(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    act_error err = {0};
    if (ad_replicate_start(ad_host_starting(host), &err) < 0) {
        pl_wake_complete(wake, PL_REASON_REPLICATE_FAILED, "host %s: %s", name_of(host),
                         err.message);
        return;
    }
    pl_wake_ok(wake);
}

static void on_serving_written(ad_host *host, int result, const act_error *err);

static void on_published(claim_store *store, int result, uint64_t new_revision,
                         const claim *current, const act_error *err, void *userdata)
{
    ad_host *host = host_of(userdata);
    pl_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        pl_wake_complete(wake, PL_REASON_PUBLISH_LOST,
                         "host %s: the claim changed while publishing generation %" PRIu64,
                         name_of(host), claim_admitted_generation(&state_of(host)->admitted));
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: publishing failed: %s",
                         name_of(host), err->message);
        return;
    }
    state_of(host)->admitted.revision = new_revision;
    ad_generation *gen = ad_host_starting(host);
    ad_host_set_starting(host, NULL);
    gen->serving_usec = act_now_usec();
    /* In a swap, N serves on until N+1 is healthy; it is retired next. */
    if (pl_wake_is_swap(wake))
        ad_host_set_replaced(host, ad_host_serving(host));
    ad_host_set_serving(host, gen);
    ad_host_set_last_served(host, &gen->build);
    /* The record says serving before the step ends, so a daemon that dies
     * after announcing it can resume the generation. */
    act_error write_err = {0};
    state_of(host)->waiting_wake = wake;
    if (write_record_async(gen, REC_GEN_SERVING, NULL, on_serving_written, &write_err) < 0) {
        act_log(LOG_WARNING, "host %s: %s", name_of(host), write_err.message);
        pl_wake_ok(take_wake(host));
    }
}

static void on_serving_written(ad_host *host, int result, const act_error *err)
{
    if (result < 0)
        act_log(LOG_WARNING, "host %s: %s", name_of(host), err->message);
    pl_wake_ok(take_wake(host));
}

static void on_publish_read(claim_store *store, int result, const claim *c, const act_error *err,
                            void *userdata)
{
    ad_host *host = host_of(userdata);
    if (result <= 0) {
        pl_wake_complete(take_wake(host),
                         result < 0 ? PL_REASON_STORE_ERROR : PL_REASON_PUBLISH_LOST,
                         "host %s: before publishing, %s", name_of(host),
                         result < 0 ? err->message : "the claim was deleted");
        return;
    }
    if (!claim_same_admission(&state_of(host)->admitted, c)) {
        pl_wake_complete(take_wake(host), PL_REASON_PUBLISH_LOST,
                         "host %s: before publishing, the claim no longer describes our "
                         "admission (session %" PRIu64 ", generation %" PRIu64 ")",
                         name_of(host), state_of(host)->admitted.holder.session,
                         claim_admitted_generation(&state_of(host)->admitted));
        return;
    }
    char handle[sizeof(c->holder.handle)];
    ad_host_format_handle(host, claim_admitted_generation(c), handle, sizeof(handle));
    claim next;
    claim_next_published(c, handle, &next);
    state_of(host)->admitted = next;
    act_error call_err = {0};
    if (claims_cas_async(store, name_of(host), c->revision, &next, on_published, host, &call_err) <
        0)
        store_call_failed(take_wake(host), host, &call_err);
}

static void publish_read(ad_host *host)
{
    act_error err = {0};
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_publish_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

static void op_publish(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    /* A move's probe passes HealthCheck= before it publishes: its
     * publication ends the move, so what it names must be known to serve
     * (a wake's check comes after, in `healthy`, and runs again there). */
    if (ad_host_probe_op(host) && config_of(host)->health_check && ad_host_starting(host)) {
        start_probe(wake, host, ad_host_starting(host), config_of(host)->health_check,
                    config_of(host)->ready_timeout_usec);
        return;
    }
    state_of(host)->waiting_wake = wake;
    publish_read(host);
}

static void op_healthy(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    /* An exit between ready and here was only noted (the steps in between
     * wait on the claim store): the generation just published is dead. */
    ad_generation *serving = ad_host_serving(host);
    if (serving && serving->exited) {
        pl_wake_complete(wake, PL_REASON_CRASHED,
                         "host %s: generation %" PRIu64 " exited with status %d before it could "
                         "serve",
                         name_of(host), serving->number, serving->exit_status);
        return;
    }
    if (!config_of(host)->health_check) {
        pl_wake_ok(wake);
        return;
    }
    if (!serving) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED,
                         "host %s: no published generation to check the health of", name_of(host));
        return;
    }
    start_probe(wake, host, serving, config_of(host)->health_check,
                config_of(host)->ready_timeout_usec);
}

/* ---- failed -------------------------------------------------------------- */

static void on_generation_retired(ad_generation *gen, bool proven, const char *why, void *userdata)
{
    pl_wake *wake = userdata;
    ad_host *host = gen->host;
    if (ad_host_starting(host) == gen)
        ad_host_set_starting(host, NULL);
    if (ad_host_replaced(host) == gen)
        ad_host_set_replaced(host, NULL);
    if (ad_host_serving(host) == gen) {
        /* A swap's N+1 that failed after its publication: N still serves. */
        ad_host_set_serving(host, ad_host_replaced(host));
        ad_host_set_replaced(host, NULL);
    }
    uint64_t number = gen->number;
    if (proven) {
        ad_generation_free(gen);
        pl_wake_retired(wake, true, "host %s: generation %" PRIu64 " is proven stopped",
                        name_of(host), number);
    } else {
        /* The leaf of an unproven generation is kept on the host: the sweep
         * that the transition starts proves it stopped later. */
        act_log_fields(LOG_ERR, &(act_log_ctx){.host = name_of(host), .generation = number},
                       "host %s: generation %" PRIu64 " is NOT proven stopped: %s", name_of(host),
                       number, why);
        if (!ad_host_keep_unproven(host, TAKE_PTR(gen->leaf), number))
            act_log(LOG_ERR,
                    "host %s: out of memory keeping the leaf of generation %" PRIu64
                    " for the sweep; only the next daemon retires it",
                    name_of(host), number);
        ad_generation_free(gen);
        pl_wake_retired(wake, false, "host %s: generation %" PRIu64 " not proven stopped: %s",
                        name_of(host), number, why);
    }
}

static void op_failed(pl_wake *wake, void *userdata)
{
    ad_host *host = host_of(userdata);
    const pl_retirement *retirement = pl_wake_retirement(wake);
    ad_wake_state *w = state_of(host);
    if (w) {
        ad_restore_abandon(w->restore);
        rel_resolved_release(&w->resolved);
    }
    if (retirement->record_attempt)
        ad_host_count_failed_attempt(host, pl_reason_to_string(retirement->reason));
    ad_generation *serving = ad_host_serving(host);
    ad_generation *starting = ad_host_starting(host);
    ad_generation *replaced = ad_host_replaced(host);
    ad_generation *gen = NULL;
    switch (retirement->cause) {
    case PL_RETIRE_EXITED:
    case PL_RETIRE_PARK:
        gen = serving;
        break;
    case PL_RETIRE_REPLACED:
        gen = replaced;
        break;
    case PL_RETIRE_ATTEMPT:
    case PL_RETIRE_UNCERTAIN:
        /* The attempt's generation; once published it is the serving one. A
         * failed swap attempt never reaches for N: N serves on. */
        gen = starting ? starting : (pl_wake_is_swap(wake) && !replaced ? NULL : serving);
        break;
    }
    if (!gen) {
        pl_wake_retired(wake, true, "host %s: nothing was started", name_of(host));
        return;
    }
    ad_generation_retire(gen, retirement->graceful, on_generation_retired, wake);
}

/* A serving generation that served for FailureResetSec= before it failed
 * is no part of a crash loop: its failure starts the streak again. */
static bool served_long_enough(const ad_generation *gen)
{
    uint64_t served = act_now_usec() - gen->serving_usec;
    return served >= daemon_of(gen->host)->config.failure_reset_usec;
}

/* A generation's main process exited while it was not being retired. Before
 * it is ready, the wake waiting for it fails now; once it serves, the
 * pipeline parks the host (status 0 idle, anything else a failure). Between
 * the two the exit is only noted, and `healthy` finds it. */
void ad_wake_ops_on_generation_exit(ad_generation *gen, void *userdata)
{
    ad_host *host = host_of(userdata);
    ad_wake_state *w = state_of(host);
    if (gen == ad_host_starting(host) && w && w->waiting_wake &&
        pl_wake_step(w->waiting_wake) == PL_STEP_READY) {
        pl_wake *wake = take_wake(host);
        probe_free(TAKE_PTR(w->probe));
        pl_wake_complete(wake, PL_REASON_CRASHED,
                         "host %s: generation %" PRIu64 " exited with status %d before it was "
                         "ready",
                         name_of(host), gen->number, gen->exit_status);
        return;
    }
    if (gen == ad_host_serving(host))
        pl_host_generation_exited(ad_host_pipeline(host), gen->exit_status,
                                  served_long_enough(gen));
}

/* What the supervision of the serving generation noticed. A stop notice is
 * the app asking to stop: the host parks, gracefully, as when it is idle, and
 * its sockets are watched again for the next client. A missed watchdog or
 * failed health checks are failures of the build: the generation is
 * retired at once and the failure-park backoff applies. Only the serving
 * generation of a serving host counts: anything else is on its way out. */
static void on_generation_notice(ad_generation *gen, ad_generation_notice notice, const char *why,
                                 void *userdata)
{
    ad_host *host = host_of(userdata);
    pl_host *pipeline = ad_host_pipeline(host);
    if (gen != ad_host_serving(host) || pl_host_get_state(pipeline) != PL_HOST_SERVING)
        return;
    if (notice == AD_NOTICE_STOPPING) {
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = name_of(host), .generation = gen->number},
                       "%s; parking", why);
        pl_host_park(pipeline, PL_PARK_IDLE);
        return;
    }
    pl_host_generation_failed(
        pipeline, notice == AD_NOTICE_WATCHDOG ? PL_REASON_WATCHDOG : PL_REASON_UNHEALTHY,
        served_long_enough(gen), "%s", why);
}

void ad_wake_ops_supervise(ad_host *host)
{
    ad_generation *serving = ad_host_serving(host);
    if (serving)
        ad_generation_supervise(serving, on_generation_notice, host);
}

const pl_ops ad_wake_ops = {
    .read = op_read,
    .admit = op_admit,
    .restore = op_restore,
    .reserve = op_reserve,
    .materialize = op_materialize,
    .prepare = op_prepare,
    .gate = op_gate,
    .exec = op_exec,
    .ready = op_ready,
    .replicate = op_replicate,
    .publish = op_publish,
    .healthy = op_healthy,
    .failed = op_failed,
    .abandon = op_abandon,
};
