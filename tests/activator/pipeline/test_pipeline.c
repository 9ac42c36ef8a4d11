/* The wake pipeline on a real sd-event loop, with scripted operations.
 *
 * Backoff units are milliseconds here instead of seconds; delays are checked
 * against the unit with a tolerance, never against wall-clock constants. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "activator/pipeline/pipeline.h"
#include "common/cleanup.h"
#include "fake-ops.h"
#include "fixture.h"

static void happy_path_runs_every_step_in_order(void **state)
{
    fixture *f = *state;
    /* Some steps complete later from the loop, the rest synchronously. */
    f->fake.delay_usec[PL_STEP_ADMIT] = 2 * MSEC;
    f->fake.delay_usec[PL_STEP_READY] = 5 * MSEC;
    f->fake.delay_usec[PL_STEP_PUBLISH] = 1 * MSEC;
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);

    const pl_step expected[] = {
        PL_STEP_READ,        PL_STEP_ADMIT,     PL_STEP_RESTORE, PL_STEP_RESERVE,
        PL_STEP_MATERIALIZE, PL_STEP_PREPARE,   PL_STEP_GATE,    PL_STEP_EXEC,
        PL_STEP_READY,       PL_STEP_REPLICATE, PL_STEP_PUBLISH, PL_STEP_HEALTHY,
    };
    assert_int_equal(f->fake.log_len, ARRAY_SIZE(expected));
    for (size_t i = 0; i < ARRAY_SIZE(expected); i++)
        assert_string_equal(pl_step_to_string(f->fake.log[i]), pl_step_to_string(expected[i]));
    assert_int_equal(result.count, 1);
    assert_int_equal(result.kind, PL_WAKE_SERVING);
    assert_int_equal(result.reason, PL_REASON_NONE);
    assert_int_equal(result.attempts, 1);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 0);

    /* The milestones come in pipeline order. */
    const pl_wake_event_type milestones[] = {PL_WAKE_EVENT_WAKING,    PL_WAKE_EVENT_ADMITTED,
                                             PL_WAKE_EVENT_EXECUTED,  PL_WAKE_EVENT_READY,
                                             PL_WAKE_EVENT_PUBLISHED, PL_WAKE_EVENT_SERVING};
    int last = -1;
    for (size_t i = 0; i < ARRAY_SIZE(milestones); i++) {
        int at = fake_find_event(&f->fake, milestones[i], 0);
        assert_true(at > last);
        last = at;
    }
    /* A serving host does not start a second wake. */
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_WARM, fake_on_done, &result),
                     PL_WAKE_ALREADY_SERVING);
}

typedef struct refusal_case {
    pl_step step;
    pl_reason reason;
} refusal_case;

static void every_refusal_stops_before_exec_and_is_not_retried(void **state)
{
    fixture *f = *state;
    const refusal_case cases[] = {
        {PL_STEP_READ, PL_REASON_NOT_OWNER},          {PL_STEP_READ, PL_REASON_WRONG_PHASE},
        {PL_STEP_ADMIT, PL_REASON_CLAIM_CHANGED},     {PL_STEP_MATERIALIZE, PL_REASON_NOT_STAGED},
        {PL_STEP_PREPARE, PL_REASON_PIN_MISMATCH},    {PL_STEP_PREPARE, PL_REASON_HELD_MISMATCH},
        {PL_STEP_PREPARE, PL_REASON_DIGEST_MISMATCH}, {PL_STEP_GATE, PL_REASON_NOT_OWNER},
        {PL_STEP_GATE, PL_REASON_CLAIM_CHANGED},      {PL_STEP_GATE, PL_REASON_PIN_MISMATCH},
        {PL_STEP_GATE, PL_REASON_HELD_MISMATCH},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        fake_ops_init(&f->fake, f->loop);
        for (unsigned call = 0; call < FAKE_MAX_CALLS; call++)
            f->fake.outcome[cases[i].step][call] = cases[i].reason;
        make_host(f);
        fake_result result = {0};
        wake_and_wait(f, &result);
        fake_run_for(f->loop, 100); /* long enough for a retry at 20 ms to show */

        assert_int_equal(result.count, 1);
        assert_int_equal(result.kind, PL_WAKE_REFUSED);
        assert_string_equal(pl_reason_to_string(result.reason),
                            pl_reason_to_string(cases[i].reason));
        assert_int_equal(result.step, cases[i].step);
        assert_non_null(strstr(result.message, pl_reason_to_string(cases[i].reason)));
        assert_int_equal(f->fake.calls[PL_STEP_EXEC], 0);
        assert_true(f->fake.calls[PL_STEP_RESERVE] <= 1);
        assert_int_equal(f->fake.calls[cases[i].step], 1);
        assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_BACKOFF), 0);
        assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_REFUSED), 1);
        /* What an attempt reserved is retired, and never as the build's
         * failure. */
        assert_int_equal(f->fake.calls[PL_STEP_FAILED], f->fake.calls[PL_STEP_RESERVE]);
        if (f->fake.calls[PL_STEP_FAILED])
            assert_false(f->fake.retirements[0].record_attempt);
        assert_int_equal(pl_host_get_state(f->host), PL_HOST_PARKED);
        assert_int_equal(pl_host_failure_streak(f->host), 0);
        assert_int_equal(pl_host_free(f->host), 0);
        f->host = NULL;
    }
}

