/* App watchdogs and stop notices, under the real daemon with real apps:
 *   - an app that stops sending WATCHDOG=1 is retired within WatchdogSec=
 *     and a second, with reason watchdog, as a failure park;
 *   - an app that keeps sending it serves on past several periods;
 *   - WATCHDOG=trigger retires at once;
 *   - STOPPING=1 parks the host, and the next connection wakes a new
 *     generation;
 *   - a health check repeated every HealthCheckIntervalSec= that starts
 *     failing retires the generation after HealthCheckFailures= failures in
 *     a row, with reason unhealthy. */
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

/* Wakes demo and returns its serving event, with the mark set at it. */
static dh_event wake_until_serving(dh_daemon *d, dh_served *served)
{
    dh_events_mark(d);
    *served = dh_wake(d, "demo");
    dh_event serving;
    DH_CHECK(d, dh_event_wait(d, "demo", "serving", 5000, &serving), "no serving event");
    d->mark = serving.seq;
    return serving;
}

/* The failed event of a serving generation that was retired for reason,
 * and the host parked with the generation proven stopped and gone. */
static dh_event expect_retired_for(dh_daemon *d, const char *reason, const dh_served *served,
                                   int timeout_ms)
{
    dh_event failed;
    DH_CHECK(d, dh_event_wait(d, "demo", "failed", timeout_ms, &failed),
             "generation %" PRIu64 " was not failed within %d ms", served->generation, timeout_ms);
    DH_CHECK(d, strcmp(failed.reason, reason) == 0 && failed.generation == served->generation,
             "the failed event says reason %s generation %" PRIu64 ", expected %s %" PRIu64,
             failed.reason, failed.generation, reason, served->generation);
    DH_CHECK(d, dh_event_wait(d, "demo", "retired", 10000, NULL), "no retired event");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_pid_gone(served->pid), "the retired app (pid %d) still runs", (int)served->pid);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "the retired generation's leaf is left");
    return failed;
}

static void test_an_app_that_stops_its_keepalives_is_retired_for_its_watchdog(void **state)
{
    dh_daemon *d = *state;
    /* Three keep-alives, one every 333 ms from READY=1, then silence. */
    dh_start_with_host(d, DH_STORE_DIR, "demo", "--watchdog-stop-after 3", "WatchdogSec=1\n");
    for (uint64_t streak = 1; streak <= 2; streak++) {
        dh_served served;
        dh_event serving = wake_until_serving(d, &served);
        dh_event failed = expect_retired_for(d, "watchdog", &served, 10000);
        /* The last keep-alive came at most 0.67 s after serving; the
         * deadline is WatchdogSec=1 after it, and a second more is allowed. */
        double after = seconds_between(&serving, &failed);
        DH_CHECK(d, after >= 0.95 && after <= 2.7,
                 "retired %.2f s after serving; WatchdogSec=1 after the last keep-alive", after);
        /* A failure park, like a crash: the streak paces the next wake. */
        dh_expect_parked_for(d, "demo", "watchdog", streak);
        DH_CHECK(d, dh_log_wait(d, "sent no WATCHDOG=1 within 1000 ms", 1000),
                 "the log does not say why the generation was retired");
    }
    dh_stop_and_check_clean(d);
}

/* Whether pid's environment has the entry "name=value". */
static bool environ_has(pid_t pid, const char *name, const char *value)
{
    char path[64], want[128];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    snprintf(want, sizeof(want), "%s=%s", name, value);
    FILE *file = fopen(path, "re");
    if (!file)
        return false;
    char entry[4096];
    size_t n = 0;
    bool found = false;
    for (int c; !found && (c = fgetc(file)) != EOF;) {
        if (c != '\0' && n + 1 < sizeof(entry)) {
            entry[n++] = (char)c;
            continue;
        }
        entry[n] = '\0';
        found = strcmp(entry, want) == 0;
        n = 0;
    }
    fclose(file);
    return found;
}

