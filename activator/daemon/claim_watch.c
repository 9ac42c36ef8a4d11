/* Claims that change under us. Another box named executor while we wake or
 * serve the host: the local generation is retired within this one watch
 * event. A claim that newly names this box wakes the host. */
#include "activator/daemon/claim_watch.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/announce.h"
#include "activator/daemon/hosts.h"
#include "common/log.h"

#define WATCH_RETRY_USEC (1000 * 1000ull)

struct ad_claim_watch {
    ad_daemon *daemon;
    claims_watch *watch;
    uint64_t revision;               /* where the next watch starts */
    sd_event_source *retry_timer;
};

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata);

static int restart_watch(ad_claim_watch *cw, act_error *err)
{
    return claims_watch_start(cw->daemon->store, cw->revision, on_change, cw, &cw->watch, err);
}

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata);

static void retry_later(ad_claim_watch *cw)
{
    if (cw->daemon->stopping)
        return;
    cw->retry_timer = sd_event_source_disable_unref(cw->retry_timer);
    if (sd_event_add_time_relative(cw->daemon->loop, &cw->retry_timer, CLOCK_MONOTONIC,
                                   WATCH_RETRY_USEC, 0, on_retry, cw) < 0)
        act_log(LOG_ERR, "claim watch: cannot arm its retry timer; claims are not watched");
}

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_claim_watch *cw = userdata;
    cw->retry_timer = sd_event_source_disable_unref(cw->retry_timer);
    act_error err = {0};
    if (restart_watch(cw, &err) < 0) {
        act_log(LOG_WARNING, "claim watch: %s; retrying", err.message);
        retry_later(cw);
    }
    return 0;
}

static void host_claim_changed(ad_host *host, const claim_change *change)
{
    const char *box = ad_host_daemon(host)->config.box;
    pl_host *pipeline = ad_host_pipeline(host);
    bool ours = change->kind == CLAIM_CHANGE_PUT && claim_owned_by(&change->claim, box);
    pl_host_state state = pl_host_get_state(pipeline);
    ad_publish(host, EV_EVENT_CLAIM_CHANGED, NULL,
               change->kind == CLAIM_CHANGE_DELETE ? "deleted"
               : ours                              ? "ours"
                                                   : claim_executor(&change->claim));
    if (!ours) {
        if (state == PL_HOST_WAKING)
            pl_host_cancel(pipeline, PL_REASON_NOT_OWNER,
                           "host %s: the claim no longer names this box", ad_host_name(host));
        else if (state == PL_HOST_SERVING)
            pl_host_park(pipeline, PL_PARK_CLAIM_LOST);
        ad_host_set_claim_ours(host, false);
        return;
    }
    /* Newly ours: the last claim we saw named someone else (or nobody). */
    bool newly = !ad_host_claim_ours(host);
    ad_host_set_claim_ours(host, true);
    if (newly && state == PL_HOST_PARKED && !ad_host_daemon(host)->stopping &&
        claim_phase_allows_wake(&change->claim, box, false, NULL) == 0)
        pl_host_wake(pipeline, PL_TRIGGER_CLAIM_CHANGE, NULL, NULL);
}

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata)
{
    ad_claim_watch *cw = userdata;
    if (error < 0) {
        act_log(LOG_WARNING, "claim watch ended: %s; restarting from revision %" PRIu64,
                err ? err->message : "unknown error", cw->revision);
        claims_watch_free(cw->watch);
        cw->watch = NULL;
        retry_later(cw);
        return;
    }
    cw->revision = change->revision + 1;
    if (change->kind == CLAIM_CHANGE_MALFORMED) {
        act_log(LOG_WARNING, "claim watch: %s", change->problem.message);
        return;
    }
    ad_host *host = ad_hosts_find(cw->daemon, change->claim.host);
    if (host)
        host_claim_changed(host, change);
}

int ad_claim_watch_start(ad_daemon *daemon, act_error *err)
{
    assert(daemon && daemon->store);
    ad_claim_watch *cw = calloc(1, sizeof(*cw));
    if (!cw)
        return act_error_set(err, ENOMEM, "out of memory");
    cw->daemon = daemon;
    daemon->claim_watch = cw;
    return restart_watch(cw, err);
}

void ad_claim_watch_stop(ad_daemon *daemon)
{
    ad_claim_watch *cw = daemon->claim_watch;
    if (!cw)
        return;
    claims_watch_free(cw->watch);
    sd_event_source_disable_unref(cw->retry_timer);
    free(cw);
    daemon->claim_watch = NULL;
}