static void ready_timeout_is_retried_with_doubling_backoff_then_given_up(void **state)
{
    fixture *f = *state;
    f->config.max_starts = 5;
    /* ready never answers: the pipeline's own window must close it. */
    f->fake.hang[PL_STEP_READY] = true;
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);

    assert_int_equal(result.kind, PL_WAKE_FAILED);
    assert_int_equal(result.reason, PL_REASON_READY_TIMEOUT);
    assert_int_equal(result.attempts, 5);
    assert_non_null(strstr(result.message, "gave up after 5 starts"));
    assert_int_equal(f->fake.calls[PL_STEP_READ], 1);
    assert_int_equal(f->fake.calls[PL_STEP_ADMIT], 1);
    assert_int_equal(f->fake.calls[PL_STEP_RESTORE], 1);
    assert_int_equal(f->fake.calls[PL_STEP_EXEC], 5);
    assert_int_equal(f->fake.abandoned, 5);
    assert_int_equal(f->fake.calls[PL_STEP_PUBLISH], 0);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 5);
    for (unsigned i = 0; i < 5; i++) {
        assert_int_equal(f->fake.retirements[i].attempt, i + 1);
        assert_int_equal(f->fake.retirements[i].cause, PL_RETIRE_ATTEMPT);
        assert_int_equal(f->fake.retirements[i].reason, PL_REASON_READY_TIMEOUT);
        assert_true(f->fake.retirements[i].record_attempt);
        assert_true(f->fake.retirements[i].exec_started);
    }

    /* Four waits, doubling from the unit; each measured from the BACKOFF
     * event to the next reserve, never shorter than asked and not much
     * longer. */
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_BACKOFF), 4);
    uint64_t measured[4];
    for (unsigned n = 0; n < 4; n++) {
        const fake_event *backoff =
            &f->fake.events[fake_find_event(&f->fake, PL_WAKE_EVENT_BACKOFF, n)];
        uint64_t unit = f->config.backoff_unit_usec;
        assert_int_equal(backoff->delay_usec, unit << n);
        int next = -1;
        for (unsigned i = (unsigned)fake_find_event(&f->fake, PL_WAKE_EVENT_BACKOFF, n);
             i < f->fake.n_events; i++)
            if (f->fake.events[i].type == PL_WAKE_EVENT_STEP &&
                f->fake.events[i].step == PL_STEP_RESERVE) {
                next = (int)i;
                break;
            }
        assert_true(next > 0);
        measured[n] = f->fake.events[next].at_usec - backoff->at_usec;
        assert_true(measured[n] + 500 >= backoff->delay_usec);
        assert_true(measured[n] < backoff->delay_usec + 5 * unit);
    }
    /* The spacing itself doubles (within tolerance). */
    for (unsigned n = 1; n < 4; n++) {
        double ratio = (double)measured[n] / (double)measured[n - 1];
        assert_true(ratio > 1.3 && ratio < 3.0);
    }
    /* Giving up is a failure park: the next wake waits its backoff. */
    assert_int_equal(pl_host_failure_streak(f->host), 1);
}

/* WakeTimeoutSec= ends the wake where the backoff would run past it, long
 * before MaxStarts=; every window ends within it. Timing only makes the
 * count smaller on a slow machine. */
static void the_wake_timeout_ends_the_attempts(void **state)
{
    fixture *f = *state;
    f->config.max_starts = 5;
    f->config.wake_timeout_usec = 200 * MSEC;
    f->fake.hang[PL_STEP_READY] = true;
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.kind, PL_WAKE_FAILED);
    assert_int_equal(result.reason, PL_REASON_READY_TIMEOUT);
    /* 30 ms windows, backoffs of 20, 40, 80 ms: the third backoff ends past
     * 200 ms. */
    assert_true(result.attempts >= 1 && result.attempts <= 3);
    assert_non_null(strstr(result.message, "no further start, as WakeTimeoutSec (200 ms)"));
}

static unsigned fallback_failures;

/* The attempt's build has a fallback; its failure asks for the next
 * attempt at once (what the daemon does for a failed pin). */
static void as_a_pin_with_a_fallback(fake_ops *fake, pl_wake *wake, pl_step step)
{
    if (step == PL_STEP_PREPARE && pl_wake_attempt(wake) == 1)
        pl_wake_keep_room_for_fallback(wake);
    if (step == PL_STEP_FAILED && fallback_failures++ == 0)
        pl_wake_next_attempt_at_once(wake);
}

static void a_pin_leaves_its_fallback_a_window(void **state)
{
    fixture *f = *state;
    f->config.max_starts = 2;
    f->config.ready_timeout_usec = 30000 * MSEC;
    f->config.wake_timeout_usec = 400 * MSEC;
    f->fake.hang[PL_STEP_READY] = true;
    fallback_failures = 0;
    f->fake.on_call = as_a_pin_with_a_fallback;
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.attempts, 2);
    /* No backoff between the pin and its fallback. */
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_BACKOFF), 0);
    /* The pin's window was half the bound (min(ReadyTimeoutSec=, 400 / 2));
     * the fallback had the rest. Neither had ReadyTimeoutSec='s 30 s. */
    int first = fake_find_event(&f->fake, PL_WAKE_EVENT_FAILED, 0);
    int second = fake_find_event(&f->fake, PL_WAKE_EVENT_FAILED, 1);
    assert_true(first >= 0 && second > first);
    uint64_t began = f->fake.events[0].at_usec;
    assert_true(f->fake.events[first].at_usec - began < 400 * MSEC);
    assert_true(f->fake.events[second].at_usec - began >= 400 * MSEC);
    assert_non_null(strstr(result.message, "cut short by WakeTimeoutSec"));
}

