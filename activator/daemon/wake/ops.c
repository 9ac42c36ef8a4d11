/* The wake pipeline's operations, over claims/, release/ and cgroup/.
 *
 * Each operation either completes at once or starts one asynchronous call
 * (a claim read or CAS, a probe, a process, file work on a worker) and
 * parks the wake in host->wake_state->waiting_wake until that call answers on
 * the loop. Only one operation of a host is in flight at a time, so one slot
 * is enough. */
#include "activator/daemon/wake/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/host/step_holds.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/wake/state.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

/* While the claim watch cannot list the claims, nothing is admitted: an
 * admission the store cannot fence must not start anything. */
static bool refused_for_the_store(pl_wake *wake, ad_host *host)
{
    const ad_store_state *store = &host->daemon->store_state;
    if (!store->unavailable)
        return false;
    pl_wake_complete(wake, PL_REASON_STORE_UNAVAILABLE, "host %s: %s", host->name, store->refusal);
    return true;
}

/* ---- read ---------------------------------------------------------------- */

/* Whether c lets this box wake the host now: another executor means not
 * ours, and the op's phase must allow a wake. PL_REASON_NONE, or the refusal
 * with its sentence in message. */
static pl_reason judge_claim(const ad_host *host, const claim *c, char *message, size_t size)
{
    act_error err = {0};
    if (!claim_owned_by(c, host->daemon->config.box)) {
        const char *executor = claim_executor(c);
        if (executor[0])
            snprintf(message, size, "host %s: claim names box %s as executor, this box is %s",
                     host->name, executor, host->daemon->config.box);
        else
            snprintf(message, size, "host %s: claim is released (no executor), this box is %s",
                     host->name, host->daemon->config.box);
        return PL_REASON_NOT_OWNER;
    }
    /* While this box is a move's target, a wake is the move's probe, and
     * only a probe of that very op may be admitted. */
    const char *probe_op = host->probe_op;
    int r = probe_op ? claim_probe_allows_wake(c, host->daemon->config.box, probe_op, &err)
                     : claim_phase_allows_wake(c, host->daemon->config.box, false, &err);
    if (r < 0) {
        snprintf(message, size, "%s", err.message);
        /* A handover in progress: the box that held the host releases it
         * once its generation is proven stopped, and that write wakes the
         * host here (fleet/claim_watch.c). */
        return r == -EAGAIN ? PL_REASON_RELEASE_PENDING : PL_REASON_WRONG_PHASE;
    }
    return PL_REASON_NONE;
}

static void judge_observed(pl_wake *wake, ad_host *host)
{
    char message[sizeof(((act_error *)0)->message)];
    host->claim_ours = claim_owned_by(&host->wake_state->observed, host->daemon->config.box);
    pl_reason reason = judge_claim(host, &host->wake_state->observed, message, sizeof(message));
    if (reason != PL_REASON_NONE) {
        pl_wake_complete(wake, reason, "%s", message);
        return;
    }
    pl_wake_ok(wake);
}

static void on_unclaimed_created(claim_store *store, int result, uint64_t new_revision,
                                 const claim *current, const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    pl_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        /* Someone created a claim at the same moment: judge theirs. */
        host->wake_state->observed = *current;
        judge_observed(wake, host);
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: cannot create its claim: %s",
                         host->name, err->message);
        return;
    }
    host->wake_state->observed.revision = new_revision;
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                   "host %s: had no claim; claimed it for box %s (ClaimUnclaimed=yes)", host->name,
                   host->daemon->config.box);
    judge_observed(wake, host);
}

/* The claim a box writes for a configured host nobody has claimed yet. */
static void unclaimed_claim(const ad_host *host, claim *out)
{
    *out = (claim){0};
    snprintf(out->host, sizeof(out->host), "%s", host->name);
    snprintf(out->op.id, sizeof(out->op.id), "unclaimed");
    out->op.kind = CLAIM_OP_SERVING;
    snprintf(out->op.phase, sizeof(out->op.phase), "assigned");
    snprintf(out->op.exec, sizeof(out->op.exec), "%s", host->daemon->config.box);
}

