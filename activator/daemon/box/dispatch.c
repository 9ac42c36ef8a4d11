/* Control requests, already validated by activator/control/request.c, turned
 * into actions on the daemon. Replies that depend on a wake or on the claim
 * store are sent from the callback that learns the outcome. */
#include "activator/daemon/box/dispatch.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "activator/daemon/builds/gc.h"
#include "activator/daemon/moves/checkpoint_request.h"
#include "activator/daemon/fleet/claim_watch.h"
#include "activator/daemon/fleet/claim_waits.h"
#include "activator/daemon/fleet/requests.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/box/host_status.h"
#include "activator/daemon/hosts/hosts.h"
#include "activator/daemon/builds/promote.h"
#include "activator/daemon/box/reload.h"
#include "activator/daemon/builds/stage.h"
#include "activator/daemon/builds/swap.h"
#include "common/json_fields.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

#ifndef ACTIVATOR_VERSION
#define ACTIVATOR_VERSION "unknown"
#endif

/* Every per-host op names a configured host; anything else is a clear refusal. */
static ad_host *find_host(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    ad_host *host = ad_hosts_find(daemon, request->host);
    if (!host)
        ctrl_reply_error(reply, "unknown_host",
                         "host %s is not configured on box %s; add %s/%s.conf and reload "
                         "the daemon (systemctl reload activatord)",
                         request->host, daemon->config.box, daemon->config.hosts_directory,
                         request->host);
    return host;
}

static void reply_status(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    if (request->host[0]) {
        ad_host *host = find_host(daemon, request, reply);
        if (host)
            ctrl_reply_ok(reply, ad_host_status_json(host));
        return;
    }
    json_object *hosts = json_object_new_array();
    for (size_t i = 0; i < daemon->n_hosts; i++)
        json_object_array_add(hosts, ad_host_status_json(daemon->hosts[i]));
    json_object *result = json_object_new_object();
    json_object_object_add(result, "hosts", hosts);
    json_object_object_add(result, "store", ad_claim_watch_store_status(daemon));
    ctrl_reply_ok(reply, result);
}

/* ---- wake, park ---------------------------------------------------------- */

typedef struct wake_request {
    ad_host *host;
    ctrl_reply *reply;
} wake_request;

static void on_wake_done(pl_host *pipeline, const pl_wake_result *result, void *userdata)
{
    _cleanup_free_ wake_request *request = userdata;
    if (result->kind == PL_WAKE_SERVING)
        ctrl_reply_ok(request->reply, ad_host_status_json(request->host));
    else
        ctrl_reply_error(request->reply,
                         result->reason != PL_REASON_NONE ? pl_reason_to_string(result->reason)
                                                          : pl_wake_kind_to_string(result->kind),
                         "%s", result->message ? result->message : "the wake did not serve");
}

static void do_wake(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    ad_host *host = find_host(daemon, request, reply);
    if (!host)
        return;
    if (daemon->stopping) {
        ctrl_reply_error(reply, "stopping", "box %s is stopping; wake refused", daemon->config.box);
        return;
    }
    /* Its generation (if any) is frozen by the fence, not serving. */
    if (ad_host_fenced(host)) {
        ctrl_reply_error(reply, "fenced",
                         "host %s: box %s cannot prove its lease to the claim store, and the "
                         "host fails over (Failover=yes), so it is fenced here until the store "
                         "acknowledges a renewal; wake refused",
                         host->name, daemon->config.box);
        return;
    }
    wake_request *waiting = NULL;
    if (!request->no_wait) {
        waiting = calloc(1, sizeof(*waiting));
        if (!waiting) {
            ctrl_reply_error(reply, "internal", "out of memory");
            return;
        }
        *waiting = (wake_request){.host = host, .reply = reply};
    }
    /* A warm request for a frozen host: it is served once thawed. */
    if (ad_freeze_active(host, NULL)) {
        act_error thaw_err = {0};
        if (ad_freeze_thaw(host, "warm wake", &thaw_err) < 0)
            act_log(LOG_WARNING, "host %s: %s", request->host, thaw_err.message);
    }
    int r = pl_host_wake(host->pipeline, PL_TRIGGER_WARM, waiting ? on_wake_done : NULL, waiting);
    if (r < 0 || r == PL_WAKE_ALREADY_SERVING)
        free(waiting);
    if (r < 0)
        ctrl_reply_error(reply, "internal", "host %s: wake failed: %s", request->host,
                         strerror(-r));
    else if (r == PL_WAKE_ALREADY_SERVING || request->no_wait)
        ctrl_reply_ok(reply, ad_host_status_json(host));
}

