/* The wake pipeline's operations, over claims/, release/ and cgroup/.
 *
 * Each operation either completes at once or starts one asynchronous call
 * (a claim read or CAS, a probe, a process) and parks the wake in
 * state_of(host)->waiting_wake until that call answers on the loop. Only one
 * operation of a host is in flight at a time, so one slot is enough. */
#include "activator/daemon/wake_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/daemon/record_writes.h"
#include "activator/daemon/restore.h"
#include "activator/probe/probe.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

/* What one wake knows, from `read` to its end. Kept apart from the host so
 * that 10,000 parked hosts do not each carry two claims and a build. */
struct act_wake_state {
    act_daemon_host *host;
    claim observed;                  /* the claim read at `read` */
    claim admitted;                  /* our admission, revision = its fencing token */
    rel_resolved resolved;           /* the verified build (exec_fd -1 when none) */
    act_probe *probe;                /* readiness or health probe in flight */
    act_wake *waiting_wake;          /* an op waiting for an async answer */
    act_restore *restore;            /* ExecRestore= in flight */
};

static act_daemon_host *host_of(void *userdata)
{
    return userdata;
}

static act_wake_state *state_of(const act_daemon_host *host)
{
    return act_daemon_host_wake_state(host);
}

static act_daemon *daemon_of(const act_daemon_host *host)
{
    return act_daemon_host_daemon(host);
}

static const act_host_config *config_of(const act_daemon_host *host)
{
    return act_daemon_host_config(host);
}

static const char *box_of(const act_daemon_host *host)
{
    return daemon_of(host)->config.box;
}

static const char *name_of(const act_daemon_host *host)
{
    return act_daemon_host_name(host);
}

/* gen's record as it stands, written with phase off the loop. */
static int write_record_async(act_generation *gen, act_generation_phase phase,
                              const act_build_state *build_state, act_record_written_fn written,
                              act_error *err)
{
    act_generation_record record;
    act_generation_fill_record(gen, phase, &record);
    return act_record_write_async(gen->host, &record, build_state, written, err);
}

/* Takes the parked wake: the answer that arrives completes it exactly once. */
static act_wake *take_wake(act_daemon_host *host)
{
    return TAKE_PTR(state_of(host)->waiting_wake);
}

/* A claim store call that could not even be started ends the step. */
static void store_call_failed(act_wake *wake, act_daemon_host *host, const act_error *err)
{
    state_of(host)->waiting_wake = NULL;
    act_wake_complete(wake, ACT_REASON_STORE_ERROR, "host %s: %s", name_of(host), err->message);
}

/* ---- read ---------------------------------------------------------------- */

/* The claim decides: another executor means not ours, and the op's phase
 * must allow a wake. */
static void judge_observed(act_wake *wake, act_daemon_host *host)
{
    act_error err = {0};
    act_daemon_host_set_claim_ours(host, claim_owned_by(&state_of(host)->observed, box_of(host)));
    if (!act_daemon_host_claim_ours(host)) {
        const char *executor = claim_executor(&state_of(host)->observed);
        act_wake_complete(wake, ACT_REASON_NOT_OWNER,
                          executor[0] ? "host %s: claim names box %s as executor, this box is %s"
                                      : "host %s: claim is released (no executor)%.0s, this box is %s",
                          name_of(host), executor, box_of(host));
        return;
    }
    if (claim_phase_allows_wake(&state_of(host)->observed, box_of(host), false, &err) < 0) {
        act_wake_complete(wake, ACT_REASON_WRONG_PHASE, "%s", err.message);
        return;
    }
    act_wake_ok(wake);
}

