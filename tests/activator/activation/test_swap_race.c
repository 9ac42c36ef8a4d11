/* A swap, or another claim write, racing a wake of a parked host, on the
 * real daemon. The wake is held at a step (ACTIVATOR_TEST_HOLD) while the
 * write lands, so every case hits its window on every run:
 *   - a swap while the connection's wake is between its read and its
 *     admission: the swap is not refused, its pin lands, the wake admits
 *     itself again over it and runs the pin, and the connection is answered;
 *   - an operator's pin written there: the same, without a swap;
 *   - another admission written there (same box, another daemon start):
 *     still refused (claim_changed), nothing runs;
 *   - an operator's pin written between the admission and the gate: that
 *     wake is refused, and the next one, for the same connection, runs the
 *     pin and answers it;
 *   - a swap while the wake has sent its admission: the pin waits for that
 *     wake to serve (its client answered by the old build), then N+1 of the
 *     pin replaces it;
 *   - a swap while a park is being retired: the pinned build wakes after it;
 *   - a stop-first swap whose park is followed at once by a wake: the swap
 *     joins that wake, which runs the pin.
 * On the dir store or a real etcd (argv[1]). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activation.h"

static dh_store_kind store_kind = DH_STORE_DIR;

/* One client connecting to a parked host on a thread of its own: its
 * connection wakes the host, and it waits for the answer meanwhile. */
typedef struct client {
    pthread_t thread;
    int port;
    ah_sample sample;
} client;

static void *client_run(void *arg)
{
    client *c = arg;
    ah_get(c->port, &c->sample);
    return NULL;
}

static void client_start(dh_daemon *d, client *c, int port)
{
    *c = (client){.port = port};
    DH_CHECK(d, pthread_create(&c->thread, NULL, client_run, c) == 0, "cannot start a client");
}

/* Joins the client and checks that build version answered it. */
static void client_answered_by(dh_daemon *d, client *c, const char *version)
{
    pthread_join(c->thread, NULL);
    DH_CHECK(d, c->sample.error == 0, "the connection that woke the host failed at %s: %s",
             c->sample.failed_at, strerror(c->sample.error));
    DH_CHECK(d, strcmp(c->sample.version, version) == 0,
             "the connection that woke the host was answered by %s, expected %s", c->sample.version,
             version);
}

static void touch(dh_daemon *d, const char *path)
{
    FILE *f = fopen(path, "w");
    DH_CHECK(d, f != NULL, "cannot create %s: %s", path, strerror(errno));
    fclose(f);
}

/* web parked, with v2 staged beside the live v1, on a daemon that holds
 * every wake before step until <dir>/<step>-go exists (its path in hold). */
static int start_held(dh_daemon *d, const char *step, rel_identity *v2, char *hold,
                      size_t hold_size)
{
    dh_setup(d, store_kind, NULL);
    int port = dh_add_app_host(d, "web", NULL, NULL);
    ah_stage_variant(d, "web", "v2", false, v2);
    snprintf(hold, hold_size, "%s/%s-go", d->drv.dir, step);
    char env[PATH_MAX + 64];
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_HOLD=%s:%s", step, hold);
    const char *const extra_env[] = {env, NULL};
    dh_start(d, extra_env);
    DH_CHECK(d, dh_wait_state(d, "web", "parked", 10000), "web is not parked after start");
    dh_events_mark(d);
    return port;
}

static void wait_held(dh_daemon *d, const char *step, const char *hold)
{
    char waiting[PATH_MAX + 64];
    snprintf(waiting, sizeof(waiting), "step %s held: waiting for %s", step, hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 10000), "the wake never paused before %s", step);
}

/* The start most cases share: a client's connection wakes the host, and the
 * wake is held at step. Returns the host's port. */
static int hold_a_wake(dh_daemon *d, const char *step, rel_identity *v2, char *hold, size_t size,
                       client *waking)
{
    int port = start_held(d, step, v2, hold, size);
    client_start(d, waking, port);
    wait_held(d, step, hold);
    return port;
}

