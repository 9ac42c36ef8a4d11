/* What the fleet ops decide between their store calls and what they reply
 * (activator/control/fleet.h), with hand-made claims and box records: the
 * same decisions the daemon and activatorctl --store make. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "activator/control/fleet.h"
#include "common/clock.h"
#include "common/json_fields.h"

static ctrl_request request_of(const char *text)
{
    ctrl_request request;
    ctrl_request_error err;
    if (ctrl_request_parse(text, strlen(text), &request, &err) < 0)
        fail_msg("%s: %s", text, err.error.message);
    return request;
}

/* web1, served by b1 as generation 4, at revision 12. */
static claim served_claim(void)
{
    claim c = {0};
    snprintf(c.host, sizeof(c.host), "web1");
    snprintf(c.holder.box, sizeof(c.holder.box), "b1");
    snprintf(c.holder.incarnation, sizeof(c.holder.incarnation), "inc1");
    c.holder.session = 3;
    c.holder.generation = 4;
    c.holder.stamp_usec = 1700000000000000ULL;
    snprintf(c.op.id, sizeof(c.op.id), "op-1");
    c.op.kind = CLAIM_OP_SERVING;
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    snprintf(c.op.exec, sizeof(c.op.exec), "b1");
    c.revision = 12;
    return c;
}

static claims_box box_record(const char *box, bool live)
{
    claims_box record = {.lease_ttl_usec = 10000000, .live = live};
    snprintf(record.box, sizeof(record.box), "%s", box);
    record.expires_usec = act_wallclock_usec() + (live ? 5000000 : 0) - (live ? 0 : 90000000);
    return record;
}

static void outcome_free(ctrl_fleet_outcome *out)
{
    json_object_put(out->result);
    out->result = NULL;
}

static void an_assignment_needs_a_live_box_unless_forced(void **state)
{
    ctrl_request assign = request_of("{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\","
                                     "\"box\":\"b2\"}");
    ctrl_request forced = request_of("{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\","
                                     "\"box\":\"b2\",\"force\":true}");
    /* Both list the boxes: --force skips the lease, never the drain mark. */
    assert_true(ctrl_fleet_lists_boxes(&assign));
    assert_true(ctrl_fleet_lists_boxes(&forced));

    claim current = served_claim(), next;
    ctrl_fleet_outcome out;
    assert_int_equal(ctrl_fleet_plan(&assign, 1, &current, &next, &out), 0);
    assert_string_equal(claim_executor(&next), "b2");

    claims_box boxes[] = {box_record("b1", true), box_record("b2", false)};
    assert_int_equal(ctrl_fleet_check_box(&assign, &current, boxes, 2, &out), 1);
    assert_string_equal(out.code, "box_not_live");
    assert_non_null(strstr(out.error.message, "revision 12, box b1"));
    assert_non_null(strstr(out.error.message, "lease ran out 90 s ago"));
    assert_non_null(strstr(out.error.message, "--force"));
    assert_int_equal(ctrl_fleet_check_box(&assign, &current, boxes, 1, &out), 1);
    assert_non_null(strstr(out.error.message, "no record"));
    assert_int_equal(ctrl_fleet_check_box(&forced, &current, boxes, 2, &out), 0);
    boxes[1].live = true;
    assert_int_equal(ctrl_fleet_check_box(&assign, &current, boxes, 2, &out), 0);
}

/* A drained box takes no host: an assignment, forced or not, and a move
 * to it are refused, naming the box and how to lift the mark. */
