/* A 3-member etcd cluster on loopback, and a store given all three
 * endpoints: each member in turn is frozen with SIGSTOP (it accepts
 * connections and answers nothing), and the store's calls and its box watch
 * must move to a member that answers, within the call budget.
 *
 * And a store given one follower only, whose leader is frozen: the follower
 * answers "leader changed" until the others elect a new leader, and the
 * store's calls must ride that election out within their budget. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "etcd_harness.h"
#include "store_fixture.h"

#define MEMBERS 3
/* The call budget while a member is frozen: twice the daemon's 5 s. What
 * is tested is that a call rides an election out (another member, another
 * round), not how fast etcd elects: beside a CPU hog, with the sanitized
 * test and three members sharing two CPUs, one election alone has taken
 * over 5 s, while on an idle machine the read below takes about 2.8 s. */
#define ELECTION_BUDGET_MS 10000
static etcd_harness members[MEMBERS];

/* A store of the given members (bitmask) under prefix, attached to event
 * when event is set. */
static claim_store *open_members(unsigned mask, const char *prefix, int timeout_ms, sd_event *event)
{
    char url[512] = "etcd://";
    for (size_t i = 0; i < MEMBERS; i++) {
        if (!(mask & (1u << i)))
            continue;
        size_t used = strlen(url);
        snprintf(url + used, sizeof(url) - used, "%s%s", used > strlen("etcd://") ? "," : "",
                 members[i].endpoint);
    }
    size_t used = strlen(url);
    snprintf(url + used, sizeof(url) - used, "/%s", prefix);
    claims_store_options options = {.timeout_ms = timeout_ms, .watch_timeout_ms = 1000};
    claim_store *store = NULL;
    act_error err = {0};
    if (claims_store_open(url, &options, &store, &err) < 0 ||
        (event && claims_store_attach_event(store, event, &err) < 0))
        fail_msg("cannot open %s: %s", url, err.message);
    return store;
}

/* Every member answers a read again (a thawed member catches up). */
static void wait_all_answer(const char *prefix)
{
    for (size_t i = 0; i < MEMBERS; i++) {
        claim_store *one = open_members(1u << i, prefix, 2000, NULL);
        claim c;
        act_error err = {0};
        int r = -1;
        for (int tries = 0; tries < 100 && r < 0; tries++)
            r = claims_read(one, "h1", &c, &err);
        if (r < 0)
            fail_msg("member %zu does not answer after its thaw: %s", i, err.message);
        claims_store_free(one);
    }
}

/* Writes c over expected; 0 with *revision, as claims_cas. A write whose
 * first attempt timed out may have landed all the same (on a loaded
 * machine a commit can outlast a member's share of the budget): the
 * attempt on the next member then meets that write itself, and the answer
 * is CLAIMS_CHANGED with the claim this write made. The test is the only
 * writer, so that claim (its holder and session) is this write, landed. */
static int write_claim(claim_store *store, const claim *c, uint64_t expected, uint64_t *revision,
                       act_error *err)
{
    claim current = {0};
    int r = claims_cas(store, c->host, expected, c, revision, &current, err);
    if (r == CLAIMS_CHANGED && current.revision > expected &&
        current.holder.session == c->holder.session &&
        strcmp(current.holder.box, c->holder.box) == 0) {
        *revision = current.revision;
        return 0;
    }
    return r;
}

static void a_frozen_member_is_left_by_calls_and_watch(void **state)
{
    const char *prefix = "frozen";
    sd_event *event = NULL;
    assert_int_equal(sd_event_new(&event), 0);
    /* The box's store: every member. A frozen leader stops every write
     * until the others elect a new one (etcd's election timeout, 1 s),
     * which the budget must outlast. */
    claim_store *store = open_members(0x7, prefix, ELECTION_BUDGET_MS, event);
    act_error err = {0};
    claim c = fixture_claim("h1", 1); /* b1 holds and runs it */
    uint64_t revision = 0;
    assert_int_equal(claims_cas(store, "h1", 0, &c, &revision, NULL, &err), 0);
    fixture_seen seen = {0};
    claims_watch *watch = NULL;
    uint64_t first_from = revision + 1;
    assert_int_equal(
        claims_watch_box_start(store, "b1", first_from, fixture_seen_on_watch, &seen, &watch, &err),
        0);
    for (size_t victim = 0; victim < MEMBERS; victim++) {
        assert_int_equal(kill(members[victim].pid, SIGSTOP), 0);
        /* The box's own write answers within its budget. */
        c.holder.session++;
        uint64_t start = act_now_usec();
        int r = write_claim(store, &c, revision, &revision, &err);
        if (r != 0)
            fail_msg("with member %zu frozen, a write failed after %" PRIu64 " ms: %s", victim,
                     (act_now_usec() - start) / 1000, err.message);
        /* Another box's write, through the members that answer: the watch
         * tells it, wherever it was. */
        claim_store *other = open_members(0x7 & ~(1u << victim), prefix, ELECTION_BUDGET_MS, NULL);
        c.holder.session++;
        assert_int_equal(write_claim(other, &c, revision, &revision, &err), 0);
        claims_store_free(other);
        for (int rounds = 0; rounds < 100; rounds++) {
            fixture_seen_run(event, &seen, 0, 100);
            if (seen.error) {
                /* It ended to move: start it again where calls are answered,
                 * from where it was, as the daemon's heal does. */
                claims_watch_free(watch);
                uint64_t from = seen.n ? seen.changes[seen.n - 1].revision + 1 : first_from;
                seen.error = 0;
                assert_int_equal(claims_watch_box_start(store, "b1", from, fixture_seen_on_watch,
                                                        &seen, &watch, &err),
                                 0);
            }
            if (seen.n && seen.changes[seen.n - 1].revision == revision)
                break;
        }
        if (!seen.n || seen.changes[seen.n - 1].revision != revision)
            fail_msg("with member %zu frozen, the watch never told revision %" PRIu64, victim,
                     revision);
        assert_int_equal(kill(members[victim].pid, SIGCONT), 0);
        wait_all_answer(prefix);
    }
    claims_watch_free(watch);
    claims_store_free(store);
    sd_event_unref(event);
}