static void a_crash_before_ready_is_retried_and_can_then_serve(void **state)
{
    fixture *f = *state;
    f->fake.outcome[PL_STEP_READY][0] = PL_REASON_CRASHED;
    f->fake.outcome[PL_STEP_EXEC][1] = PL_REASON_EXEC_FAILED;
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.kind, PL_WAKE_SERVING);
    assert_int_equal(result.attempts, 3);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 2);
    assert_true(f->fake.retirements[0].exec_started);
    assert_false(f->fake.retirements[1].exec_started);
    assert_true(f->fake.retirements[1].record_attempt);
    assert_int_equal(f->fake.calls[PL_STEP_RESTORE], 1);
    assert_int_equal(f->fake.calls[PL_STEP_ADMIT], 1);
}

static void a_gate_refusal_records_no_failed_attempt(void **state)
{
    fixture *f = *state;
    /* Even a reason that would be retried elsewhere ends the wake at the
     * gate. */
    const pl_reason reasons[] = {PL_REASON_NOT_OWNER, PL_REASON_STORE_ERROR, PL_REASON_EXEC_FAILED};
    for (size_t i = 0; i < ARRAY_SIZE(reasons); i++) {
        fake_ops_init(&f->fake, f->loop);
        f->fake.outcome[PL_STEP_GATE][0] = reasons[i];
        make_host(f);
        fake_result result = {0};
        wake_and_wait(f, &result);
        fake_run_for(f->loop, 100);
        assert_int_equal(result.kind, PL_WAKE_REFUSED);
        assert_int_equal(result.reason, reasons[i]);
        assert_int_equal(result.step, PL_STEP_GATE);
        assert_int_equal(f->fake.calls[PL_STEP_EXEC], 0);
        assert_int_equal(f->fake.calls[PL_STEP_GATE], 1);
        assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
        assert_false(f->fake.retirements[0].record_attempt);
        assert_false(f->fake.retirements[0].exec_started);
        assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_FAILED), 0);
        assert_int_equal(pl_host_failure_streak(f->host), 0);
        assert_int_equal(pl_host_free(f->host), 0);
        f->host = NULL;
    }
}

static void a_failure_after_ready_is_never_retried(void **state)
{
    fixture *f = *state;
    const refusal_case cases[] = {
        {PL_STEP_REPLICATE, PL_REASON_REPLICATE_FAILED},
        {PL_STEP_PUBLISH, PL_REASON_PUBLISH_LOST},
        {PL_STEP_HEALTHY, PL_REASON_UNHEALTHY},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        fake_ops_init(&f->fake, f->loop);
        f->fake.outcome[cases[i].step][0] = cases[i].reason;
        make_host(f);
        fake_result result = {0};
        wake_and_wait(f, &result);
        fake_run_for(f->loop, 100);
        assert_int_equal(result.kind, PL_WAKE_FAILED);
        assert_int_equal(result.reason, cases[i].reason);
        assert_int_equal(f->fake.calls[PL_STEP_RESERVE], 1);
        assert_int_equal(f->fake.calls[PL_STEP_EXEC], 1);
        assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
        assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_UNCERTAIN);
        assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_BACKOFF), 0);
        assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_GAVE_UP), 1);
        assert_int_equal(pl_host_free(f->host), 0);
        f->host = NULL;
    }
}

static void an_unproven_stop_refuses_wakes_until_proof(void **state)
{
    fixture *f = *state;
    f->fake.outcome[PL_STEP_READY][0] = PL_REASON_CRASHED;
    f->fake.unproven[0] = true;
    make_host(f);

    fake_result first = {0};
    wake_and_wait(f, &first);
    fake_run_for(f->loop, 100);
    /* Retryable, but the crashed attempt may still run: no second start. */
    assert_int_equal(first.kind, PL_WAKE_FAILED);
    assert_int_equal(first.reason, PL_REASON_CRASHED);
    assert_true(first.unproven);
    assert_non_null(strstr(first.message, "not proven stopped"));
    assert_int_equal(f->fake.calls[PL_STEP_RESERVE], 1);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_UNPROVEN), 1);
    assert_true(pl_host_is_unproven(f->host));

    fake_result second = {0};
    wake_and_wait(f, &second);
    assert_int_equal(second.kind, PL_WAKE_REFUSED);
    assert_int_equal(second.reason, PL_REASON_UNPROVEN_STOP);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 1);

    pl_host_report_proof(f->host);
    assert_false(pl_host_is_unproven(f->host));
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_PROVEN), 1);
    fake_result third = {0};
    wake_and_wait(f, &third);
    assert_int_equal(third.kind, PL_WAKE_SERVING);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 2);
}

/* What a previous daemon left and the daemon could not prove stopped yet
 * holds back this pipeline's wakes just the same, until the proof. */
static void a_host_marked_unproven_refuses_wakes_until_proof(void **state)
{
    fixture *f = *state;
    make_host(f);
    pl_host_mark_unproven(f->host);
    assert_true(pl_host_is_unproven(f->host));
    assert_int_equal(pl_host_adopt_serving(f->host), -EBUSY);

    fake_result refused = {0};
    wake_and_wait(f, &refused);
    assert_int_equal(refused.kind, PL_WAKE_REFUSED);
    assert_int_equal(refused.reason, PL_REASON_UNPROVEN_STOP);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 0);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_PARKED);

    pl_host_report_proof(f->host);
    assert_false(pl_host_is_unproven(f->host));
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_PROVEN), 1);
    fake_result served = {0};
    wake_and_wait(f, &served);
    assert_int_equal(served.kind, PL_WAKE_SERVING);
}

typedef struct join_state {
    pl_host *host;
    fake_result *late;
    int joined;
} join_state;

static join_state *joiner_hook_state;

static void trigger_during_exec(fake_ops *fake, pl_wake *wake, pl_step step)
{
    if (step == PL_STEP_EXEC)
        joiner_hook_state->joined = pl_host_wake(joiner_hook_state->host, PL_TRIGGER_CLAIM_CHANGE,
                                                 fake_on_done, joiner_hook_state->late);
}