static void on_unclaimed_created(claim_store *store, int result, uint64_t new_revision,
                                 const claim *current, const act_error *err, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        /* Someone created a claim at the same moment: judge theirs. */
        state_of(host)->observed = *current;
        judge_observed(wake, host);
        return;
    }
    if (result < 0) {
        act_wake_complete(wake, ACT_REASON_STORE_ERROR, "host %s: cannot create its claim: %s",
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
static void unclaimed_claim(const act_daemon_host *host, claim *out)
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
    act_daemon_host *host = host_of(userdata);
    if (result < 0) {
        act_wake_complete(take_wake(host), ACT_REASON_STORE_ERROR,
                          "host %s: cannot read its claim: %s", name_of(host), err->message);
        return;
    }
    if (result == 0) {
        if (!daemon_of(host)->config.claim_unclaimed) {
            act_wake_complete(take_wake(host), ACT_REASON_NOT_OWNER,
                              "host %s: no claim names this box (%s); assign it with "
                              "'activatorctl claim assign %s %s'",
                              name_of(host), box_of(host), name_of(host), box_of(host));
            return;
        }
        unclaimed_claim(host, &state_of(host)->observed);
        act_error call_err = {0};
        if (claims_cas_async(store, name_of(host), 0, &state_of(host)->observed, on_unclaimed_created, host,
                             &call_err) < 0)
            store_call_failed(take_wake(host), host, &call_err);
        return;
    }
    state_of(host)->observed = *c;
    judge_observed(take_wake(host), host);
}

void act_wake_state_free(void *data)
{
    act_wake_state *w = data;
    if (!w)
        return;
    act_daemon_host *host = w->host;
    act_restore_abandon(w->restore);
    rel_resolved_release(&w->resolved);
    act_probe_free(w->probe);
    if (state_of(host) == w)
        act_daemon_host_set_wake_state(host, NULL);
    free(w);
}

static void op_read(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake_state *w = calloc(1, sizeof(*w));
    if (!w) {
        act_wake_complete(wake, ACT_REASON_SETUP_FAILED, "host %s: out of memory",
                          name_of(host));
        return;
    }
    w->host = host;
    w->resolved.exec_fd = -1;
    act_daemon_host_set_wake_state(host, w);
    act_wake_set_data(wake, w, act_wake_state_free);
    if (act_daemon_host_unproven_at_start(host)) {
        act_wake_complete(wake, ACT_REASON_UNPROVEN_STOP,
                          "host %s: a generation left by the previous daemon is not proven "
                          "stopped; see the log for its cgroup",
                          name_of(host));
        return;
    }
    act_error err = {0};
    state_of(host)->waiting_wake = wake;
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_read, host, &err) < 0)
        store_call_failed(wake, host, &err);
}

/* ---- admit --------------------------------------------------------------- */

static void on_admitted(claim_store *store, int result, uint64_t new_revision,
                        const claim *current, const act_error *err, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        act_wake_complete(wake, ACT_REASON_CLAIM_CHANGED,
                          "host %s: the claim changed between read (revision %" PRIu64
                          ") and admission (now revision %" PRIu64 ")",
                          name_of(host), state_of(host)->observed.revision, current->revision);
        return;
    }
    if (result < 0) {
        act_wake_complete(wake, ACT_REASON_STORE_ERROR, "host %s: admission failed: %s",
                          name_of(host), err->message);
        return;
    }
    state_of(host)->admitted.revision = new_revision;
    act_error check = {0};
    if (claim_admission_ok(&state_of(host)->observed, &state_of(host)->admitted, daemon_of(host)->incarnation, &check) <
        0) {
        act_wake_complete(wake, ACT_REASON_CLAIM_CHANGED, "%s", check.message);
        return;
    }
    act_wake_ok(wake);
}

static void op_admit(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    claim_next_admission(&state_of(host)->observed, box_of(host), daemon_of(host)->incarnation,
                         act_wallclock_usec(), &state_of(host)->admitted);
    act_error err = {0};
    state_of(host)->waiting_wake = wake;
    if (claims_cas_async(daemon_of(host)->store, name_of(host), state_of(host)->observed.revision,
                         &state_of(host)->admitted, on_admitted, host, &err) < 0)
        store_call_failed(wake, host, &err);
}

/* ---- restore ------------------------------------------------------------- */

static void op_restore(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake_state *w = state_of(host);
    act_restore_start(host, wake, w->admitted.state.checkpoint, w->admitted.holder.generation,
                      &w->restore);
}

