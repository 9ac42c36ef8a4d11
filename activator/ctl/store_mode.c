/* activatorctl --store: the fleet ops run against the claim store itself,
 * with the claims library's synchronous calls, so an operator's workstation
 * needs no daemon. The request the command line made is validated as the
 * daemon would validate it, each op is decided by activator/control/fleet.c
 * as the daemon decides it, and the answer has the daemon's reply's shape,
 * so it is printed the same way. */
#include "activator/ctl/store_mode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef ACTIVATOR_TEST_HOOKS
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#endif

#include "activator/control/fleet.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/clock.h"

static void free_claims(claim **claims)
{
    free(*claims);
}

static void free_boxes(claims_box **boxes)
{
    free(*boxes);
}

#ifdef ACTIVATOR_TEST_HOOKS
/* Test builds only: ACTIVATOR_TEST_HOLD=fleet_cas:PATH (other items are
 * the daemon's) holds each compare-and-swap of an edit until PATH exists,
 * as the daemon's hold of the same name does, so a test can write the
 * claim between the read and the write. PATH.held is made first, which is
 * how the test knows the edit is there (its output is read only once it
 * exits). */
static void test_hold_before_write(void)
{
    const char *spec = getenv("ACTIVATOR_TEST_HOLD");
    const char *item = spec ? strstr(spec, "fleet_cas:") : NULL;
    if (!item)
        return;
    char path[4096], held[4200];
    snprintf(path, sizeof(path), "%.*s", (int)strcspn(item + strlen("fleet_cas:"), ","),
             item + strlen("fleet_cas:"));
    if (path[0] != '/' || access(path, F_OK) == 0)
        return;
    snprintf(held, sizeof(held), "%s.held", path);
    int fd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    fprintf(stderr, "activatorctl: point fleet_cas held: waiting for %s\n", path);
    /* A poll, not a watch: this process has no loop, and a test waits. */
    while (access(path, F_OK) != 0)
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
}
#else
static void test_hold_before_write(void)
{
}
#endif

/* The edits and claim.show: read, decide, [check the box], write; a write
 * that lost to one that left the decision as it was is planned and made
 * again on the claim now there (ctrl_fleet_written). */
static void run_claim_op(claim_store *store, const ctrl_request *request,
                         ctrl_fleet_outcome *out)
{
    act_error err = {0};
    claim current = {0}, next;
    int found = claims_read(store, request->host, &current, &err);
    if (found < 0) {
        ctrl_fleet_store_error(request, &err, out);
        return;
    }
    if (ctrl_fleet_plan(request, found, &current, &next, out) != 0)
        return;
    if (ctrl_fleet_lists_boxes(request)) {
        _cleanup_(free_boxes) claims_box *boxes = NULL;
        size_t n = 0;
        /* Liveness only: one store request, however many boxes there are. */
        if (claims_box_list_live(store, &boxes, &n, &err) < 0) {
            ctrl_fleet_store_error(request, &err, out);
            return;
        }
        if (ctrl_fleet_check_box(request, &current, boxes, n, out) != 0)
            return;
    }
    for (unsigned writes = 1;; writes++) {
        test_hold_before_write();
        uint64_t revision = 0;
        claim now = {0};
        int r = claims_cas(store, request->host, current.revision, &next, &revision, &now, &err);
        if (ctrl_fleet_written(request, r, revision, writes, &current, &next, &now, &err, out) != 0)
            return;
    }
}

/* claim.wait: read, decide, watch the claim until its first change or the
 * end of the wait, read again. */
static void run_wait_op(claim_store *store, const ctrl_request *request, ctrl_fleet_outcome *out)
{
    uint64_t started = act_now_usec();
    uint64_t deadline = started + (uint64_t)ctrl_fleet_wait_sec(request) * 1000000ull;
    bool last_look = false, from_now = false;
    for (;;) {
        act_error err = {0};
        claim current = {0};
        int found = claims_read(store, request->host, &current, &err);
        if (found < 0) {
            ctrl_fleet_store_error(request, &err, out);
            return;
        }
        uint64_t now = act_now_usec(), from = 0;
        if (ctrl_fleet_wait_plan(request, found, &current, now - started, last_look, &from, out) !=
            0)
            return;
        int left_ms = deadline > now ? (int)((deadline - now + 999) / 1000) : 0;
        claim_change change;
        int r = claims_watch_host_next(store, request->host, from_now ? 0 : from, left_ms, &change,
                                       &err);
        if (r == -ENODATA && !from_now) {
            /* Written last before the compaction: still as read. */
            from_now = true;
            continue;
        }
        if (r < 0) {
            ctrl_fleet_store_error(request, &err, out);
            return;
        }
        last_look = r == 0;
    }
}