/* Waits until the claim pins version (the daemon writes it from the loop;
 * this only waits for that write, it times nothing). */
static bool claim_pin_wait(dh_daemon *d, const char *version, int timeout_ms, claim *out)
{
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        if (dh_claim_get(d, "web", out) && out->has_pin && strcmp(out->pin.version, version) == 0)
            return true;
        ah_sleep_ms(10);
    }
    return false;
}

static void swap_ok(dh_daemon *d, dh_async *swap)
{
    json_object *reply = dh_request_finish(d, swap);
    DH_CHECK(d, dh_reply_ok(reply), "the swap: %s", json_object_to_json_string(reply));
    json_object_put(reply);
}

/* The claim pins v2 without a failure and names the generation that serves,
 * which v2 runs and which answers. */
static void check_serves_the_pin(dh_daemon *d, int port, const rel_identity *v2)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "web", &c), "no claim after the swap");
    DH_CHECK(d,
             c.has_pin && strcmp(c.pin.version, "v2") == 0 &&
                 strcmp(c.pin.digest, v2->build_digest) == 0 && c.pin.failure_reason[0] == '\0',
             "the claim pins %s (failure \"%s\"), expected v2 without a failure",
             c.has_pin ? c.pin.version : "(none)", c.pin.failure_reason);
    ah_sample s;
    int r = ah_get(port, &s);
    DH_CHECK(d, r == 0, "a request after the swap failed at %s: %s", s.failed_at, strerror(r));
    DH_CHECK(d, strcmp(s.version, "v2") == 0 && s.generation == c.holder.generation,
             "answered by %s generation %" PRIu64 "; the claim names generation %" PRIu64
             ", expected v2",
             s.version, s.generation, c.holder.generation);
}

static void check_nothing_refused(dh_daemon *d)
{
    dh_events_pump(d, 200);
    DH_CHECK(d,
             dh_events_count(d, "web", "refused") == 0 && dh_events_count(d, "web", "failed") == 0,
             "%zu refusals and %zu failures of web during the race",
             dh_events_count(d, "web", "refused"), dh_events_count(d, "web", "failed"));
}

static void test_swap_between_read_and_admission_serves_the_connection(void **state)
{
    dh_daemon *d = *state;
    rel_identity v2;
    char hold[PATH_MAX];
    client waking;
    int port = hold_a_wake(d, "admit", &v2, hold, sizeof(hold), &waking);

    dh_async *swap =
        dh_request_start(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"web\",\"version\":\"v2\"}");
    /* No admission was sent yet: the pin lands at once, under the wake. */
    claim pinned;
    DH_CHECK(d, claim_pin_wait(d, "v2", 10000, &pinned),
             "the swap did not pin v2 while the wake waited before its admission");
    touch(d, hold);

    client_answered_by(d, &waking, "v2");
    swap_ok(d, swap);
    DH_CHECK(d, dh_log_wait(d, "admitting again on it", 1000),
             "the wake did not admit itself again over the pin");
    check_nothing_refused(d);
    DH_CHECK(d, dh_events_count(d, "web", "exec") == 1,
             "%zu generations started; the wake of the pin is the swap",
             dh_events_count(d, "web", "exec"));
    check_serves_the_pin(d, port, &v2);
    dh_stop_and_check_clean(d);
}

/* What another box's swap of the host, or an operator's tool, writes while
 * a wake is held: a pin of v2 over the claim as it stands. */
static void pin_as_an_operator(dh_daemon *d, const rel_identity *v2)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "web", &c), "no claim while the wake is held");
    c.has_pin = true;
    c.pin = (claim_pin){0};
    snprintf(c.pin.version, sizeof(c.pin.version), "v2");
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", v2->build_digest);
    dh_claim_put(d, &c);
}

static void test_operator_pin_between_read_and_admission_is_admitted_over(void **state)
{
    dh_daemon *d = *state;
    rel_identity v2;
    char hold[PATH_MAX];
    client waking;
    int port = hold_a_wake(d, "admit", &v2, hold, sizeof(hold), &waking);

    pin_as_an_operator(d, &v2);
    touch(d, hold);

    client_answered_by(d, &waking, "v2");
    check_nothing_refused(d);
    check_serves_the_pin(d, port, &v2);
    dh_stop_and_check_clean(d);
}

