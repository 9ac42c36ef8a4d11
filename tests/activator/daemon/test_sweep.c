/* No host is stuck forever: a generation whose stop cannot be proven (a
 * process of it in uninterruptible sleep outlives every SIGKILL until it
 * wakes) leaves its host refusing wakes with unproven_stop, and the sweep
 * kills its cgroup again and again and watches it, until it is empty; then
 * the host wakes as before and a `proven` event says so. The same holds for
 * a leftover of a previous daemon.
 *
 * What holds a process in uninterruptible sleep here is a FUSE read that
 * the test leaves unanswered (tests/cgroup/apps/cg-stuck.c): real on every
 * kernel, where a frozen cgroup v2 is not (its tasks die of SIGKILL).
 *
 * Recovery retires leftovers side by side after READY=1, so fifty of them
 * that each take their StopTimeoutSec to stop delay the start by nothing;
 * and a start that fails after recovery leaves what it resumed running. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "common/clock.h"
#include "tests/cgroup/stuck.h"

/* The process held in uninterruptible sleep: the fixture's teardown lets it
 * go first, or the cgroup root could never be removed. */
static cgt_stuck held;

static int teardown(void **state)
{
    cgt_stuck_release(&held, NULL, 0);
    return dh_fixture_teardown(state);
}

#define SWEEP_TEST(f) cmocka_unit_test_setup_teardown(f, dh_fixture_setup, teardown)

static bool released(const claim *c)
{
    return c->holder.released_usec != 0;
}

/* Holds a process of the test in uninterruptible sleep inside host's leaf. */
static void hold_in_leaf(dh_daemon *d, const char *host, const char *leaf)
{
    char path[PATH_MAX + 160], why[512];
    snprintf(path, sizeof(path), "%s/hosts/%s/%s", d->drv.cgroup_path, host, leaf);
    int r = cgt_stuck_start(CG_STUCK, path, &held, why, sizeof(why));
    if (r == -ENODEV) {
        print_message("SKIP: FUSE is not usable here, so nothing holds a process in "
                      "uninterruptible sleep: %s\n",
                      why);
        skip();
    }
    DH_CHECK(d, r == 0, "%s", why);
}

static void let_go(dh_daemon *d)
{
    char what[256];
    DH_CHECK(d, cgt_stuck_release(&held, what, sizeof(what)) == 0,
             "the held process did not end: %s", what);
    /* The kill waited for it: it died of SIGKILL the instant it woke. */
    DH_CHECK(d, strstr(what, "killed=9"), "the held process was not killed: %s", what);
}

static void expect_refused_unproven(dh_daemon *d, const char *host)
{
    json_object *status = dh_status(d, host);
    DH_CHECK(d, strcmp(dh_json_str(status, "reason"), "unproven_stop") == 0,
             "status of %s while its leaf is not proven stopped: %s", host,
             json_object_to_json_string(status));
    json_object_put(status);
    json_object *reply = dh_wake_reply(d, host, 10000);
    DH_CHECK(d, !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "unproven_stop") == 0,
             "a wake of %s while its leaf is not proven stopped: %s", host,
             json_object_to_json_string(reply));
    json_object_put(reply);
}

/* After the proof: the leaf and its record are gone, the generation was
 * announced retired, the refusal cleared with `proven`, and a wake serves. */
static void expect_proven_then_serving(dh_daemon *d, const char *host, uint64_t generation)
{
    dh_event retired;
    DH_CHECK(d, dh_event_wait(d, host, "proven", 10000, NULL),
             "no proven event once the held process ended");
    DH_CHECK(d, dh_event_wait(d, host, "retired", 0, &retired) &&
                    retired.generation == generation,
             "no retired event for generation %" PRIu64, generation);
    char leaf[32];
    snprintf(leaf, sizeof(leaf), "g-%" PRIu64, generation);
    DH_CHECK(d, !dh_leaf_exists(d, host, leaf), "leaf %s is left after its proof", leaf);
    DH_CHECK(d, dh_generation_records(d, host) == 0, "%zu records left after the proof",
             dh_generation_records(d, host));
    dh_served next = dh_wake(d, host);
    DH_CHECK(d, next.generation > generation, "the wake after the proof served generation %" PRIu64,
             next.generation);
}

