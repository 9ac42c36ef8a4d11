/* The claim watch heals, against a real store (argv[1]: etcd or dir): when
 * the watch ends for any reason, the daemon lists every claim again at one
 * revision, reconciles every host, and watches from there.
 *
 * etcd:
 *   - the compaction case: the daemon is stopped (SIGSTOP) while etcd
 *     restarts under it and its history is compacted past what the daemon
 *     had seen; once continued, a reassignment of the host it serves to
 *     another box retires its generation within StoreWatchTimeoutSec + 2 s
 *     (a daemon that resumed its watch from where it was would hit the
 *     compacted history again and again, and never see the reassignment);
 *   - etcd restarting while the daemon watches heals the same way;
 *   - etcd down for 20 s: the served host keeps answering, a wake of another
 *     host is refused with store_unavailable, status shows the store
 *     unavailable, and once etcd is back everything converges;
 *   - a host parked while etcd is down: the claim write that records the
 *     park fails, is tried again, and lands as soon as the daemon sees etcd
 *     back (not at the end of its retry's delay), so the claim does not go
 *     on naming a generation that no longer runs.
 * dir:
 *   - the journal cut short under a stopped daemon: once continued, it heals
 *     by the same list and sees the reassignment. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "claims/store_dir.h"
#include "harness.h"

/* Short, so a dead stream is noticed within the test's bounds. */
#define WATCH_TIMEOUT_SEC 2
#define WATCH_TIMEOUT_CONF "StoreWatchTimeoutSec=2s\n"
/* What the compaction case allows for the retirement after a reassignment. */
#define RETIRE_BOUND_MS ((WATCH_TIMEOUT_SEC + 2) * 1000)

static dh_store_kind store_kind = DH_STORE_ETCD;

static int start_serving_demo(dh_daemon *d, pid_t *app)
{
    dh_setup(d, store_kind, WATCH_TIMEOUT_CONF);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_add_app_host(d, "other", NULL, NULL);
    dh_start(d, NULL);
    *app = dh_wake(d, "demo").pid;
    return port;
}

static void pause_daemon(dh_daemon *d, int sig)
{
    DH_CHECK(d, kill(d->drv.pid, sig) == 0, "cannot send signal %d to the daemon: %s", sig,
             strerror(errno));
}

/* Reassigns demo to the other box; returns the claim's new revision. */
static uint64_t reassign_demo(dh_daemon *d, uint64_t *when_ms)
{
    dh_events_mark(d);
    *when_ms = dd_now_ms();
    return dh_claim_take_for(d, "demo", DH_OTHER_BOX);
}

/* Checks that the generation demo served is retired within bound_ms of the
 * reassignment, its app gone and the claim left as written. */
static void expect_retired(dh_daemon *d, pid_t app, uint64_t taken, uint64_t since_ms, int bound_ms)
{
    bool retired = dh_event_wait(d, "demo", "retired",
                                 (int)(since_ms + (uint64_t)bound_ms - dd_now_ms()), NULL);
    uint64_t elapsed = dd_now_ms() - since_ms;
    DH_CHECK(d, retired, "the generation was not retired within %d ms of the reassignment",
             bound_ms);
    DH_CHECK(d, dh_pid_gone(app), "the retired generation's app (pid %d) still runs", (int)app);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after) && after.revision == taken,
             "the daemon wrote over the other box's claim");
    printf("retired %" PRIu64 " ms after the reassignment\n", elapsed);
}

static void expect_retired_after_reassignment(dh_daemon *d, pid_t app, int bound_ms)
{
    uint64_t since_ms;
    uint64_t taken = reassign_demo(d, &since_ms);
    expect_retired(d, app, taken, since_ms, bound_ms);
}

/* The daemon's status reply, with the store object; the caller puts it. */
static json_object *status_store(dh_daemon *d, json_object **reply)
{
    *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"status\"}");
    DH_CHECK(d, dh_reply_ok(*reply), "status: %s", json_object_to_json_string(*reply));
    json_object *store = NULL;
    json_object_object_get_ex(dh_reply_result(*reply), "store", &store);
    DH_CHECK(d, store, "status has no store: %s", json_object_to_json_string(*reply));
    return store;
}

static bool wait_store_state(dh_daemon *d, const char *state, int timeout_ms)
{
    uint64_t end = dd_now_ms() + (uint64_t)timeout_ms;
    do {
        json_object *reply;
        json_object *store = status_store(d, &reply);
        bool reached = strcmp(dh_json_str(store, "state"), state) == 0;
        json_object_put(reply);
        if (reached)
            return true;
        dd_sleep_ms(100);
    } while (dd_now_ms() < end);
    return false;
}

