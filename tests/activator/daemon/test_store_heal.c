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
 *   - etcd restarting while the daemon watches heals the same way.
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
static void expect_retired(dh_daemon *d, pid_t app, uint64_t taken, uint64_t since_ms,
                           int bound_ms)
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
    DH_CHECK(d, dh_log_wait(d, "listing every claim again", 10000),
             "the watch did not notice that etcd restarted");
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "demo stopped answering");
    /* The daemon may still wait out a retry (at most 5 s) until etcd answers. */
    expect_retired_after_reassignment(d, app, RETIRE_BOUND_MS + 5000);
    dh_stop_and_check_clean(d);
}

static void test_journal_cut_under_a_stopped_daemon(void **state)
{
    dh_daemon *d = *state;
    pid_t app;
    start_serving_demo(d, &app);
    char journal[PATH_MAX + 32];
    snprintf(journal, sizeof(journal), "%s/%s", d->store_url + strlen("dir://"),
             DIR_JOURNAL_FILE);

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
    DH_CHECK(d, dh_log_wait(d, "listing every claim again", 1000),
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
    };
    const struct CMUnitTest dir_tests[] = {
        DH_TEST(test_journal_cut_under_a_stopped_daemon),
    };
    if (store_kind == DH_STORE_DIR)
        return cmocka_run_group_tests(dir_tests, NULL, NULL);
    return cmocka_run_group_tests(etcd_tests, NULL, NULL);
}