/* ---- reserve, materialize ------------------------------------------------ */

static void op_reserve(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_error err = {0};
    act_generation *gen = NULL;
    /* Every attempt of one admission is the same generation N: the claim
     * names N, and a failed attempt's leaf is removed before the next. */
    int r = act_generation_new(host, "g", state_of(host)->admitted.holder.generation, &gen, &err);
    if (r < 0) {
        act_wake_complete(wake, ACT_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                          err.message);
        return;
    }
    gen->session = state_of(host)->admitted.holder.session;
    gen->admission_revision = state_of(host)->admitted.revision;
    gen->on_exit = act_wake_ops_on_generation_exit;
    gen->on_exit_userdata = host;
    act_daemon_host_set_starting(host, gen);
    /* Its record is written at the gate, once the build is known and before
     * anything runs in the leaf; a successor daemon that finds an empty leaf
     * without a record retires it with proof. */
    act_wake_ok(wake);
}

static void on_notify(act_notify *notify, const act_notify_message *message, void *userdata)
{
    act_generation *gen = userdata;
    act_daemon_host *host = gen->host;
    if (message->status)
        act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = name_of(host), .generation = gen->number},
                       "host %s: generation %" PRIu64 " status: %s", name_of(host), gen->number,
                       message->status);
    if (!message->ready || gen->ready)
        return;
    gen->ready = true;
    if (gen == act_daemon_host_starting(host) && state_of(host)->waiting_wake &&
        act_wake_step(state_of(host)->waiting_wake) == ACT_STEP_READY)
        act_wake_ok(take_wake(host));
}

static void op_materialize(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_generation *gen = act_daemon_host_starting(host);
    act_error err = {0};
    if (act_daemon_host_state_directory(host, &err) < 0) {
        act_wake_complete(wake, ACT_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                          err.message);
        return;
    }
    if (config_of(host)->ready.kind == ACT_PROBE_NOTIFY && !gen->notify &&
        act_generation_open_notify(gen, on_notify, &err) < 0) {
        act_wake_complete(wake, ACT_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                          err.message);
        return;
    }
    act_wake_ok(wake);
}

/* ---- prepare, gate ------------------------------------------------------- */

static act_reason reason_of_resolve(int r)
{
    switch (r) {
    case -ENOENT:
        return ACT_REASON_NOT_STAGED;
    case -EKEYREJECTED:
        return ACT_REASON_PIN_MISMATCH;
    case -EBADMSG:
    case -EUCLEAN:
    case -ELOOP:
    case -EPERM:
        return ACT_REASON_DIGEST_MISMATCH;
    default:
        return ACT_REASON_SETUP_FAILED;
    }
}

/* The held version freezes the host: a build that is not it never runs. */
static bool held_mismatch(const act_daemon_host *host, const claim *c)
{
    return c->held[0] && strcmp(c->held, state_of(host)->resolved.identity.version) != 0;
}

static bool pin_mismatch(const act_daemon_host *host, const claim *c)
{
    return c->has_pin && (strcmp(c->pin.version, state_of(host)->resolved.identity.version) != 0 ||
                          strcmp(c->pin.digest, state_of(host)->resolved.identity.build_digest) != 0);
}