/* The operator's freeze and thaw answer once the write to cgroup.freeze is
 * made; status then shows "frozen" once the kernel says it is. */
static void do_freeze(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply,
                      bool freeze)
{
    ad_host *host = find_host(daemon, request, reply);
    if (!host)
        return;
    act_error err = {0};
    int r = freeze ? ad_freeze_start(host, "an operator's freeze", &err)
                   : ad_freeze_thaw(host, "operator", &err);
    if (r < 0) {
        ctrl_reply_error(reply, r == -ENOMEM ? "internal" : "refused", "%s", err.message);
        return;
    }
    ctrl_reply_ok(reply, ad_host_status_json(host));
}

static void do_park(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    ad_host *host = find_host(daemon, request, reply);
    if (!host)
        return;
    pl_host_park(host->pipeline, PL_PARK_REQUEST);
    ctrl_reply_ok(reply, ad_host_status_json(host));
}

/* ---- releases ------------------------------------------------------------ */

/* A swap's operator: answered once, when the swap ended or (no_wait) began;
 * a swap that made its build current is followed by the automatic gc. */
typedef struct swap_asker {
    ctrl_reply *reply; /* NULL once answered */
} swap_asker;

static void on_swap_news(ad_host *host, const ad_swap_news *news, void *userdata)
{
    swap_asker *asker = userdata;
    if (asker->reply && news->code) {
        ctrl_reply_error(asker->reply, news->code, "%s", news->message);
    } else if (asker->reply) {
        json_object *status = ad_host_status_json(host);
        if (news->started)
            json_object_object_add(status, "swap", json_object_new_string(news->version));
        ctrl_reply_ok(asker->reply, status);
    }
    asker->reply = NULL;
    if (!news->ended)
        return;
    free(asker);
    if (news->made_current)
        ad_gc_after_change(host);
}

static void do_swap(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    ad_host *host = find_host(daemon, request, reply);
    if (!host)
        return;
    swap_asker *asker = calloc(1, sizeof(*asker));
    if (!asker) {
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    asker->reply = reply;
    ad_swap_order order = {
        .version = request->version, .mode = request->mode, .no_wait = request->no_wait};
    ad_swap_start(host, &order, on_swap_news, asker);
}

static void do_stage(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    /* Only root gets here: stage needs that role (activator/control/ops.h). */
    ad_host *host = find_host(daemon, request, reply);
    if (host)
        ad_stage_start(host, request, reply);
}

static void do_promote(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    ad_host *host = find_host(daemon, request, reply);
    if (host)
        ad_promote_start(host, request, reply);
}

static void do_gc(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    ad_host *host = find_host(daemon, request, reply);
    if (host)
        ad_gc_start(host, request->has_keep ? request->keep : ad_host_config(host)->releases_keep,
                    request->dry_run, reply);
}

static void do_releases(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    ad_host *host = find_host(daemon, request, reply);
    if (host)
        ad_releases_start(host, reply);
}

/* ---- stats, version ------------------------------------------------------ */

static void reply_stats(ad_daemon *daemon, ctrl_reply *reply)
{
    uint64_t by_state[_PL_HOST_STATE_MAX] = {0};
    uint64_t failed_attempts = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        by_state[pl_host_get_state(daemon->hosts[i]->pipeline)]++;
        failed_attempts += daemon->hosts[i]->failed_attempts;
    }
    json_object *result = json_object_new_object();
    act_json_add_u64(result, "hosts", daemon->n_hosts);
    for (int state = 0; state < _PL_HOST_STATE_MAX; state++) {
        char key[32];
        snprintf(key, sizeof(key), "hosts_%s", pl_host_state_to_string((pl_host_state)state));
        act_json_add_u64(result, key, by_state[state]);
    }
    act_json_add_u64(result, "failed_attempts", failed_attempts);
    act_json_add_u64(result, "events_published", daemon->events ? ev_sequence(daemon->events) : 0);
    act_json_add_u64(result, "claim_waits", daemon->n_claim_waits);
    ctrl_reply_ok(reply, result);
}