static void a_drained_box_is_refused_forced_or_not(void **state)
{
    ctrl_request assign = request_of("{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\","
                                     "\"box\":\"b2\"}");
    ctrl_request forced = request_of("{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\","
                                     "\"box\":\"b2\",\"force\":true}");
    ctrl_request move = request_of("{\"v\":1,\"op\":\"move\",\"host\":\"web1\","
                                   "\"box\":\"b2\"}");
    claim current = served_claim();
    claims_box boxes[] = {box_record("b1", true), box_record("b2", true)};
    boxes[1].drained_usec = act_wallclock_usec() - 120 * 1000000ull;
    const ctrl_request *requests[] = {&assign, &forced, &move};
    for (size_t i = 0; i < 3; i++) {
        ctrl_fleet_outcome out;
        assert_int_equal(ctrl_fleet_check_box(requests[i], &current, boxes, 2, &out), 1);
        assert_string_equal(out.code, "box_drained");
        assert_non_null(strstr(out.error.message, "box b2 was drained 120 s ago"));
        assert_non_null(strstr(out.error.message, "activatorctl undrain b2"));
        assert_non_null(strstr(out.error.message, "revision 12, box b1"));
    }
    /* A box drained while down is refused as drained, not as dead. */
    boxes[1].live = false;
    ctrl_fleet_outcome out;
    assert_int_equal(ctrl_fleet_check_box(&forced, &current, boxes, 2, &out), 1);
    assert_string_equal(out.code, "box_drained");
    boxes[1].drained_usec = 0;
    assert_int_equal(ctrl_fleet_check_box(&forced, &current, boxes, 2, &out), 0);
}

static void a_lost_compare_and_swap_names_the_revision_and_the_box(void **state)
{
    ctrl_request hold =
        request_of("{\"v\":1,\"op\":\"hold\",\"host\":\"web1\",\"version\":\"v2\"}");
    claim current = served_claim(), next;
    ctrl_fleet_outcome out;
    assert_int_equal(ctrl_fleet_plan(&hold, 1, &current, &next, &out), 0);
    assert_string_equal(next.held, "v2");

    /* Another operator held it on v3 meanwhile, and assigned it to b3. */
    claim now = current, read = current;
    now.revision = 15;
    snprintf(now.held, sizeof(now.held), "v3");
    snprintf(now.op.exec, sizeof(now.op.exec), "b3");
    snprintf(now.op.phase, sizeof(now.op.phase), CLAIM_PHASE_ASSIGNED);
    assert_int_equal(ctrl_fleet_written(&hold, CLAIMS_CHANGED, 0, 1, &read, &next, &now, NULL, &out),
                     1);
    assert_string_equal(out.code, "claim_changed");
    assert_non_null(strstr(out.error.message, "host web1"));
    assert_non_null(strstr(out.error.message, "revision 15, box b3 (last run by b1)"));
    assert_non_null(strstr(out.error.message, "its hold is now v3 (it was none)"));
    assert_null(out.result);
    assert_int_equal(read.revision, 12);

    assert_int_equal(ctrl_fleet_written(&hold, 0, 16, 1, &read, &next, NULL, NULL, &out), 1);
    assert_null(out.code);
    json_object *revision = NULL, *changed = NULL;
    assert_true(json_object_object_get_ex(out.result, "revision", &revision));
    assert_int_equal(json_object_get_uint64(revision), 16);
    assert_true(json_object_object_get_ex(out.result, "changed", &changed));
    assert_true(json_object_get_boolean(changed));
    outcome_free(&out);

    /* Nothing to change: answered without a write. */
    current.held[0] = '\0';
    ctrl_request unhold = request_of("{\"v\":1,\"op\":\"unhold\",\"host\":\"web1\"}");
    assert_int_equal(ctrl_fleet_plan(&unhold, 1, &current, &next, &out), 1);
    assert_null(out.code);
    assert_true(json_object_object_get_ex(out.result, "changed", &changed));
    assert_false(json_object_get_boolean(changed));
    outcome_free(&out);

    /* No claim: refused, saying how to make one. */
    claim absent = {0};
    assert_int_equal(ctrl_fleet_plan(&unhold, 0, &absent, &next, &out), 1);
    assert_string_equal(out.code, "no_claim");
    assert_non_null(strstr(out.error.message, "claim assign web1"));
}

/* web1 served by b1, pinned on v2 (a swap's pin, whose failure the daemon
 * records beside it) and held on v1, at revision 12. */
static claim pinned_claim(void)
{
    claim c = served_claim();
    c.has_pin = true;
    snprintf(c.pin.version, sizeof(c.pin.version), "v2");
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%064d", 2);
    snprintf(c.held, sizeof(c.held), "v1");
    snprintf(c.holder.handle, sizeof(c.holder.handle), "127.0.0.1:8080");
    return c;
}

/* What the daemon writes back over c without an operator: the park of the
 * generation (phase parked, the handle gone), or a new admission (a new
 * session and generation, phase starting), and a pin's failure. */
