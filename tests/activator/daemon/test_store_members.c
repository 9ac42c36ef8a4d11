/* A daemon on a 3-member etcd cluster on loopback (Store= names all three),
 * with each member in turn frozen by SIGSTOP under it while it serves: a
 * member that hangs rather than refuses. The daemon's calls must leave it
 * for another member within the call budget, so that a wake of another host
 * is admitted; and its claim watch must leave it too, so that a
 * reassignment written through the other members retires the host it
 * serves within StoreWatchTimeoutSec= and a call budget. The frozen member
 * is continued before the next round.
 *
 * And a daemon whose store endpoints are two proxies to one etcd that lose
 * the answers of its admission and of its publication after etcd applied
 * them: the wake takes its own landed writes and serves. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "claims/etcd_wire.h"
#include "harness.h"
#include "tests/common/tcp_proxy.h"

#define MEMBERS 3
#define WATCH_TIMEOUT_SEC 2
/* The daemon's call budget (claims_store_options.timeout_ms's default). */
#define CALL_BUDGET_MS 5000
/* What a wake takes once its calls answer, and what the retirement takes
 * once the claim is heard: far below a second on any machine of this kind;
 * the margin keeps a loaded machine from failing the test. */
#define SLACK_MS 4000

static etcd_harness members[MEMBERS];
/* The lost-answer test's etcd, its two proxies and their shared hold. */
static etcd_harness single;
static tcp_proxy *proxies[2];
static tcp_proxy_hold *lose_one;

static void member_signal(dh_daemon *d, size_t m, int sig)
{
    DH_CHECK(d, kill(members[m].pid, sig) == 0, "cannot send signal %d to member %zu: %s", sig, m,
             strerror(errno));
}

static void test_a_frozen_member_is_left_for_the_others(void **state)
{
    dh_daemon *d = *state;
    act_error err = {0};
    if (etcd_harness_start_cluster(members, MEMBERS, &err) < 0)
        fail_msg("cannot start a %d-member etcd cluster: %s", MEMBERS, err.message);
    char url[512] = "etcd://";
    for (size_t m = 0; m < MEMBERS; m++) {
        size_t used = strlen(url);
        snprintf(url + used, sizeof(url) - used, "%s%s", m ? "," : "", members[m].endpoint);
    }
    size_t used = strlen(url);
    snprintf(url + used, sizeof(url) - used, "/members");
    dh_setup_box(d, DH_BOX, url, "StoreWatchTimeoutSec=2s\n");
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_add_app_host(d, "other", NULL, NULL);
    dh_start(d, NULL);

    for (size_t m = 0; m < MEMBERS; m++) {
        dh_served served = dh_wake(d, "demo");
        member_signal(d, m, SIGSTOP);
        printf("member %zu (%s) frozen\n", m, members[m].endpoint);

        uint64_t start = dd_now_ms();
        dh_wake(d, "other");
        uint64_t woken_ms = dd_now_ms() - start;
        printf("  a wake of another host answered in %" PRIu64 " ms\n", woken_ms);
        DH_CHECK(d, woken_ms < CALL_BUDGET_MS + SLACK_MS,
                 "the wake took %" PRIu64 " ms with member %zu frozen: more than the call "
                 "budget (%d ms) allows",
                 woken_ms, m, CALL_BUDGET_MS);

        dh_events_mark(d);
        start = dd_now_ms();
        uint64_t taken = dh_claim_take_for(d, "demo", DH_OTHER_BOX);
        int bound_ms = WATCH_TIMEOUT_SEC * 1000 + CALL_BUDGET_MS + SLACK_MS;
        DH_CHECK(d, dh_event_wait(d, "demo", "retired", bound_ms, NULL),
                 "with member %zu frozen, a reassignment written through the others did not "
                 "retire demo within %d ms: the claim watch stayed on the frozen member",
                 m, bound_ms);
        printf("  the reassignment retired demo %" PRIu64 " ms after it was written\n",
               dd_now_ms() - start);
        DH_CHECK(d, dh_pid_gone(served.pid), "the retired generation's app (pid %d) still runs",
                 (int)served.pid);
        claim after;
        DH_CHECK(d, dh_claim_get(d, "demo", &after) && after.revision == taken,
                 "the daemon wrote over the other box's claim");

        member_signal(d, m, SIGCONT);
        dh_park(d, "other");
        DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
        claim back;
        dh_claim_assigned("demo", DH_BOX, &back);
        dh_claim_put(d, &back);
    }
    dh_stop_and_check_clean(d);
}

static void touch(dh_daemon *d, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    DH_CHECK(d, fd >= 0, "cannot create %s: %s", path, strerror(errno));
    close(fd);
}

/* Waits until the wake holds before step (its hold file is hold), checks
 * that lost_before answers were lost so far, makes the next transaction on
 * demo's claim lose its answer after etcd applied it, and lets the step go
 * on. */