static void concurrent_triggers_join_one_wake_and_share_its_outcome(void **state)
{
    fixture *f = *state;
    f->fake.delay_usec[PL_STEP_READY] = 20 * MSEC;
    f->fake.on_call = trigger_during_exec;
    make_host(f);
    fake_result results[4] = {{0}};
    join_state hook = {.host = f->host, .late = &results[3], .joined = -1};
    joiner_hook_state = &hook;

    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &results[0]),
                     PL_WAKE_STARTED);
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &results[1]),
                     PL_WAKE_JOINED);
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_WARM, fake_on_done, &results[2]),
                     PL_WAKE_JOINED);
    /* Outcomes only come from the loop. */
    assert_int_equal(results[0].count, 0);
    assert_true(fake_run_until(f->loop, &results[3].count, 5000));
    fake_run_for(f->loop, 20);

    assert_int_equal(hook.joined, PL_WAKE_JOINED);
    for (size_t i = 0; i < ARRAY_SIZE(results); i++) {
        assert_int_equal(results[i].count, 1);
        assert_int_equal(results[i].kind, PL_WAKE_SERVING);
    }
    assert_int_equal(f->fake.calls[PL_STEP_READ], 1);
    assert_int_equal(f->fake.calls[PL_STEP_EXEC], 1);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_JOINED), 3);
    joiner_hook_state = NULL;
}

static void joiners_of_a_failed_wake_all_get_the_failure(void **state)
{
    fixture *f = *state;
    f->config.max_starts = 2;
    f->fake.outcome[PL_STEP_READY][0] = PL_REASON_CRASHED;
    f->fake.outcome[PL_STEP_READY][1] = PL_REASON_CRASHED;
    make_host(f);
    fake_result results[3] = {{0}};
    for (size_t i = 0; i < ARRAY_SIZE(results); i++)
        assert_true(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &results[i]) >= 0);
    assert_true(fake_run_until(f->loop, &results[2].count, 5000));
    for (size_t i = 0; i < ARRAY_SIZE(results); i++) {
        assert_int_equal(results[i].count, 1);
        assert_int_equal(results[i].kind, PL_WAKE_FAILED);
        assert_int_equal(results[i].reason, PL_REASON_CRASHED);
        assert_int_equal(results[i].attempts, 2);
    }
}

static void cancel_while_ready_abandons_it_and_retires_the_attempt(void **state)
{
    fixture *f = *state;
    f->fake.hang[PL_STEP_READY] = true;
    f->config.ready_timeout_usec = 30 * 1000 * MSEC;
    make_host(f);
    fake_result result = {0};
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &result),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &f->fake.calls[PL_STEP_READY], 5000));
    assert_int_equal(pl_host_park(f->host, PL_PARK_REQUEST), 1);
    assert_true(fake_run_until(f->loop, &result.count, 5000));

    assert_int_equal(result.kind, PL_WAKE_CANCELLED);
    assert_int_equal(result.reason, PL_REASON_CANCELLED);
    assert_int_equal(f->fake.abandoned, 1);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
    assert_false(f->fake.retirements[0].record_attempt);
    assert_true(f->fake.retirements[0].exec_started);
    assert_int_equal(f->fake.calls[PL_STEP_REPLICATE], 0);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_PARKED);
    assert_int_equal(pl_host_failure_streak(f->host), 0);
}

static void cancel_during_a_step_stops_at_its_boundary(void **state)
{
    fixture *f = *state;
    f->fake.delay_usec[PL_STEP_MATERIALIZE] = 30 * MSEC;
    make_host(f);
    fake_result result = {0};
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &result),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &f->fake.calls[PL_STEP_MATERIALIZE], 5000));
    /* The claim was taken over: the step in flight finishes, nothing after. */
    assert_int_equal(pl_host_cancel(f->host, PL_REASON_NOT_OWNER, "claim now names box-2"), 1);
    assert_true(fake_run_until(f->loop, &result.count, 5000));
    assert_int_equal(result.kind, PL_WAKE_CANCELLED);
    assert_int_equal(result.reason, PL_REASON_NOT_OWNER);
    assert_string_equal(result.message, "claim now names box-2");
    assert_int_equal(f->fake.calls[PL_STEP_PREPARE], 0);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_CANCELLED), 1);
}

static void cancel_during_backoff_or_before_start_stops_at_once(void **state)
{
    fixture *f = *state;
    f->config.backoff_unit_usec = 10 * 1000 * MSEC; /* a wait the test must not sit out */
    f->fake.outcome[PL_STEP_READY][0] = PL_REASON_READY_TIMEOUT;
    make_host(f);
    fake_result result = {0};
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &result),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &f->fake.calls[PL_STEP_FAILED], 5000));
    fake_run_for(f->loop, 20);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_BACKOFF), 1);
    assert_int_equal(pl_host_cancel(f->host, PL_REASON_CANCELLED, "shutting down"), 1);
    assert_true(fake_run_until(f->loop, &result.count, 1000));
    assert_int_equal(result.kind, PL_WAKE_CANCELLED);
    assert_int_equal(f->fake.calls[PL_STEP_RESERVE], 1);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1); /* the failed attempt's only */

    /* Cancelled before the loop ran it: no operation at all. */
    fake_result early = {0};
    unsigned reads = f->fake.calls[PL_STEP_READ];
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_WARM, fake_on_done, &early), PL_WAKE_STARTED);
    assert_int_equal(pl_host_cancel(f->host, PL_REASON_CANCELLED, "park"), 1);
    assert_true(fake_run_until(f->loop, &early.count, 1000));
    assert_int_equal(early.kind, PL_WAKE_CANCELLED);
    assert_int_equal(f->fake.calls[PL_STEP_READ], reads);
    assert_int_equal(pl_host_cancel(f->host, PL_REASON_CANCELLED, "nothing"), 0);
}

