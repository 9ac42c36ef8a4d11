/* The fleet ops through a box's daemon (activator/control/fleet.h): claims,
 * boxes, claim.show, claim.assign, claim.release, hold, unhold, unpin,
 * box.drain and box.undrain,
 * each a chain of asynchronous store calls on the loop, with fleet.c's
 * decisions between them, so they answer as activatorctl --store does. */
#include "activator/daemon/fleet/requests.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "activator/control/fleet.h"
#include "activator/daemon/builds/identify.h"
#include "common/clock.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/hosts/hosts.h"
#include "common/cleanup.h"
#include "common/log.h"
#ifdef ACTIVATOR_TEST_HOOKS
#include "activator/daemon/host/step_holds.h"
#endif

typedef struct fleet_request {
    ad_daemon *daemon;
    ctrl_reply *reply;
    ctrl_request request; /* a copy: the dispatcher's is gone once it returns */
    int found;
    claim current; /* as read, and as the last CAS that lost found it */
    claim next;
    unsigned writes; /* the CAS made so far */
    claims_box *boxes; /* boxes: the records, until the claims are listed */
    size_t n_boxes;
} fleet_request;

static void fleet_request_free(fleet_request *pending)
{
    if (!pending)
        return;
    free(pending->boxes);
    free(pending);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(fleet_request *, fleet_request_free)

void ad_fleet_reply(ctrl_reply *reply, ctrl_fleet_outcome *outcome)
{
    if (outcome->code)
        ctrl_reply_error(reply, outcome->code, "%s", outcome->error.message);
    else
        ctrl_reply_ok(reply, TAKE_PTR(outcome->result));
}

/* Replies with what fleet.c decided, which ends the request. */
static void answer(fleet_request *pending, ctrl_fleet_outcome *outcome)
{
    ad_fleet_reply(pending->reply, outcome);
    fleet_request_free(pending);
}

static void store_failed(fleet_request *pending, const act_error *err)
{
    ctrl_fleet_outcome outcome;
    ctrl_fleet_store_error(&pending->request, err, &outcome);
    answer(pending, &outcome);
}

/* ---- the edits ------------------------------------------------------------ */

static void write_next(fleet_request *pending);

static void on_written(claim_store *store, int result, uint64_t new_revision,
                       const claim *current, const act_error *err, void *userdata)
{
    fleet_request *pending = userdata;
    ctrl_fleet_outcome outcome;
    uint64_t lost_at = pending->current.revision;
    if (ctrl_fleet_written(&pending->request, result, new_revision, pending->writes,
                           &pending->current, &pending->next, current, err, &outcome) == 0) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = pending->request.host},
                       "host %s: %s lost its compare-and-swap at revision %" PRIu64
                       " to a write that left what it decided as it was (now revision %" PRIu64
                       "); writing it again on that claim (%u of %u)",
                       pending->request.host, ctrl_op_name(pending->request.op), lost_at,
                       pending->current.revision, pending->writes + 1, CTRL_FLEET_WRITES_MAX);
        write_next(pending);
        return;
    }
    answer(pending, &outcome);
}

static void write_now(void *userdata)
{
    fleet_request *pending = userdata;
    pending->writes++;
    act_error err = {0};
    if (claims_cas_async(pending->daemon->store, pending->request.host, pending->current.revision,
                         &pending->next, on_written, pending, &err) < 0)
        store_failed(pending, &err);
}

static void write_next(fleet_request *pending)
{
#ifdef ACTIVATOR_TEST_HOOKS
    char what[128];
    snprintf(what, sizeof(what), "host %s: %s", pending->request.host,
             ctrl_op_name(pending->request.op));
    ad_step_holds_call("fleet_cas", what, write_now, pending);
#else
    write_now(pending);
#endif
}

/* ---- box.drain, box.undrain: the mark alone ------------------------------- */

