/* A pin's failure is the build's own, with the real daemon:
 *   - a swap cancelled by a park, and a swap refused by the start budget,
 *     leave the pin as it was: no failure, and the next cold wake runs it;
 *   - a cold wake of a pinned build that crashes before ready, with no
 *     fallback, records the failure on the pin, and the next wake is
 *     refused pin_failed rather than crash-looping it again; with a
 *     fallback but no start left, the next box the host is assigned to
 *     runs the fallback;
 *   - a first wake of a crashing pin with a fallback named serves the
 *     fallback to the very client that woke it, and the claim records the
 *     pin's failure; so does the swap of a parked host to a crashing build;
 *   - a pin that is never ready has its ready window cut so that the
 *     fallback still fits in WakeTimeoutSec=. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* Crashing at once is what /bin/false does with any arguments. */
#define CRASHING_BUILD "/bin/false"

/* A build that runs and never says it is ready. */
static void stage_never_ready(dh_daemon *d, const char *version, rel_identity *identity)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/never-ready.sh", dh_helper_dir(d));
    FILE *f = fopen(path, "we");
    DH_CHECK(d, f, "cannot write %s: %s", path, strerror(errno));
    fputs("#!/bin/sh\nexec sleep 600\n", f);
    fclose(f);
    DH_CHECK(d, chmod(path, 0755) == 0, "cannot chmod %s", path);
    dh_stage_file(d, "demo", version, path, false, identity);
}

/* Pins demo's claim to pinned (its failure cleared), with fallback named
 * when not NULL, as a swap on another box would have left it. */
static void pin_claim(dh_daemon *d, const rel_identity *pinned, const rel_identity *fallback)
{
    claim c;
    if (!dh_claim_get(d, "demo", &c))
        dh_claim_assigned("demo", DH_BOX, &c); /* never woken yet */
    c.has_pin = true;
    c.pin = (claim_pin){0};
    snprintf(c.pin.version, sizeof(c.pin.version), "%s", pinned->version);
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", pinned->build_digest);
    if (fallback) {
        snprintf(c.pin.fallback_version, sizeof(c.pin.fallback_version), "%s", fallback->version);
        snprintf(c.pin.fallback_digest, sizeof(c.pin.fallback_digest), "%s",
                 fallback->build_digest);
    }
    dh_claim_put(d, &c);
}

/* A wake of demo, by its own answer (a wake that runs a pin and then its
 * fallback may take longer than the harness's HTTP client waits). */
static void wake_serves(dh_daemon *d, const char *what)
{
    json_object *woken = dh_wake_reply(d, "demo", 60000);
    bool served = dh_reply_ok(woken);
    char text[1024];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(woken));
    json_object_put(woken);
    DH_CHECK(d, served, "%s did not serve: %s", what, text);
}

static void park(dh_daemon *d)
{
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
}

/* The claim is pinned to version, with no failure recorded. */
static void expect_pin_unfailed(dh_daemon *d, const char *version, const char *after)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim of demo");
    DH_CHECK(d, c.has_pin && strcmp(c.pin.version, version) == 0 && !c.pin.failure_reason[0],
             "after %s the pin is %s with failure \"%s\" (%s); expected %s, not failed", after,
             c.has_pin ? c.pin.version : "(none)", c.pin.failure_reason, c.pin.failure_message,
             version);
}

static bool pin_failed(const claim *c)
{
    return claim_pin_failed(c);
}

/* The claim's pin is version, failed for reason on this box (written back
 * once the wake ended, so perhaps after its answer). */
static void expect_pin_failed(dh_daemon *d, const char *version, const char *reason,
                              const char *after)
{
    claim c;
    dh_claim_wait(d, "demo", pin_failed, 10000, &c);
    DH_CHECK(d,
             c.has_pin && strcmp(c.pin.version, version) == 0 &&
                 strcmp(c.pin.failure_reason, reason) == 0 && c.pin.failure_message[0] &&
                 strcmp(c.pin.failure_box, DH_BOX) == 0 && c.pin.failure_usec > 0,
             "after %s the pin is %s with failure \"%s\" (%s) on \"%s\"; expected %s failed "
             "(%s) on %s",
             after, c.has_pin ? c.pin.version : "(none)", c.pin.failure_reason,
             c.pin.failure_message, c.pin.failure_box, version, reason, DH_BOX);
}

static dh_async *start_swap_to_v2(dh_daemon *d)
{
    return dh_request_start(d, 60000,
                            "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}");
}

/* The swap's reply, which must be a failure with code. */
static void swap_ends(dh_daemon *d, dh_async *swap, const char *code)
{
    json_object *reply = dh_request_finish(d, swap);
    char text[2048];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    bool as_expected = !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), code) == 0;
    json_object_put(reply);
    DH_CHECK(d, as_expected, "the swap answered %s; expected code %s", text, code);
}