static void reply_version(ad_daemon *daemon, ctrl_reply *reply)
{
    json_object *result = json_object_new_object();
    act_json_add_string(result, "version", ACTIVATOR_VERSION);
    act_json_add_string(result, "box", daemon->config.box);
    act_json_add_string(result, "incarnation", daemon->incarnation);
    act_json_add_string(result, "store", claims_store_kind(daemon->store));
    act_json_add_u64(result, "starts", daemon->lifetime.starts);
    act_json_add_u64(result, "started_usec", daemon->lifetime.started_usec);
    act_json_add_u64(result, "handovers", daemon->lifetime.handovers);
    if (daemon->lifetime.last_handover_usec)
        act_json_add_u64(result, "last_handover_usec", daemon->lifetime.last_handover_usec);
    ctrl_reply_ok(reply, result);
}

void ad_dispatch(const ctrl_request *request, ctrl_reply *reply, void *userdata)
{
    assert(request && reply && userdata);
    ad_daemon *daemon = userdata;
    switch (request->op) {
    case CTRL_OP_STATUS:
        reply_status(daemon, request, reply);
        return;
    case CTRL_OP_WAKE:
        do_wake(daemon, request, reply);
        return;
    case CTRL_OP_PARK:
        do_park(daemon, request, reply);
        return;
    case CTRL_OP_SWAP:
        do_swap(daemon, request, reply);
        return;
    case CTRL_OP_STAGE:
        do_stage(daemon, request, reply);
        return;
    case CTRL_OP_PROMOTE:
        do_promote(daemon, request, reply);
        return;
    case CTRL_OP_RELEASES:
        do_releases(daemon, request, reply);
        return;
    case CTRL_OP_CLAIM_SHOW:
    case CTRL_OP_CLAIM_ASSIGN:
    case CTRL_OP_CLAIM_RELEASE:
    case CTRL_OP_CLAIMS:
    case CTRL_OP_BOXES:
    case CTRL_OP_HOLD:
    case CTRL_OP_UNHOLD:
    case CTRL_OP_UNPIN:
    case CTRL_OP_MOVE:
    case CTRL_OP_MOVE_ABORT:
    case CTRL_OP_BOX_DRAIN:
    case CTRL_OP_BOX_UNDRAIN:
        ad_fleet_request(daemon, request, reply);
        return;
    case CTRL_OP_CLAIM_WAIT:
        ad_claim_wait_start(daemon, request, reply);
        return;
    case CTRL_OP_STATS:
        reply_stats(daemon, reply);
        return;
    case CTRL_OP_VERSION:
        reply_version(daemon, reply);
        return;
    case CTRL_OP_RELOAD:
        ad_reload(daemon, reply);
        return;
    case CTRL_OP_GC:
        do_gc(daemon, request, reply);
        return;
    case CTRL_OP_CHECKPOINT: {
        ad_host *host = find_host(daemon, request, reply);
        if (host)
            ad_checkpoint_request_start(host, reply);
        return;
    }
    case CTRL_OP_CHECKPOINTS: {
        ad_host *host = find_host(daemon, request, reply);
        if (host)
            ad_checkpoints_list(host, reply);
        return;
    }
    case CTRL_OP_FREEZE:
    case CTRL_OP_THAW:
        do_freeze(daemon, request, reply, request->op == CTRL_OP_FREEZE);
        return;
    case CTRL_OP__COUNT:
        break;
    }
    ctrl_reply_error(reply, CTRL_REQ_UNKNOWN_OP, "unknown op");
}