/* The soak's break at +1612 s: a promote landed between a wake's admission
 * and its gate. The gate refuses the wake (its build is no longer the one
 * the claim chooses), and the connection that woke it is answered by the
 * next wake, which admits again, rather than reset. */
static void test_a_pin_between_admission_and_gate_wakes_again_for_the_connection(void **state)
{
    dh_daemon *d = *state;
    rel_identity v2;
    char hold[PATH_MAX];
    client waking;
    int port = hold_a_wake(d, "gate", &v2, hold, sizeof(hold), &waking);

    /* An operator's pin, written after our admission: it keeps it. */
    pin_as_an_operator(d, &v2);
    touch(d, hold);

    client_answered_by(d, &waking, "v2");
    dh_event refused;
    DH_CHECK(d, dh_event_wait(d, "web", "refused", 10000, &refused),
             "the wake past its admission was not refused: the gate let a build the claim no "
             "longer chooses run");
    DH_CHECK(d, dh_events_count(d, "web", "exec") == 1, "%zu execs, expected the second wake's",
             dh_events_count(d, "web", "exec"));
    check_serves_the_pin(d, port, &v2);
    dh_stop_and_check_clean(d);
}

static void test_another_admission_between_read_and_admission_is_still_refused(void **state)
{
    dh_daemon *d = *state;
    rel_identity v2;
    char hold[PATH_MAX];
    client waking;
    int port = hold_a_wake(d, "admit", &v2, hold, sizeof(hold), &waking);

    /* Another admission on this very box (a daemon start that is not this
     * one): the executor is the same, but the holder's session moved, so
     * every start of ours is fenced and nothing may admit over it. */
    claim c, taken;
    DH_CHECK(d, dh_claim_get(d, "web", &c), "no claim while the wake is held");
    dh_claim_taken_by_other_box(&c, &taken);
    snprintf(taken.holder.box, sizeof(taken.holder.box), "%s", DH_BOX);
    snprintf(taken.op.exec, sizeof(taken.op.exec), "%s", DH_BOX);
    uint64_t taken_revision = dh_claim_put(d, &taken);
    touch(d, hold);

    dh_event refused;
    DH_CHECK(d, dh_event_wait(d, "web", "refused", 10000, &refused), "the wake was not refused");
    DH_CHECK(d, strstr(refused.reason, "claim_changed") != NULL,
             "the wake was refused with %s, expected claim_changed", refused.reason);
    pthread_join(waking.thread, NULL);
    DH_CHECK(d, waking.sample.error != 0,
             "the connection was answered (by %s) though another box admitted itself",
             waking.sample.version);
    DH_CHECK(d, dh_events_count(d, "web", "exec") == 0, "a fenced wake exec'd its build");
    DH_CHECK(d, dh_claim_get(d, "web", &c) && c.revision == taken_revision,
             "the refused wake wrote over the other admission (revision %" PRIu64 " -> %" PRIu64
             ")",
             taken_revision, c.revision);
    /* The next connection is a new wake, which reads and admits again.
     * (Its prepare also runs in the host's lane after the one the refused
     * admission began, so that one has answered before the daemon stops.) */
    ah_sample next;
    int r = ah_get(port, &next);
    DH_CHECK(d, r == 0 && strcmp(next.version, "v1") == 0,
             "the next connection after the refusal was not served by v1 (%s at %s)",
             r ? strerror(r) : next.version, r ? next.failed_at : "answer");
    dh_stop_and_check_clean(d);
}