static void test_a_swap_cancelled_by_a_park_leaves_the_pin_unfailed(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_add_app_host(d, "demo", NULL, dh_helper_dir_line(d));
    dh_start(d, NULL);
    dh_wake(d, "demo");
    stage_never_ready(d, "v2", NULL);

    dh_events_mark(d);
    dh_async *swap = start_swap_to_v2(d);
    DH_CHECK(d, dh_event_wait(d, "demo", "exec", 30000, NULL), "the swap's v2 did not exec");
    park(d);
    swap_ends(d, swap, "cancelled");
    expect_pin_unfailed(d, "v2", "a swap cancelled by a park");

    /* Still the pin: the next cold wake runs v2 first (and, as it is never
     * ready, then its fallback, the build that served). */
    dh_events_mark(d);
    wake_serves(d, "the wake after the cancelled swap");
    dh_expect_version(d, port, "v1");
    dh_event exec;
    DH_CHECK(d, dh_event_wait(d, "demo", "exec", 10000, &exec), "no exec event for the wake");
    DH_CHECK(d, strcmp(exec.version, "v2") == 0,
             "the wake after the cancelled swap ran %s first; expected the pin, v2", exec.version);
    dh_stop_and_check_clean(d);
}

static void test_a_budget_refused_swap_leaves_the_pin_unfailed(void **state)
{
    dh_daemon *d = *state;
    /* One start per 1000 s: the wake takes it, and the swap's start would
     * wait far past the budget's wait, so it is refused at once. */
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, "StartRateLimit=0.001\n");
    dh_wake(d, "demo");
    dh_stage(d, "demo", "v2", false, NULL);
    dh_async *swap = start_swap_to_v2(d);
    swap_ends(d, swap, "budget");
    expect_pin_unfailed(d, "v2", "a swap refused by the start budget");
    dh_expect_version(d, port, "v1");
    dh_stop_and_check_clean(d);
}

static void test_a_cold_wake_of_a_crashing_pin_records_its_failure(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, "MaxStarts=2\n");
    dh_wake(d, "demo");
    park(d);
    rel_identity v2;
    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, false, &v2);
    pin_claim(d, &v2, NULL);

    json_object *reply = dh_wake_reply(d, "demo", 60000);
    char text[2048];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    bool crashed = strcmp(dh_reply_code(reply), "crashed") == 0;
    json_object_put(reply);
    DH_CHECK(d, crashed, "the wake of the crashing pin answered %s; expected crashed", text);
    expect_pin_failed(d, "v2", "crashed", "a cold wake that crashed twice");

    /* Every box reads the failure: no wake runs v2 again. */
    reply = dh_wake_reply(d, "demo", 60000);
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    bool refused = strcmp(dh_reply_code(reply), "pin_failed") == 0;
    json_object_put(reply);
    DH_CHECK(d, refused, "the wake after the pin failed answered %s; expected pin_failed", text);
    dh_stop_and_check_clean(d);
}

static void test_a_first_wake_serves_the_fallback_to_its_client(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    rel_identity v2, v3;
    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, false, &v2);
    dh_stage(d, "demo", "v3", false, &v3);
    pin_claim(d, &v2, &v3);

    /* The client's connection wakes demo: it is answered by v3. */
    dh_events_mark(d);
    dh_expect_version(d, port, "v3");
    dh_event fallback;
    DH_CHECK(d, dh_event_wait(d, "demo", "pin.fallback", 10000, &fallback),
             "no pin.fallback event for the wake");
    DH_CHECK(d, strcmp(fallback.version, "v3") == 0 && strstr(fallback.reason, "v2"),
             "pin.fallback names version %s (%s); expected v3, with the failed pin v2",
             fallback.version, fallback.reason);
    expect_pin_failed(d, "v2", "crashed", "a first wake that fell back");

    /* v2 ran once: the fallback took the wake's next start, without backoff. */
    DH_CHECK(d, dh_events_count(d, "demo", "exec") == 2,
             "the wake made %zu execs; expected v2 once, then v3",
             dh_events_count(d, "demo", "exec"));
    dh_stop_and_check_clean(d);
}

static void test_a_swap_of_a_parked_host_to_a_crashing_build_serves_the_fallback(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    dh_wake(d, "demo");
    park(d);
    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, false, NULL);
    dh_async *swap = start_swap_to_v2(d);
    swap_ends(d, swap, "crashed");
    expect_pin_failed(d, "v2", "crashed", "the swap of a parked host to a crashing build");
    DH_CHECK(d, dh_wait_state(d, "demo", "serving", 10000), "the fallback does not serve");
    dh_expect_version(d, port, "v1");
    dh_stop_and_check_clean(d);
}

