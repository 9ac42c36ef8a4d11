/* Self-fencing: see hosts/self_fence.h. */
#include "activator/daemon/hosts/self_fence.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/moves/checkpoint_every.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/parking/idle.h"
#include "activator/daemon/wake/ops.h"
#include "claims/box_lease.h"
#include "common/clock.h"
#include "common/log.h"

typedef struct ad_self_fence ad_self_fence;

struct ad_self_fence {
    ad_daemon *daemon;
    sd_event_source *fence_timer; /* acked + TTL - M */
    sd_event_source *gone_timer;  /* acked + TTL + M, armed once fenced */
};

/* ---- fencing ----------------------------------------------------------------- */

/* Stops gen's processes (if any run); false when it could not. */
static bool freeze_for_fence(ad_host *host, ad_generation *gen)
{
    if (!gen || gen->retired || gen->exited)
        return true;
    act_error err = {0};
    if (ad_generation_freeze(gen, NULL, NULL, &err) == 0)
        return true;
    act_log(LOG_ERR, "host %s: cannot freeze generation %" PRIu64 " to fence it: %s", host->name,
            gen->number, err.message);
    return false;
}

static void fence_host(ad_host *host, const char *why)
{
    if (host->fenced || !host->claim_failover)
        return;
    host->fenced = true;
    /* A host frozen for idleness stays frozen: its sockets no longer thaw
     * it (parking/freeze.c reads host->fenced). Otherwise whatever runs
     * stops: the serving generation and a swap's N+1 beside it. */
    bool frozen = true;
    if (!host->freeze) {
        ad_checkpoint_every_stop(host, false);
        ad_idle_unwatch(host);
        frozen = freeze_for_fence(host, host->serving);
        frozen = freeze_for_fence(host, host->starting) && frozen;
        host->fence_froze = true;
    }
    /* A start in flight (a cold wake, a swap's N+1) could publish only
     * through the store: it ends now, and with the claim taken as lost its
     * generation is killed frozen, never thawed to serve (the lift reads
     * the claim again). So does whatever could not be frozen. */
    if (!frozen || pl_host_get_state(host->pipeline) == PL_HOST_WAKING || host->starting) {
        host->claim_ours = false;
        if (pl_host_get_state(host->pipeline) == PL_HOST_SERVING && !frozen)
            pl_host_park(host->pipeline, PL_PARK_CLAIM_LOST);
        else
            pl_host_cancel(host->pipeline, PL_REASON_FENCED, "host %s: %s", host->name, why);
    }
    act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name, .reason = "fenced"},
                   "host %s: fenced: %s", host->name, why);
    ad_publish(host, EV_EVENT_FENCED, host->serving, why);
}

static void fence_all(ad_self_fence *f, const char *why)
{
    ad_daemon *daemon = f->daemon;
    if (!daemon->fenced)
        act_log(LOG_WARNING,
                "box %s: %s; fencing every host that fails over (Failover=yes): frozen, wakes "
                "refused, until the store acknowledges a renewal",
                daemon->config.box, why);
    daemon->fenced = true;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        /* A lift's read in flight speaks of a time before this fence. */
        if (daemon->hosts[i]->fence_reading)
            daemon->hosts[i]->fence_read_stale = true;
        fence_host(daemon->hosts[i], why);
    }
}

/* The lease is gone: another box may run the fenced hosts now, so their
 * generations are killed frozen, as for a claim lost. */
static void retire_fenced(ad_self_fence *f, const char *why)
{
    ad_daemon *daemon = f->daemon;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        ad_host *host = daemon->hosts[i];
        if (!host->fenced || !host->serving || host->serving->retired)
            continue;
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name, .reason = "fenced"},
                       "host %s: %s; retiring its fenced generation", host->name, why);
        host->fence_froze = false;
        host->claim_ours = false;
        pl_host_park(host->pipeline, PL_PARK_CLAIM_LOST);
    }
}

static int on_gone(sd_event_source *source, uint64_t usec, void *userdata)
{
    retire_fenced(userdata, "the box's lease has certainly expired in the store");
    return 0;
}

static void arm(ad_self_fence *f, sd_event_source **timer, uint64_t at,
                sd_event_time_handler_t handler)
{
    int r = *timer
                ? sd_event_source_set_time(*timer, at)
                : sd_event_add_time(f->daemon->loop, timer, CLOCK_MONOTONIC, at, 1000, handler, f);
    if (r >= 0)
        r = sd_event_source_set_enabled(*timer, SD_EVENT_ONESHOT);
    if (r < 0)
        act_log(LOG_ERR, "box %s: cannot arm the self-fencing timer: %s", f->daemon->config.box,
                strerror(-r));
    else
        /* Before anything else the loop has to do: a late fence is the one
         * that can let two boxes serve. */
        sd_event_source_set_priority(*timer, SD_EVENT_PRIORITY_IMPORTANT);
}

static int on_fence_due(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_self_fence *f = userdata;
    claims_box_lease *lease = f->daemon->box_lease;
    uint64_t acked = claims_box_lease_acked_sent(lease), ttl = claims_box_lease_ttl(lease);
    char why[160];
    snprintf(why, sizeof(why),
             "no lease renewal acknowledged for %" PRIu64 " ms (the lease is %" PRIu64 " ms)",
             (act_now_usec() - acked) / 1000, ttl / 1000);
    fence_all(f, why);
    arm(f, &f->gone_timer, acked + ttl + claims_box_lease_margin(ttl), on_gone);
    return 0;
}

/* ---- lifting it ---------------------------------------------------------------- */