static void compact_etcd(dh_daemon *d, uint64_t revision)
{
    char body[96];
    snprintf(body, sizeof(body), "{\"revision\":\"%" PRIu64 "\",\"physical\":true}", revision);
    char *response = NULL;
    long status = etcd_harness_post(&d->etcd, "/v3/kv/compaction", body, NULL, &response);
    DH_CHECK(d, status == 200, "compaction to %" PRIu64 ": HTTP %ld: %s", revision, status,
             response ? response : "");
    free(response);
}

static void test_compaction_under_a_stopped_daemon(void **state)
{
    dh_daemon *d = *state;
    pid_t app;
    start_serving_demo(d, &app);

    pause_daemon(d, SIGSTOP);
    act_error err = {0};
    DH_CHECK(d, etcd_harness_restart(&d->etcd, &err) == 0, "etcd restart: %s", err.message);
    /* Changes the daemon never saw, then history compacted past them. */
    uint64_t revision = 0;
    for (uint64_t i = 1; i <= 5; i++) {
        claim elsewhere;
        dh_claim_assigned("other", i % 2 ? DH_OTHER_BOX : DH_BOX, &elsewhere);
        elsewhere.op.id[0] = (char)('a' + i);
        revision = dh_claim_put(d, &elsewhere);
    }
    compact_etcd(d, revision);
    pause_daemon(d, SIGCONT);

    expect_retired_after_reassignment(d, app, RETIRE_BOUND_MS);
    dh_stop_and_check_clean(d);
}

static void test_etcd_restart_while_watching(void **state)
{
    dh_daemon *d = *state;
    pid_t app;
    int port = start_serving_demo(d, &app);

    act_error err = {0};
    DH_CHECK(d, etcd_harness_restart(&d->etcd, &err) == 0, "etcd restart: %s", err.message);
    DH_CHECK(d, dh_log_wait(d, "listing this box's claims again", 10000),
             "the watch did not notice that etcd restarted");
    DH_CHECK(d, wait_store_state(d, "ok", 15000), "the store did not come back in status");
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "demo stopped answering");
    expect_retired_after_reassignment(d, app, RETIRE_BOUND_MS);
    dh_stop_and_check_clean(d);
}

#define DOWN_MS 20000

static void test_etcd_down_keeps_serving_and_refuses_wakes(void **state)
{
    dh_daemon *d = *state;
    pid_t app;
    int port = start_serving_demo(d, &app);
    json_object *status = dh_status(d, "demo");
    uint64_t generation = dh_json_u64(status, "generation");
    json_object_put(status);

    etcd_harness_stop(&d->etcd);
    uint64_t down_at = dd_now_ms();
    DH_CHECK(d, wait_store_state(d, "unavailable", 15000),
             "status does not show the store unavailable");

    json_object *reply = dh_wake_reply(d, "other", 30000), *error = NULL;
    char text[2048];
    json_object_object_get_ex(reply, "error", &error);
    snprintf(text, sizeof(text), "%s", dh_json_str(error, "message"));
    bool refused = !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "store_unavailable") == 0;
    json_object_put(reply);
    DH_CHECK(d, refused, "a wake while etcd is down: expected store_unavailable, got %s", text);
    DH_CHECK(d,
             strstr(text, "unreachable since") &&
                 strstr(text, "serving generations keep serving") && strstr(text, d->store_url),
             "the refusal does not say what happened: %s", text);
    DH_CHECK(d, dh_marker_pids(d, "other", NULL, 0) == 0, "other ran while etcd was down");

    json_object *store = status_store(d, &reply);
    DH_CHECK(d, dh_json_u64(store, "since_usec") > 0 && dh_json_str(store, "error")[0],
             "status does not say since when and why: %s", json_object_to_json_string(store));
    json_object_put(reply);
    char out[16384];
    char *const argv[] = {(char *)DH_ACTIVATORCTL, (char *)"--connect", d->drv.control_url,
                          (char *)"--no-color", (char *)"status", NULL};
    int exit_code = dh_run(argv, out, sizeof(out));
    DH_CHECK(d, exit_code == 0 && strstr(out, "unavailable since"),
             "activatorctl status (exit %d) does not show the store down:\n%s", exit_code, out);

    /* Every second of the outage, the served host answers. */
    while (dd_now_ms() - down_at < DOWN_MS) {
        char body[512];
        DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0,
                 "demo stopped answering %" PRIu64 " ms into the outage", dd_now_ms() - down_at);
        dd_sleep_ms(1000);
    }

    act_error err = {0};
    DH_CHECK(d, etcd_harness_restart(&d->etcd, &err) == 0, "etcd restart: %s", err.message);
    DH_CHECK(d, wait_store_state(d, "ok", 15000), "the store did not come back in status");
    DH_CHECK(d, dh_log_wait(d, "answers again", 1000), "no log line that the store is back");
    dh_wake(d, "other");
    status = dh_status(d, "demo");
    bool same = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                dh_json_u64(status, "generation") == generation;
    json_object_put(status);
    DH_CHECK(d, same, "demo is not served by the same generation after the outage");
    DH_CHECK(d, kill(app, 0) == 0, "demo's app died during the outage");
    dh_stop_and_check_clean(d);
}