static void a_trigger_after_cancel_starts_a_fresh_wake(void **state)
{
    fixture *f = *state;
    f->fake.delay_usec[PL_STEP_ADMIT] = 20 * MSEC;
    make_host(f);
    fake_result cancelled = {0}, fresh = {0};
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &cancelled),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &f->fake.calls[PL_STEP_ADMIT], 5000));
    assert_int_equal(pl_host_park(f->host, PL_PARK_REQUEST), 1);
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &fresh),
                     PL_WAKE_JOINED);
    assert_true(fake_run_until(f->loop, &fresh.count, 5000));
    assert_int_equal(cancelled.kind, PL_WAKE_CANCELLED);
    assert_int_equal(fresh.kind, PL_WAKE_SERVING);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 2);
}

static void exits_and_parks_drive_the_failure_park_backoff(void **state)
{
    fixture *f = *state;
    make_host(f);
    serve(f);
    assert_int_equal(pl_host_generation_exited(f->host, 1, false), 0);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_RETIRING);
    wait_parked(f);
    assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_EXITED);
    assert_int_equal(f->fake.retirements[0].reason, PL_REASON_CRASHED);
    assert_int_equal(pl_host_failure_streak(f->host), 1);

    /* Re-activation waits base · 2^0, then base · 2^1 after a second crash. */
    for (unsigned streak = 1; streak <= 2; streak++) {
        unsigned deferred = fake_count_events(&f->fake, PL_WAKE_EVENT_DEFERRED);
        serve(f);
        assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_DEFERRED), deferred + 1);
        const fake_event *event =
            &f->fake.events[fake_find_event(&f->fake, PL_WAKE_EVENT_DEFERRED, deferred)];
        uint64_t expected = f->config.park_backoff_base_usec << (streak - 1);
        assert_true(event->delay_usec <= expected);
        assert_true(event->delay_usec + 30 * MSEC >= expected);
        int read = -1;
        for (unsigned i = (unsigned)fake_find_event(&f->fake, PL_WAKE_EVENT_DEFERRED, deferred);
             i < f->fake.n_events && read < 0; i++)
            if (f->fake.events[i].type == PL_WAKE_EVENT_STEP &&
                f->fake.events[i].step == PL_STEP_READ)
                read = (int)i;
        assert_true(read > 0);
        assert_true(f->fake.events[read].at_usec - event->at_usec + 500 >= event->delay_usec);
        if (streak == 1) {
            assert_int_equal(pl_host_generation_exited(f->host, 2, false), 0);
            wait_parked(f);
            assert_int_equal(pl_host_failure_streak(f->host), 2);
        }
    }

    /* A generation that served long enough restarts the count. */
    assert_int_equal(pl_host_generation_exited(f->host, 1, true), 0);
    wait_parked(f);
    assert_int_equal(pl_host_failure_streak(f->host), 1);
    serve(f);
    /* Exit status 0 is an idle park: the streak is cleared. */
    assert_int_equal(pl_host_generation_exited(f->host, 0, false), 0);
    wait_parked(f);
    assert_int_equal(pl_host_failure_streak(f->host), 0);
    unsigned deferred = fake_count_events(&f->fake, PL_WAKE_EVENT_DEFERRED);
    serve(f);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_DEFERRED), deferred);

    /* An operator's park keeps the streak and retires gracefully; an idle
     * park clears it. */
    assert_int_equal(pl_host_park(f->host, PL_PARK_REQUEST), 1);
    wait_parked(f);
    unsigned last = f->fake.calls[PL_STEP_FAILED] - 1;
    assert_int_equal(f->fake.retirements[last].cause, PL_RETIRE_PARK);
    assert_true(f->fake.retirements[last].graceful);
    assert_int_equal(pl_host_park(f->host, PL_PARK_IDLE), 0);
    assert_int_equal(pl_host_generation_exited(f->host, 0, false), -ESRCH);
}

/* A generation that fails while it serves (a missed watchdog, failed
 * repeated health checks) is retired at once and the host parks as after a
 * crash: the failure-park backoff paces the next wake. */
static void a_serving_failure_retires_at_once_and_parks_as_a_failure(void **state)
{
    fixture *f = *state;
    make_host(f);
    serve(f);
    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_WATCHDOG, false,
                                               "no WATCHDOG=1 within %d ms", 100),
                     0);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_RETIRING);
    int faulted = fake_find_event(&f->fake, PL_WAKE_EVENT_FAULTED, 0);
    assert_true(faulted >= 0);
    assert_int_equal(f->fake.events[faulted].reason, PL_REASON_WATCHDOG);
    /* Only once: the host is retiring now. */
    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_WATCHDOG, false, "again"),
                     -ESRCH);
    wait_parked(f);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
    const pl_retirement *retirement = &f->fake.retirements[0];
    assert_int_equal(retirement->cause, PL_RETIRE_PARK);
    assert_int_equal(retirement->reason, PL_REASON_WATCHDOG);
    assert_int_equal(retirement->park_cause, PL_PARK_FAILURE);
    assert_false(retirement->graceful);
    assert_false(retirement->record_attempt);
    assert_int_equal(pl_host_failure_streak(f->host), 1);
    assert_true(fake_find_event(&f->fake, PL_WAKE_EVENT_PARKED, 0) > faulted);

    /* The next wake waits out the failure-park backoff. */
    serve(f);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_DEFERRED), 1);
    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_UNHEALTHY, false,
                                               "3 health checks in a row failed"),
                     0);
    wait_parked(f);
    assert_int_equal(f->fake.retirements[1].reason, PL_REASON_UNHEALTHY);
    assert_int_equal(pl_host_failure_streak(f->host), 2);

    /* One that served long enough starts the count again. */
    serve(f);
    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_WATCHDOG, true, "late"), 0);
    wait_parked(f);
    assert_int_equal(pl_host_failure_streak(f->host), 1);

    /* Only a failure of the generation's own is one. */
    serve(f);
    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_NONE, false, "ok?"), -EINVAL);
    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_NOT_OWNER, false, "moved"),
                     -EINVAL);
    assert_int_equal(pl_host_generation_failed(f->host, _PL_REASON_MAX, false, "bad"), -EINVAL);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
}

