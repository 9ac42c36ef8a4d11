/* Wakes activatord must refuse, each with nothing exec'd: the claim names
 * another box (or none), the claim's op does not allow a wake, the pin names
 * another digest than the staged build, the held version is not the live
 * one (refused before the admission, which it does not spend), and the
 * staged build was tampered with. For each: the wake's reply
 * and the refused event carry the reason code, no exec event is published,
 * the app never ran (its marker is absent), no generation leaf or record is
 * left, no failed attempt of the build is recorded, and the daemon still
 * stops cleanly. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A host "demo" with act-e2e-app staged as v1 and live. */
static void prepare_demo(dh_daemon *d, rel_identity *v1)
{
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_write_app_host(d, "demo", dh_free_port(), NULL, NULL);
    dh_stage(d, "demo", "v1", true, v1);
}

/* Wakes demo and checks that it was refused with code and ran nothing.
 * claim_untouched: the refusal comes before admission, so the claim must
 * still be at written_revision. */
static void expect_refusal(dh_daemon *d, const char *code, bool claim_untouched,
                           uint64_t written_revision)
{
    dh_start(d, NULL);
    dh_events_mark(d);
    json_object *reply = dh_wake_reply(d, "demo", 30000);
    DH_CHECK(d, !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), code) == 0,
             "wake: expected a refusal with code %s, got %s", code,
             json_object_to_json_string(reply));
    json_object *error = NULL;
    json_object_object_get_ex(reply, "error", &error);
    DH_CHECK(d, strlen(dh_json_str(error, "message")) > 10,
             "the refusal has no sentence saying why: %s", json_object_to_json_string(reply));
    json_object_put(reply);

    dh_event refused;
    DH_CHECK(d, dh_event_wait(d, "demo", "refused", 5000, &refused),
             "no refused event for the %s refusal", code);
    DH_CHECK(d, strcmp(refused.reason, code) == 0, "the refused event says %s, expected %s",
             refused.reason, code);
    /* Let whatever the refusal set off (a retirement) finish and be told. */
    dh_events_pump(d, 200);
    DH_CHECK(d, dh_events_count(d, "demo", "exec") == 0, "an exec event despite the %s refusal",
             code);
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 0,
             "the app ran (pid %d) despite the %s refusal", (int)pids[0], code);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "%zu generation leaves left after the %s refusal",
             dh_leaf_count(d, "demo"), code);
    DH_CHECK(d, dh_generation_records(d, "demo") == 0,
             "%zu generation records left after the %s refusal", dh_generation_records(d, "demo"),
             code);

    json_object *status = dh_status(d, "demo");
    DH_CHECK(d,
             strcmp(dh_json_str(status, "state"), "parked") == 0 &&
                 strcmp(dh_json_str(status, "reason"), code) == 0,
             "status after the %s refusal: %s", code, json_object_to_json_string(status));
    json_object_put(status);

    reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"stats\"}");
    DH_CHECK(d, dh_reply_ok(reply) && dh_json_u64(dh_reply_result(reply), "failed_attempts") == 0,
             "a refusal recorded a failed attempt of the build: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);

    if (claim_untouched) {
        claim after;
        DH_CHECK(d, dh_claim_get(d, "demo", &after), "the claim disappeared");
        DH_CHECK(d, after.revision == written_revision,
                 "the %s refusal changed the claim (revision %" PRIu64 " -> %" PRIu64 ")", code,
                 written_revision, after.revision);
    }
    dh_stop_and_check_clean(d);
}

static void test_claim_names_another_box(void **state)
{
    dh_daemon *d = *state;
    prepare_demo(d, NULL);
    claim c;
    dh_claim_assigned("demo", DH_OTHER_BOX, &c);
    snprintf(c.holder.box, sizeof(c.holder.box), DH_OTHER_BOX);
    snprintf(c.holder.incarnation, sizeof(c.holder.incarnation), "0123456789abcdef");
    c.holder.session = 3;
    c.holder.generation = 3;
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    uint64_t revision = dh_claim_put(d, &c);
    expect_refusal(d, "not_owner", true, revision);
}

static void test_released_claim(void **state)
{
    dh_daemon *d = *state;
    prepare_demo(d, NULL);
    claim c;
    dh_claim_assigned("demo", "", &c);
    snprintf(c.op.phase, sizeof(c.op.phase), "parked");
    uint64_t revision = dh_claim_put(d, &c);
    expect_refusal(d, "not_owner", true, revision);
}

static void test_phase_not_wakeable(void **state)
{
    dh_daemon *d = *state;
    prepare_demo(d, NULL);
    claim c;
    dh_claim_assigned("demo", DH_BOX, &c);
    c.op.kind = CLAIM_OP_MOVE;
    snprintf(c.op.phase, sizeof(c.op.phase), "draining");
    uint64_t revision = dh_claim_put(d, &c);
    expect_refusal(d, "wrong_phase", true, revision);
}

static void test_pin_digest_differs(void **state)
{
    dh_daemon *d = *state;
    rel_identity v1;
    prepare_demo(d, &v1);
    claim c;
    dh_claim_assigned("demo", DH_BOX, &c);
    c.has_pin = true;
    snprintf(c.pin.version, sizeof(c.pin.version), "v1");
    /* A well-formed digest that is not v1's. */
    memset(c.pin.digest, 'a', 64);
    c.pin.digest[64] = '\0';
    if (strcmp(c.pin.digest, v1.build_digest) == 0)
        c.pin.digest[0] = 'b';
    dh_claim_put(d, &c);
    expect_refusal(d, "pin_mismatch", false, 0);
}

static void test_held_version_is_not_live(void **state)
{
    dh_daemon *d = *state;
    prepare_demo(d, NULL);
    dh_stage(d, "demo", "v2", true, NULL); /* live is v2 now */
    claim c;
    dh_claim_assigned("demo", DH_BOX, &c);
    snprintf(c.held, sizeof(c.held), "v1");
    /* Refused before the admission: the claim is left as it was written. */
    uint64_t revision = dh_claim_put(d, &c);
    expect_refusal(d, "held_mismatch", true, revision);
}

static void test_tampered_build(void **state)
{
    dh_daemon *d = *state;
    rel_identity v1;
    prepare_demo(d, &v1);
    char path[PATH_MAX];
    dh_staged_exec_path(d, "demo", "v1", path, sizeof(path));
    int fd = open(path, O_RDWR | O_CLOEXEC);
    DH_CHECK(d, fd >= 0, "open %s: %s", path, strerror(errno));
    struct stat st;
    DH_CHECK(d, fstat(fd, &st) == 0 && st.st_size > 4096, "the staged build is too small");
    unsigned char byte;
    off_t offset = st.st_size / 2;
    DH_CHECK(d, pread(fd, &byte, 1, offset) == 1, "pread: %s", strerror(errno));
    byte ^= 0xff;
    DH_CHECK(d, pwrite(fd, &byte, 1, offset) == 1, "pwrite: %s", strerror(errno));
    close(fd);
    claim c;
    dh_claim_assigned("demo", DH_BOX, &c);
    dh_claim_put(d, &c);
    expect_refusal(d, "digest_mismatch", false, 0);
}

int main(void)
{
    int r = dh_check_can_run("daemon-refusals", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_claim_names_another_box),
        DH_TEST(test_released_claim),
        DH_TEST(test_phase_not_wakeable),
        DH_TEST(test_pin_digest_differs),
        DH_TEST(test_held_version_is_not_live),
        DH_TEST(test_tampered_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
