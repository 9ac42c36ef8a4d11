/* The pipeline's pure policy parts: attempt and failure-park backoff, the
 * failure streak, the per-host token bucket, the box-wide cap with FIFO wake,
 * and the reason table. Time is simulated: these modules take it as input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "activator/pipeline/backoff.h"
#include "activator/pipeline/budget.h"
#include "activator/pipeline/reason.h"
#include "common/cleanup.h"

#define MSEC 1000ULL
#define SEC 1000000ULL

static void attempt_backoff_doubles_from_the_unit(void **state)
{
    assert_int_equal(pl_attempt_backoff_usec(0, SEC), 0);
    assert_int_equal(pl_attempt_backoff_usec(1, SEC), 1 * SEC);
    assert_int_equal(pl_attempt_backoff_usec(2, SEC), 2 * SEC);
    assert_int_equal(pl_attempt_backoff_usec(3, SEC), 4 * SEC);
    assert_int_equal(pl_attempt_backoff_usec(4, SEC), 8 * SEC);
    assert_int_equal(pl_attempt_backoff_usec(3, 20 * MSEC), 80 * MSEC);
    /* Saturates instead of wrapping to a short wait. */
    assert_true(pl_attempt_backoff_usec(200, SEC) == UINT64_MAX);
}

static void failure_park_delay_follows_25ms_doubling_capped_at_30s(void **state)
{
    const uint64_t base = 25 * MSEC, cap = 30 * SEC;
    assert_int_equal(pl_failure_park_delay_usec(0, base, cap), 0);
    assert_int_equal(pl_failure_park_delay_usec(1, base, cap), 25 * MSEC);
    assert_int_equal(pl_failure_park_delay_usec(2, base, cap), 50 * MSEC);
    assert_int_equal(pl_failure_park_delay_usec(3, base, cap), 100 * MSEC);
    assert_int_equal(pl_failure_park_delay_usec(11, base, cap), 25600 * MSEC);
    assert_int_equal(pl_failure_park_delay_usec(12, base, cap), cap);
    assert_int_equal(pl_failure_park_delay_usec(4000000000u, base, cap), cap);
}

/* A replica's restarts in a row wait ReplicateRestartSec= doubled each
 * time, up to the cap, whatever the unit. */
static void doubling_delays_start_at_the_unit_and_stop_at_the_cap(void **state)
{
    assert_int_equal(pl_doubling_delay_usec(0, SEC, 30 * SEC), 0);
    assert_int_equal(pl_doubling_delay_usec(1, SEC, 30 * SEC), 1 * SEC);
    assert_int_equal(pl_doubling_delay_usec(5, SEC, 30 * SEC), 16 * SEC);
    assert_int_equal(pl_doubling_delay_usec(6, SEC, 30 * SEC), 30 * SEC);
    assert_int_equal(pl_doubling_delay_usec(3, 10 * MSEC, 30 * SEC), 40 * MSEC);
    assert_int_equal(pl_doubling_delay_usec(2, 20 * SEC, 30 * SEC), 30 * SEC);
    assert_int_equal(pl_doubling_delay_usec(4000000000u, 10 * MSEC, 30 * SEC), 30 * SEC);
}

static void the_failure_streak_is_reset_by_idle_and_by_serving_long(void **state)
{
    assert_int_equal(pl_failure_streak_next(0, PL_PARK_FAILURE, false), 1);
    assert_int_equal(pl_failure_streak_next(3, PL_PARK_FAILURE, false), 4);
    assert_int_equal(pl_failure_streak_next(3, PL_PARK_FAILURE, true), 1);
    assert_int_equal(pl_failure_streak_next(3, PL_PARK_IDLE, false), 0);
    assert_int_equal(pl_failure_streak_next(3, PL_PARK_REQUEST, false), 3);
    assert_int_equal(pl_failure_streak_next(3, PL_PARK_CLAIM_LOST, false), 3);
    assert_string_equal(pl_park_cause_to_string(PL_PARK_CLAIM_LOST), "claim_lost");
}

static void token_bucket_allows_one_second_of_burst_then_the_rate(void **state)
{
    pl_token_bucket bucket;
    uint64_t now = 1000 * SEC;
    assert_int_equal(pl_token_bucket_init(&bucket, 20, now, NULL), 0);
    assert_int_equal(pl_token_bucket_available(&bucket, now), 20);

    /* The burst: twenty at once, not twenty-one. */
    for (int i = 0; i < 20; i++)
        assert_int_equal(pl_token_bucket_take(&bucket, now), 0);
    uint64_t wait = pl_token_bucket_take(&bucket, now);
    assert_int_equal(wait, 50 * MSEC);
    assert_int_equal(pl_token_bucket_take(&bucket, now + wait - 1), 1);
    assert_int_equal(pl_token_bucket_take(&bucket, now + wait), 0);

    /* The rate: asking every millisecond for ten seconds yields 20 a second. */
    now += wait;
    unsigned granted = 0;
    for (uint64_t t = now; t < now + 10 * SEC; t += MSEC)
        granted += pl_token_bucket_take(&bucket, t) == 0;
    assert_true(granted >= 199 && granted <= 201);

    /* A long quiet spell refills to the burst and no further. */
    now += 3600 * SEC;
    assert_int_equal(pl_token_bucket_available(&bucket, now), 20);
    for (int i = 0; i < 20; i++)
        assert_int_equal(pl_token_bucket_take(&bucket, now), 0);
    assert_true(pl_token_bucket_take(&bucket, now) > 0);
}