static void a_trigger_during_retirement_wakes_after_it(void **state)
{
    fixture *f = *state;
    make_host(f);
    serve(f);
    f->fake.delay_usec[PL_STEP_FAILED] = 20 * MSEC;
    assert_int_equal(pl_host_park(f->host, PL_PARK_IDLE), 1);
    fake_result result = {0};
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &result),
                     PL_WAKE_JOINED);
    assert_true(fake_run_until(f->loop, &result.count, 5000));
    assert_int_equal(result.kind, PL_WAKE_SERVING);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 2);
    /* The retirement finished before the new wake read anything. */
    int parked = fake_find_event(&f->fake, PL_WAKE_EVENT_PARKED, 0);
    int waking = fake_find_event(&f->fake, PL_WAKE_EVENT_WAKING, 1);
    assert_true(parked >= 0 && waking > parked);
}

static void an_unproven_park_refuses_the_next_wake(void **state)
{
    fixture *f = *state;
    make_host(f);
    serve(f);
    f->fake.unproven[0] = true;
    assert_int_equal(pl_host_park(f->host, PL_PARK_CLAIM_LOST), 1);
    wait_parked(f);
    assert_true(pl_host_is_unproven(f->host));
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.reason, PL_REASON_UNPROVEN_STOP);
}

/* A restarted daemon resumes a generation that kept running: the host
 * serves without a wake, and parks and exits work on it as on any other. */
static void an_adopted_generation_serves_and_parks_like_any_other(void **state)
{
    fixture *f = *state;
    make_host(f);
    assert_int_equal(pl_host_adopt_serving(f->host), 0);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 0);
    assert_true(fake_find_event(&f->fake, PL_WAKE_EVENT_SERVING, 0) >= 0);
    /* Only a parked host can adopt. */
    assert_int_equal(pl_host_adopt_serving(f->host), -EBUSY);
    fake_result result = {0};
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &result),
                     PL_WAKE_ALREADY_SERVING);
    assert_int_equal(pl_host_park(f->host, PL_PARK_IDLE), 1);
    wait_parked(f);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
}

static void an_unproven_host_cannot_adopt(void **state)
{
    fixture *f = *state;
    make_host(f);
    serve(f);
    f->fake.unproven[0] = true;
    assert_int_equal(pl_host_park(f->host, PL_PARK_CLAIM_LOST), 1);
    wait_parked(f);
    assert_int_equal(pl_host_adopt_serving(f->host), -EBUSY);
    pl_host_report_proof(f->host);
    assert_int_equal(pl_host_adopt_serving(f->host), 0);
}

/* Budgets inside the pipeline: hosts share one box-wide cap. */
static void the_box_cap_holds_starts_and_wakes_them_in_order(void **state)
{
    fixture *f = *state;
    pl_start_cap cap;
    assert_int_equal(pl_start_cap_init(&cap, 1, NULL), 0);
    char order[8][16];
    unsigned order_len = 0;
    fake_ops fakes[3];
    pl_host *hosts[3] = {NULL};
    fake_result results[3] = {{0}};
    const char *names[] = {"a", "b", "c"};
    f->config.start_cap = &cap;
    for (int i = 0; i < 3; i++) {
        fake_ops_init(&fakes[i], f->loop);
        fakes[i].label = names[i];
        fakes[i].reserve_order = order;
        fakes[i].reserve_order_len = &order_len;
        fakes[i].delay_usec[PL_STEP_READY] = 15 * MSEC;
        assert_int_equal(pl_host_new(f->loop, names[i], &f->config, &fakes[i].table, &fakes[i],
                                     fake_on_event, &fakes[i], &hosts[i], NULL),
                         0);
    }
    /* a takes the slot; c and then b ask while it is taken. */
    assert_int_equal(pl_host_wake(hosts[0], PL_TRIGGER_CONNECTION, fake_on_done, &results[0]),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &fakes[0].calls[PL_STEP_RESERVE], 1000));
    assert_int_equal(pl_host_wake(hosts[2], PL_TRIGGER_CONNECTION, fake_on_done, &results[2]),
                     PL_WAKE_STARTED);
    for (int i = 0; i < 100 && fake_count_events(&fakes[2], PL_WAKE_EVENT_HELD) == 0; i++)
        sd_event_run(f->loop, 1 * MSEC);
    assert_int_equal(fake_count_events(&fakes[2], PL_WAKE_EVENT_HELD), 1);
    assert_int_equal(pl_host_wake(hosts[1], PL_TRIGGER_CONNECTION, fake_on_done, &results[1]),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &results[1].count, 5000));
    assert_true(fake_run_until(f->loop, &results[2].count, 5000));

    assert_int_equal(order_len, 3);
    assert_string_equal(order[0], "a");
    assert_string_equal(order[1], "c");
    assert_string_equal(order[2], "b");
    assert_int_equal(fake_count_events(&fakes[2], PL_WAKE_EVENT_HELD), 1);
    assert_int_equal(fake_count_events(&fakes[1], PL_WAKE_EVENT_HELD), 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(results[i].kind, PL_WAKE_SERVING);
        assert_int_equal(pl_host_free(hosts[i]), 0);
    }
    assert_int_equal(cap.in_flight, 0);
    assert_int_equal(cap.held, 0);
}

