/* The wake's last two steps: `publish`, the claim's write naming the
 * generation that serves, and `healthy`. publish reads the claim, requires
 * it to describe our admission still, and compare-and-swaps it to phase
 * serving with the admitted generation and its handle; from that write on
 * the generation is the host's serving one (in a swap, N is retired next),
 * and its record says so. healthy finds out whether it exited meanwhile,
 * and runs HealthCheck=. */
#include "activator/daemon/wake/ops.h"

#include <inttypes.h>

#include "activator/daemon/wake/internal.h"
#include "common/clock.h"
#include "common/log.h"

static void on_serving_written(ad_host *host, int result, const act_error *err);

static void on_published(claim_store *store, int result, uint64_t new_revision,
                         const claim *current, const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    pl_wake *wake = take_wake(host);
    ad_wake_take_landed_write(host, "publication", &host->wake_state->admitted, current, &result,
                              &new_revision);
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
    ad_host_claim_seen(host, &host->wake_state->admitted, new_revision);
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
    ad_wake_pin_failure_onto(host, &host->starting->build, &next);
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

void ad_wake_op_publish(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    /* A move's probe passes HealthCheck= before it publishes: its
     * publication ends the move, so what it names must be known to serve
     * (a wake's check comes after, in `healthy`, and runs again there).
     * Once the check passes, the step goes on with publish_read. */
    if (host->probe_op && ad_host_config(host)->health_check && host->starting) {
        ad_wake_start_probe(wake, host, host->starting, ad_host_config(host)->health_check,
                            ad_host_config(host)->ready_timeout_usec, publish_read);
        return;
    }
    host->wake_state->waiting_wake = wake;
    publish_read(host);
}

void ad_wake_op_healthy(pl_wake *wake, void *userdata)
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
    /* So was a required replica (ReplicateRequired=yes) that went down for
     * good since `replicate`: the generation does not serve without it. */
    if (serving && serving->replica.failed && ad_host_config(host)->replicate_required) {
        pl_wake_complete(wake, PL_REASON_REPLICATE_FAILED, "%s", serving->replica.failure);
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
    ad_wake_start_probe(wake, host, serving, ad_host_config(host)->health_check,
                        ad_host_config(host)->ready_timeout_usec, NULL);
}