static void token_bucket_below_one_per_second_still_allows_one_start(void **state)
{
    pl_token_bucket bucket;
    assert_int_equal(pl_token_bucket_init(&bucket, 0.2, 0, NULL), 0);
    assert_int_equal(pl_token_bucket_take(&bucket, 0), 0);
    assert_int_equal(pl_token_bucket_take(&bucket, 0), 5 * SEC);
    assert_int_equal(pl_token_bucket_take(&bucket, 5 * SEC), 0);
}

static void token_bucket_refuses_bad_rates(void **state)
{
    pl_token_bucket bucket;
    const double bad[] = {0, -1, 2e6, __builtin_nan(""), __builtin_inf()};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        act_error err = {0};
        assert_int_equal(pl_token_bucket_init(&bucket, bad[i], 0, &err), -EINVAL);
        assert_non_null(strstr(err.message, "start rate"));
    }
}

typedef struct grant_log {
    int order[8];
    int n;
} grant_log;

typedef struct test_waiter {
    pl_start_waiter waiter;
    int id;
    grant_log *log;
} test_waiter;

static void record_grant(pl_start_waiter *waiter, void *userdata)
{
    test_waiter *self = userdata;
    self->log->order[self->log->n++] = self->id;
}

static void start_cap_holds_over_the_limit_and_wakes_in_fifo_order(void **state)
{
    pl_start_cap cap;
    grant_log log = {0};
    test_waiter waiters[6];
    assert_int_equal(pl_start_cap_init(&cap, 2, NULL), 0);
    for (int i = 0; i < 6; i++)
        waiters[i] = (test_waiter){.id = i, .log = &log};

    assert_true(pl_start_cap_acquire(&cap, &waiters[0].waiter, record_grant, &waiters[0]));
    assert_true(pl_start_cap_acquire(&cap, &waiters[1].waiter, record_grant, &waiters[1]));
    for (int i = 2; i < 6; i++)
        assert_false(pl_start_cap_acquire(&cap, &waiters[i].waiter, record_grant, &waiters[i]));
    assert_int_equal(cap.in_flight, 2);
    assert_int_equal(cap.held, 4);

    /* A held start that gives up leaves the queue without a grant. */
    pl_start_cap_withdraw(&cap, &waiters[3].waiter);
    assert_int_equal(cap.held, 3);
    pl_start_cap_withdraw(&cap, &waiters[3].waiter);
    assert_int_equal(cap.held, 3);

    for (int i = 0; i < 3; i++)
        pl_start_cap_release(&cap);
    assert_int_equal(log.n, 3);
    assert_int_equal(log.order[0], 2);
    assert_int_equal(log.order[1], 4);
    assert_int_equal(log.order[2], 5);
    assert_int_equal(cap.in_flight, 2);
    assert_int_equal(cap.held, 0);

    /* With nobody held, releases free slots, and a newcomer gets one. */
    pl_start_cap_release(&cap);
    assert_int_equal(cap.in_flight, 1);
    assert_true(pl_start_cap_acquire(&cap, &waiters[3].waiter, record_grant, &waiters[3]));
    pl_start_cap_release(&cap);
    pl_start_cap_release(&cap);
    pl_start_cap_release(&cap);
    assert_int_equal(cap.in_flight, 0);
}

static void a_newcomer_does_not_jump_held_starts(void **state)
{
    pl_start_cap cap;
    grant_log log = {0};
    test_waiter waiters[3];
    assert_int_equal(pl_start_cap_init(&cap, 1, NULL), 0);
    for (int i = 0; i < 3; i++)
        waiters[i] = (test_waiter){.id = i, .log = &log};
    assert_true(pl_start_cap_acquire(&cap, &waiters[0].waiter, record_grant, &waiters[0]));
    assert_false(pl_start_cap_acquire(&cap, &waiters[1].waiter, record_grant, &waiters[1]));
    pl_start_cap_release(&cap); /* goes to 1 */
    assert_false(pl_start_cap_acquire(&cap, &waiters[2].waiter, record_grant, &waiters[2]));
    assert_int_equal(log.n, 1);
    assert_int_equal(log.order[0], 1);
    act_error err = {0};
    assert_int_equal(pl_start_cap_init(&cap, 0, &err), -EINVAL);
    assert_non_null(strstr(err.message, "use 1 or more"));
}

/* MaxConcurrentStarts= changed at runtime: raised, the held starts go at
 * once in their order; lowered, the starts in flight finish and nothing is
 * granted until they are below the new limit. */