static void on_read(claim_store *store, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    ad_host *host = userdata;
    if (result < 0) {
        pl_wake_complete(take_wake(host), PL_REASON_STORE_ERROR,
                         "host %s: cannot read its claim: %s", host->name, err->message);
        return;
    }
    if (result == 0) {
        if (!host->daemon->config.claim_unclaimed) {
            pl_wake_complete(take_wake(host), PL_REASON_NOT_OWNER,
                             "host %s: no claim names this box (%s); assign it with "
                             "'activatorctl claim assign %s %s'",
                             host->name, host->daemon->config.box, host->name,
                             host->daemon->config.box);
            return;
        }
        unclaimed_claim(host, &host->wake_state->observed);
        act_error call_err = {0};
        if (claims_cas_async(store, host->name, 0, &host->wake_state->observed,
                             on_unclaimed_created, host, &call_err) < 0)
            store_call_failed(take_wake(host), host, &call_err);
        return;
    }
    host->wake_state->observed = *c;
    judge_observed(take_wake(host), host);
}

const claim *ad_wake_ops_admitted(const ad_host *host)
{
    const ad_wake_state *w = host->wake_state;
    return w && w->admitted.revision ? &w->admitted : NULL;
}

bool ad_wake_ops_admission_sent(const ad_host *host)
{
    const ad_wake_state *w = host->wake_state;
    return w && w->admission_sent;
}

void ad_wake_state_free(void *data)
{
    ad_wake_state *w = data;
    if (!w)
        return;
    ad_host *host = w->host;
    ad_restore_abandon(w->restore);
    ad_wake_early_start_discard(w);
    ad_wake_early_forget(w);
    rel_resolved_release(&w->resolved);
    probe_free(w->probe);
    if (host->wake_state == w)
        host->wake_state = NULL;
    free(w);
}

static void read_claim(void *userdata)
{
    ad_host *host = userdata;
    act_error err = {0};
    if (claims_read_async(host->daemon->store, host->name, on_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

static void op_read(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = calloc(1, sizeof(*w));
    if (!w) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: out of memory", host->name);
        return;
    }
    w->host = host;
    w->resolved.exec_fd = -1;
    host->wake_state = w;
    pl_wake_set_data(wake, w, ad_wake_state_free);
    if (refused_for_the_store(wake, host))
        return;
    /* The archive must be of a state nothing writes: a wake waits until
     * the checkpoint is written (unless ExecCheckpoint= snapshots live). */
    if ((host->checkpoint || host->checkpoint_request) && !ad_host_config(host)->checkpoint_live) {
        pl_wake_complete(wake, PL_REASON_CHECKPOINTING,
                         "host %s: a checkpoint of its state is being written; wake it again "
                         "once it is (activatorctl checkpoints %s lists them)",
                         host->name, host->name);
        return;
    }
    host->wake_state->waiting_wake = wake;
    /* The write-back of the last wake or park goes first: the admission
     * this read leads to must not meet it in the store. */
    if (!ad_claim_report_defer(host, read_claim, host))
        read_claim(host);
}

/* ---- admit --------------------------------------------------------------- */


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

/* The admission's answer, kept in w->answer, taken by the wake. */
static void admission_answered(ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    /* A held answer (test hooks) may find its wake gone, or another one. */
    if (!w || !w->answer.pending)
        return;
    w->answer.pending = false;
    int result = w->answer.result;
    uint64_t new_revision = w->answer.revision;
    const claim *current = &w->answer.current;
    const act_error *err = &w->answer.err;
    pl_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        char why[sizeof(((act_error *)0)->message)];
        if (w->admission_conflicts < ADMISSION_CONFLICTS_MAX &&
            admission_may_retry(host, &w->observed, current, why, sizeof(why))) {
            w->admission_conflicts++;
            act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                           "host %s: the claim changed between read (revision %" PRIu64
                           ") and admission (now revision %" PRIu64
                           ") in a way that still lets this box serve; admitting again on it "
                           "(%u of %u)",
                           host->name, w->observed.revision, current->revision,
                           w->admission_conflicts, ADMISSION_CONFLICTS_MAX);
            w->observed = *current;
            /* The new admission may name another build (a pin) or another
             * generation: what was made beside the first one goes. */
            ad_wake_early_start_discard(w);
            admit_on(wake, host);
            return;
        }
        if (w->admission_conflicts >= ADMISSION_CONFLICTS_MAX)
            snprintf(why, sizeof(why), "it changed %u times in a row", w->admission_conflicts + 1);
        pl_wake_complete(wake, PL_REASON_CLAIM_CHANGED,
                         "host %s: the claim changed between read (revision %" PRIu64
                         ") and admission (now revision %" PRIu64 "): %s",
                         host->name, w->observed.revision, current->revision, why);
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: admission failed: %s", host->name,
                         err->message);
        return;
    }
    w->admitted.revision = new_revision;
    act_error check = {0};
    if (claim_admission_ok(&w->observed, &w->admitted, host->daemon->incarnation, &check) < 0) {
        pl_wake_complete(wake, PL_REASON_CLAIM_CHANGED, "%s", check.message);
        return;
    }
    pl_wake_ok(wake);
}

