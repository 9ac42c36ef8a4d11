/* Claims that change under us, and the watch that tells us. Another box named
 * executor while we wake or serve the host: the local generation is retired
 * within this one watch event. A claim that newly names this box wakes the
 * host. A move's phases are handed to moves/move.c, which drains
 * (moves/source.c) or probes (moves/target.c).
 *
 * The box lists and watches only its own index (claims.h: a box's own
 * claims): every claim that names it, and the last word on each claim
 * that named it and no longer does. A configured host the index does not
 * hold has a claim that names other boxes or none, which for this box is
 * the same as no claim: it is not ours, and a wake reads its claim.
 *
 * The watch heals (claims/box_view.c: when to list again is the view's).
 * Whatever ends it (a compaction of the store's history, the server closing
 * the stream, a silent stream, a lost connection), the index is listed again
 * at one revision and every configured host is reconciled against that list
 * exactly as if its claim had changed (the same function a watched change
 * goes through), and only then is the store watched again, from that
 * revision + 1. While the list cannot be had, the
 * store is unavailable: generations that serve keep serving, and wakes are
 * refused (wake/admit.c reads daemon->store_state) until a list succeeds. */
#include "activator/daemon/fleet/claim_watch.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/claim/release.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/hosts/hosts.h"
#include "activator/daemon/moves/move.h"
#include "activator/daemon/hosts/recovery.h"
#include "claims/box_view.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/names.h"
#include "common/text.h"

struct ad_claim_watch {
    ad_daemon *daemon;
    claims_box_view *view;
};

/* ---- one changed claim ------------------------------------------------------ */

static void host_claim_changed(ad_host *host, const claim_change *change)
{
    const char *box = host->daemon->config.box;
    ad_host_claim_seen(host, change->kind == CLAIM_CHANGE_PUT ? &change->claim : NULL,
                       change->revision);
    pl_host *pipeline = host->pipeline;
    bool ours = change->kind == CLAIM_CHANGE_PUT && claim_owned_by(&change->claim, box);
    pl_host_state state = pl_host_get_state(pipeline);
    ad_publish(host, EV_EVENT_CLAIM_CHANGED, NULL,
               change->kind == CLAIM_CHANGE_DELETE ? "deleted"
               : ours                              ? "ours"
                                                   : claim_executor(&change->claim));
    /* A move's phases ask this box to drain or to probe (or end its part);
     * the rest below holds for them as for any claim. */
    if (change->kind == CLAIM_CHANGE_PUT)
        ad_move_claim_seen(host, &change->claim);
    else
        ad_move_free(host);
    if (!ours) {
        if (state == PL_HOST_WAKING)
            pl_host_cancel(pipeline, PL_REASON_NOT_OWNER,
                           "host %s: the claim no longer names this box", host->name);
        else if (state == PL_HOST_SERVING) {
            /* Known before the retirement starts: a frozen generation of a
             * host that is not ours any more is killed frozen, never
             * thawed to take a client (generations/retire.c). */
            host->claim_ours = false;
            pl_host_park(pipeline, PL_PARK_CLAIM_LOST);
        }
        host->claim_ours = false;
        /* Already at rest: release it now; otherwise once the park ends
         * (hosts/transitions.c). */
        if (change->kind == CLAIM_CHANGE_PUT)
            ad_claim_release(host, &change->claim);
        return;
    }
    /* Newly ours: the last claim we saw named someone else (or nobody). Or
     * handed over to us: assigned here, and the box that held it has just
     * released it. */
    bool newly = !host->claim_ours;
    bool handed_over = change->claim.holder.box[0] && strcmp(change->claim.holder.box, box) != 0 &&
                       change->claim.holder.released_usec;
    host->claim_ours = true;
    host->claim_failover = change->claim.has_failover;
    if ((newly || handed_over) && state == PL_HOST_PARKED && !host->daemon->stopping &&
        claim_phase_allows_wake(&change->claim, box, false, NULL) == 0)
        pl_host_wake(pipeline, PL_TRIGGER_CLAIM_CHANGE, NULL, NULL);
}