static void test_a_generation_not_proven_stopped_is_swept_until_it_is(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    dh_served served = dh_wake(d, "demo");
    hold_in_leaf(d, "demo", "g-1");

    dh_events_mark(d);
    dh_park(d, "demo");
    /* The kill cannot end the held process: the retirement gives up on its
     * proof after its bound (10 s), and the host refuses wakes. */
    dh_event failed;
    DH_CHECK(d, dh_event_wait(d, "demo", "failed", 30000, &failed) &&
                    strcmp(failed.reason, "unproven_stop") == 0 && failed.generation == 1,
             "no failed event with reason unproven_stop for generation 1");
    DH_CHECK(d, dh_pid_gone(served.pid), "the app itself survived its retirement");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    expect_refused_unproven(d, "demo");
    DH_CHECK(d, cgt_stuck_state(&held) == 'D', "the held process is not in uninterruptible sleep");
    /* The sweep kills it again, after 1 s; nothing is proven meanwhile. */
    DH_CHECK(d, dh_log_wait(d, "leaf g-1 still has processes after 1 kill", 5000),
             "the sweep did not kill the leaf again");
    DH_CHECK(d, dh_leaf_exists(d, "demo", "g-1") && dh_generation_records(d, "demo") == 1,
             "the leaf or its record went before the proof");
    DH_CHECK(d, dh_events_count(d, "demo", "proven") == 0, "proven before the held process ended");

    let_go(d);
    expect_proven_then_serving(d, "demo", 1);
    dh_stop_and_check_clean(d);
}

/* A host whose stop is not proven stays this box's to release: assigned to
 * another box meanwhile, its claim is released there once the sweep proves
 * the leaf empty, not left waiting for some later write. */
static void test_a_host_not_proven_stopped_is_released_once_it_is(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    dh_wake(d, "demo");
    hold_in_leaf(d, "demo", "g-1");
    dh_events_mark(d);
    dh_park(d, "demo");
    DH_CHECK(d, dh_event_wait(d, "demo", "failed", 30000, NULL), "no failed event for g-1");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");

    dh_step("assign demo to %s while its leaf is not proven stopped", DH_OTHER_BOX);
    claim current, assigned;
    DH_CHECK(d, dh_claim_get(d, "demo", &current), "no claim for demo");
    claim_edit edit = {.kind = CLAIM_EDIT_ASSIGN, .stamp_usec = act_wallclock_usec()};
    snprintf(edit.box, sizeof(edit.box), "%s", DH_OTHER_BOX);
    act_error err = {0};
    DH_CHECK(d, claim_apply_edit("demo", &current, &edit, &assigned, &err) == 0, "%s",
             err.message);
    dh_claim_put(d, &assigned);
    DH_CHECK(d, dh_event_wait(d, "demo", "claim.changed", 10000, NULL),
             "the daemon did not see demo's claim change");
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c) && !c.holder.released_usec,
             "demo's claim was released while its leaf may still run");

    let_go(d);
    DH_CHECK(d, dh_event_wait(d, "demo", "proven", 10000, NULL), "no proven event");
    DH_CHECK(d, dh_claim_wait(d, "demo", released, 10000, &c),
             "demo's claim was not released once its leaf was proven empty (holder %s, "
             "released %" PRIu64 ")",
             c.holder.box, c.holder.released_usec);
    dh_stop_and_check_clean(d);
}

/* The claim names a newer admission than the generation left running, so
 * the next daemon retires it rather than resuming it. */
static void supersede_claim(dh_daemon *d, const char *host, const char *box)
{
    claim current;
    DH_CHECK(d, dh_claim_get(d, host, &current), "no claim for %s", host);
    claim next = current;
    snprintf(next.holder.box, sizeof(next.holder.box), "%s", box);
    snprintf(next.op.exec, sizeof(next.op.exec), "%s", box);
    next.holder.session = current.holder.session + 1;
    next.holder.generation = current.holder.generation + 1;
    dh_claim_put(d, &next);
}

static void test_a_leftover_not_proven_stopped_is_swept_until_it_is(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    dh_served served = dh_wake(d, "demo");
    dh_kill(d);
    supersede_claim(d, "demo", DH_BOX);
    hold_in_leaf(d, "demo", "g-1");

    dh_start(d, NULL);
    DH_CHECK(d, dh_pid_gone(served.pid), "the leftover app was not stopped");
    expect_refused_unproven(d, "demo");
    DH_CHECK(d, dh_log_wait(d, "leaf g-1 still has processes after 1 kill", 5000),
             "the sweep did not kill the leftover again");
    DH_CHECK(d, dh_events_count(d, "demo", "proven") == 0, "proven before the held process ended");

    let_go(d);
    expect_proven_then_serving(d, "demo", 1);
    dh_stop_and_check_clean(d);
}

enum { MANY = 50 };

/* Fifty leftovers whose apps ignore SIGTERM: each takes its whole
 * StopTimeoutSec to stop. Retired one after another before READY=1, they
 * would hold the start for fifty times that; side by side after it, the
 * daemon is ready before any of them is gone, and all are gone one
 * StopTimeoutSec later. */
