/* The control request parser: every kind of bad request is refused with the
 * right code and a sentence naming the field; good requests parse exactly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "activator/control/request.h"

static void expect_refused(const char *body, const char *code, const char *needle)
{
    ctrl_request req;
    ctrl_request_error err;
    int r = ctrl_request_parse(body, strlen(body), &req, &err);
    if (r >= 0 || !err.code || strcmp(err.code, code) != 0 || !strstr(err.error.message, needle))
        fail_msg("request %s: got r=%d code=%s message=\"%s\"; wanted code %s mentioning \"%s\"",
                 body, r, err.code ? err.code : "(none)", err.error.message, code, needle);
}

static void test_not_json(void **state)
{
    expect_refused("hello", CTRL_REQ_BAD_JSON, "not JSON");
    expect_refused("{\"v\":1,\"op\":\"status\"", CTRL_REQ_BAD_JSON, "middle");
    expect_refused("{\"v\":1,\"op\":\"status\"} trailing", CTRL_REQ_BAD_JSON, "offset 22");
    expect_refused("{\"v\":1,}", CTRL_REQ_BAD_JSON, "not JSON");
    expect_refused("", CTRL_REQ_BAD_JSON, "empty");
    expect_refused("[1,2]", CTRL_REQ_BAD_TYPE, "an array");
    expect_refused("\"status\"", CTRL_REQ_BAD_TYPE, "a string");
    /* Invalid UTF-8 inside a string. */
    expect_refused("{\"v\":1,\"op\":\"st\xff\"}", CTRL_REQ_BAD_JSON, "not JSON");
}

static void test_nul_byte(void **state)
{
    static const char body[] = "{\"v\":1,\"op\":\"status\"}\0junk";
    ctrl_request req;
    ctrl_request_error err;
    assert_int_equal(ctrl_request_parse(body, sizeof(body) - 1, &req, &err), -EINVAL);
    assert_string_equal(err.code, CTRL_REQ_BAD_JSON);
    assert_non_null(strstr(err.error.message, "NUL byte at offset 21"));
}

static void test_too_large(void **state)
{
    size_t len = 1024 * 1024;
    char *body = malloc(len);
    assert_non_null(body);
    memset(body, ' ', len);
    memcpy(body, "{\"v\":1,\"op\":\"status\"}", 21);
    ctrl_request req;
    ctrl_request_error err;
    assert_int_equal(ctrl_request_parse(body, len, &req, &err), -EMSGSIZE);
    assert_string_equal(err.code, CTRL_REQ_TOO_LARGE);
    assert_non_null(strstr(err.error.message, "1048576 bytes"));
    free(body);
}

static void test_version_and_op(void **state)
{
    expect_refused("{\"op\":\"status\"}", CTRL_REQ_MISSING_FIELD, "\"v\"");
    expect_refused("{\"v\":\"1\",\"op\":\"status\"}", CTRL_REQ_BAD_TYPE, "field \"v\" is a string");
    expect_refused("{\"v\":2,\"op\":\"status\"}", CTRL_REQ_BAD_VERSION, "version 2");
    expect_refused("{\"v\":1}", CTRL_REQ_MISSING_FIELD, "\"op\"");
    expect_refused("{\"v\":1,\"op\":7}", CTRL_REQ_BAD_TYPE, "field \"op\" is a number");
    expect_refused("{\"v\":1,\"op\":\"reboot\"}", CTRL_REQ_UNKNOWN_OP, "unknown op \"reboot\"");
    expect_refused(
        "{\"v\":1,\"op\":\"reboot\"}", CTRL_REQ_UNKNOWN_OP,
        "ops are status, wake, park, swap, stage, promote, releases, claim.show, "
        "claim.wait, claim.assign, claim.release, claims, boxes, hold, unhold, unpin, move, "
        "move.abort, stats, version");
    expect_refused("{\"v\":1,\"op\":\"sta\\u0000tus\"}", CTRL_REQ_UNKNOWN_OP, "\\x00");
}

