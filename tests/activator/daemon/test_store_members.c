/* A daemon on a 3-member etcd cluster on loopback (Store= names all three),
 * with each member in turn frozen by SIGSTOP under it while it serves: a
 * member that hangs rather than refuses. The daemon's calls must leave it
 * for another member within the call budget, so that a wake of another host
 * is admitted; and its claim watch must leave it too, so that a
 * reassignment written through the other members retires the host it
 * serves within StoreWatchTimeoutSec= and a call budget. The frozen member
 * is continued before the next round. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define MEMBERS 3
#define WATCH_TIMEOUT_SEC 2
/* The daemon's call budget (claims_store_options.timeout_ms's default). */
#define CALL_BUDGET_MS 5000
/* What a wake takes once its calls answer, and what the retirement takes
 * once the claim is heard: far below a second on any machine of this kind;
 * the margin keeps a loaded machine from failing the test. */
#define SLACK_MS 4000

static etcd_harness members[MEMBERS];

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

static int teardown(void **state)
{
    int r = dh_fixture_teardown(state);
    for (size_t m = 0; m < MEMBERS; m++) {
        if (members[m].pid)
            kill(members[m].pid, SIGCONT);
        etcd_harness_destroy(&members[m]);
    }
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