static void unfenced(ad_host *host, const char *what)
{
    host->fenced = false;
    host->fence_froze = false;
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name},
                   "host %s: the fence is lifted: %s", host->name, what);
    ad_publish(host, EV_EVENT_UNFENCED, host->serving, what);
}

static void read_claim(ad_host *host);

/* One read per fenced host at a time, its userdata the host (nothing is
 * allocated that a store freed with the read in flight would leak); a read
 * that a new fence overtook is stale (fence_read_stale), and the lift in
 * force reads again. */
static void on_unfence_read(claim_store *store, int result, const claim *c, const act_error *err,
                            void *userdata)
{
    ad_host *host = userdata;
    ad_self_fence *f = host->daemon->self_fence;
    bool stale = host->fence_read_stale;
    host->fence_reading = false;
    host->fence_read_stale = false;
    if (!f || f->daemon->fenced || !host->fenced)
        return; /* fenced again, or lifted already */
    if (stale || result < 0) {
        /* Overtaken by a fence since: read again under the lift in force. A
         * store error leaves it fenced until the next renewal lifts again. */
        if (stale)
            read_claim(host);
        return;
    }
    ad_daemon *daemon = f->daemon;
    ad_generation *gen = host->serving;
    bool live = gen && !gen->retired && !gen->exited;
    bool ours = result > 0 && claim_owned_by(c, daemon->config.box) &&
                (!live || c->holder.session == gen->session);
    if (!ours) {
        char why[200];
        snprintf(why, sizeof(why), "retired: the claim names %s now",
                 result > 0 && claim_executor(c)[0] ? claim_executor(c) : "no box");
        host->claim_ours = false;
        if (live)
            pl_host_park(host->pipeline, PL_PARK_CLAIM_LOST);
        unfenced(host, why);
        return;
    }
    host->claim_ours = true;
    if (live && host->fence_froze) {
        act_error thaw_err = {0};
        if (ad_generation_thaw(gen, NULL, NULL, &thaw_err) < 0) {
            act_log(LOG_ERR, "host %s: %s; retiring generation %" PRIu64, host->name,
                    thaw_err.message, gen->number);
            pl_host_park(host->pipeline, PL_PARK_CLAIM_LOST);
            unfenced(host, "retired: it could not be thawed");
            return;
        }
        ad_wake_ops_supervise(host);
        ad_idle_watch(host, ad_freeze_or_park);
        ad_checkpoint_every_arm(host, ad_wake_ops_supervise);
    } else if (host->freeze) {
        ad_freeze_watch_again(host);
    }
    unfenced(host, live ? "thawed: the claim still names this admission"
                        : "the claim still names this box");
}

/* The lease is proven again: each fenced host asks its claim whether it is
 * still this box's. */
static void lift(ad_self_fence *f)
{
    ad_daemon *daemon = f->daemon;
    if (daemon->fenced)
        act_log(LOG_NOTICE, "box %s: the store acknowledged the lease again; lifting the fence",
                daemon->config.box);
    daemon->fenced = false;
    f->gone_timer = sd_event_source_disable_unref(f->gone_timer);
    for (size_t i = 0; i < daemon->n_hosts; i++)
        if (daemon->hosts[i]->fenced && !daemon->hosts[i]->fence_reading)
            read_claim(daemon->hosts[i]);
}

static void read_claim(ad_host *host)
{
    act_error err = {0};
    if (claims_read_async(host->daemon->store, host->name, on_unfence_read, host, &err) < 0) {
        act_log(LOG_WARNING, "host %s: cannot read its claim to lift its fence: %s", host->name,
                err.message);
        return;
    }
    host->fence_reading = true;
}

/* ---- the lease ------------------------------------------------------------------ */

/* Fences when due from the lease as it stands now. */
static void rearm(ad_self_fence *f)
{
    claims_box_lease *lease = f->daemon->box_lease;
    uint64_t acked = claims_box_lease_acked_sent(lease), ttl = claims_box_lease_ttl(lease);
    if (!acked) {
        fence_all(f, "the box holds no lease in the store");
        /* A lease of a previous daemon may live up to its length from now. */
        if (!f->gone_timer)
            arm(f, &f->gone_timer, act_now_usec() + ttl + claims_box_lease_margin(ttl), on_gone);
        return;
    }
    arm(f, &f->fence_timer, acked + ttl - claims_box_lease_margin(ttl), on_fence_due);
}

static void on_lease(claims_box_lease *lease, bool lost, void *userdata)
{
    ad_self_fence *f = userdata;
    if (lost) {
        fence_all(f, "the store no longer has the box's lease");
        retire_fenced(f, "the store no longer has the box's lease");
    } else {
        lift(f);
    }
    rearm(f);
}

void ad_self_fence_start(ad_daemon *daemon)
{
    if (!daemon->box_lease)
        return;
    ad_self_fence *f = calloc(1, sizeof(*f));
    if (!f) {
        act_log(LOG_ERR, "box %s: out of memory; no self-fencing", daemon->config.box);
        return;
    }
    f->daemon = daemon;
    daemon->self_fence = f;
    claims_box_lease_observe(daemon->box_lease, on_lease, f);
    rearm(f);
}

void ad_self_fence_resumed(ad_host *host)
{
    if (host->daemon->fenced)
        fence_host(host, "the box's lease is not proven yet");
}

void ad_self_fence_free(ad_daemon *daemon)
{
    ad_self_fence *f = daemon->self_fence;
    if (!f)
        return;
    if (daemon->box_lease)
        claims_box_lease_observe(daemon->box_lease, NULL, NULL);
    sd_event_source_disable_unref(f->fence_timer);
    sd_event_source_disable_unref(f->gone_timer);
    /* Reads in flight find no fence and do nothing. */
    daemon->self_fence = NULL;
    free(f);
}