static void test_fields(void **state)
{
    expect_refused("{\"v\":1,\"op\":\"wake\"}", CTRL_REQ_MISSING_FIELD, "needs field(s): host");
    expect_refused("{\"v\":1,\"op\":\"swap\",\"host\":\"web1\"}", CTRL_REQ_MISSING_FIELD,
                   "version");
    expect_refused("{\"v\":1,\"op\":\"stage\"}", CTRL_REQ_MISSING_FIELD, "host, version, path");
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":5}", CTRL_REQ_BAD_TYPE,
                   "field \"host\" is a number, not a string");
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":\"web1\",\"no_wait\":\"yes\"}",
                   CTRL_REQ_BAD_TYPE, "no_wait");
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":\"web1\",\"hots\":1}", CTRL_REQ_UNKNOWN_FIELD,
                   "field \"hots\" is not part of op \"wake\"; its fields are: host, no_wait");
    expect_refused("{\"v\":1,\"op\":\"status\",\"version\":\"v1\"}", CTRL_REQ_UNKNOWN_FIELD,
                   "version");
    expect_refused("{\"v\":1,\"op\":\"swap\",\"host\":\"a\",\"version\":\"b\",\"mode\":\"fast\"}",
                   CTRL_REQ_BAD_VALUE, "overlap");
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":null}", CTRL_REQ_BAD_TYPE, "null");
}

static void test_bad_names(void **state)
{
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":\"../etc\"}", CTRL_REQ_BAD_NAME,
                   "host name \"../etc\"");
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":\"a/b\"}", CTRL_REQ_BAD_NAME, "a/b");
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":\"\"}", CTRL_REQ_BAD_NAME, "empty");
    expect_refused("{\"v\":1,\"op\":\"wake\",\"host\":\"web\\u0000x\"}", CTRL_REQ_BAD_NAME, "NUL");
    expect_refused("{\"v\":1,\"op\":\"promote\",\"host\":\"web1\",\"version\":\".hidden\"}",
                   CTRL_REQ_BAD_NAME, "version name");
    expect_refused("{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\",\"box\":\"b 2\"}",
                   CTRL_REQ_BAD_NAME, "box name");
    expect_refused("{\"v\":1,\"op\":\"stage\",\"host\":\"w\",\"version\":\"v\",\"path\":\"rel\"}",
                   CTRL_REQ_BAD_VALUE, "absolute");
    expect_refused(
        "{\"v\":1,\"op\":\"stage\",\"host\":\"w\",\"version\":\"v\",\"path\":\"/a\\nb\"}",
        CTRL_REQ_BAD_VALUE, "control character");
    expect_refused(
        "{\"v\":1,\"op\":\"stage\",\"host\":\"w\",\"version\":\"v\",\"path\":\"oci:img:v1\"}",
        CTRL_REQ_BAD_VALUE, "oci:/absolute/path");
}

