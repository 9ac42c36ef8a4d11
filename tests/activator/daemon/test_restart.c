/* activatord is crash-only: killed at any instant (SIGKILL here, as the OOM
 * killer or a bug would), its generations keep running, and the next daemon
 * either resumes supervising a generation (its record, its claim and its
 * process agree that it is this box's serving admission) or retires it with
 * proof. Clients of a resumed host never see the restart. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The pid that answers on port, from act-testapp's "demo ... pid=P". */
static int64_t answering_pid(dh_daemon *d, int port)
{
    char body[1024];
    int n = dh_http_get(port, body, sizeof(body));
    DH_CHECK(d, n > 0, "nothing answers on port %d (%d)", port, n);
    const char *pid = strstr(body, "pid=");
    DH_CHECK(d, pid, "unexpected answer: %s", body);
    return atoll(pid + 4);
}

static void test_serving_generation_is_resumed_after_a_crash(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    int64_t pid = dh_wake(d, "demo").pid;
    DH_CHECK(d, answering_pid(d, port) == pid, "the app does not answer");

    dh_kill(d);
    /* No daemon: the generation still serves, on the socket it was given. */
    DH_CHECK(d, answering_pid(d, port) == pid, "the generation did not outlive the daemon");

    dh_start(d, NULL);
    DH_CHECK(d, dh_log_wait(d, "resumed generation 1", 5000), "the daemon did not resume it");
    json_object *status = dh_status(d, "demo");
    DH_CHECK(d, strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                    dh_json_u64(status, "generation") == 1 &&
                    (int64_t)dh_json_u64(status, "pid") == pid,
             "status after restart: %s", json_object_to_json_string(status));
    json_object_put(status);
    DH_CHECK(d, answering_pid(d, port) == pid, "a new process answers after the restart");
    DH_CHECK(d, dh_leaf_exists(d, "demo", "g-1"), "the resumed generation's leaf is gone");

    /* The resumed generation is supervised like any other: a park retires
     * it with proof, and a plain connection wakes a new one. */
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_pid_gone((pid_t)pid), "the resumed app still runs");
    DH_CHECK(d, !dh_leaf_exists(d, "demo", "g-1"), "the retired leaf is left");
    int64_t next = answering_pid(d, port);
    DH_CHECK(d, next != pid, "the connection did not wake a new generation");
    dh_stop_and_check_clean(d);
}

/* While the daemon was down, another box took the host: what still runs
 * here is no longer this box's admission and is retired with proof. */
static void test_generation_whose_claim_moved_is_retired_at_start(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    int64_t pid = dh_wake(d, "demo").pid;
    dh_kill(d);

    claim serving;
    DH_CHECK(d, dh_claim_get(d, "demo", &serving), "no claim while serving");
    claim moved;
    dh_claim_taken_by_other_box(&serving, &moved);
    dh_claim_put(d, &moved);

    dh_start(d, NULL);
    DH_CHECK(d, dh_pid_gone((pid_t)pid),
             "the generation of a claim that moved still runs after the restart");
    DH_CHECK(d, !dh_leaf_exists(d, "demo", "g-1"), "its leaf is left");
    json_object *status = dh_status(d, "demo");
    DH_CHECK(d, strcmp(dh_json_str(status, "state"), "parked") == 0, "status: %s",
             json_object_to_json_string(status));
    json_object_put(status);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-restart", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_serving_generation_is_resumed_after_a_crash),
        DH_TEST(test_generation_whose_claim_moved_is_retired_at_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
