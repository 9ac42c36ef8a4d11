/* Apps that fail, under the real daemon:
 *   - one that never says READY=1: each attempt ends in ready_timeout after
 *     ReadyTimeoutSec, is retired with its leaf proven empty and removed,
 *     and is retried after 1 s then 2 s, until MaxStarts; then the wake gives
 *     up and the failed attempts are recorded;
 *   - one that crashes while it serves: the daemon sees the exit through the
 *     pidfd at once, retires the generation, records the failure (status,
 *     a failed event) and parks the host. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static double seconds_between(const dh_event *from, const dh_event *to)
{
    return ((double)to->time_usec - (double)from->time_usec) / 1e6;
}

/* Waits for the next event of demo named name and moves the mark past it, so
 * the next wait finds the one after. */
static dh_event next_event(dh_daemon *d, const char *name, int timeout_ms)
{
    dh_event event;
    DH_CHECK(d, dh_event_wait(d, "demo", name, timeout_ms, &event), "no %s event within %d ms",
             name, timeout_ms);
    d->mark = event.seq;
    return event;
}

static void test_never_ready_retried_with_backoff_then_given_up(void **state)
{
    dh_daemon *d = *state;
    enum { MAX_STARTS = 3 };
    dh_start_with_host(d, DH_STORE_DIR, "demo", "--never-ready",
                       "ReadyTimeoutSec=1\nMaxStarts=3\n");
    dh_events_mark(d);
    dh_async *wake = dh_wake_start(d, "demo", 60000);

    dh_event exec[MAX_STARTS], failed[MAX_STARTS], retired[MAX_STARTS];
    for (int i = 0; i < MAX_STARTS; i++) {
        exec[i] = next_event(d, "exec", 10000);
        failed[i] = next_event(d, "failed", 10000);
        DH_CHECK(d, strcmp(failed[i].reason, "ready_timeout") == 0,
                 "attempt %d failed with %s, expected ready_timeout", i + 1, failed[i].reason);
        retired[i] = next_event(d, "retired", 10000);
        /* The attempt's leaf is proven empty and gone before the backoff
         * ends and the next attempt creates g-N again. */
        char leaf[32];
        snprintf(leaf, sizeof(leaf), "g-%" PRIu64, exec[i].generation);
        DH_CHECK(d, !dh_leaf_exists(d, "demo", leaf),
                 "attempt %d: leaf %s still exists after its retired event", i + 1, leaf);
        DH_CHECK(d, i == 0 || exec[i].generation == exec[0].generation,
                 "attempt %d runs generation %" PRIu64 ", the admission named %" PRIu64, i + 1,
                 exec[i].generation, exec[0].generation);
    }
    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "ready_timeout") == 0,
             "wake: expected ready_timeout, got %s", json_object_to_json_string(reply));
    json_object_put(reply);
    dh_events_pump(d, 300);
    DH_CHECK(d, dh_events_count(d, "demo", "exec") == 0, "a fourth attempt ran (MaxStarts=3)");

    /* The ready window, then the doubling backoff between attempts (event
     * timestamps; tolerant of a loaded machine, but 1 s and 2 s apart). */
    for (int i = 0; i < MAX_STARTS; i++) {
        double window = seconds_between(&exec[i], &failed[i]);
        DH_CHECK(d, window >= 0.9 && window <= 2.5,
                 "attempt %d: ready_timeout came %.2f s after exec, ReadyTimeoutSec=1", i + 1,
                 window);
    }
    double backoff1 = seconds_between(&retired[0], &exec[1]);
    double backoff2 = seconds_between(&retired[1], &exec[2]);
    DH_CHECK(d, backoff1 >= 0.95 && backoff1 <= 1.9,
             "backoff before attempt 2 was %.2f s, expected about 1 s", backoff1);
    DH_CHECK(d, backoff2 >= 1.95 && backoff2 <= 3.2,
             "backoff before attempt 3 was %.2f s, expected about 2 s", backoff2);
    DH_CHECK(d, backoff2 - backoff1 >= 0.6, "the backoff did not double: %.2f s then %.2f s",
             backoff1, backoff2);

    /* Every attempt ran once and none is left running. */
    pid_t pids[8];
    size_t n = dh_marker_pids(d, "demo", pids, 8);
    DH_CHECK(d, n == MAX_STARTS, "%zu attempts ran, expected %d", n, MAX_STARTS);
    for (size_t i = 0; i < n; i++)
        DH_CHECK(d, kill(pids[i], 0) < 0 && errno == ESRCH, "attempt %zu (pid %d) still runs",
                 i + 1, (int)pids[i]);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "leaves left after giving up");
    DH_CHECK(d, dh_generation_records(d, "demo") == 0, "generation records left after giving up");

    json_object *status = dh_status(d, "demo");
    DH_CHECK(d,
             strcmp(dh_json_str(status, "state"), "parked") == 0 &&
                 strcmp(dh_json_str(status, "reason"), "ready_timeout") == 0 &&
                 dh_json_u64(status, "failure_streak") >= 1,
             "status after giving up: %s", json_object_to_json_string(status));
    json_object_put(status);
    reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"stats\"}");
    DH_CHECK(d, dh_json_u64(dh_reply_result(reply), "failed_attempts") == MAX_STARTS,
             "stats should count %d failed attempts: %s", MAX_STARTS,
             json_object_to_json_string(reply));
    json_object_put(reply);
    dh_stop_and_check_clean(d);
}

static void test_crash_while_serving_is_seen_and_recorded(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", "--crash-after-ms 1500", NULL);
    dh_events_mark(d);
    int64_t pid = dh_wake(d, "demo").pid;
    dh_event exec;
    DH_CHECK(d, dh_event_wait(d, "demo", "exec", 1000, &exec), "no exec event");
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0,
             "the app does not answer before it crashes");

    /* The crash comes 1.5 s after the start; the daemon sees it through the
     * pidfd and retires the generation with proof. */
    dh_event retired;
    DH_CHECK(d, dh_event_wait(d, "demo", "retired", 10000, &retired),
             "the crash was not followed by a retired event");
    double seen_after = ((double)retired.time_usec - (double)exec.time_usec) / 1e6;
    DH_CHECK(d, seen_after >= 1.4 && seen_after <= 5.0,
             "the crash (1.5 s after exec) was handled %.2f s after exec", seen_after);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park after the crash");
    DH_CHECK(d, kill((pid_t)pid, 0) < 0 && errno == ESRCH,
             "the crashed app (pid %" PRId64 ") is "
             "still there (not reaped?)",
             pid);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "the crashed generation's leaf is left");
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 1,
             "a failure after publication was retried blindly");

    json_object *status = dh_status(d, "demo");
    bool recorded = strcmp(dh_json_str(status, "reason"), "crashed") == 0 &&
                    dh_json_u64(status, "failure_streak") >= 1;
    char status_text[1024];
    snprintf(status_text, sizeof(status_text), "%s", json_object_to_json_string(status));
    json_object_put(status);
    DH_CHECK(d, recorded, "status does not record the crash: %s", status_text);

    dh_event failed;
    DH_CHECK(d, dh_event_wait(d, "demo", "failed", 1000, &failed),
             "no failed event was published for the crash of a serving generation");
    DH_CHECK(d, strcmp(failed.reason, "crashed") == 0 && failed.generation == exec.generation,
             "the failed event says reason %s generation %" PRIu64 ", expected crashed %" PRIu64,
             failed.reason, failed.generation, exec.generation);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-failures", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_never_ready_retried_with_backoff_then_given_up),
        DH_TEST(test_crash_while_serving_is_seen_and_recorded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