static claim parked_back(const claim *c)
{
    claim next;
    claim_next_parked(c, &next);
    next.revision = c->revision + 1;
    return next;
}

static claim admitted_again(const claim *c)
{
    claim next;
    claim_next_admission(c, "b1", "inc2", c->holder.stamp_usec + 1, &next);
    if (next.has_pin)
        snprintf(next.pin.failure_reason, sizeof(next.pin.failure_reason), "not-ready");
    next.revision = c->revision + 2;
    return next;
}

/* One edit, planned on read, whose first CAS lost to now: 0 (written again
 * on now) or 1 (answered), with next and out as ctrl_fleet_written left them. */
static int lost_to(const char *request_text, const claim *read_claim, const claim *now,
                   unsigned writes, claim *next, ctrl_fleet_outcome *out)
{
    ctrl_request request = request_of(request_text);
    claim read = *read_claim;
    if (ctrl_fleet_plan(&request, read.revision ? 1 : 0, &read, next, out) != 0)
        fail_msg("%s: planned nothing to write on the claim read (%s)", request_text,
                 out->code ? out->error.message : "unchanged");
    int r = ctrl_fleet_written(&request, CLAIMS_CHANGED, 0, writes, &read, next, now, NULL, out);
    if (r == 0)
        assert_int_equal(read.revision, now->revision); /* the next CAS goes at now's */
    return r;
}

#define UNPIN "{\"v\":1,\"op\":\"unpin\",\"host\":\"web1\"}"
#define HOLD_V3 "{\"v\":1,\"op\":\"hold\",\"host\":\"web1\",\"version\":\"v3\"}"
#define UNHOLD "{\"v\":1,\"op\":\"unhold\",\"host\":\"web1\"}"
#define ASSIGN_B2 "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\",\"box\":\"b2\"}"
#define FORCE_B2                                                                                   \
    "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\",\"box\":\"b2\",\"force\":true}"
#define RELEASE "{\"v\":1,\"op\":\"claim.release\",\"host\":\"web1\"}"

/* The daemon's own write-backs change nothing an operator's edit decided
 * on: the edit is planned again on the claim now there, keeping what the
 * daemon wrote, and written at its revision. */
static void a_write_back_between_read_and_write_is_written_over(void **state)
{
    claim read = pinned_claim(), next;
    ctrl_fleet_outcome out;
    const claim backs[] = {parked_back(&read), admitted_again(&read)};
    for (size_t i = 0; i < ARRAY_SIZE(backs); i++) {
        const claim *now = &backs[i];
        assert_int_equal(lost_to(UNPIN, &read, now, 1, &next, &out), 0);
        assert_false(next.has_pin);
        assert_string_equal(next.op.phase, now->op.phase);
        assert_int_equal(next.holder.session, now->holder.session);
        assert_int_equal(next.holder.generation, now->holder.generation);

        assert_int_equal(lost_to(HOLD_V3, &read, now, 1, &next, &out), 0);
        assert_string_equal(next.held, "v3");
        assert_string_equal(next.op.phase, now->op.phase);

        assert_int_equal(lost_to(UNHOLD, &read, now, 1, &next, &out), 0);
        assert_string_equal(next.held, "");
        assert_string_equal(next.holder.handle, now->holder.handle);

        assert_int_equal(lost_to(ASSIGN_B2, &read, now, 1, &next, &out), 0);
        assert_string_equal(claim_executor(&next), "b2");
        assert_int_equal(next.holder.session, now->holder.session);
        assert_int_equal(lost_to(FORCE_B2, &read, now, 1, &next, &out), 0);
        assert_string_equal(claim_executor(&next), "b2");

        assert_int_equal(lost_to(RELEASE, &read, now, 1, &next, &out), 0);
        assert_string_equal(next.op.exec, ""); /* released */
    }

    /* Up to CTRL_FLEET_WRITES_MAX writes in all, then it says it kept losing. */
    claim now = parked_back(&read);
    assert_int_equal(lost_to(UNPIN, &read, &now, CTRL_FLEET_WRITES_MAX - 1, &next, &out), 0);
    assert_int_equal(lost_to(UNPIN, &read, &now, CTRL_FLEET_WRITES_MAX, &next, &out), 1);
    assert_string_equal(out.code, "claim_changed");
    char times[64];
    snprintf(times, sizeof(times), "%d times in a row", CTRL_FLEET_WRITES_MAX);
    assert_non_null(strstr(out.error.message, times));
    assert_non_null(strstr(out.error.message, "revision 13, box b1"));

    /* A write that made the edit already: answered unchanged, no write. */
    now.has_pin = false;
    now.pin = (claim_pin){0};
    assert_int_equal(lost_to(UNPIN, &read, &now, 1, &next, &out), 1);
    assert_null(out.code);
    assert_false(json_object_get_boolean(json_object_object_get(out.result, "changed")));
    assert_int_equal(json_object_get_uint64(json_object_object_get(out.result, "revision")), 13);
    outcome_free(&out);
    now = parked_back(&read);
    snprintf(now.held, sizeof(now.held), "v3");
    assert_int_equal(lost_to(HOLD_V3, &read, &now, 1, &next, &out), 1);
    assert_null(out.code);
    outcome_free(&out);
}