static void test_a_park_while_etcd_is_down_reaches_the_claim_once_it_is_back(void **state)
{
    dh_daemon *d = *state;
    pid_t app;
    start_serving_demo(d, &app);
    claim serving;
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "serving", 5000, &serving),
             "demo's claim does not say serving but %s", serving.op.phase);

    etcd_harness_stop(&d->etcd);
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_pid_gone(app), "the parked generation's app (pid %d) still runs", (int)app);
    DH_CHECK(d, dh_log_wait(d, "cannot write phase parked to its claim", 15000),
             "the park's claim write did not fail while etcd was down");
    /* Its retries fail too while etcd is down (100 ms, then 200 ms...),
     * until their delay is the longest, 5 s. */
    DH_CHECK(d, dh_log_wait(d, "trying again in 5000 ms", 15000),
             "the park's claim write was not tried again while etcd was down");

    act_error err = {0};
    DH_CHECK(d, etcd_harness_restart(&d->etcd, &err) == 0, "etcd restart: %s", err.message);
    DH_CHECK(d, wait_store_state(d, "ok", 15000), "the store did not come back in status");
    /* Once the daemon says the store answers, the write waiting out its
     * 5 s delay is made at once: the claim is right within moments, not
     * up to 5 s later. */
    uint64_t back_at = dd_now_ms();
    claim parked;
    bool written = dh_claim_wait_phase(d, "demo", "parked", 2000, &parked);
    DH_CHECK(d, written,
             "2 s after status said the store answers again, demo's claim still says %s "
             "(generation %" PRIu64 ", handle '%s'), though demo is parked",
             parked.op.phase, parked.holder.generation, parked.holder.handle);
    printf("the park reached the claim %" PRIu64 " ms after status said the store answers\n",
           dd_now_ms() - back_at);
    DH_CHECK(
        d, parked.holder.session == serving.holder.session && !parked.holder.handle[0],
        "the parked claim is not the serving one's admission without a handle: session %" PRIu64
        " (was %" PRIu64 "), handle '%s'",
        parked.holder.session, serving.holder.session, parked.holder.handle);
    dh_stop_and_check_clean(d);
}

static void test_journal_cut_under_a_stopped_daemon(void **state)
{
    dh_daemon *d = *state;
    pid_t app;
    start_serving_demo(d, &app);
    char journal[PATH_MAX + 32];
    snprintf(journal, sizeof(journal), "%s/%s", d->store_url + strlen("dir://"), DIR_JOURNAL_FILE);

    /* The reassignment's journal line is lost with the cut; only a later
     * change of another host is in the journal when the daemon goes on. */
    pause_daemon(d, SIGSTOP);
    uint64_t since_ms;
    uint64_t taken = reassign_demo(d, &since_ms);
    DH_CHECK(d, truncate(journal, 0) == 0, "cannot cut %s: %s", journal, strerror(errno));
    claim elsewhere;
    dh_claim_assigned("other", DH_OTHER_BOX, &elsewhere);
    dh_claim_put(d, &elsewhere);
    pause_daemon(d, SIGCONT);
    expect_retired(d, app, taken, dd_now_ms(), RETIRE_BOUND_MS);
    DH_CHECK(d, dh_log_wait(d, "listing this box's claims again", 1000),
             "the daemon did not say it listed the claims again");
    dh_stop_and_check_clean(d);
}

int main(int argc, char **argv)
{
    store_kind = dh_store_kind_from(argc > 1 ? argv[1] : NULL);
    char suite[64];
    snprintf(suite, sizeof(suite), "daemon-store-heal-%s", argc > 1 ? argv[1] : "dir");
    int r = dh_check_can_run(suite, store_kind);
    if (r)
        return r;
    const struct CMUnitTest etcd_tests[] = {
        DH_TEST(test_compaction_under_a_stopped_daemon),
        DH_TEST(test_etcd_restart_while_watching),
        DH_TEST(test_etcd_down_keeps_serving_and_refuses_wakes),
        DH_TEST(test_a_park_while_etcd_is_down_reaches_the_claim_once_it_is_back),
    };
    const struct CMUnitTest dir_tests[] = {
        DH_TEST(test_journal_cut_under_a_stopped_daemon),
    };
    if (store_kind == DH_STORE_DIR)
        return cmocka_run_group_tests(dir_tests, NULL, NULL);
    return cmocka_run_group_tests(etcd_tests, NULL, NULL);
}
