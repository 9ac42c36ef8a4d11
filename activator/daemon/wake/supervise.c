/* What a host's generations do once they run, watched: the exit handler of
 * every generation of the host (set at `reserve`, and by recovery for a
 * generation it resumes), and the supervision of the one that serves
 * (WatchdogSec=, HealthCheckIntervalSec=, STOPPING=1, ReplicateRequired=).
 * An exit before ready fails the wake waiting for it; what happens to the
 * serving one parks the host. */
#include "activator/daemon/wake/ops.h"

#include <inttypes.h>

#include "activator/daemon/wake/internal.h"
#include "common/clock.h"
#include "common/log.h"

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

/* The reason a serving generation fails for what its supervision noticed. */
static pl_reason failure_of(ad_generation_notice notice)
{
    switch (notice) {
    case AD_NOTICE_WATCHDOG:
        return PL_REASON_WATCHDOG;
    case AD_NOTICE_REPLICA_FAILED:
        return PL_REASON_REPLICATE_FAILED;
    case AD_NOTICE_UNHEALTHY:
    default:
        return PL_REASON_UNHEALTHY;
    }
}

/* What the supervision of the serving generation noticed. A stop notice is
 * the app asking to stop: the host parks, gracefully, as when it is idle, and
 * its sockets are watched again for the next client. A missed watchdog or
 * failed health checks are failures of the build, and a required replica
 * that stays down (ReplicateRequired=yes) one of the generation: it is
 * retired at once, as a crashed one is, and the failure-park backoff
 * applies. Only the serving generation of a serving host counts: anything
 * else is on its way out. */
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
    pl_host_generation_failed(pipeline, failure_of(notice), served_long_enough(gen), "%s", why);
}

void ad_wake_ops_supervise(ad_host *host)
{
    ad_generation *serving = host->serving;
    if (serving)
        ad_generation_supervise(serving, on_generation_notice, host);
}