static void op_prepare(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    const claim *admitted = &state_of(host)->admitted;
    rel_pin pin = {0};
    if (admitted->has_pin) {
        snprintf(pin.version, sizeof(pin.version), "%s", admitted->pin.version);
        snprintf(pin.digest, sizeof(pin.digest), "%s", admitted->pin.digest);
    }
    rel_resolved_release(&state_of(host)->resolved);
    act_error err = {0};
    /* The live link is read once here; everything after uses this fd. The
     * build's manifest names its executable (Exec='s path, for a directory
     * build, when it was staged), so no override is passed. */
    int r = rel_resolve(daemon_of(host)->releases, name_of(host), admitted->has_pin ? &pin : NULL,
                        NULL, &state_of(host)->resolved, &err);
    if (r < 0) {
        act_wake_complete(wake, reason_of_resolve(r), "%s", err.message);
        return;
    }
    if (held_mismatch(host, admitted)) {
        act_wake_complete(wake, ACT_REASON_HELD_MISMATCH,
                          "host %s: held on version %s, but the build to run is %s",
                          name_of(host), admitted->held, state_of(host)->resolved.identity.version);
        return;
    }
    act_build_ref *build = &act_daemon_host_starting(host)->build;
    snprintf(build->version, sizeof(build->version), "%s", state_of(host)->resolved.identity.version);
    snprintf(build->digest, sizeof(build->digest), "%s", state_of(host)->resolved.identity.digest);
    snprintf(build->build_digest, sizeof(build->build_digest), "%s",
             state_of(host)->resolved.identity.build_digest);
    act_wake_ok(wake);
}

/* The gate re-reads the claim twice: before and after the build state is
 * written. Between admission and exec another box may have taken the host;
 * if so nothing is exec'd. */
static void gate_second_read(act_daemon_host *host);

static bool gate_claim_still_ours(act_wake *wake, act_daemon_host *host, int result,
                                  const claim *fresh, const act_error *err)
{
    if (result < 0) {
        act_wake_complete(wake, ACT_REASON_STORE_ERROR, "host %s: gate cannot read the claim: %s",
                          name_of(host), err->message);
        return false;
    }
    if (result == 0) {
        act_wake_complete(wake, ACT_REASON_NOT_OWNER, "host %s: the claim was deleted before exec",
                          name_of(host));
        return false;
    }
    if (fresh->revision == state_of(host)->admitted.revision)
        return true;
    if (!claim_owned_by(fresh, box_of(host)))
        act_wake_complete(wake, ACT_REASON_NOT_OWNER,
                          "host %s: before exec, the claim names box %s as executor, this box is "
                          "%s",
                          name_of(host), claim_executor(fresh), box_of(host));
    else if (pin_mismatch(host, fresh))
        act_wake_complete(wake, ACT_REASON_PIN_MISMATCH,
                          "host %s: before exec, the pin changed to %s", name_of(host),
                          fresh->has_pin ? fresh->pin.version : "(none)");
    else
        act_wake_complete(wake, ACT_REASON_CLAIM_CHANGED,
                          "host %s: before exec, the claim moved from our admission (revision %" PRIu64
                          ") to revision %" PRIu64,
                          name_of(host), state_of(host)->admitted.revision, fresh->revision);
    return false;
}

static void on_gate_second_read(claim_store *store, int result, const claim *c,
                                const act_error *err, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake *wake = take_wake(host);
    if (gate_claim_still_ours(wake, host, result, c, err))
        act_wake_ok(wake);
}

static void on_gate_written(act_daemon_host *host, int result, const act_error *err);

static void on_gate_first_read(claim_store *store, int result, const claim *c,
                               const act_error *err, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake *wake = take_wake(host);
    if (!gate_claim_still_ours(wake, host, result, c, err))
        return;
    if (pin_mismatch(host, &state_of(host)->admitted)) {
        act_wake_complete(wake, ACT_REASON_PIN_MISMATCH,
                          "host %s: the resolved build %s is not the pinned %s", name_of(host),
                          state_of(host)->resolved.identity.version, state_of(host)->admitted.pin.version);
        return;
    }
    if (held_mismatch(host, &state_of(host)->admitted)) {
        act_wake_complete(wake, ACT_REASON_HELD_MISMATCH,
                          "host %s: held on version %s, but the build to run is %s",
                          name_of(host), state_of(host)->admitted.held, state_of(host)->resolved.identity.version);
        return;
    }
    act_generation *gen = act_daemon_host_starting(host);
    act_build_state state = {
        .build = gen->build,
        .generation = gen->number,
        .session = gen->session,
        .written_usec = act_wallclock_usec(),
    };
    act_error write_err = {0};
    state_of(host)->waiting_wake = wake;
    if (write_record_async(gen, ACT_GEN_STARTING, &state, on_gate_written, &write_err) < 0) {
        state_of(host)->waiting_wake = NULL;
        act_wake_complete(wake, ACT_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                          write_err.message);
    }
}