/* What a change does, whether the watch told it or a list after a heal
 * stands for it. True when it was about a host of this box. */
static bool apply_change(ad_claim_watch *cw, const claim_change *change)
{
    if (change->kind == CLAIM_CHANGE_MALFORMED)
        return false; /* the view logged it */
    ad_host *host = ad_hosts_find(cw->daemon, change->claim.host);
    if (host)
        host_claim_changed(host, change);
    return host != NULL;
}

/* How many of the changes the watch told were about this box's hosts:
 * what the box's index saves is the rest. */
static void count_change(ad_claim_watch *cw, bool concerning)
{
    const met_daemon_metrics *m = cw->daemon->metrics;
    if (m)
        met_metric_add(m->claim_changes, MET_LABELS(concerning ? "yes" : "no"), 1);
}

static void count_heal(ad_claim_watch *cw, int result, size_t n, uint64_t duration_usec)
{
    const met_daemon_metrics *m = cw->daemon->metrics;
    if (!m)
        return;
    met_metric_add(m->claim_heals, MET_LABELS(result < 0 ? "error" : "ok"), 1);
    if (result < 0)
        return;
    met_metric_observe(m->claim_heal_duration, NULL, (double)duration_usec / 1e6);
    met_metric_add(m->claim_heal_claims, NULL, (double)n);
}

/* ---- the store's health ------------------------------------------------------ */

static void set_store_unavailable(ad_claim_watch *cw, const act_error *err)
{
    ad_store_state *state = &cw->daemon->store_state;
    bool newly = !state->unavailable;
    if (newly) {
        state->unavailable = true;
        state->since_usec = act_wallclock_usec();
    }
    act_copy_string(state->last_error, sizeof(state->last_error),
                    err ? err->message : "unknown error");
    time_t since = (time_t)(state->since_usec / 1000000);
    struct tm local;
    char clock[16] = "?";
    if (localtime_r(&since, &local))
        strftime(clock, sizeof(clock), "%H:%M:%S", &local);
    snprintf(state->refusal, sizeof(state->refusal),
             "claim store %s unreachable since %s: %s; serving generations keep serving; wakes "
             "resume when it answers",
             cw->daemon->config.store, clock, state->last_error);
    /* Once, not at every retry: the state stays visible in status. */
    if (newly)
        act_log(LOG_WARNING, "%s", state->refusal);
}

static void set_store_answers(ad_claim_watch *cw)
{
    ad_store_state *state = &cw->daemon->store_state;
    if (!state->unavailable)
        return;
    uint64_t down_sec = (act_wallclock_usec() - state->since_usec) / 1000000;
    act_log(LOG_NOTICE,
            "claim store %s answers again after %" PRIu64
            " s; this box's claims were listed again at "
            "revision %" PRIu64 " and reconciled; wakes resume",
            cw->daemon->config.store, down_sec, claims_box_view_revision(cw->view) - 1);
    *state = (ad_store_state){0};
    ad_claim_report_store_answers(cw->daemon);
}

json_object *ad_claim_watch_store_status(const ad_daemon *daemon)
{
    const ad_store_state *state = &daemon->store_state;
    json_object *store = json_object_new_object();
    json_object_object_add(store, "url", json_object_new_string(daemon->config.store));
    json_object_object_add(store, "state",
                           json_object_new_string(state->unavailable ? "unavailable" : "ok"));
    if (state->unavailable) {
        json_object_object_add(store, "since_usec", json_object_new_uint64(state->since_usec));
        json_object_object_add(store, "error", json_object_new_string(state->last_error));
    }
    return store;
}

/* ---- the view's owner ------------------------------------------------------- */

/* Every configured host against the list, as if each claim had changed: a
 * host the list has is a put of its claim, a host it lacks a delete (its
 * claim, if any, names other boxes). Both are sorted by name, so one pass
 * pairs them. */
