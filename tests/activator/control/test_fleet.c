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
    assert_true(ctrl_fleet_needs_live_box(&assign));
    assert_false(ctrl_fleet_needs_live_box(&forced));

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
    boxes[1].live = true;
    assert_int_equal(ctrl_fleet_check_box(&assign, &current, boxes, 2, &out), 0);
}

static void a_lost_compare_and_swap_names_the_revision_and_the_box(void **state)
{
    ctrl_request hold =
        request_of("{\"v\":1,\"op\":\"hold\",\"host\":\"web1\",\"version\":\"v2\"}");
    claim current = served_claim(), next;
    ctrl_fleet_outcome out;
    assert_int_equal(ctrl_fleet_plan(&hold, 1, &current, &next, &out), 0);
    assert_string_equal(next.held, "v2");

    /* Another box took it meanwhile. */
    claim now = current;
    now.revision = 15;
    snprintf(now.op.exec, sizeof(now.op.exec), "b3");
    snprintf(now.op.phase, sizeof(now.op.phase), CLAIM_PHASE_ASSIGNED);
    ctrl_fleet_written(&hold, CLAIMS_CHANGED, 0, &next, &now, NULL, &out);
    assert_string_equal(out.code, "claim_changed");
    assert_non_null(strstr(out.error.message, "host web1"));
    assert_non_null(strstr(out.error.message, "revision 15, box b3 (last run by b1)"));
    assert_null(out.result);

    ctrl_fleet_written(&hold, 0, 16, &next, NULL, NULL, &out);
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
    claim claims[3] = {served_claim(), served_claim(), served_claim()};
    snprintf(claims[1].host, sizeof(claims[1].host), "web2");
    claims[1].has_pin = true;
    snprintf(claims[1].pin.version, sizeof(claims[1].pin.version), "v3");
    snprintf(claims[2].host, sizeof(claims[2].host), "web3");
    snprintf(claims[2].op.exec, sizeof(claims[2].op.exec), "gone");
    snprintf(claims[2].op.phase, sizeof(claims[2].op.phase), CLAIM_PHASE_ASSIGNED);

    json_object *result = ctrl_fleet_claims_result(claims, 3, running_here, NULL);
    /* The version: the pin's, else the holder's build where it is known. */
    assert_string_equal(field(row_of(result, "claims", "host", "web1"), "version"), "v7");
    assert_string_equal(field(row_of(result, "claims", "host", "web2"), "version"), "v3");
    assert_string_equal(field(row_of(result, "claims", "host", "web2"), "pin"), "v3");
    assert_string_equal(field(row_of(result, "claims", "host", "web3"), "box"), "gone");
    assert_string_equal(field(row_of(result, "claims", "host", "web3"), "holder"), "b1");
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
    assert_true(ctrl_fleet_needs_live_box(&move));
    assert_true(ctrl_fleet_needs_live_box(&forced));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_assignment_needs_a_live_box_unless_forced),
        cmocka_unit_test(a_lost_compare_and_swap_names_the_revision_and_the_box),
        cmocka_unit_test(the_lists_show_every_claim_and_box),
        cmocka_unit_test(a_move_checks_both_boxes_and_resumes_the_same_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
