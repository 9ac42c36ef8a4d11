/* The wake pipeline's operations, over claims/, release/ and cgroup/: the
 * table activator/pipeline runs (ad_wake_ops), `failed` (a generation
 * retired with proof) and `abandon`. The other steps have files of their
 * own: `read` and `admit` in wake/admit.c; `restore`, `reserve`,
 * `materialize`, `exec`, `ready` and `replicate` in wake/start.c;
 * `prepare` in wake/prepare.c; the gate in wake/gate.c; `publish` and
 * `healthy` in wake/publish.c. A generation's exit and the supervision of
 * the serving one are in wake/supervise.c.
 *
 * Each operation either completes at once or starts one asynchronous call
 * (a claim read or CAS, a probe, a process, file work on a worker) and
 * parks the wake in host->wake_state->waiting_wake until that call answers on
 * the loop. Only one operation of a host is in flight at a time, so one slot
 * is enough. */
#include "activator/daemon/wake/ops.h"

#include <inttypes.h>

#include "activator/daemon/wake/internal.h"
#include "common/cleanup.h"
#include "common/log.h"

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
    if (retirement->cause == PL_RETIRE_ATTEMPT || retirement->cause == PL_RETIRE_UNCERTAIN)
        ad_wake_note_pin_failure(wake, host, gen);
    if (!gen) {
        pl_wake_retired(wake, true, "host %s: nothing was started", host->name);
        return;
    }
    ad_generation_retire(gen, retirement->graceful, on_generation_retired, wake);
}

/* ---- abandon ------------------------------------------------------------- */

/* The pipeline stopped waiting for the step (ready's window closed, or the
 * wake was cancelled): what the step waits on stops and answers no one. */
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

const pl_ops ad_wake_ops = {
    .read = ad_wake_op_read,
    .admit = ad_wake_op_admit,
    .restore = ad_wake_op_restore,
    .reserve = ad_wake_op_reserve,
    .materialize = ad_wake_op_materialize,
    .prepare = ad_wake_op_prepare,
    .gate = ad_wake_op_gate,
    .exec = ad_wake_op_exec,
    .ready = ad_wake_op_ready,
    .replicate = ad_wake_op_replicate,
    .publish = ad_wake_op_publish,
    .healthy = ad_wake_op_healthy,
    .failed = op_failed,
    .abandon = op_abandon,
};