/* Expects the edit that lost to now to be refused claim_changed, saying
 * what changed (want) and where the claim stands. */
static void refused_over(const char *request_text, const claim *read, const claim *now,
                         const char *want)
{
    claim next;
    ctrl_fleet_outcome out;
    assert_int_equal(lost_to(request_text, read, now, 1, &next, &out), 1);
    assert_non_null(out.code);
    assert_string_equal(out.code, "claim_changed");
    assert_null(out.result);
    if (!strstr(out.error.message, want) || !strstr(out.error.message, "host web1") ||
        !strstr(out.error.message, "nothing was written"))
        fail_msg("%s: expected \"%s\" in: %s", request_text, want, out.error.message);
}

/* A write that changes what the edit decided on refuses it, and the
 * refusal says what changed; so does the same test of the decision made on
 * its own (ctrl_fleet_same_decision), which promote's unpin asks too. */
static void a_write_that_changes_the_decision_refuses_the_edit(void **state)
{
    claim read = pinned_claim();

    claim repinned = parked_back(&read);
    snprintf(repinned.pin.version, sizeof(repinned.pin.version), "v3");
    snprintf(repinned.pin.digest, sizeof(repinned.pin.digest), "%064d", 3);
    refused_over(UNPIN, &read, &repinned, "its pin is now v3 (it was v2)");
    refused_over(UNPIN, &read, &repinned, "(now revision 13, box b1)");
    refused_over(UNPIN, &read, &repinned, "activatorctl claim show web1");
    /* The same version staged again is another build: another decision. */
    claim rebuilt = parked_back(&read);
    snprintf(rebuilt.pin.digest, sizeof(rebuilt.pin.digest), "%064d", 4);
    refused_over(UNPIN, &read, &rebuilt, "its pin is now v2 (it was v2)");

    claim held_elsewhere = parked_back(&read);
    snprintf(held_elsewhere.held, sizeof(held_elsewhere.held), "v4");
    refused_over(HOLD_V3, &read, &held_elsewhere, "its hold is now v4 (it was v1)");
    refused_over(UNHOLD, &read, &held_elsewhere, "its hold is now v4 (it was v1)");
    claim unheld = parked_back(&read);
    unheld.held[0] = '\0';
    refused_over(HOLD_V3, &read, &unheld, "its hold is now none (it was v1)");

    claim moving = parked_back(&read);
    snprintf(moving.op.id, sizeof(moving.op.id), "move-1");
    moving.op.kind = CLAIM_OP_MOVE;
    snprintf(moving.op.phase, sizeof(moving.op.phase), "draining");
    snprintf(moving.op.from, sizeof(moving.op.from), "b1");
    snprintf(moving.op.to, sizeof(moving.op.to), "b3");
    refused_over(ASSIGN_B2, &read, &moving, "its op is now move-1 move/draining on box b1");
    refused_over(RELEASE, &read, &moving, "(it was op-1 serving/serving on box b1)");
    claim assigned = parked_back(&read);
    snprintf(assigned.op.id, sizeof(assigned.op.id), "assign");
    snprintf(assigned.op.phase, sizeof(assigned.op.phase), CLAIM_PHASE_ASSIGNED);
    snprintf(assigned.op.exec, sizeof(assigned.op.exec), "b3");
    refused_over(RELEASE, &read, &assigned, "its op is now assign serving/assigned on box b3");
    /* Released meanwhile under the same op id: the holder still names b1. */
    claim released = parked_back(&read);
    released.op.exec[0] = '\0';
    refused_over(ASSIGN_B2, &read, &released, "its op is now op-1 serving/parked on box none");
    claim other_holder = admitted_again(&read);
    snprintf(other_holder.holder.box, sizeof(other_holder.holder.box), "b3");
    snprintf(other_holder.op.exec, sizeof(other_holder.op.exec), "b3");
    refused_over(FORCE_B2, &read, &other_holder, "its op is now op-1 serving/starting on box b3");

    claim deleted = {0};
    refused_over(UNPIN, &read, &deleted, "the claim was deleted");
    claim absent = {0}, created = served_claim();
    refused_over(ASSIGN_B2, &absent, &created, "the claim was created");

    /* A move's step never goes on from another claim than the one it read. */
    char why[256];
    ctrl_request move = request_of("{\"v\":1,\"op\":\"move\",\"host\":\"web1\",\"box\":\"b2\"}");
    claim unheld_read = read;
    unheld_read.held[0] = '\0';
    claim now = parked_back(&unheld_read);
    assert_false(ctrl_fleet_same_decision(&move, &unheld_read, &now, why, sizeof(why)));
    claim next;
    ctrl_fleet_outcome out;
    assert_int_equal(lost_to("{\"v\":1,\"op\":\"move\",\"host\":\"web1\",\"box\":\"b2\"}",
                             &unheld_read, &now, 1, &next, &out),
                     1);
    assert_string_equal(out.code, "claim_changed");

    /* The test alone, as promote asks it for the pin it lifts. */
    ctrl_request unpin = request_of(UNPIN);
    now = admitted_again(&read);
    assert_true(ctrl_fleet_same_decision(&unpin, &read, &now, why, sizeof(why)));
    assert_false(ctrl_fleet_same_decision(&unpin, &read, &repinned, why, sizeof(why)));
    assert_string_equal(why, "its pin is now v3 (it was v2)");
}