static void test_many_leftovers_are_retired_after_ready_side_by_side(void **state)
{
    dh_daemon *d = *state;
    const unsigned stop_timeout_sec = 10;
    char extra[64];
    snprintf(extra, sizeof(extra), "StopTimeoutSec=%u\n", stop_timeout_sec);
    dh_setup(d, DH_STORE_DIR, NULL);
    char names[MANY][16];
    for (unsigned i = 0; i < MANY; i++) {
        snprintf(names[i], sizeof(names[i]), "web%02u", i);
        dh_add_app_host(d, names[i], "--ignore-sigterm", extra);
    }
    dh_start(d, NULL);
    pid_t pids[MANY];
    for (unsigned i = 0; i < MANY; i++)
        pids[i] = dh_wake(d, names[i]).pid;
    dh_kill(d);
    for (unsigned i = 0; i < MANY; i++)
        supersede_claim(d, names[i], DH_OTHER_BOX);

    dh_start(d, NULL);
    uint64_t startup_ms = dd_startup_usec(&d->drv) / 1000;
    unsigned left = 0;
    for (unsigned i = 0; i < MANY; i++)
        left += dh_leaf_exists(d, names[i], "g-1");
    DH_CHECK(d, left == MANY,
             "READY=1 came %" PRIu64 " ms after the start, when only %u of %d leftovers "
             "were still there: the start waited for their retirement",
             startup_ms, left, MANY);
    expect_refused_unproven(d, names[0]);

    for (unsigned i = 0; i < MANY; i++) {
        DH_CHECK(d, dh_event_wait(d, names[i], "retired", (int)(stop_timeout_sec + 20) * 1000,
                                  NULL),
                 "leftover %s was not retired", names[i]);
        DH_CHECK(d, dh_event_wait(d, names[i], "proven", 5000, NULL),
                 "%s does not wake again after its leftover was retired", names[i]);
    }
    for (unsigned i = 0; i < MANY; i++) {
        DH_CHECK(d, dh_pid_gone(pids[i]), "the app of %s survived", names[i]);
        DH_CHECK(d, dh_leaf_count(d, names[i]) == 0 && dh_generation_records(d, names[i]) == 0,
                 "%s keeps a leaf or a record", names[i]);
    }
    dh_stop_and_check_clean(d);
}

/* ControlListen= with a key that cannot be read fails the start after
 * recovery. What recovery resumed keeps running, untouched, and the start
 * after the key is fixed resumes it again. */
static void test_a_failed_start_leaves_what_it_resumed_running(void **state)
{
    dh_daemon *d = *state;
    char certs[] = "/tmp/act-sweep-tls-XXXXXX";
    assert_non_null(mkdtemp(certs));
    assert_true(dh_make_tls_certs(certs));
    char conf[4 * PATH_MAX], key[PATH_MAX], saved_key[PATH_MAX];
    snprintf(conf, sizeof(conf),
             "ControlListen=tls+tcp://127.0.0.1:%d\nTLSCertificate=%s/server.crt\n"
             "TLSKey=%s/server.key\nTLSClientCA=%s/ca.crt\nControlOperators=client\n",
             dh_free_port(), certs, certs, certs);
    snprintf(key, sizeof(key), "%s/server.key", certs);
    snprintf(saved_key, sizeof(saved_key), "%s/server.key.saved", certs);
    dh_setup(d, DH_STORE_DIR, conf);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    dh_served served = dh_wake(d, "demo");
    dh_hand_over(d);

    /* A directory where the key was: unreadable, root or not. */
    DH_CHECK(d, rename(key, saved_key) == 0 && mkdir(key, 0700) == 0, "cannot break the key");
    DH_CHECK(d, dh_start_failing(d) == 1, "the start with an unreadable key did not exit 1");
    DH_CHECK(d, dh_log_wait(d, "not started; 1 resumed generations keep running", 0),
             "the failed start does not say what it left running");
    DH_CHECK(d, !dh_pid_gone(served.pid), "the failed start stopped the resumed app");
    DH_CHECK(d, dh_leaf_exists(d, "demo", "g-1") && dh_generation_records(d, "demo") == 1,
             "the failed start retired the resumed generation");
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0 && strstr(body, "generation=1"),
             "the resumed app does not answer after the failed start");

    DH_CHECK(d, rmdir(key) == 0 && rename(saved_key, key) == 0, "cannot restore the key");
    dh_start(d, NULL);
    DH_CHECK(d, dh_log_wait(d, "recovery: 1 generations resumed", 5000),
             "the fixed start did not resume the generation");
    json_object *status = dh_status(d, "demo");
    DH_CHECK(d, strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                    (pid_t)dh_json_u64(status, "pid") == served.pid,
             "status after the fixed start: %s", json_object_to_json_string(status));
    json_object_put(status);
    dh_stop_and_check_clean(d);
    char rm[64];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", certs);
    assert_int_equal(system(rm), 0);
}

int main(void)
{
    int r = dh_check_can_run("daemon-sweep", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        SWEEP_TEST(test_a_generation_not_proven_stopped_is_swept_until_it_is),
        SWEEP_TEST(test_a_host_not_proven_stopped_is_released_once_it_is),
        SWEEP_TEST(test_a_leftover_not_proven_stopped_is_swept_until_it_is),
        SWEEP_TEST(test_many_leftovers_are_retired_after_ready_side_by_side),
        SWEEP_TEST(test_a_failed_start_leaves_what_it_resumed_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