static void test_an_app_that_keeps_its_watchdog_alive_serves_on(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* Ready by a connect, so the notify socket is there for the watchdog
     * alone. */
    int port = dh_free_port();
    char lines[128];
    snprintf(lines, sizeof(lines), "WatchdogSec=500ms\nReady=tcp:127.0.0.1:%d\n", port);
    dh_write_app_host(d, "demo", port, NULL, lines);
    dh_stage(d, "demo", "v1", true, NULL);
    dh_start(d, NULL);
    dh_served served;
    wake_until_serving(d, &served);
    /* What systemd tells a service: the period, and whose keep-alives count. */
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)served.pid);
    DH_CHECK(d,
             environ_has(served.pid, "WATCHDOG_USEC", "500000") &&
                 environ_has(served.pid, "WATCHDOG_PID", pid),
             "the app was not given WATCHDOG_USEC=500000 and WATCHDOG_PID=%s", pid);
    /* Six periods: without its keep-alives (a wrong WATCHDOG_PID or
     * WATCHDOG_USEC would stop them) it would be retired within the first. */
    DH_CHECK(d, !dh_event_wait(d, "demo", "failed", 3000, NULL),
             "an app sending WATCHDOG=1 was failed");
    json_object *status = dh_status(d, "demo");
    bool serves = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                  dh_json_u64(status, "pid") == (uint64_t)served.pid;
    json_object_put(status);
    DH_CHECK(d, serves, "generation %" PRIu64 " (pid %d) no longer serves", served.generation,
             (int)served.pid);
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "the app does not answer");
    dh_stop_and_check_clean(d);
}

/* A generation resumed by the next daemon is supervised as before: its
 * keep-alives reach the notify socket the new daemon opens at the same path,
 * and when they stop it is retired. */
static void test_the_watchdog_holds_across_a_daemon_restart(void **state)
{
    dh_daemon *d = *state;
    /* Keep-alives for about 4 s, past the restart. */
    dh_start_with_host(d, DH_STORE_DIR, "demo", "--watchdog-stop-after 12", "WatchdogSec=1\n");
    dh_served served;
    dh_event serving = wake_until_serving(d, &served);
    dh_kill(d);
    dh_start(d, NULL);
    DH_CHECK(d, dh_log_wait(d, "resumed generation", 5000), "the daemon did not resume it");
    dh_event failed = expect_retired_for(d, "watchdog", &served, 15000);
    /* Not before the app fell silent (its 12th keep-alive comes 3.7 s after
     * READY=1): the new daemon counted its keep-alives. */
    double after = seconds_between(&serving, &failed);
    DH_CHECK(d, after >= 3.6, "retired %.2f s after serving, while it still sent WATCHDOG=1",
             after);
    dh_stop_and_check_clean(d);
}

/* During a swap the serving generation N is still the one supervised: N
 * falling silent while N+1 starts cancels the swap, and the failed event
 * names N, not the N+1 being started. */