static void a_held_start_past_the_budget_wait_is_refused(void **state)
{
    fixture *f = *state;
    pl_start_cap cap;
    assert_int_equal(pl_start_cap_init(&cap, 1, NULL), 0);
    f->config.start_cap = &cap;
    f->config.budget_wait_max_usec = 20 * MSEC;
    /* Something else holds the only slot for good. */
    pl_start_waiter unused;
    assert_true(pl_start_cap_acquire(&cap, &unused, NULL, NULL));
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.kind, PL_WAKE_REFUSED);
    assert_int_equal(result.reason, PL_REASON_BUDGET);
    assert_int_equal(f->fake.calls[PL_STEP_RESERVE], 0);
    assert_int_equal(cap.held, 0);
    pl_start_cap_release(&cap);
    assert_int_equal(cap.in_flight, 0);
}

static void the_start_rate_paces_a_crash_loop_of_one_host_only(void **state)
{
    fixture *f = *state;
    /* 4 starts a second, burst 4: the fifth start of a crash loop waits for
     * a token, about a quarter second after the first. */
    f->config.start_rate_per_sec = 4;
    f->config.backoff_unit_usec = 1 * MSEC;
    for (unsigned i = 0; i < 5; i++)
        f->fake.outcome[PL_STEP_READY][i] = PL_REASON_CRASHED;
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.kind, PL_WAKE_FAILED);
    assert_int_equal(result.attempts, 5);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_HELD), 1);
    const fake_event *held = &f->fake.events[fake_find_event(&f->fake, PL_WAKE_EVENT_HELD, 0)];
    assert_int_equal(held->attempt, 5);
    assert_true(held->delay_usec > 150 * MSEC && held->delay_usec <= 250 * MSEC);

    /* Another host with its own bucket starts at once meanwhile. */
    fake_ops other;
    fake_ops_init(&other, f->loop);
    pl_host *quiet = NULL;
    assert_int_equal(pl_host_new(f->loop, "quiet", &f->config, &other.table, &other, fake_on_event,
                                 &other, &quiet, NULL),
                     0);
    fake_result quiet_result = {0};
    assert_int_equal(pl_host_wake(quiet, PL_TRIGGER_WARM, fake_on_done, &quiet_result),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &quiet_result.count, 1000));
    assert_int_equal(quiet_result.kind, PL_WAKE_SERVING);
    assert_int_equal(fake_count_events(&other, PL_WAKE_EVENT_HELD), 0);
    assert_int_equal(pl_host_free(quiet), 0);
}

/* A reload changes a host's pipeline configuration: the next wake runs with
 * it, and what would be refused at creation is refused here too, leaving
 * the configuration in force as it was. */
static void a_new_config_applies_to_the_next_wake(void **state)
{
    fixture *f = *state;
    f->config.max_starts = 1;
    for (unsigned i = 0; i < 3; i++)
        f->fake.outcome[PL_STEP_READY][i] = PL_REASON_CRASHED;
    make_host(f);
    fake_result result = {0};
    wake_and_wait(f, &result);
    assert_int_equal(result.kind, PL_WAKE_FAILED);
    assert_int_equal(result.attempts, 1);

    pl_config changed = f->config;
    changed.max_starts = 4;
    changed.park_backoff_max_usec = changed.park_backoff_base_usec;
    changed.start_rate_per_sec = 1000;
    assert_int_equal(pl_host_set_config(f->host, &changed, NULL), 0);
    assert_int_equal(pl_host_config(f->host)->max_starts, 4);

    pl_config bad = changed;
    bad.max_starts = 0;
    act_error err = {0};
    assert_int_equal(pl_host_set_config(f->host, &bad, &err), -EINVAL);
    assert_non_null(strstr(err.message, "web1"));
    bad = changed;
    pl_start_cap other;
    assert_int_equal(pl_start_cap_init(&other, 1, NULL), 0);
    bad.start_cap = &other;
    assert_int_equal(pl_host_set_config(f->host, &bad, &err), -EINVAL);
    assert_int_equal(pl_host_config(f->host)->max_starts, 4);

    fake_result second = {0};
    wake_and_wait(f, &second);
    assert_int_equal(second.kind, PL_WAKE_SERVING);
    assert_int_equal(second.attempts, 3);
}

static void bad_names_and_configs_are_refused_with_a_sentence(void **state)
{
    fixture *f = *state;
    act_error err = {0};
    pl_host *host = NULL;
    assert_int_equal(pl_host_new(f->loop, "../etc", &f->config, &f->fake.table, &f->fake, NULL,
                                 NULL, &host, &err),
                     -EINVAL);
    assert_null(host);
    assert_non_null(strstr(err.message, "host name"));

    pl_config bad = f->config;
    bad.max_starts = 6;
    act_error_clear(&err);
    assert_int_equal(
        pl_host_new(f->loop, "web1", &bad, &f->fake.table, &f->fake, NULL, NULL, &host, &err),
        -EINVAL);
    assert_non_null(strstr(err.message, "web1"));
    assert_non_null(strstr(err.message, "MaxStarts=6"));

    bad = f->config;
    bad.ready_timeout_usec = 31 * 1000 * MSEC;
    act_error_clear(&err);
    assert_int_equal(pl_config_check(&bad, &err), -EINVAL);
    assert_non_null(strstr(err.message, "ReadyTimeoutSec"));
}