static void lose_the_answer_of(dh_daemon *d, const char *step, const char *hold,
                               const char *claim_key_b64, unsigned lost_before)
{
    char waiting[PATH_MAX + 64];
    snprintf(waiting, sizeof(waiting), "step %s held: waiting for %s", step, hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 20000), "the wake never held before %s", step);
    DH_CHECK(d, tcp_proxy_hold_dropped(lose_one) == lost_before,
             "before %s, the proxies had lost %u answers, not %u", step,
             tcp_proxy_hold_dropped(lose_one), lost_before);
    const char *needles[] = {"/v3/kv/txn", claim_key_b64};
    tcp_proxy_hold_arm(lose_one, needles, 2);
    touch(d, hold);
}

/* A compare-and-swap whose answer is lost after etcd applied it: the store
 * client waits out its share of the call budget on that endpoint and sends
 * the same write to the next, where the compare meets the write itself.
 * The admission and the publication each take such a claim for their own
 * (it carries this daemon's incarnation and the admission's stamp and
 * session), rather than ending the wake as if another box got in. Both
 * endpoints are proxies to one etcd, so whichever the client starts on
 * loses the answer. */
static void test_a_write_whose_answer_was_lost_is_taken_as_landed(void **state)
{
    dh_daemon *d = *state;
    act_error err = {0};
    if (etcd_harness_start(&single, &err) < 0)
        fail_msg("cannot start etcd: %s", err.message);
    lose_one = tcp_proxy_hold_new();
    assert_non_null(lose_one);
    for (size_t i = 0; i < 2; i++) {
        proxies[i] = tcp_proxy_start("127.0.0.1", "127.0.0.1", single.client_port, lose_one, &err);
        if (!proxies[i])
            fail_msg("%s", err.message);
    }
    char url[256];
    snprintf(url, sizeof(url), "etcd://127.0.0.1:%d,127.0.0.1:%d/landed",
             tcp_proxy_port(proxies[0]), tcp_proxy_port(proxies[1]));
    char *key_b64 = etcd_b64_encode("/landed/demo", strlen("/landed/demo"));
    assert_non_null(key_b64);
    dh_setup_box(d, DH_BOX, url, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    char admit_hold[PATH_MAX], publish_hold[PATH_MAX];
    dh_hold_path(d, "admit-go", admit_hold, sizeof(admit_hold));
    dh_hold_path(d, "publish-go", publish_hold, sizeof(publish_hold));
    char env[2 * PATH_MAX + 64];
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_HOLD=admit:%s,publish:%s", admit_hold, publish_hold);
    const char *const extra_env[] = {env, NULL};
    dh_start(d, extra_env);
    claim before;
    dh_claim_assigned("demo", DH_BOX, &before);
    dh_claim_put(d, &before);
    DH_CHECK(d, dh_claim_get(d, "demo", &before), "no claim for demo");

    dh_async *wake = dh_wake_start(d, "demo", 60000);
    lose_the_answer_of(d, "admit", admit_hold, key_b64, 0);
    lose_the_answer_of(d, "publish", publish_hold, key_b64, 1);
    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, dh_reply_ok(reply),
             "a wake whose admission and publication lost their answers "
             "was not served: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, tcp_proxy_hold_dropped(lose_one) == 2,
             "the proxies lost %u answers, not the admission's and the publication's",
             tcp_proxy_hold_dropped(lose_one));
    DH_CHECK(d,
             dh_log_wait(d, "the claim is our admission", 1000) &&
                 dh_log_wait(d, "the claim is our publication", 1000),
             "the daemon did not say it took its own landed writes");
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after), "no claim after the wake");
    DH_CHECK(d,
             strcmp(after.op.phase, "serving") == 0 &&
                 after.holder.session == before.holder.session + 1,
             "the claim says phase %s, session %" PRIu64 "; expected serving after exactly one "
             "admission (session %" PRIu64 ")",
             after.op.phase, after.holder.session, before.holder.session + 1);
    free(key_b64);
    dh_stop_and_check_clean(d);
}

static int teardown(void **state)
{
    int r = dh_fixture_teardown(state);
    for (size_t m = 0; m < MEMBERS; m++) {
        if (members[m].pid)
            kill(members[m].pid, SIGCONT);
        etcd_harness_destroy(&members[m]);
    }
    for (size_t i = 0; i < 2; i++) {
        tcp_proxy_stop(proxies[i]);
        proxies[i] = NULL;
    }
    tcp_proxy_hold_free(lose_one);
    lose_one = NULL;
    etcd_harness_destroy(&single);
    return r;
}

int main(void)
{
    int r = dh_check_can_run("daemon-store-members", DH_STORE_ETCD);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_frozen_member_is_left_for_the_others,
                                        dh_fixture_setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_write_whose_answer_was_lost_is_taken_as_landed,
                                        dh_fixture_setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