/* The build state and the record are durable: ownership once more, then
 * the exec. */
static void on_gate_written(act_daemon_host *host, int result, const act_error *err)
{
    if (result < 0) {
        act_wake_complete(take_wake(host), ACT_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                          err->message);
        return;
    }
    gate_second_read(host);
}

static void gate_second_read(act_daemon_host *host)
{
    act_error err = {0};
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_gate_second_read, host, &err) <
        0)
        store_call_failed(take_wake(host), host, &err);
}

static void gate_first_read(act_daemon_host *host)
{
    act_error err = {0};
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_gate_first_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

static void op_gate(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    state_of(host)->waiting_wake = wake;
    gate_first_read(host);
}

/* ---- exec, ready --------------------------------------------------------- */

static void op_exec(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_generation *gen = act_daemon_host_starting(host);
    act_error err = {0};
    int r = act_generation_spawn(gen, state_of(host)->resolved.exec_fd, &err);
    rel_resolved_release(&state_of(host)->resolved);
    if (r < 0) {
        act_wake_complete(wake, ACT_REASON_EXEC_FAILED, "host %s: %s", name_of(host),
                          err.message);
        return;
    }
    /* The pid reaches the record at publication (phase serving), the only
     * phase a successor daemon resumes; no durable write delays readiness. */
    act_wake_ok(wake);
}

static void on_probe_done(act_probe *probe, bool ok, const char *why, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake *wake = take_wake(host);
    act_probe_free(TAKE_PTR(state_of(host)->probe));
    act_step step = act_wake_step(wake);
    if (ok)
        act_wake_ok(wake);
    else
        act_wake_complete(wake,
                          step == ACT_STEP_HEALTHY ? ACT_REASON_UNHEALTHY
                                                   : ACT_REASON_READY_TIMEOUT,
                          "host %s: %s probe failed: %s", name_of(host),
                          step == ACT_STEP_HEALTHY ? "health" : "readiness", why);
}

static void start_probe(act_wake *wake, act_daemon_host *host, const act_probe_spec *spec,
                        uint64_t timeout_usec)
{
    act_error err = {0};
    state_of(host)->waiting_wake = wake;
    if (act_probe_start(daemon_of(host)->loop, spec, timeout_usec, 20 * 1000, on_probe_done, host,
                        &state_of(host)->probe, &err) < 0) {
        state_of(host)->waiting_wake = NULL;
        act_wake_complete(wake, ACT_REASON_SETUP_FAILED, "host %s: %s", name_of(host),
                          err.message);
    }
}

static void op_ready(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_generation *gen = act_daemon_host_starting(host);
    if (config_of(host)->ready.kind != ACT_PROBE_NOTIFY) {
        start_probe(wake, host, &config_of(host)->ready, config_of(host)->ready_timeout_usec);
        return;
    }
    if (gen->ready) {
        act_wake_ok(wake);
        return;
    }
    /* on_notify or on_process_exit completes it; the pipeline bounds the
     * wait by ReadyTimeoutSec and calls abandon when it closes. */
    state_of(host)->waiting_wake = wake;
}

static void op_abandon(act_wake *wake, act_step step, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake_state *w = state_of(host);
    if (!w)
        return;
    if (w->waiting_wake == wake)
        w->waiting_wake = NULL;
    act_probe_free(TAKE_PTR(w->probe));
    act_restore_abandon(w->restore);
}

/* ---- replicate, publish, healthy ----------------------------------------- */

static void op_replicate(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_error err = {0};
    if (act_replicate_start(act_daemon_host_starting(host), &err) < 0) {
        act_wake_complete(wake, ACT_REASON_REPLICATE_FAILED, "host %s: %s", name_of(host),
                          err.message);
        return;
    }
    act_wake_ok(wake);
}

static void on_serving_written(act_daemon_host *host, int result, const act_error *err);

static void on_published(claim_store *store, int result, uint64_t new_revision,
                         const claim *current, const act_error *err, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        act_wake_complete(wake, ACT_REASON_PUBLISH_LOST,
                          "host %s: the claim changed while publishing generation %" PRIu64,
                          name_of(host), state_of(host)->admitted.holder.generation);
        return;
    }
    if (result < 0) {
        act_wake_complete(wake, ACT_REASON_STORE_ERROR, "host %s: publishing failed: %s",
                          name_of(host), err->message);
        return;
    }
    state_of(host)->admitted.revision = new_revision;
    act_generation *gen = act_daemon_host_starting(host);
    act_daemon_host_set_starting(host, NULL);
    gen->serving_usec = act_now_usec();
    /* In a swap, N serves on until N+1 is healthy; it is retired next. */
    if (act_wake_is_swap(wake))
        act_daemon_host_set_replaced(host, act_daemon_host_serving(host));
    act_daemon_host_set_serving(host, gen);
    /* The record says serving before the step ends, so a daemon that dies
     * after announcing it can resume the generation. */
    act_error write_err = {0};
    state_of(host)->waiting_wake = wake;
    if (write_record_async(gen, ACT_GEN_SERVING, NULL, on_serving_written, &write_err) < 0) {
        act_log(LOG_WARNING, "host %s: %s", name_of(host), write_err.message);
        act_wake_ok(take_wake(host));
    }
}