static void run_list_op(claim_store *store, const ctrl_request *request,
                        ctrl_fleet_outcome *out)
{
    act_error err = {0};
    _cleanup_(free_boxes) claims_box *boxes = NULL;
    _cleanup_(free_claims) claim *claims = NULL;
    size_t n_boxes = 0, n_claims = 0;
    if ((request->op == CTRL_OP_BOXES && claims_box_list(store, &boxes, &n_boxes, &err) < 0) ||
        claims_list(store, &claims, &n_claims, NULL, NULL, &err) < 0) {
        ctrl_fleet_store_error(request, &err, out);
        return;
    }
    *out = (ctrl_fleet_outcome){0};
    out->result = request->op == CTRL_OP_BOXES
                      ? ctrl_fleet_boxes_result(boxes, n_boxes, claims, n_claims)
                      : ctrl_fleet_claims_result(claims, n_claims, NULL, NULL);
}

/* box.drain, box.undrain: the mark alone. */
static void run_drain_op(claim_store *store, const ctrl_request *request, ctrl_fleet_outcome *out)
{
    act_error err = {0};
    claims_box mark = {0};
    int r =
        request->op == CTRL_OP_BOX_DRAIN
            ? claims_box_drain(store, request->box, act_wallclock_usec(), &mark.drained_usec, &err)
            : claims_box_undrain(store, request->box, &err);
    if (r < 0) {
        ctrl_fleet_store_error(request, &err, out);
        return;
    }
    *out = (ctrl_fleet_outcome){0};
    out->result = ctrl_fleet_drain_result(request, &mark);
}

/* {"ok":true,"result":...} or {"ok":false,"error":{"code","message"}}. */
static json_object *reply_of(ctrl_fleet_outcome *outcome)
{
    json_object *reply = json_object_new_object();
    json_object_object_add(reply, "ok", json_object_new_boolean(!outcome->code));
    if (!outcome->code) {
        json_object_object_add(reply, "result", TAKE_PTR(outcome->result));
        return reply;
    }
    json_object *error = json_object_new_object();
    json_object_object_add(error, "code", json_object_new_string(outcome->code));
    json_object_object_add(error, "message", json_object_new_string(outcome->error.message));
    json_object_object_add(reply, "error", error);
    return reply;
}

int ctl_store_open(const ctl_options *options, claim_store **out)
{
    claims_store_options store_options = {
        .timeout_ms = options->timeout_sec * 1000,
        .ca_file = options->store_ca,
        .cert_file = options->store_cert,
        .key_file = options->store_key,
    };
    act_error err = {0};
    if (claims_store_open(options->store_url, &store_options, out, &err) < 0) {
        fprintf(stderr, "activatorctl: --store: %s\n", err.message);
        return CTL_EXIT_USAGE;
    }
    return CTL_EXIT_OK;
}

int ctl_store_call(const ctl_options *options, json_object *request_json, json_object **reply)
{
    *reply = NULL;
    const char *text = json_object_to_json_string_ext(request_json, JSON_C_TO_STRING_PLAIN);
    ctrl_request request;
    ctrl_request_error refused;
    if (ctrl_request_parse(text, strlen(text), &request, &refused) < 0) {
        fprintf(stderr, "activatorctl: %s\n", refused.error.message);
        return CTL_EXIT_USAGE;
    }
    _cleanup_(claims_store_freep) claim_store *store = NULL;
    int opened = ctl_store_open(options, &store);
    if (opened != CTL_EXIT_OK)
        return opened;
    act_error err = {0};
    /* A write into a store laid out otherwise would leave its boxes'
     * indexes wrong. A store that does not answer is told below, as for
     * any request. */
    bool writes = request.op != CTRL_OP_CLAIMS && request.op != CTRL_OP_BOXES;
    if (writes && claims_store_check_layout(store, &err) == -EPROTONOSUPPORT) {
        fprintf(stderr, "activatorctl: --store: %s\n", err.message);
        return CTL_EXIT_USAGE;
    }
    ctrl_fleet_outcome outcome = {0};
    if (request.op == CTRL_OP_CLAIMS || request.op == CTRL_OP_BOXES)
        run_list_op(store, &request, &outcome);
    else if (request.op == CTRL_OP_CLAIM_WAIT)
        run_wait_op(store, &request, &outcome);
    else if (request.op == CTRL_OP_BOX_DRAIN || request.op == CTRL_OP_BOX_UNDRAIN)
        run_drain_op(store, &request, &outcome);
    else
        run_claim_op(store, &request, &outcome);
    bool unreachable = outcome.code && strcmp(outcome.code, "store_error") == 0;
    *reply = reply_of(&outcome);
    /* The store is what --store reaches instead of a daemon: one that does
     * not answer is unreachable, as a daemon would be. */
    return unreachable ? CTL_EXIT_UNREACHABLE : CTL_EXIT_OK;
}