static json_object *row_of(json_object *result, const char *list, const char *key,
                           const char *value)
{
    json_object *rows = NULL;
    assert_true(json_object_object_get_ex(result, list, &rows));
    for (size_t i = 0; i < json_object_array_length(rows); i++) {
        json_object *row = json_object_array_get_idx(rows, i), *field = NULL;
        if (json_object_object_get_ex(row, key, &field) &&
            strcmp(json_object_get_string(field), value) == 0)
            return row;
    }
    return NULL;
}

static const char *field(json_object *row, const char *key)
{
    json_object *value = NULL;
    return json_object_object_get_ex(row, key, &value) ? json_object_get_string(value) : NULL;
}

static const char *running_here(const claim *c, void *userdata)
{
    return strcmp(c->host, "web1") == 0 ? "v7" : NULL;
}

static void the_lists_show_every_claim_and_box(void **state)
{
    claim claims[4] = {served_claim(), served_claim(), served_claim(), served_claim()};
    snprintf(claims[1].host, sizeof(claims[1].host), "web2");
    claims[1].has_pin = true;
    snprintf(claims[1].pin.version, sizeof(claims[1].pin.version), "v3");
    /* web4's pin failed: every start runs its fallback, and the row says so. */
    snprintf(claims[3].host, sizeof(claims[3].host), "web4");
    claims[3].has_pin = true;
    snprintf(claims[3].pin.version, sizeof(claims[3].pin.version), "v5");
    snprintf(claims[3].pin.failure_reason, sizeof(claims[3].pin.failure_reason), "crashed");
    snprintf(claims[3].pin.failure_box, sizeof(claims[3].pin.failure_box), "b2");
    snprintf(claims[3].pin.fallback_version, sizeof(claims[3].pin.fallback_version), "v4");
    snprintf(claims[2].host, sizeof(claims[2].host), "web3");
    snprintf(claims[2].op.exec, sizeof(claims[2].op.exec), "gone");
    snprintf(claims[2].op.phase, sizeof(claims[2].op.phase), CLAIM_PHASE_ASSIGNED);

    json_object *result = ctrl_fleet_claims_result(claims, 4, running_here, NULL);
    /* The version: the pin's, else the holder's build where it is known. */
    assert_string_equal(field(row_of(result, "claims", "host", "web1"), "version"), "v7");
    assert_string_equal(field(row_of(result, "claims", "host", "web2"), "version"), "v3");
    assert_string_equal(field(row_of(result, "claims", "host", "web2"), "pin"), "v3");
    assert_string_equal(field(row_of(result, "claims", "host", "web3"), "box"), "gone");
    assert_string_equal(field(row_of(result, "claims", "host", "web3"), "holder"), "b1");
    json_object *web4 = row_of(result, "claims", "host", "web4");
    assert_string_equal(field(web4, "pin"), "v5");
    assert_string_equal(field(web4, "pin_failure"), "crashed");
    assert_string_equal(field(web4, "pin_failure_box"), "b2");
    assert_string_equal(field(web4, "pin_fallback"), "v4");
    assert_string_equal(field(web4, "version"), "v4");
    json_object_put(result);

    /* b1 has a record; "gone" is only named by a claim: dead, no record. */
    claims_box boxes[] = {box_record("b1", true)};
    result = ctrl_fleet_boxes_result(boxes, 1, claims, 3);
    json_object *b1 = row_of(result, "boxes", "box", "b1");
    json_object *gone = row_of(result, "boxes", "box", "gone");
    assert_non_null(b1);
    assert_non_null(gone);
    assert_string_equal(field(b1, "live"), "true");
    assert_string_equal(field(b1, "hosts"), "2");
    assert_string_equal(field(gone, "live"), "false");
    assert_string_equal(field(gone, "record"), "false");
    assert_string_equal(field(gone, "hosts"), "1");
    json_object_put(result);
}