static void on_admitted(claim_store *store, int result, uint64_t new_revision, const claim *current,
                        const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = host->wake_state;
    w->answer.pending = true;
    w->answer.result = result;
    w->answer.revision = new_revision;
    if (current)
        w->answer.current = *current;
    if (err)
        w->answer.err = *err;
#ifdef ACTIVATOR_TEST_HOOKS
    /* A test holds the answer here to see what was made beside it. */
    ad_step_holds_point(host, "admitted", admission_answered);
#else
    admission_answered(host);
#endif
}

/* CASes our admission over the observed claim. */
static void admit_on(pl_wake *wake, ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    /* A swap's admission fences N+1 with a new session, but N serves until
     * N+1 is published, and the claim keeps saying so. */
    if (pl_wake_is_swap(wake))
        claim_next_swap_admission(&w->observed, host->daemon->config.box, host->daemon->incarnation,
                                  act_wallclock_usec(), &w->admitted);
    else
        claim_next_admission(&w->observed, host->daemon->config.box, host->daemon->incarnation,
                             act_wallclock_usec(), &w->admitted);
    act_error err = {0};
    w->waiting_wake = wake;
    w->admission_sent = true;
    if (claims_cas_async(host->daemon->store, host->name, w->observed.revision, &w->admitted,
                         on_admitted, host, &err) < 0) {
        store_call_failed(wake, host, &err);
        return;
    }
    ad_wake_begin_early_prepare(host);
}

static void op_admit(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    if (refused_for_the_store(wake, host))
        return;
    admit_on(wake, host);
}

/* ---- restore ------------------------------------------------------------- */

static void op_restore(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = host->wake_state;
    /* A restore rewrites the state directory an early start's view shows. */
    if (w->early_gen && ad_restore_would_run(host, &w->admitted.state))
        ad_wake_early_start_discard(w);
    ad_restore_start(host, wake, &w->admitted.state, claim_admitted_generation(&w->admitted),
                     &w->restore);
}

/* ---- reserve, materialize ------------------------------------------------ */