static void on_serving_written(act_daemon_host *host, int result, const act_error *err)
{
    if (result < 0)
        act_log(LOG_WARNING, "host %s: %s", name_of(host), err->message);
    act_wake_ok(take_wake(host));
}

static void on_publish_read(claim_store *store, int result, const claim *c, const act_error *err,
                            void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    if (result <= 0) {
        act_wake_complete(take_wake(host), result < 0 ? ACT_REASON_STORE_ERROR
                                                      : ACT_REASON_PUBLISH_LOST,
                          "host %s: before publishing, %s", name_of(host),
                          result < 0 ? err->message : "the claim was deleted");
        return;
    }
    if (!claim_same_admission(&state_of(host)->admitted, c)) {
        act_wake_complete(take_wake(host), ACT_REASON_PUBLISH_LOST,
                          "host %s: before publishing, the claim no longer describes our "
                          "admission (session %" PRIu64 ", generation %" PRIu64 ")",
                          name_of(host), state_of(host)->admitted.holder.session,
                          state_of(host)->admitted.holder.generation);
        return;
    }
    claim next = *c;
    snprintf(next.op.phase, sizeof(next.op.phase), "serving");
    act_daemon_host_format_handle(host, state_of(host)->admitted.holder.generation, next.holder.handle,
                           sizeof(next.holder.handle));
    state_of(host)->admitted = next;
    act_error call_err = {0};
    if (claims_cas_async(store, name_of(host), c->revision, &next, on_published, host,
                         &call_err) < 0)
        store_call_failed(take_wake(host), host, &call_err);
}