static void test_good_requests(void **state)
{
    ctrl_request req;
    ctrl_request_error err;
    const char *status = "{\"v\":1,\"op\":\"status\"}";
    assert_int_equal(ctrl_request_parse(status, strlen(status), &req, &err), 0);
    assert_int_equal(req.op, CTRL_OP_STATUS);
    assert_string_equal(req.host, "");

    const char *swap = " {\"op\":\"swap\",\"v\":1,\"host\":\"web1\",\"version\":\"v2.0\","
                       "\"mode\":\"stop-first\",\"no_wait\":true}\n";
    assert_int_equal(ctrl_request_parse(swap, strlen(swap), &req, &err), 0);
    assert_int_equal(req.op, CTRL_OP_SWAP);
    assert_string_equal(req.host, "web1");
    assert_string_equal(req.version, "v2.0");
    assert_int_equal(req.mode, CTRL_SWAP_STOP_FIRST);
    assert_true(req.no_wait);

    const char *stage = "{\"v\":1,\"op\":\"stage\",\"host\":\"web1\",\"version\":\"v3\","
                        "\"path\":\"/srv/builds/web1 v3\",\"promote\":true}";
    assert_int_equal(ctrl_request_parse(stage, strlen(stage), &req, &err), 0);
    assert_string_equal(req.path, "/srv/builds/web1 v3");
    assert_true(req.promote);
    const char *image = "{\"v\":1,\"op\":\"stage\",\"host\":\"web1\",\"version\":\"v4\","
                        "\"path\":\"oci:/srv/images/web1:v4\"}";
    assert_int_equal(ctrl_request_parse(image, strlen(image), &req, &err), 0);
    assert_string_equal(req.path, "oci:/srv/images/web1:v4");
    const char *pulled = "{\"v\":1,\"op\":\"stage\",\"host\":\"web1\",\"version\":\"v5\","
                         "\"path\":\"docker://registry.example.com/web1:v5\"}";
    assert_int_equal(ctrl_request_parse(pulled, strlen(pulled), &req, &err), 0);
    assert_string_equal(req.path, "docker://registry.example.com/web1:v5");

    const char *assign = "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\",\"box\":\"box-2\"}";
    assert_int_equal(ctrl_request_parse(assign, strlen(assign), &req, &err), 0);
    assert_int_equal(req.op, CTRL_OP_CLAIM_ASSIGN);
    assert_string_equal(req.box, "box-2");
    assert_false(req.force);
    const char *forced = "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\",\"box\":\"box-2\","
                         "\"force\":true}";
    assert_int_equal(ctrl_request_parse(forced, strlen(forced), &req, &err), 0);
    assert_true(req.force);
    expect_refused("{\"v\":1,\"op\":\"claim.assign\",\"host\":\"web1\",\"box\":\"b2\","
                   "\"force\":\"yes\"}",
                   CTRL_REQ_BAD_TYPE, "\"force\" is a string");

    const char *hold = "{\"v\":1,\"op\":\"hold\",\"host\":\"web1\",\"version\":\"v3\"}";
    assert_int_equal(ctrl_request_parse(hold, strlen(hold), &req, &err), 0);
    assert_int_equal(req.op, CTRL_OP_HOLD);
    assert_string_equal(req.version, "v3");
    expect_refused("{\"v\":1,\"op\":\"hold\",\"host\":\"web1\"}", CTRL_REQ_MISSING_FIELD,
                   "needs field(s): version");
    expect_refused("{\"v\":1,\"op\":\"claims\",\"host\":\"web1\"}", CTRL_REQ_UNKNOWN_FIELD,
                   "not part of op \"claims\"");

    const char *wait =
        "{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"revision\":9007199254740993,"
        "\"wait\":300}";
    assert_int_equal(ctrl_request_parse(wait, strlen(wait), &req, &err), 0);
    assert_int_equal(req.op, CTRL_OP_CLAIM_WAIT);
    assert_true(req.revision == 9007199254740993ull);
    assert_int_equal(req.wait_sec, 300);
    const char *bare = "{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\"}";
    assert_int_equal(ctrl_request_parse(bare, strlen(bare), &req, &err), 0);
    assert_true(req.revision == 0);
    assert_int_equal(req.wait_sec, 0);
    expect_refused("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"revision\":-1}",
                   CTRL_REQ_BAD_VALUE, "field \"revision\" is -1; send a claim's revision");
    expect_refused("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"revision\":"
                   "99999999999999999999}",
                   CTRL_REQ_BAD_VALUE, "field \"revision\"");
    expect_refused("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"revision\":\"7\"}",
                   CTRL_REQ_BAD_TYPE, "\"revision\" is a string");
    expect_refused("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"wait\":0}",
                   CTRL_REQ_BAD_VALUE, "field \"wait\" is 0; wait 1 to 300 seconds");
    expect_refused("{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web1\",\"wait\":301}",
                   CTRL_REQ_BAD_VALUE, "wait 1 to 300 seconds");
    expect_refused("{\"v\":1,\"op\":\"claim.show\",\"host\":\"web1\",\"wait\":5}",
                   CTRL_REQ_UNKNOWN_FIELD, "not part of op \"claim.show\"");

    for (int op = 0; op < CTRL_OP__COUNT; op++)
        assert_int_equal(ctrl_op_from_name(ctrl_op_name((ctrl_op)op)), op);
    assert_null(ctrl_op_name(CTRL_OP__COUNT));
}

