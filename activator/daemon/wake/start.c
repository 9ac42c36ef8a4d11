/* The steps that start the admitted generation N in its leaf: `restore`
 * (the state directory brought to the claim's checkpoint), `reserve` (N
 * and its leaf, or the early start taken), `materialize` (the state
 * directory and N's notify socket), `exec` (the verified build run in the
 * leaf) and `ready`; then `replicate` (ExecReplicate= beside the app).
 * `prepare` and the gate run between materialize and exec
 * (wake/prepare.c, wake/gate.c). `reserve` through `ready` are one
 * attempt, made again for the same N up to MaxStarts= times. */
#include "activator/daemon/wake/ops.h"

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/wake/internal.h"
#include "common/log.h"

/* ---- restore ------------------------------------------------------------- */

/* A restore rewrites the host's state for the start that follows, so that
 * start must be one that may happen: before a restore changes anything,
 * the build the admission chose is resolved and hashed (the work prepare
 * would do, begun beside the admission and taken by prepare afterwards)
 * and checked against the pin and the hold, as prepare checks it. The
 * admission itself (our compare-and-swap) proved the claim ours. A wake
 * refused by these checks leaves the state as it was. */

static void restore_now(ad_host *host, pl_wake *wake)
{
    ad_wake_state *w = host->wake_state;
    ad_restore_start(host, wake, &w->admitted.state, claim_admitted_generation(&w->admitted),
                     &w->restore);
}

static void restore_after_fetch(ad_host *host, pl_wake *wake)
{
    /* The answer that said "not staged" goes; the fetched build is resolved. */
    ad_wake_early_forget(host->wake_state);
    ad_wake_op_restore(wake, host);
}

/* The checkpoint names the build that last ran against its state: another
 * one than this wake runs is said, and refused when the host asks. True
 * when the wake was refused. */
static bool refused_for_the_states_build(ad_host *host, pl_wake *wake, const ad_prepared *prepared)
{
    const claim_state *state = &host->wake_state->admitted.state;
    const rel_identity *id = &prepared->resolved.identity;
    if (!state->build_version[0] || !state->build_digest[0] ||
        strcmp(state->build_digest, id->build_digest) == 0)
        return false;
    char why[512];
    snprintf(why, sizeof(why),
             "checkpoint %s holds a state that build %s (digest %.12s) last ran against; this "
             "wake runs %s (digest %.12s)",
             state->checkpoint, state->build_version, state->build_digest, id->version,
             id->build_digest);
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name, .build = id->version},
                   "host %s: %s", host->name, why);
    ad_publish(host, EV_EVENT_STATE_OTHER_BUILD, NULL, why);
    if (!ad_host_config(host)->restore_requires_same_build)
        return false;
    pl_wake_complete(
        wake, PL_REASON_STATE_BUILD_MISMATCH,
        "host %s: %s, and RestoreRequiresSameBuild=yes refuses it; run %s (activatorctl "
        "swap %s %s), or set RestoreRequiresSameBuild=no if %s reads its state",
        host->name, why, state->build_version, host->name, state->build_version, id->version);
    return true;
}

static void on_build_checked(ad_host *host, const ad_prepared *prepared)
{
    pl_wake *wake = take_wake(host);
    if (!wake)
        return;
    if (ad_wake_prepared_stops(host, wake, prepared, restore_after_fetch) ||
        refused_for_the_states_build(host, wake, prepared))
        return;
    restore_now(host, wake);
}

void ad_wake_op_restore(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = host->wake_state;
    if (!ad_restore_would_run(host, &w->admitted.state)) {
        restore_now(host, wake); /* nothing to change: ends at once */
        return;
    }
    /* The restore rewrites the state directory an early start's view shows. */
    if (w->early_gen)
        ad_wake_early_start_discard(w);
    if (ad_wake_refuse_failed_pin(host, wake))
        return;
    w->waiting_wake = wake;
    if (!ad_wake_early_prepare_check(host, on_build_checked)) {
        w->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED,
                         "host %s: cannot resolve the build before the restore (out of memory, "
                         "or the release workers are stopping)",
                         host->name);
    }
}

/* ---- reserve, materialize ------------------------------------------------ */

void ad_wake_op_reserve(pl_wake *wake, void *userdata)
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

void ad_wake_op_materialize(pl_wake *wake, void *userdata)
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

void ad_wake_op_exec(pl_wake *wake, void *userdata)
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

void ad_wake_op_ready(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    ad_generation *gen = host->starting;
    if (ad_host_config(host)->ready.kind != PROBE_NOTIFY) {
        ad_wake_start_probe(wake, host, gen, &ad_host_config(host)->ready,
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

/* ---- replicate ----------------------------------------------------------- */

/* From here the generation keeps its replica running as ReplicateRestart=
 * says (generations/replica.c); a replica that cannot start at all is a
 * setup the host's file got wrong, which no restart would mend. */
void ad_wake_op_replicate(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    act_error err = {0};
    if (ad_generation_start_replica(host->starting, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_REPLICATE_FAILED,
                         "host %s: cannot start ExecReplicate=: %s", host->name, err.message);
        return;
    }
    pl_wake_ok(wake);
}