static void reconcile(claims_box_view *view, const claim *claims, size_t n, uint64_t revision,
                      void *userdata)
{
    ad_claim_watch *cw = userdata;
    ad_daemon *daemon = cw->daemon;
    if (daemon->stopping)
        return;
    size_t next = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        const char *name = daemon->hosts[i]->name;
        while (next < n && strcmp(claims[next].host, name) < 0)
            next++;
        if (claims_box_view_is_malformed(view, name))
            continue;
        claim_change change = {.kind = CLAIM_CHANGE_DELETE, .revision = revision};
        if (next < n && strcmp(claims[next].host, name) == 0) {
            change.kind = CLAIM_CHANGE_PUT;
            change.revision = claims[next].revision;
            change.claim = claims[next];
        } else {
            snprintf(change.claim.host, sizeof(change.claim.host), "%s", name);
        }
        apply_change(cw, &change);
    }
}

static bool changed(claims_box_view *view, const claim_change *change, void *userdata)
{
    ad_claim_watch *cw = userdata;
    bool concerning = apply_change(cw, change);
    count_change(cw, concerning);
    return concerning;
}

static void store_health(claims_box_view *view, const act_error *err, void *userdata)
{
    if (err)
        set_store_unavailable(userdata, err);
    else
        set_store_answers(userdata);
}

static void heal_ended(claims_box_view *view, int result, size_t n, uint64_t duration_usec,
                       void *userdata)
{
    count_heal(userdata, result, n, duration_usec);
}

static const claims_box_view_ops view_ops = {
    .changed = changed,
    .listed = reconcile,
    .store_health = store_health,
    .heal_ended = heal_ended,
};

/* ---- start and stop ---------------------------------------------------------- */

/* Where each host's claim stands now, without the reactions of a change: a
 * host whose claim names this box is already ours, so a later write that
 * still names it does not wake the host. Recovery has judged the
 * generations it resumed. */
static void take_baseline(ad_claim_watch *cw, const claim *claims, size_t n)
{
    ad_daemon *daemon = cw->daemon;
    size_t next = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        ad_host *host = daemon->hosts[i];
        while (next < n && strcmp(claims[next].host, host->name) < 0)
            next++;
        bool found = next < n && strcmp(claims[next].host, host->name) == 0;
        host->claim_ours = found && claim_owned_by(&claims[next], daemon->config.box);
        host->claim_failover = host->claim_ours && claims[next].has_failover;
        if (found) {
            ad_host_claim_seen(host, &claims[next], claims[next].revision);
            /* A move a previous daemon took part in goes on from its
             * phase: a source drains again, a target probes again (same
             * deadline). */
            ad_move_claim_seen(host, &claims[next]);
            /* What a previous daemon did not live to write (recovery ran). */
            ad_recover_settle_claim(host, &claims[next]);
        }
    }
}

int ad_claim_watch_start(ad_daemon *daemon, act_error *err)
{
    assert(daemon && daemon->store);
    ad_claim_watch *cw = calloc(1, sizeof(*cw));
    if (!cw)
        return act_error_set(err, ENOMEM, "out of memory");
    cw->daemon = daemon;
    daemon->claim_watch = cw;
    int r =
        claims_box_view_new(daemon->store, daemon->loop, daemon->config.box,
                            daemon->config.store_watch_timeout_usec, &view_ops, cw, &cw->view, err);
    if (r < 0)
        return r;
    /* The same start as a heal's, on the store's own loop: the daemon is
     * not ready until the store answered. */
    claim *claims = NULL;
    size_t n = 0;
    uint64_t revision = 0;
    r = claims_list_box_at(daemon->store, daemon->config.box, &claims, &n, &revision, NULL, NULL,
                           err);
    if (r < 0)
        return act_error_prefix(err, "Store=%s: cannot list the claims", daemon->config.store);
    take_baseline(cw, claims, n);
    free(claims);
    return claims_box_view_watch_from(cw->view, revision, err);
}

void ad_claim_watch_hold(ad_daemon *daemon)
{
    if (daemon->claim_watch)
        claims_box_view_hold(daemon->claim_watch->view);
}

void ad_claim_watch_stop(ad_daemon *daemon)
{
    ad_claim_watch *cw = daemon->claim_watch;
    if (!cw)
        return;
    claims_box_view_free(cw->view);
    free(cw);
    daemon->claim_watch = NULL;
}
