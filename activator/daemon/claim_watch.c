/* Claims that change under us. Another box named executor while we wake or
 * serve the host: the local generation is retired within this one watch
 * event. A claim that newly names this box wakes the host. */
#include "activator/daemon/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

#define WATCH_RETRY_USEC (1000 * 1000ull)

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata);

static int restart_watch(act_daemon *daemon, act_error *err)
{
    return claims_watch_start(daemon->store, daemon->watch_revision, on_change, daemon,
                              &daemon->watch, err);
}

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata)
{
    act_daemon *daemon = userdata;
    sd_event_source_disable_unref(source);
    act_error err = {0};
    if (restart_watch(daemon, &err) < 0) {
        act_log(LOG_WARNING, "claim watch: %s; retrying", err.message);
        sd_event_add_time_relative(daemon->loop, NULL, CLOCK_MONOTONIC, WATCH_RETRY_USEC, 0,
                                   on_retry, daemon);
    }
    return 0;
}

static void host_claim_changed(act_daemon_host *host, const claim_change *change)
{
    const char *box = host->daemon->config.box;
    bool ours = change->kind == CLAIM_CHANGE_PUT && claim_owned_by(&change->claim, box);
    act_host_state state = act_host_get_state(host->pipeline);
    act_publish(host, ACT_EVENT_CLAIM_CHANGED, NULL,
                change->kind == CLAIM_CHANGE_DELETE ? "deleted"
                : ours                               ? "ours"
                                                     : claim_executor(&change->claim));
    if (!ours) {
        if (state == ACT_HOST_WAKING)
            act_host_cancel(host->pipeline, ACT_REASON_NOT_OWNER,
                            "host %s: the claim no longer names this box", host->config->name);
        else if (state == ACT_HOST_SERVING)
            act_host_park(host->pipeline, ACT_PARK_CLAIM_LOST);
        host->claim_ours = false;
        return;
    }
    /* Newly ours: the last claim we saw named someone else (or nobody). */
    bool newly = !host->claim_ours;
    host->claim_ours = true;
    if (newly && state == ACT_HOST_PARKED &&
        claim_phase_allows_wake(&change->claim, box, false, NULL) == 0)
        act_host_wake(host->pipeline, ACT_TRIGGER_CLAIM_CHANGE, NULL, NULL);
}

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata)
{
    act_daemon *daemon = userdata;
    if (error < 0) {
        act_log(LOG_WARNING, "claim watch ended: %s; restarting from revision %" PRIu64,
                err ? err->message : "unknown error", daemon->watch_revision);
        claims_watch_free(daemon->watch);
        daemon->watch = NULL;
        if (!daemon->stopping)
            sd_event_add_time_relative(daemon->loop, NULL, CLOCK_MONOTONIC, WATCH_RETRY_USEC, 0,
                                       on_retry, daemon);
        return;
    }
    daemon->watch_revision = change->revision + 1;
    if (change->kind == CLAIM_CHANGE_MALFORMED) {
        act_log(LOG_WARNING, "claim watch: %s", change->problem.message);
        return;
    }
    act_daemon_host *host = act_hosts_find(daemon, change->claim.host);
    if (host)
        host_claim_changed(host, change);
}

int act_claim_watch_start(act_daemon *daemon, act_error *err)
{
    return restart_watch(daemon, err);
}