/* A move looks at both leases: the target's always, the source's to
 * refuse --force while it lives, and to refuse a drain when it does not. */
static void a_move_checks_both_boxes_and_resumes_the_same_move(void **state)
{
    claim current = served_claim(), next;
    ctrl_fleet_outcome out;
    ctrl_request move = request_of("{\"v\":1,\"op\":\"move\",\"host\":\"web1\","
                                   "\"box\":\"b2\"}");
    ctrl_request forced = request_of("{\"v\":1,\"op\":\"move\",\"host\":\"web1\","
                                     "\"box\":\"b2\",\"force\":true}");
    assert_true(ctrl_fleet_is_fleet_op(CTRL_OP_MOVE));
    assert_true(ctrl_fleet_lists_boxes(&move));
    assert_true(ctrl_fleet_lists_boxes(&forced));
    assert_int_equal(ctrl_fleet_plan(&move, 1, &current, &next, &out), 0);
    assert_int_equal(next.op.kind, CLAIM_OP_MOVE);
    assert_string_equal(next.op.phase, "draining");
    assert_string_equal(next.op.to, "b2");
    assert_non_null(strstr(next.op.id, "move-"));

    claims_box both[] = {box_record("b1", true), box_record("b2", true)};
    assert_int_equal(ctrl_fleet_check_box(&move, &current, both, 2, &out), 0);
    assert_int_equal(ctrl_fleet_check_box(&forced, &current, both, 2, &out), 1);
    assert_string_equal(out.code, "source_live");
    claims_box source_dead[] = {box_record("b1", false), box_record("b2", true)};
    assert_int_equal(ctrl_fleet_check_box(&move, &current, source_dead, 2, &out), 1);
    assert_string_equal(out.code, "box_not_live");
    assert_non_null(strstr(out.error.message, "--force"));
    assert_int_equal(ctrl_fleet_check_box(&forced, &current, source_dead, 2, &out), 0);
    assert_int_equal(ctrl_fleet_check_box(&move, &current, source_dead, 1, &out), 1);
    assert_string_equal(out.code, "unknown_box");
    assert_non_null(strstr(out.error.message, "revision 12"));

    /* The same move again is answered with it, unchanged. */
    next.revision = 13;
    assert_int_equal(ctrl_fleet_plan(&move, 1, &next, &current, &out), 1);
    assert_null(out.code);
    assert_false(json_object_get_boolean(json_object_object_get(out.result, "changed")));
    outcome_free(&out);
    /* Rolled back by an abort; an abort without a move is refused. */
    ctrl_request abort_move = request_of("{\"v\":1,\"op\":\"move.abort\",\"host\":\"web1\"}");
    claim back;
    assert_int_equal(ctrl_fleet_plan(&abort_move, 1, &next, &back, &out), 0);
    assert_string_equal(back.op.exec, "b1");
    assert_string_equal(back.failure.reason, "aborted");
    claim serving = served_claim();
    assert_int_equal(ctrl_fleet_plan(&abort_move, 1, &serving, &back, &out), 1);
    assert_string_equal(out.code, "no_move");
}