/* The op table both the parser and activatorctl read is whole: every op has
 * a name and a summary, no field is both required and optional, and every
 * field bit names a field of the table. */
static void test_op_table(void **state)
{
    size_t n_fields;
    const ctrl_field_spec *fields = ctrl_fields(&n_fields);
    unsigned known = 0;
    for (size_t i = 0; i < n_fields; i++) {
        known |= fields[i].bit;
        assert_ptr_equal(ctrl_field_spec_of(fields[i].bit), &fields[i]);
        assert_true((fields[i].kind == CTRL_FIELD_KIND_CHOICE) == (fields[i].choices != NULL));
    }
    for (int op = 0; op < CTRL_OP__COUNT; op++) {
        const ctrl_op_spec *spec = ctrl_op_spec_of((ctrl_op)op);
        assert_non_null(spec);
        assert_non_null(spec->name);
        assert_true(spec->summary && strlen(spec->summary) > 10);
        assert_int_equal(spec->required & spec->optional, 0);
        assert_int_equal((spec->required | spec->optional) & ~known, 0);
    }
    assert_null(ctrl_op_spec_of(CTRL_OP__COUNT));

    /* Only root stages: the daemon reads the path with its own privileges. */
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_STAGE)->role, CTRL_ROLE_ROOT);
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_WAKE)->role, CTRL_ROLE_OPERATOR);
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_STATUS)->role, CTRL_ROLE_VIEWER);
    /* The fleet's read-only views are a viewer's; what changes a claim is an
     * operator's. */
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_CLAIMS)->role, CTRL_ROLE_VIEWER);
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_BOXES)->role, CTRL_ROLE_VIEWER);
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_HOLD)->role, CTRL_ROLE_OPERATOR);
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_UNHOLD)->role, CTRL_ROLE_OPERATOR);
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_UNPIN)->role, CTRL_ROLE_OPERATOR);
    assert_int_equal(ctrl_op_spec_of(CTRL_OP_CLAIM_ASSIGN)->role, CTRL_ROLE_OPERATOR);

    /* The mode field's choices are the swap modes, in their enum's order. */
    const ctrl_field_spec *mode = ctrl_field_spec_of(CTRL_FIELD_MODE);
    assert_int_equal(ctrl_field_choice(mode, ctrl_swap_mode_name(CTRL_SWAP_OVERLAP)),
                     CTRL_SWAP_OVERLAP);
    assert_int_equal(ctrl_field_choice(mode, ctrl_swap_mode_name(CTRL_SWAP_STOP_FIRST)),
                     CTRL_SWAP_STOP_FIRST);
    assert_int_equal(ctrl_field_choice(mode, "fast"), -1);

    char list[128];
    ctrl_fields_list(CTRL_FIELD_PATH | CTRL_FIELD_HOST, list, sizeof(list));
    assert_string_equal(list, "host, path");
    ctrl_fields_list(0, list, sizeof(list));
    assert_string_equal(list, "none");
    ctrl_field_choices_list(mode, "|", list, sizeof(list));
    assert_string_equal(list, "overlap|stop-first");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_json),      cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_too_large),     cmocka_unit_test(test_version_and_op),
        cmocka_unit_test(test_fields),        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_good_requests), cmocka_unit_test(test_op_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