static void test_a_silent_n_during_a_swap_is_retired_as_itself(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* Keep-alives for about 4 s after READY=1, long enough to start a swap. */
    dh_add_app_host(d, "demo", "--watchdog-stop-after 12", "WatchdogSec=1\n");
    dh_stage(d, "demo", "v2", false, NULL);
    /* N+1 is held before its gate (N passes: the file is there), so it is
     * still starting when N falls silent. */
    char hold[PATH_MAX];
    dh_hold_path(d, "hold-go", hold, sizeof(hold));
    FILE *file = fopen(hold, "w");
    DH_CHECK(d, file && fclose(file) == 0, "cannot create %s", hold);
    dh_start_holding(d, "gate", hold);
    dh_served served;
    wake_until_serving(d, &served);
    DH_CHECK(d, unlink(hold) == 0, "cannot remove %s", hold);

    dh_async *swap = dh_request_start(
        d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}");
    DH_CHECK(d, dh_event_wait(d, "demo", "swap.started", 10000, NULL), "the swap did not start");
    dh_event failed;
    DH_CHECK(d, dh_event_wait(d, "demo", "failed", 15000, &failed), "N was not failed");
    DH_CHECK(d, strcmp(failed.reason, "watchdog") == 0 && failed.generation == served.generation,
             "the failed event says reason %s generation %" PRIu64 ", expected watchdog %" PRIu64,
             failed.reason, failed.generation, served.generation);
    /* Let N+1 on, so that the cancelled swap retires it. */
    file = fopen(hold, "w");
    DH_CHECK(d, file && fclose(file) == 0, "cannot create %s", hold);
    json_object *reply = dh_request_finish(d, swap);
    DH_CHECK(d, !dh_reply_ok(reply), "the swap served though N failed during it: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_pid_gone(served.pid), "N (pid %d) still runs", (int)served.pid);
    dh_expect_parked_for(d, "demo", "watchdog", 1);
    dh_stop_and_check_clean(d);
}

static void test_watchdog_trigger_retires_at_once(void **state)
{
    dh_daemon *d = *state;
    /* A period far longer than the test: only the trigger can retire it. */
    dh_start_with_host(d, DH_STORE_DIR, "demo", "--watchdog-trigger-after-ms 300",
                       "WatchdogSec=1min\n");
    dh_served served;
    dh_event serving = wake_until_serving(d, &served);
    dh_event failed = expect_retired_for(d, "watchdog", &served, 10000);
    double after = seconds_between(&serving, &failed);
    DH_CHECK(d, after <= 3.0, "WATCHDOG=trigger (0.3 s after READY=1) retired %.2f s after serving",
             after);
    dh_expect_parked_for(d, "demo", "watchdog", 1);
    DH_CHECK(d, dh_log_wait(d, "sent WATCHDOG=trigger", 1000), "the log does not say why");
    dh_stop_and_check_clean(d);
}

static void test_stopping_parks_the_host_and_the_next_client_wakes_it(void **state)
{
    dh_daemon *d = *state;
    /* The app stops accepting and says STOPPING=1, then waits for SIGTERM:
     * only the notice can park the host. */
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", "--stopping-after-ms 500", NULL);
    dh_served served;
    wake_until_serving(d, &served);
    DH_CHECK(d, dh_event_wait(d, "demo", "parking", 10000, NULL),
             "STOPPING=1 did not park the host");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_pid_gone(served.pid), "the stopping app (pid %d) still runs", (int)served.pid);
    DH_CHECK(d, dh_events_count(d, "demo", "failed") == 0, "a stop notice counted as a failure");
    /* An orderly end: no failure, no backoff. */
    dh_expect_parked_for(d, "demo", "", 0);

    /* The sockets are watched again: a client wakes a new generation. */
    dh_events_mark(d);
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "the next client was not answered");
    char expected[64];
    snprintf(expected, sizeof(expected), "generation=%" PRIu64 " ", served.generation);
    DH_CHECK(d, strstr(body, "generation=") && !strstr(body, expected),
             "the next client was answered by generation %" PRIu64 " again: %s", served.generation,
             body);
    DH_CHECK(d, dh_event_wait(d, "demo", "serving", 5000, NULL), "no new generation serves");
    dh_stop_and_check_clean(d);
}

static void test_a_health_check_that_starts_failing_retires_the_generation(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* The check at the healthy step and two repeated ones pass; then the
     * app closes its health socket and the checks are refused. */
    int health_port = dh_free_port();
    char args[128], lines[256];
    snprintf(args, sizeof(args), "--health-listen 127.0.0.1:%d --health-fail-after 3", health_port);
    snprintf(lines, sizeof(lines),
             "HealthCheck=tcp:127.0.0.1:%d\nHealthCheckIntervalSec=300ms\nHealthCheckFailures=2\n",
             health_port);
    dh_add_app_host(d, "demo", args, lines);
    dh_start(d, NULL);
    dh_served served;
    dh_event serving = wake_until_serving(d, &served);
    dh_event failed = expect_retired_for(d, "unhealthy", &served, 10000);
    /* Checks at 0.3 and 0.6 s pass, those at 0.9 and 1.2 s fail. */
    double after = seconds_between(&serving, &failed);
    DH_CHECK(d, after >= 1.15 && after <= 3.5,
             "retired %.2f s after serving; two passing checks and two failing ones take 1.2 s",
             after);
    DH_CHECK(d,
             dh_log_wait(d, "failed a health check (1 of 2 in a row)", 1000) &&
                 dh_log_wait(d, "failed 2 health checks in a row", 1000),
             "the log does not count the failed checks");
    dh_expect_parked_for(d, "demo", "unhealthy", 1);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-watchdog", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_an_app_that_stops_its_keepalives_is_retired_for_its_watchdog),
        DH_TEST(test_an_app_that_keeps_its_watchdog_alive_serves_on),
        DH_TEST(test_the_watchdog_holds_across_a_daemon_restart),
        DH_TEST(test_a_silent_n_during_a_swap_is_retired_as_itself),
        DH_TEST(test_watchdog_trigger_retires_at_once),
        DH_TEST(test_stopping_parks_the_host_and_the_next_client_wakes_it),
        DH_TEST(test_a_health_check_that_starts_failing_retires_the_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