static void test_swap_after_admission_waits_for_the_wake(void **state)
{
    dh_daemon *d = *state;
    rel_identity v2;
    char hold[PATH_MAX];
    client waking;
    int port = hold_a_wake(d, "restore", &v2, hold, sizeof(hold), &waking);

    dh_async *swap =
        dh_request_start(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"web\",\"version\":\"v2\"}");
    DH_CHECK(
        d,
        dh_log_wait(d, "the swap to v2 waits for the wake in flight to end before it pins", 10000),
        "the swap did not wait for the admitted wake");
    claim c;
    DH_CHECK(d, dh_claim_get(d, "web", &c) && !c.has_pin,
             "the swap pinned %s under an admitted wake, whose gate would refuse it",
             c.pin.version);
    touch(d, hold);

    /* The wake serves what it admitted (v1); then N+1 runs the pin. */
    client_answered_by(d, &waking, "v1");
    swap_ok(d, swap);
    DH_CHECK(d, dh_event_wait(d, "web", "swap.done", 10000, NULL), "no swap.done event");
    check_nothing_refused(d);
    DH_CHECK(d,
             dh_events_count(d, "web", "exec") == 2 && dh_events_count(d, "web", "swap.done") == 1,
             "%zu generations started and %zu swaps done; expected the wake's and N+1, one swap",
             dh_events_count(d, "web", "exec"), dh_events_count(d, "web", "swap.done"));
    check_serves_the_pin(d, port, &v2);
    dh_stop_and_check_clean(d);
}

static void test_swap_during_a_park_wakes_the_pin_after_it(void **state)
{
    dh_daemon *d = *state;
    rel_identity v2;
    char hold[PATH_MAX];
    int port = start_held(d, "failed", &v2, hold, sizeof(hold));
    dh_wake(d, "web");
    dh_park(d, "web");
    wait_held(d, "failed", hold);

    dh_async *swap =
        dh_request_start(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"web\",\"version\":\"v2\"}");
    claim pinned;
    DH_CHECK(d, claim_pin_wait(d, "v2", 10000, &pinned), "the swap did not pin v2 during the park");
    touch(d, hold);

    swap_ok(d, swap);
    DH_CHECK(d, dh_events_count(d, "web", "parked") == 1, "the park did not end parked");
    check_nothing_refused(d);
    check_serves_the_pin(d, port, &v2);
    dh_stop_and_check_clean(d);
}

static void test_stop_first_swap_joins_the_wake_that_followed_the_park(void **state)
{
    dh_daemon *d = *state;
    rel_identity v2;
    char hold[PATH_MAX];
    int port = start_held(d, "failed", &v2, hold, sizeof(hold));
    dh_wake(d, "web");

    dh_async *swap = dh_request_start(
        d, 60000,
        "{\"v\":1,\"op\":\"swap\",\"host\":\"web\",\"version\":\"v2\",\"mode\":\"stop-first\"}");
    wait_held(d, "failed", hold);
    /* A trigger during N's retirement: it wakes the host as soon as N is
     * retired, so the host is waking, not parked, when the park ends. */
    dh_wake_started(d, "web");
    touch(d, hold);

    swap_ok(d, swap);
    check_nothing_refused(d);
    DH_CHECK(d, dh_events_count(d, "web", "exec") == 2,
             "%zu generations started; expected N and the one wake of the pin",
             dh_events_count(d, "web", "exec"));
    check_serves_the_pin(d, port, &v2);
    dh_stop_and_check_clean(d);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "etcd") == 0)
        store_kind = DH_STORE_ETCD;
    int r = dh_check_can_run(store_kind == DH_STORE_ETCD ? "activation-swap-race-etcd"
                                                         : "activation-swap-race-dir",
                             store_kind);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        AH_LOAD_TEST(test_swap_between_read_and_admission_serves_the_connection),
        AH_LOAD_TEST(test_operator_pin_between_read_and_admission_is_admitted_over),
        AH_LOAD_TEST(test_a_pin_between_admission_and_gate_wakes_again_for_the_connection),
        AH_LOAD_TEST(test_another_admission_between_read_and_admission_is_still_refused),
        AH_LOAD_TEST(test_swap_after_admission_waits_for_the_wake),
        AH_LOAD_TEST(test_swap_during_a_park_wakes_the_pin_after_it),
        AH_LOAD_TEST(test_stop_first_swap_joins_the_wake_that_followed_the_park),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
