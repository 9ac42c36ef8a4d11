/* activatord is crash-only: killed at any instant (SIGKILL here, as the OOM
 * killer or a bug would), its generations keep running, and the next daemon
 * either resumes supervising a generation (its record, its claim and its
 * process agree that it is this box's serving admission) or retires it with
 * proof. Clients of a resumed host never see the restart.
 *
 * A handover (systemctl restart's signal) is the same without the crash:
 * the daemon exits 0 and leaves every generation running, and under a
 * client that never pauses, no request fails across ten of them. */
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
    int64_t pid = dh_answer_pid(port);
    DH_CHECK(d, pid > 0, "nothing answers on port %d", port);
    return pid;
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

/* The generation dies with the daemon (both killed): the claim still says
 * it serves, and the next daemon, which has nothing to resume, writes it
 * parked; a connection wakes a new generation. */
static void test_claim_of_a_generation_that_died_with_the_daemon_says_parked(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    dh_served served = dh_wake(d, "demo");
    dh_kill(d);
    DH_CHECK(d, kill(served.pid, SIGKILL) == 0 && dh_pid_gone(served.pid),
             "cannot kill the app (pid %d)", (int)served.pid);
    claim stale;
    DH_CHECK(d, dh_claim_get(d, "demo", &stale) && strcmp(stale.op.phase, "serving") == 0,
             "the claim does not say serving after both died: phase %s", stale.op.phase);

    dh_start(d, NULL);
    claim c;
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "parked", 10000, &c),
             "after the restart the claim still says %s, generation %" PRIu64 " handle \"%s\"",
             c.op.phase, c.holder.generation, c.holder.handle);
    DH_CHECK(d, !c.holder.handle[0] && c.holder.generation == stale.holder.generation,
             "the parked claim names handle \"%s\", generation %" PRIu64, c.holder.handle,
             c.holder.generation);
    /* The dead generation's leaf is retired with proof beside the claim's
     * write; until that proof a wake is refused (unproven_stop), as it must
     * be. The next wake comes after it: the leaf removed. */
    char leaf[PATH_MAX + 32];
    snprintf(leaf, sizeof(leaf), "%s/hosts/demo/g-%" PRIu64, d->drv.cgroup_path,
             stale.holder.generation);
    bool removed = false;
    for (int i = 0; i < 1000 && !removed; i++) {
        removed = access(leaf, F_OK) != 0;
        if (!removed)
            dd_sleep_ms(10);
    }
    DH_CHECK(d, removed, "the dead generation's leaf %s was not retired within 10 s", leaf);
    int64_t next = answering_pid(d, port);
    DH_CHECK(d, next != served.pid, "the dead generation's pid answers");
    dh_stop_and_check_clean(d);
}

static void test_handover_keeps_every_app_under_a_client(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    /* A unix socket path: a re-bind would replace the live socket. */
    char unix_path[PATH_MAX];
    snprintf(unix_path, sizeof(unix_path), "%s/web.sock", d->drv.dir);
    dh_write_host(d, "unixweb",
                  "[Host]\nExec=act-e2e-app\nStopTimeoutSec=1\nReadyTimeoutSec=5\n"
                  "[Listen]\nListenStream=%s\n",
                  unix_path);
    dh_stage(d, "unixweb", "v1", true, NULL);
    dh_start(d, NULL);
    int64_t pid = dh_wake(d, "demo").pid;
    int64_t unix_pid = dh_wake(d, "unixweb").pid;

    dh_busy_client client;
    dh_busy_client_start(d, &client, port, unix_path);
    enum { HANDOVERS = 10 };
    for (int i = 0; i < HANDOVERS; i++) {
        pid_t daemon_pid = d->drv.pid;
        dh_hand_over(d);
        DH_CHECK(d, answering_pid(d, port) == pid, "handover %d: another process answers", i);
        dh_start(d, NULL);
        DH_CHECK(d, d->drv.pid != daemon_pid, "the daemon's pid did not change");
        DH_CHECK(d, dh_log_wait(d, "recovery: 2 generations resumed", 5000),
                 "handover %d: the next daemon did not resume both generations", i);
    }
    dh_busy_client_stop(&client);
    DH_CHECK(d, client.failed == 0,
             "%u of %u requests failed across %d handovers; the first: %s", client.failed,
             client.failed + client.answered, HANDOVERS, client.first_failure);
    DH_CHECK(d, client.answered > 2 * HANDOVERS, "only %u requests were answered",
             client.answered);
    DH_CHECK(d, answering_pid(d, port) == pid, "the TCP app was replaced");
    char body[512];
    int n = dh_http_get_unix(unix_path, body, sizeof(body));
    DH_CHECK(d, n > 0 && atoll(strstr(body, "pid=") + 4) == unix_pid,
             "the unix socket app was replaced or does not answer");

    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"version\"}");
    json_object *version = dh_reply_result(reply);
    uint64_t starts = dh_json_u64(version, "starts"), handovers = dh_json_u64(version, "handovers");
    json_object_put(reply);
    DH_CHECK(d, starts == HANDOVERS + 1 && handovers == HANDOVERS,
             "version says %llu starts and %llu handovers, expected %d and %d",
             (unsigned long long)starts, (unsigned long long)handovers, HANDOVERS + 1, HANDOVERS);
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
        DH_TEST(test_claim_of_a_generation_that_died_with_the_daemon_says_parked),
        DH_TEST(test_handover_keeps_every_app_under_a_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