static void on_drain_marked(claim_store *store, int result, const claims_box *record,
                            const act_error *err, void *userdata)
{
    fleet_request *pending = userdata;
    if (result < 0) {
        store_failed(pending, err);
        return;
    }
    act_log(LOG_NOTICE, "box %s %s by an operator's request", pending->request.box,
            pending->request.op == CTRL_OP_BOX_DRAIN ? "drained" : "undrained");
    ctrl_fleet_outcome outcome = {0};
    outcome.result = ctrl_fleet_drain_result(&pending->request, record);
    answer(pending, &outcome);
}

static void on_boxes_for_assign(claim_store *store, int result, const claims_box *boxes,
                                size_t n, const act_error *err, void *userdata)
{
    fleet_request *pending = userdata;
    if (result < 0) {
        store_failed(pending, err);
        return;
    }
    ctrl_fleet_outcome outcome;
    if (ctrl_fleet_check_box(&pending->request, &pending->current, boxes, n, &outcome) != 0) {
        answer(pending, &outcome);
        return;
    }
    write_next(pending);
}

static void on_read(claim_store *store, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    fleet_request *pending = userdata;
    if (result < 0) {
        store_failed(pending, err);
        return;
    }
    pending->found = result;
    pending->current = result > 0 ? *c : (claim){0};
    ctrl_fleet_outcome outcome;
    if (ctrl_fleet_plan(&pending->request, result, &pending->current, &pending->next,
                        &outcome) != 0) {
        answer(pending, &outcome);
        return;
    }
    if (!ctrl_fleet_lists_boxes(&pending->request)) {
        write_next(pending);
        return;
    }
    /* Which boxes are live is all the check needs: one store request,
     * however many boxes the fleet has. */
    act_error call_err = {0};
    if (claims_box_list_live_async(store, on_boxes_for_assign, pending, &call_err) < 0)
        store_failed(pending, &call_err);
}

/* ---- the lists ------------------------------------------------------------ */

/* The build a claim's generation runs, when it is this box's and serves. */
static const char *local_version(const claim *c, void *userdata)
{
    ad_daemon *daemon = userdata;
    if (strcmp(c->holder.box, daemon->config.box) != 0)
        return NULL;
    ad_host *host = ad_hosts_find(daemon, c->host);
    const ad_generation *serving = host ? host->serving : NULL;
    return serving && serving->number == c->holder.generation ? serving->build.version : NULL;
}

/* A claim that does not parse is skipped (and logged by the store), as
 * activatorctl --store skips it. */
static void on_claims_listed(claim_store *store, int result, claim *claims, size_t n,
                             uint64_t revision, const act_error *err, void *userdata)
{
    fleet_request *pending = userdata;
    _cleanup_free_ claim *listed = claims;
    if (result < 0) {
        store_failed(pending, err);
        return;
    }
    ctrl_fleet_outcome outcome = {0};
    if (pending->request.op == CTRL_OP_BOXES)
        outcome.result = ctrl_fleet_boxes_result(pending->boxes, pending->n_boxes, listed, n);
    else
        outcome.result = ctrl_fleet_claims_result(listed, n, local_version, pending->daemon);
    answer(pending, &outcome);
}

static void list_claims(fleet_request *pending)
{
    act_error err = {0};
    if (claims_list_async(pending->daemon->store, NULL, NULL, on_claims_listed, pending,
                          &err) < 0)
        store_failed(pending, &err);
}

static void on_boxes_listed(claim_store *store, int result, const claims_box *boxes, size_t n,
                            const act_error *err, void *userdata)
{
    fleet_request *pending = userdata;
    if (result < 0) {
        store_failed(pending, err);
        return;
    }
    pending->boxes = n ? malloc(n * sizeof(*boxes)) : NULL;
    if (n && !pending->boxes) {
        act_error oom = {0};
        act_error_set(&oom, ENOMEM, "out of memory");
        store_failed(pending, &oom);
        return;
    }
    if (n)
        memcpy(pending->boxes, boxes, n * sizeof(*boxes));
    pending->n_boxes = n;
    list_claims(pending);
}

/* ---- a hold names its build ----------------------------------------------- */