static int early_completion[3];

static void complete_early(fake_ops *fake, pl_wake *wake, pl_step step)
{
    if (step != PL_STEP_READ)
        return;
    /* The wrong completion for the step, then the right one; the fake then
     * completes a second time, which must be ignored. */
    early_completion[0] = pl_wake_retired(wake, true, NULL);
    early_completion[1] = pl_wake_ok(wake);
    early_completion[2] = pl_wake_complete(wake, PL_REASON_NONE, NULL);
}

static void late_or_double_completions_are_ignored(void **state)
{
    fixture *f = *state;
    f->fake.on_call = complete_early;
    make_host(f);
    serve(f);
    assert_int_equal(early_completion[0], -ESTALE);
    assert_int_equal(early_completion[1], 0);
    assert_int_equal(early_completion[2], -ESTALE);
    assert_int_equal(f->fake.calls[PL_STEP_ADMIT], 1);
    assert_int_equal(f->fake.calls[PL_STEP_HEALTHY], 1);
}

/* ENDED is the last event of every wake, retirement and swap: its outcome
 * was delivered and the host is at rest, and a handler may start the next
 * wake from there (the daemon re-arms demand watching and continues a
 * stop-first swap on it). */
typedef struct ended_probe {
    fake_ops *fake;
    fake_result *first;
    fake_result second;
    unsigned ended;
    unsigned first_count_at_end;
    pl_host_state state_at_end;
} ended_probe;

static void wake_again_on_ended(pl_host *host, const pl_wake_event *event, void *userdata)
{
    ended_probe *probe = userdata;
    fake_on_event(host, event, probe->fake);
    if (event->type != PL_WAKE_EVENT_ENDED || probe->ended++ > 0)
        return;
    probe->first_count_at_end = probe->first->count;
    probe->state_at_end = pl_host_get_state(host);
    assert_int_equal(pl_host_wake(host, PL_TRIGGER_CONNECTION, fake_on_done, &probe->second),
                     PL_WAKE_STARTED);
}

static void ended_is_last_and_may_wake_again(void **state)
{
    fixture *f = *state;
    f->fake.outcome[PL_STEP_RESERVE][0] = PL_REASON_NOT_OWNER; /* a refusal, then a serve */
    fake_result first = {0};
    ended_probe probe = {.fake = &f->fake, .first = &first};
    act_error err = {0};
    assert_int_equal(pl_host_new(f->loop, "web1", &f->config, &f->fake.table, &f->fake,
                                 wake_again_on_ended, &probe, &f->host, &err),
                     0);
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &first),
                     PL_WAKE_STARTED);
    assert_true(fake_run_until(f->loop, &probe.second.count, 5000));

    assert_int_equal(first.kind, PL_WAKE_REFUSED);
    assert_int_equal(probe.first_count_at_end, 1);
    assert_int_equal(probe.state_at_end, PL_HOST_PARKED);
    int refused = fake_find_event(&f->fake, PL_WAKE_EVENT_REFUSED, 0);
    int ended = fake_find_event(&f->fake, PL_WAKE_EVENT_ENDED, 0);
    int retired = fake_find_event(&f->fake, PL_WAKE_EVENT_RETIRED, 0);
    assert_true(refused >= 0 && retired > refused && ended > retired);
    assert_int_equal(probe.second.kind, PL_WAKE_SERVING);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_ENDED), 2);
    assert_int_equal(f->fake.events[f->fake.n_events - 1].type, PL_WAKE_EVENT_ENDED);

    /* A park is a retirement: it ends with ENDED too, the host parked. */
    assert_int_equal(pl_host_park(f->host, PL_PARK_REQUEST), 1);
    wait_parked(f);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_ENDED), 3);
    assert_int_equal(f->fake.events[f->fake.n_events - 1].type, PL_WAKE_EVENT_ENDED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(happy_path_runs_every_step_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(every_refusal_stops_before_exec_and_is_not_retried, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            ready_timeout_is_retried_with_doubling_backoff_then_given_up, setup, teardown),
        cmocka_unit_test_setup_teardown(the_wake_timeout_ends_the_attempts, setup, teardown),
        cmocka_unit_test_setup_teardown(a_pin_leaves_its_fallback_a_window, setup, teardown),
        cmocka_unit_test_setup_teardown(a_crash_before_ready_is_retried_and_can_then_serve, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_gate_refusal_records_no_failed_attempt, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failure_after_ready_is_never_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(an_unproven_stop_refuses_wakes_until_proof, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_host_marked_unproven_refuses_wakes_until_proof, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(concurrent_triggers_join_one_wake_and_share_its_outcome,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(joiners_of_a_failed_wake_all_get_the_failure, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(cancel_while_ready_abandons_it_and_retires_the_attempt,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(cancel_during_a_step_stops_at_its_boundary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(cancel_during_backoff_or_before_start_stops_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_trigger_after_cancel_starts_a_fresh_wake, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(exits_and_parks_drive_the_failure_park_backoff, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_serving_failure_retires_at_once_and_parks_as_a_failure,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_trigger_during_retirement_wakes_after_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_unproven_park_refuses_the_next_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(an_adopted_generation_serves_and_parks_like_any_other,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_unproven_host_cannot_adopt, setup, teardown),
        cmocka_unit_test_setup_teardown(the_box_cap_holds_starts_and_wakes_them_in_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_held_start_past_the_budget_wait_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_new_config_applies_to_the_next_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(the_start_rate_paces_a_crash_loop_of_one_host_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(bad_names_and_configs_are_refused_with_a_sentence, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(late_or_double_completions_are_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(ended_is_last_and_may_wake_again, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