static void the_cap_limit_changes_while_starts_run(void **state)
{
    pl_start_cap cap;
    grant_log log = {0};
    test_waiter waiters[6];
    assert_int_equal(pl_start_cap_init(&cap, 1, NULL), 0);
    for (int i = 0; i < 6; i++)
        waiters[i] = (test_waiter){.id = i, .log = &log};
    assert_true(pl_start_cap_acquire(&cap, &waiters[0].waiter, record_grant, &waiters[0]));
    for (int i = 1; i < 6; i++)
        assert_false(pl_start_cap_acquire(&cap, &waiters[i].waiter, record_grant, &waiters[i]));

    assert_int_equal(pl_start_cap_set_limit(&cap, 3, NULL), 0);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.order[0], 1);
    assert_int_equal(log.order[1], 2);
    assert_int_equal(cap.in_flight, 3);
    assert_int_equal(cap.held, 3);

    assert_int_equal(pl_start_cap_set_limit(&cap, 1, NULL), 0);
    pl_start_cap_release(&cap);
    pl_start_cap_release(&cap);
    assert_int_equal(log.n, 2);
    assert_int_equal(cap.in_flight, 1);
    pl_start_cap_release(&cap); /* below the limit now: passed to 3 */
    assert_int_equal(log.n, 3);
    assert_int_equal(log.order[2], 3);
    assert_int_equal(cap.in_flight, 1);

    act_error err = {0};
    assert_int_equal(pl_start_cap_set_limit(&cap, 0, &err), -EINVAL);
    assert_int_equal(cap.limit, 1);
    pl_start_cap_withdraw(&cap, &waiters[4].waiter);
    pl_start_cap_withdraw(&cap, &waiters[5].waiter);
    pl_start_cap_release(&cap);
    assert_int_equal(cap.in_flight, 0);
}

static void reasons_round_trip_and_follow_their_table(void **state)
{
    const char *expected[] = {"not_owner",    "wrong_phase",   "unproven_stop",   "claim_changed",
                              "pin_mismatch", "held_mismatch", "digest_mismatch", "restore_failed",
                              "exec_failed",  "ready_timeout", "publish_lost",    "budget",
                              "store_unavailable", "unhealthy", "watchdog"};
    for (size_t i = 0; i < ARRAY_SIZE(expected); i++) {
        int reason = pl_reason_from_string(expected[i]);
        assert_true(reason > 0);
        assert_string_equal(pl_reason_to_string(reason), expected[i]);
    }
    for (int r = 0; r < _PL_REASON_MAX; r++) {
        assert_int_equal(pl_reason_from_string(pl_reason_to_string(r)), r);
        /* A refusal is never retried. */
        if (pl_reason_is_refusal(r))
            assert_false(pl_reason_is_retryable(r));
    }
    assert_int_equal(pl_reason_from_string("bogus"), -EINVAL);
    assert_int_equal(pl_reason_from_string(NULL), -EINVAL);
    assert_string_equal(pl_reason_to_string(_PL_REASON_MAX), "unknown");

    /* Exactly the failures of a start that ran are retried. */
    int retryable[_PL_REASON_MAX] = {0};
    retryable[PL_REASON_EXEC_FAILED] = retryable[PL_REASON_READY_TIMEOUT] =
        retryable[PL_REASON_CRASHED] = 1;
    for (int r = 0; r < _PL_REASON_MAX; r++)
        assert_int_equal(pl_reason_is_retryable(r), retryable[r]);
    assert_false(pl_reason_is_retryable(PL_REASON_PUBLISH_LOST));
    assert_false(pl_reason_blames_build(PL_REASON_DIGEST_MISMATCH));
    /* An unreachable store refuses: nothing may be admitted without it. */
    assert_true(pl_reason_is_refusal(PL_REASON_STORE_UNAVAILABLE));
    assert_true(pl_reason_blames_build(PL_REASON_READY_TIMEOUT));
    /* A missed watchdog is the build's own, as a crash is. */
    assert_true(pl_reason_blames_build(PL_REASON_WATCHDOG));
    assert_false(pl_reason_is_refusal(PL_REASON_WATCHDOG));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attempt_backoff_doubles_from_the_unit),
        cmocka_unit_test(failure_park_delay_follows_25ms_doubling_capped_at_30s),
        cmocka_unit_test(doubling_delays_start_at_the_unit_and_stop_at_the_cap),
        cmocka_unit_test(the_failure_streak_is_reset_by_idle_and_by_serving_long),
        cmocka_unit_test(token_bucket_allows_one_second_of_burst_then_the_rate),
        cmocka_unit_test(token_bucket_below_one_per_second_still_allows_one_start),
        cmocka_unit_test(token_bucket_refuses_bad_rates),
        cmocka_unit_test(start_cap_holds_over_the_limit_and_wakes_in_fifo_order),
        cmocka_unit_test(a_newcomer_does_not_jump_held_starts),
        cmocka_unit_test(the_cap_limit_changes_while_starts_run),
        cmocka_unit_test(reasons_round_trip_and_follow_their_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