static void op_reserve(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    act_error err = {0};
    ad_generation *gen = NULL;
    /* Every attempt of one admission is the same generation N: the
     * admission names N, and a failed attempt's leaf is removed before the
     * next. The first attempt may find N made ready beside the admission. */
    if (ad_wake_early_start_adopt(host)) {
        gen = host->starting;
    } else if (ad_generation_new(host, "g", claim_admitted_generation(&host->wake_state->admitted),
                                 &gen, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
        return;
    }
    gen->session = host->wake_state->admitted.holder.session;
    gen->admission_revision = host->wake_state->admitted.revision;
    gen->on_exit = ad_wake_ops_on_generation_exit;
    gen->on_exit_userdata = host;
    host->starting = gen;
    /* Its record is written at the gate, once the build is known and before
     * anything runs in the leaf; a successor daemon that finds an empty leaf
     * without a record retires it with proof. */
    pl_wake_ok(wake);
}

static void op_materialize(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    ad_generation *gen = host->starting;
    act_error err = {0};
    if (ad_host_state_directory(host, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
        return;
    }
    if (ad_wake_open_notify(gen, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
        return;
    }
    pl_wake_ok(wake);
}

/* ---- exec, ready --------------------------------------------------------- */

static void op_exec(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    ad_generation *gen = host->starting;
    act_error err = {0};
    int r = ad_generation_spawn(gen, host->wake_state->resolved.exec_fd, &err);
    rel_resolved_release(&host->wake_state->resolved);
    if (r < 0) {
        pl_wake_complete(wake, PL_REASON_EXEC_FAILED, "host %s: %s", host->name, err.message);
        return;
    }
    /* The pid reaches the record at publication (phase serving), the only
     * phase a successor daemon resumes; no durable write delays readiness. */
    pl_wake_ok(wake);
}

static void on_probe_done(probe_run *probe, bool ok, const char *why, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_passed_fn *passed = host->wake_state->passed;
    pl_wake *wake = take_wake(host);
    pl_step step = pl_wake_step(wake);
    bool health = step == PL_STEP_HEALTHY || step == PL_STEP_PUBLISH;
    if (ok && passed) {
        /* The step goes on (a move's probe, healthy: now it may publish). */
        host->wake_state->waiting_wake = wake;
        passed(host);
    } else if (ok) {
        pl_wake_ok(wake);
    } else {
        pl_wake_complete(wake, health ? PL_REASON_UNHEALTHY : PL_REASON_READY_TIMEOUT,
                         "host %s: %s probe failed: %s", host->name,
                         health ? "health" : "readiness", why);
    }
    /* Last: why is the probe's own text. */
    probe_free(TAKE_PTR(host->wake_state->probe));
}

/* gen is the generation probed, from inside it: the one starting (ready),
 * or the one just published (healthy). A failed probe ends the step; a
 * passing one too, unless passed is set: then the step goes on with
 * passed(host) (a move's publication). */
static void start_probe(pl_wake *wake, ad_host *host, ad_generation *gen, const probe_spec *spec,
                        uint64_t timeout_usec, ad_wake_passed_fn *passed)
{
    act_error err = {0};
    host->wake_state->waiting_wake = wake;
    host->wake_state->passed = passed;
    probe_runner runner = ad_generation_probe_runner(gen);
    if (probe_start(host->daemon->loop, spec, &runner, timeout_usec, 20 * 1000, on_probe_done, host,
                    &host->wake_state->probe, &err) < 0) {
        host->wake_state->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
    }
}

static void op_ready(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    ad_generation *gen = host->starting;
    if (ad_host_config(host)->ready.kind != PROBE_NOTIFY) {
        start_probe(wake, host, gen, &ad_host_config(host)->ready,
                    ad_host_config(host)->ready_timeout_usec, NULL);
        return;
    }
    if (gen->ready) {
        pl_wake_ok(wake);
        return;
    }
    /* on_notify or on_process_exit completes it; the pipeline bounds the
     * wait by ReadyTimeoutSec and calls abandon when it closes. */
    host->wake_state->waiting_wake = wake;
}

static void op_abandon(pl_wake *wake, pl_step step, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = host->wake_state;
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
    ad_host *host = userdata;
    act_error err = {0};
    if (ad_replicate_start(host->starting, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_REPLICATE_FAILED, "host %s: %s", host->name, err.message);
        return;
    }
    pl_wake_ok(wake);
}

static void on_serving_written(ad_host *host, int result, const act_error *err);

static void on_published(claim_store *store, int result, uint64_t new_revision,
                         const claim *current, const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    pl_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        pl_wake_complete(wake, PL_REASON_PUBLISH_LOST,
                         "host %s: the claim changed while publishing generation %" PRIu64,
                         host->name, claim_admitted_generation(&host->wake_state->admitted));
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: publishing failed: %s", host->name,
                         err->message);
        return;
    }
    host->wake_state->admitted.revision = new_revision;
    ad_generation *gen = host->starting;
    host->starting = NULL;
    gen->serving_usec = act_now_usec();
    /* In a swap, N serves on until N+1 is healthy; it is retired next. */
    if (pl_wake_is_swap(wake))
        host->replaced = host->serving;
    host->serving = gen;
    host->last_served = gen->build;
    /* The record says serving before the step ends, so a daemon that dies
     * after announcing it can resume the generation. */
    act_error write_err = {0};
    host->wake_state->waiting_wake = wake;
    if (write_record_async(gen, REC_GEN_SERVING, NULL, on_serving_written, &write_err) < 0) {
        act_log(LOG_WARNING, "host %s: %s", host->name, write_err.message);
        pl_wake_ok(take_wake(host));
    }
}

static void on_serving_written(ad_host *host, int result, const act_error *err)
{
    if (result < 0)
        act_log(LOG_WARNING, "host %s: %s", host->name, err->message);
    pl_wake_ok(take_wake(host));
}

static void on_publish_read(claim_store *store, int result, const claim *c, const act_error *err,
                            void *userdata)
{
    ad_host *host = userdata;
    if (result <= 0) {
        pl_wake_complete(take_wake(host),
                         result < 0 ? PL_REASON_STORE_ERROR : PL_REASON_PUBLISH_LOST,
                         "host %s: before publishing, %s", host->name,
                         result < 0 ? err->message : "the claim was deleted");
        return;
    }
    if (!claim_same_admission(&host->wake_state->admitted, c)) {
        pl_wake_complete(take_wake(host), PL_REASON_PUBLISH_LOST,
                         "host %s: before publishing, the claim no longer describes our "
                         "admission (session %" PRIu64 ", generation %" PRIu64 ")",
                         host->name, host->wake_state->admitted.holder.session,
                         claim_admitted_generation(&host->wake_state->admitted));
        return;
    }
    char handle[sizeof(c->holder.handle)];
    ad_host_format_handle(host, claim_admitted_generation(c), handle, sizeof(handle));
    claim next;
    claim_next_published(c, handle, &next);
    host->wake_state->admitted = next;
    act_error call_err = {0};
    if (claims_cas_async(store, host->name, c->revision, &next, on_published, host, &call_err) < 0)
        store_call_failed(take_wake(host), host, &call_err);
}

static void publish_read(ad_host *host)
{
    act_error err = {0};
    if (claims_read_async(host->daemon->store, host->name, on_publish_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

static void op_publish(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    /* A move's probe passes HealthCheck= before it publishes: its
     * publication ends the move, so what it names must be known to serve
     * (a wake's check comes after, in `healthy`, and runs again there).
     * Once the check passes, the step goes on with publish_read. */
    if (host->probe_op && ad_host_config(host)->health_check && host->starting) {
        start_probe(wake, host, host->starting, ad_host_config(host)->health_check,
                    ad_host_config(host)->ready_timeout_usec, publish_read);
        return;
    }
    host->wake_state->waiting_wake = wake;
    publish_read(host);
}

static void op_healthy(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    /* An exit between ready and here was only noted (the steps in between
     * wait on the claim store): the generation just published is dead. */
    ad_generation *serving = host->serving;
    if (serving && serving->exited) {
        pl_wake_complete(wake, PL_REASON_CRASHED,
                         "host %s: generation %" PRIu64 " exited with status %d before it could "
                         "serve",
                         host->name, serving->number, serving->exit_status);
        return;
    }
    if (!ad_host_config(host)->health_check) {
        pl_wake_ok(wake);
        return;
    }
    if (!serving) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED,
                         "host %s: no published generation to check the health of", host->name);
        return;
    }
    start_probe(wake, host, serving, ad_host_config(host)->health_check,
                ad_host_config(host)->ready_timeout_usec, NULL);
}

/* ---- failed -------------------------------------------------------------- */

static void on_generation_retired(ad_generation *gen, bool proven, const char *why, void *userdata)
{
    pl_wake *wake = userdata;
    ad_host *host = gen->host;
    if (host->starting == gen)
        host->starting = NULL;
    if (host->replaced == gen)
        host->replaced = NULL;
    if (host->serving == gen) {
        /* A swap's N+1 that failed after its publication: N still serves. */
        host->serving = host->replaced;
        host->replaced = NULL;
    }
    uint64_t number = gen->number;
    if (proven) {
        ad_generation_free(gen);
        pl_wake_retired(wake, true, "host %s: generation %" PRIu64 " is proven stopped", host->name,
                        number);
    } else {
        /* The leaf of an unproven generation is kept on the host: the sweep
         * that the transition starts proves it stopped later. */
        act_log_fields(LOG_ERR, &(act_log_ctx){.host = host->name, .generation = number},
                       "host %s: generation %" PRIu64 " is NOT proven stopped: %s", host->name,
                       number, why);
        if (!ad_host_keep_unproven(host, TAKE_PTR(gen->leaf), number))
            act_log(LOG_ERR,
                    "host %s: out of memory keeping the leaf of generation %" PRIu64
                    " for the sweep; only the next daemon retires it",
                    host->name, number);
        ad_generation_free(gen);
        pl_wake_retired(wake, false, "host %s: generation %" PRIu64 " not proven stopped: %s",
                        host->name, number, why);
    }
}

static void op_failed(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    const pl_retirement *retirement = pl_wake_retirement(wake);
    ad_wake_state *w = host->wake_state;
    if (w) {
        ad_restore_abandon(w->restore);
        rel_resolved_release(&w->resolved);
    }
    if (retirement->record_attempt)
        ad_host_count_failed_attempt(host, pl_reason_to_string(retirement->reason));
    ad_generation *serving = host->serving;
    ad_generation *starting = host->starting;
    ad_generation *replaced = host->replaced;
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
        pl_wake_retired(wake, true, "host %s: nothing was started", host->name);
        return;
    }
    ad_generation_retire(gen, retirement->graceful, on_generation_retired, wake);
}

/* A serving generation that served for FailureResetSec= before it failed
 * is no part of a crash loop: its failure starts the streak again. */
static bool served_long_enough(const ad_generation *gen)
{
    uint64_t served = act_now_usec() - gen->serving_usec;
    return served >= gen->host->daemon->config.failure_reset_usec;
}

/* A generation's main process exited while it was not being retired. Before
 * it is ready, the wake waiting for it fails now; once it serves, the
 * pipeline parks the host (status 0 idle, anything else a failure). Between
 * the two the exit is only noted, and `healthy` finds it. */
void ad_wake_ops_on_generation_exit(ad_generation *gen, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = host->wake_state;
    if (gen == host->starting && w && w->waiting_wake &&
        pl_wake_step(w->waiting_wake) == PL_STEP_READY) {
        pl_wake *wake = take_wake(host);
        probe_free(TAKE_PTR(w->probe));
        pl_wake_complete(wake, PL_REASON_CRASHED,
                         "host %s: generation %" PRIu64 " exited with status %d before it was "
                         "ready",
                         host->name, gen->number, gen->exit_status);
        return;
    }
    if (gen == host->serving)
        pl_host_generation_exited(host->pipeline, gen->exit_status, served_long_enough(gen));
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
    ad_host *host = userdata;
    pl_host *pipeline = host->pipeline;
    if (gen != host->serving || pl_host_get_state(pipeline) != PL_HOST_SERVING)
        return;
    if (notice == AD_NOTICE_STOPPING) {
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name, .generation = gen->number},
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
    ad_generation *serving = host->serving;
    if (serving)
        ad_generation_supervise(serving, on_generation_notice, host);
}

const pl_ops ad_wake_ops = {
    .read = op_read,
    .admit = op_admit,
    .restore = op_restore,
    .reserve = op_reserve,
    .materialize = op_materialize,
    .prepare = ad_wake_op_prepare,
    .gate = ad_wake_op_gate,
    .exec = op_exec,
    .ready = op_ready,
    .replicate = op_replicate,
    .publish = op_publish,
    .healthy = op_healthy,
    .failed = op_failed,
    .abandon = op_abandon,
};