/* A hold of a version this box has staged names that build (its digest and
 * registry source) on the claim, as a pin does: every start then runs
 * exactly it, and a box without it fetches it. Looked up on a release
 * worker, as the release store is read off the loop. */
typedef struct hold_lookup {
    fleet_request *pending;
    rel_store *releases;
    rel_pin pin;
    char source[CLAIM_SOURCE_SIZE];
    const char *code;
    int result;
    act_error err;
} hold_lookup;

static void run_hold_lookup(void *data)
{
    hold_lookup *job = data;
    const ctrl_request *request = &job->pending->request;
    job->result = ad_build_identify(job->releases, request->host, request->version, &job->pin,
                                    job->source, &job->code, &job->err);
}

static void drop_hold_lookup(void *data)
{
    hold_lookup *job = data;
    fleet_request_free(job->pending);
    free(job);
}

static void complete_hold_lookup(void *data)
{
    _cleanup_free_ hold_lookup *job = data;
    _cleanup_(fleet_request_freep) fleet_request *pending = job->pending;
    ctrl_request *request = &pending->request;
    if (job->result == 0) {
        snprintf(request->held_digest, sizeof(request->held_digest), "%s", job->pin.digest);
        snprintf(request->held_source, sizeof(request->held_source), "%s", job->source);
    } else {
        /* Still a hold: boxes refuse any other build, and a box that lacks
         * this one is refused before it admits itself. */
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = request->host},
                       "host %s: the hold on %s names no build, as this box cannot identify it "
                       "(%s)",
                       request->host, request->version, job->err.message);
    }
    act_error err = {0};
    if (claims_read_async(pending->daemon->store, request->host, on_read, pending, &err) < 0) {
        store_failed(TAKE_PTR(pending), &err);
        return;
    }
    TAKE_PTR(pending);
}

static int look_up_held_build(fleet_request *pending, act_error *err)
{
    hold_lookup *job = calloc(1, sizeof(*job));
    if (!job)
        return act_error_set(err, ENOMEM, "out of memory");
    job->pending = pending;
    job->releases = pending->daemon->releases;
    int r = act_offload_submit_droppable(pending->daemon->release_work,
                                         act_offload_lane(pending->request.host), run_hold_lookup,
                                         complete_hold_lookup, drop_hold_lookup, job, err);
    if (r < 0)
        free(job);
    return r;
}

void ad_fleet_request(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    _cleanup_(fleet_request_freep) fleet_request *pending = calloc(1, sizeof(*pending));
    if (!pending) {
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    *pending = (fleet_request){.daemon = daemon, .reply = reply, .request = *request};
    /* A host released here is retired here first, before another box may
     * be assigned to it. */
    ad_host *host = request->host[0] ? ad_hosts_find(daemon, request->host) : NULL;
    if (request->op == CTRL_OP_CLAIM_RELEASE && host)
        pl_host_park(host->pipeline, PL_PARK_REQUEST);
    act_error err = {0};
    int r;
    switch (request->op) {
    case CTRL_OP_CLAIMS:
        r = claims_list_async(daemon->store, NULL, NULL, on_claims_listed, pending, &err);
        break;
    case CTRL_OP_BOXES:
        /* The operator's display: with each lease's renewal and expiry. */
        r = claims_box_list_async(daemon->store, on_boxes_listed, pending, &err);
        break;
    case CTRL_OP_HOLD:
        r = look_up_held_build(pending, &err);
        break;
    case CTRL_OP_BOX_DRAIN:
        r = claims_box_drain_async(daemon->store, request->box, act_wallclock_usec(),
                                   on_drain_marked, pending, &err);
        break;
    case CTRL_OP_BOX_UNDRAIN:
        r = claims_box_undrain_async(daemon->store, request->box, on_drain_marked, pending, &err);
        break;
    default:
        r = claims_read_async(daemon->store, request->host, on_read, pending, &err);
        break;
    }
    if (r < 0) {
        store_failed(TAKE_PTR(pending), &err);
        return;
    }
    TAKE_PTR(pending); /* the callbacks' now */
}