static void publish_read(act_daemon_host *host)
{
    act_error err = {0};
    if (claims_read_async(daemon_of(host)->store, name_of(host), on_publish_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

static void op_publish(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    state_of(host)->waiting_wake = wake;
    publish_read(host);
}

static void op_healthy(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    /* An exit between ready and here was only noted (the steps in between
     * wait on the claim store): the generation just published is dead. */
    const act_generation *serving = act_daemon_host_serving(host);
    if (serving && serving->exited) {
        act_wake_complete(wake, ACT_REASON_CRASHED,
                          "host %s: generation %" PRIu64 " exited with status %d before it could "
                          "serve",
                          name_of(host), serving->number, serving->exit_status);
        return;
    }
    if (!config_of(host)->health_check) {
        act_wake_ok(wake);
        return;
    }
    start_probe(wake, host, config_of(host)->health_check, config_of(host)->ready_timeout_usec);
}

/* ---- failed -------------------------------------------------------------- */

static void on_generation_retired(act_generation *gen, bool proven, const char *why,
                                  void *userdata)
{
    act_wake *wake = userdata;
    act_daemon_host *host = gen->host;
    if (act_daemon_host_starting(host) == gen)
        act_daemon_host_set_starting(host, NULL);
    if (act_daemon_host_replaced(host) == gen)
        act_daemon_host_set_replaced(host, NULL);
    if (act_daemon_host_serving(host) == gen) {
        /* A swap's N+1 that failed after its publication: N still serves. */
        act_daemon_host_set_serving(host, act_daemon_host_replaced(host));
        act_daemon_host_set_replaced(host, NULL);
    }
    uint64_t number = gen->number;
    if (proven) {
        act_generation_free(gen);
        act_wake_retired(wake, true, "host %s: generation %" PRIu64 " is proven stopped",
                         name_of(host), number);
    } else {
        /* An unproven generation keeps its handle (and cgroup): the next
         * daemon or a later sweep must still be able to prove it stopped. */
        act_log_fields(LOG_ERR, &(act_log_ctx){.host = name_of(host), .generation = number},
                       "host %s: generation %" PRIu64 " is NOT proven stopped: %s", name_of(host),
                       number, why);
        act_generation_free(gen);
        act_wake_retired(wake, false, "host %s: generation %" PRIu64 " not proven stopped: %s",
                         name_of(host), number, why);
    }
}

static void op_failed(act_wake *wake, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    const act_retirement *retirement = act_wake_retirement(wake);
    act_wake_state *w = state_of(host);
    if (w) {
        act_restore_abandon(w->restore);
        rel_resolved_release(&w->resolved);
    }
    if (retirement->record_attempt)
        act_daemon_host_count_failed_attempt(host, act_reason_to_string(retirement->reason));
    act_generation *serving = act_daemon_host_serving(host);
    act_generation *starting = act_daemon_host_starting(host);
    act_generation *replaced = act_daemon_host_replaced(host);
    act_generation *gen = NULL;
    switch (retirement->cause) {
    case ACT_RETIRE_EXITED:
    case ACT_RETIRE_PARK:
        gen = serving;
        break;
    case ACT_RETIRE_REPLACED:
        gen = replaced;
        break;
    case ACT_RETIRE_ATTEMPT:
    case ACT_RETIRE_UNCERTAIN:
        /* The attempt's generation; once published it is the serving one. A
         * failed swap attempt never reaches for N: N serves on. */
        gen = starting ? starting : (act_wake_is_swap(wake) && !replaced ? NULL : serving);
        break;
    }
    if (!gen) {
        act_wake_retired(wake, true, "host %s: nothing was started", name_of(host));
        return;
    }
    act_generation_retire(gen, retirement->graceful, on_generation_retired, wake);
}

/* A generation's main process exited while it was not being retired. Before
 * it is ready, the wake waiting for it fails now; once it serves, the
 * pipeline parks the host (status 0 idle, anything else a failure). Between
 * the two the exit is only noted, and `healthy` finds it. */
void act_wake_ops_on_generation_exit(act_generation *gen, void *userdata)
{
    act_daemon_host *host = host_of(userdata);
    act_wake_state *w = state_of(host);
    if (gen == act_daemon_host_starting(host) && w && w->waiting_wake &&
        act_wake_step(w->waiting_wake) == ACT_STEP_READY) {
        act_wake *wake = take_wake(host);
        act_probe_free(TAKE_PTR(w->probe));
        act_wake_complete(wake, ACT_REASON_CRASHED,
                          "host %s: generation %" PRIu64 " exited with status %d before it was "
                          "ready",
                          name_of(host), gen->number, gen->exit_status);
        return;
    }
    if (gen == act_daemon_host_serving(host)) {
        uint64_t served = act_now_usec() - gen->serving_usec;
        bool long_enough = served >= daemon_of(host)->config.failure_reset_usec;
        act_host_generation_exited(act_daemon_host_pipeline(host), gen->exit_status, long_enough);
    }
}

const act_pipeline_ops act_wake_ops = {
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