/* The member that leads, by its own /metrics; MEMBERS when none says so. */
static size_t leader(void)
{
    for (size_t i = 0; i < MEMBERS; i++) {
        char *text = etcd_harness_metrics(&members[i]);
        double is_leader = text ? etcd_harness_metric(text, "etcd_server_is_leader", NULL) : 0;
        free(text);
        if (is_leader == 1)
            return i;
    }
    return MEMBERS;
}

static void an_election_is_ridden_out(void **state)
{
    (void)state;
    const char *prefix = "election";
    size_t led = MEMBERS;
    for (int tries = 0; tries < 100 && led == MEMBERS; tries++) {
        led = leader();
        if (led == MEMBERS)
            usleep(50 * 1000); /* a poll, not a wait for speed: at most 5 s */
    }
    if (led == MEMBERS)
        fail_msg("no member says it leads");
    size_t follower = (led + 1) % MEMBERS;
    claim_store *store = open_members(1u << follower, prefix, ELECTION_BUDGET_MS, NULL);
    act_error err = {0};
    claim c = fixture_claim("h1", 1);
    uint64_t revision = 0;
    assert_int_equal(claims_cas(store, "h1", 0, &c, &revision, NULL, &err), 0);

    char *text = etcd_harness_metrics(&members[follower]);
    double changes_before =
        text ? etcd_harness_metric(text, "etcd_server_leader_changes_seen_total", NULL) : -1;
    free(text);
    assert_int_equal(kill(members[led].pid, SIGSTOP), 0);
    /* Sent at once, both meet the election: the follower's read waits on
     * the frozen leader until a new one is elected, then answers "leader
     * changed" (Unavailable), and so does its forwarded write. */
    uint64_t start = act_now_usec();
    claim read = {0};
    int r = claims_read(store, "h1", &read, &err);
    if (r != 1)
        fail_msg("with the leader (member %zu) frozen, a read from member %zu failed after "
                 "%" PRIu64 " ms: %s",
                 led, follower, (act_now_usec() - start) / 1000, err.message);
    printf("read through the election in %" PRIu64 " ms\n", (act_now_usec() - start) / 1000);
    c.holder.session++;
    start = act_now_usec();
    r = write_claim(store, &c, revision, &revision, &err);
    if (r != 0)
        fail_msg("with the leader (member %zu) frozen, a write through member %zu failed after "
                 "%" PRIu64 " ms: %s",
                 led, follower, (act_now_usec() - start) / 1000, err.message);
    text = etcd_harness_metrics(&members[follower]);
    double changes_after =
        text ? etcd_harness_metric(text, "etcd_server_leader_changes_seen_total", NULL) : -1;
    free(text);
    assert_true(changes_after > changes_before);
    assert_int_equal(kill(members[led].pid, SIGCONT), 0);
    wait_all_answer(prefix);
    claims_store_free(store);
}

int main(void)
{
    if (!etcd_harness_available())
        return 77;
    act_error err = {0};
    if (etcd_harness_start_cluster(members, MEMBERS, &err) < 0) {
        fprintf(stderr, "cannot start a %d-member etcd cluster: %s\n", MEMBERS, err.message);
        for (size_t i = 0; i < MEMBERS; i++)
            etcd_harness_destroy(&members[i]);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_frozen_member_is_left_by_calls_and_watch),
        cmocka_unit_test(an_election_is_ridden_out),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < MEMBERS; i++) {
        if (members[i].pid > 0)
            kill(members[i].pid, SIGCONT);
        etcd_harness_destroy(&members[i]);
    }
    return r;
}