static void test_the_pins_ready_window_leaves_its_fallback_one(void **state)
{
    dh_daemon *d = *state;
    /* Without the cut, the pin would have all of ReadyTimeoutSec=30s and
     * the fallback no time left in the wake. */
    dh_setup(d, DH_STORE_DIR, NULL);
    char lines[PATH_MAX + 64];
    snprintf(lines, sizeof(lines), "ReadyTimeoutSec=30\nWakeTimeoutSec=10\n%s",
             dh_helper_dir_line(d));
    int port = dh_add_app_host(d, "demo", NULL, lines);
    dh_start(d, NULL);
    rel_identity v3;
    dh_stage(d, "demo", "v3", false, &v3);
    rel_identity v2;
    stage_never_ready(d, "v2", &v2);
    pin_claim(d, &v2, &v3);

    /* The pin's window is about 5 s, as long as the harness's client
     * waits: the wake's own answer is waited for instead. */
    wake_serves(d, "the wake of the never-ready pin");
    dh_expect_version(d, port, "v3");
    claim c;
    dh_claim_wait(d, "demo", pin_failed, 10000, &c);
    DH_CHECK(d,
             strcmp(c.pin.failure_reason, "ready_timeout") == 0 &&
                 strstr(c.pin.failure_message, "cut short by WakeTimeoutSec"),
             "the pin failed with \"%s\" (%s); expected ready_timeout, cut short by "
             "WakeTimeoutSec",
             c.pin.failure_reason, c.pin.failure_message);
    dh_stop_and_check_clean(d);
}

static bool released(const claim *c)
{
    return c->holder.released_usec != 0 || strcmp(c->holder.box, "box-b") == 0;
}

static void test_the_next_box_runs_the_fallback_of_a_pin_a_wake_failed(void **state)
{
    dh_two_boxes *boxes = *state;
    dh_daemon *a = &boxes->first, *b = &boxes->second;
    dh_setup(a, DH_STORE_DIR, NULL);
    dh_add_app_host(a, "demo", NULL, "MaxStarts=1\n");
    dh_setup_beside(b, a, "box-b", NULL);
    int b_port = dh_add_app_host(b, "demo", NULL, "MaxStarts=1\n");
    rel_identity v2, v3, v3_on_b;
    dh_stage_file(a, "demo", "v2", CRASHING_BUILD, false, &v2);
    dh_stage(a, "demo", "v3", false, &v3);
    dh_stage(b, "demo", "v3", false, &v3_on_b);
    DH_CHECK(b, strcmp(v3.build_digest, v3_on_b.build_digest) == 0,
             "v3 staged on the two boxes has two digests");
    claim c;
    dh_claim_assigned("demo", DH_BOX, &c);
    dh_claim_put(a, &c);
    dh_start(a, NULL);
    dh_start(b, NULL);
    pin_claim(a, &v2, &v3);

    /* Box A's only start of the pin crashes: no start is left for the
     * fallback, and the wake records the pin's failure. */
    json_object *reply = dh_wake_reply(a, "demo", 60000);
    bool crashed = strcmp(dh_reply_code(reply), "crashed") == 0;
    json_object_put(reply);
    DH_CHECK(a, crashed, "box A's wake of the crashing pin did not end crashed");
    expect_pin_failed(a, "v2", "crashed", "box A's wake that crashed");

    /* Box B, which never ran v2, reads the failure and runs the fallback. */
    /* (Its claim watch may wake demo on the release, before any client.) */
    dh_events_mark(b);
    json_object *assigned = dh_request(
        a, 30000, "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"demo\",\"box\":\"box-b\"}");
    bool ok = dh_reply_ok(assigned);
    json_object_put(assigned);
    DH_CHECK(a, ok, "claim.assign demo box-b was refused");
    DH_CHECK(a, dh_claim_wait(a, "demo", released, 15000, &c), "box A did not release demo");
    dh_expect_version(b, b_port, "v3");
    DH_CHECK(b, dh_event_wait(b, "demo", "pin.fallback", 10000, NULL), "box B ran no fallback");
    DH_CHECK(b, dh_events_count(b, "demo", "exec") == 1,
             "box B made %zu execs; expected the fallback's alone",
             dh_events_count(b, "demo", "exec"));
    dh_stop_and_check_clean(b);
    dh_stop_and_check_clean(a);
}

int main(void)
{
    int r = dh_check_can_run("daemon-pins", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_a_swap_cancelled_by_a_park_leaves_the_pin_unfailed),
        DH_TEST(test_a_budget_refused_swap_leaves_the_pin_unfailed),
        DH_TEST(test_a_cold_wake_of_a_crashing_pin_records_its_failure),
        DH_TEST(test_a_first_wake_serves_the_fallback_to_its_client),
        DH_TEST(test_a_swap_of_a_parked_host_to_a_crashing_build_serves_the_fallback),
        DH_TEST(test_the_pins_ready_window_leaves_its_fallback_one),
        DH_TEST_TWO_BOXES(test_the_next_box_runs_the_fallback_of_a_pin_a_wake_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