/* claim.wait answers once the claim is past the revision named, watches
 * from the right revision while it is not, and at the last look answers
 * the claim as it is, or no_claim. */
static void a_claim_wait_answers_past_its_revision_and_watches_until_then(void **state)
{
    claim c = served_claim(); /* revision 12 */
    claim none = {0};
    uint64_t from = 99;
    ctrl_fleet_outcome out;
    ctrl_request at12 =
        request_of("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"revision\":12}");
    /* Not past 12: watched from 13. */
    assert_int_equal(ctrl_fleet_wait_plan(&at12, 1, &c, 0, false, &from, &out), 0);
    assert_true(from == 13);
    /* Past it: the claim, changed. */
    c.revision = 14;
    assert_int_equal(ctrl_fleet_wait_plan(&at12, 1, &c, 2500, false, &from, &out), 1);
    assert_null(out.code);
    assert_true(act_json_bool_or(out.result, "changed", false));
    assert_true(act_json_u64_or(out.result, "waited_ms", 0) == 2);
    json_object *body = act_json_find(out.result, "claim", json_type_object);
    assert_true(act_json_u64_or(body, "revision", 0) == 14);
    outcome_free(&out);
    /* A revision from later than the claim's own: watched from after it. */
    ctrl_request at20 =
        request_of("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"revision\":20}");
    assert_int_equal(ctrl_fleet_wait_plan(&at20, 1, &c, 0, false, &from, &out), 0);
    assert_true(from == 21);
    /* The last look answers it unchanged. */
    assert_int_equal(ctrl_fleet_wait_plan(&at20, 1, &c, 30000000, true, &from, &out), 1);
    assert_null(out.code);
    assert_false(act_json_bool_or(out.result, "changed", true));
    outcome_free(&out);
    /* Deleted after the revision named: no_claim at once. */
    assert_int_equal(ctrl_fleet_wait_plan(&at12, 0, &none, 0, false, &from, &out), 1);
    assert_string_equal(out.code, "no_claim");
    assert_non_null(strstr(out.error.message, "deleted after revision 12"));
    /* Revision 0 and no claim: waited for from now, then no_claim. */
    ctrl_request any = request_of("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"wait\":5}");
    assert_int_equal(ctrl_fleet_wait_plan(&any, 0, &none, 0, false, &from, &out), 0);
    assert_true(from == 0);
    assert_int_equal(ctrl_fleet_wait_plan(&any, 0, &none, 5000000, true, &from, &out), 1);
    assert_string_equal(out.code, "no_claim");
    assert_non_null(strstr(out.error.message, "none was written in 5 s"));
    /* Revision 0 and a claim: at once. */
    assert_int_equal(ctrl_fleet_wait_plan(&any, 1, &c, 0, false, &from, &out), 1);
    assert_true(act_json_bool_or(out.result, "changed", false));
    outcome_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_assignment_needs_a_live_box_unless_forced),
        cmocka_unit_test(a_drained_box_is_refused_forced_or_not),
        cmocka_unit_test(a_lost_compare_and_swap_names_the_revision_and_the_box),
        cmocka_unit_test(a_write_back_between_read_and_write_is_written_over),
        cmocka_unit_test(a_write_that_changes_the_decision_refuses_the_edit),
        cmocka_unit_test(the_lists_show_every_claim_and_box),
        cmocka_unit_test(a_move_checks_both_boxes_and_resumes_the_same_move),
        cmocka_unit_test(a_claim_wait_answers_past_its_revision_and_watches_until_then),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
