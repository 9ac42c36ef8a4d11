/* Swaps on a real sd-event loop with scripted operations: generation N+1
 * starts beside a serving N and replaces it, or fails and leaves N serving.
 *
 * Every test first serves the host with an ordinary wake (N), then swaps.
 * The fake's call counters and retirement log therefore hold N's wake first;
 * the swap's calls come after it. */
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

/* A window the tests never sit out: only a cancel, park or exit ends it. */
#define LONG_READY_USEC (30 * 1000 * MSEC)

static int find_since(const fake_ops *fake, unsigned from, pl_wake_event_type type)
{
    for (unsigned i = from; i < fake->n_events; i++)
        if (fake->events[i].type == type)
            return (int)i;
    return -1;
}

static unsigned count_since(const fake_ops *fake, unsigned from, pl_wake_event_type type)
{
    unsigned count = 0;
    for (unsigned i = from; i < fake->n_events; i++)
        count += fake->events[i].type == type;
    return count;
}

static void start_swap(fixture *f, fake_result *result)
{
    assert_int_equal(pl_host_swap(f->host, fake_on_done, result), PL_WAKE_STARTED);
    /* Outcomes only come from the loop. */
    assert_int_equal(result->count, 0);
}

static void swap_and_wait(fixture *f, fake_result *result)
{
    start_swap(f, result);
    assert_true(fake_run_until(f->loop, &result->count, 5000));
}

/* Runs the loop until step has been called n times in all. */
static void run_until_called(fixture *f, pl_step step, unsigned n)
{
    for (int i = 0; i < 500 && f->fake.calls[step] < n; i++)
        sd_event_run(f->loop, 10 * MSEC);
    assert_int_equal(f->fake.calls[step], n);
}

/* Serves N, then starts a swap whose N+1 never gets ready: the swap waits
 * in `ready` until something else ends it. */
static void swap_waiting_in_ready(fixture *f, fake_result *result)
{
    f->config.ready_timeout_usec = LONG_READY_USEC;
    make_host(f);
    serve(f);
    f->fake.hang[PL_STEP_READY] = true;
    start_swap(f, result);
    run_until_called(f, PL_STEP_READY, 2);
}

static unsigned calls_while_not_serving;

static void count_calls_while_not_serving(fake_ops *fake, pl_wake *wake, pl_step step)
{
    if (pl_host_get_state(pl_wake_host(wake)) != PL_HOST_SERVING)
        calls_while_not_serving++;
}

static void a_swap_starts_n1_beside_n_then_retires_n_gracefully(void **state)
{
    fixture *f = *state;
    /* Readiness and N's graceful retirement take time, as they do for real. */
    f->fake.delay_usec[PL_STEP_READY] = 5 * MSEC;
    f->fake.delay_usec[PL_STEP_FAILED] = 5 * MSEC;
    make_host(f);
    serve(f);
    unsigned first_call = f->fake.log_len, first_event = f->fake.n_events;
    calls_while_not_serving = 0;
    f->fake.on_call = count_calls_while_not_serving;

    fake_result result = {0};
    start_swap(f, &result);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_true(fake_run_until(f->loop, &result.count, 5000));

    /* N+1's steps, then `failed` for N. */
    const pl_step expected[] = {
        PL_STEP_READ,    PL_STEP_ADMIT,   PL_STEP_RESTORE, PL_STEP_RESERVE, PL_STEP_MATERIALIZE,
        PL_STEP_PREPARE, PL_STEP_GATE,    PL_STEP_EXEC,    PL_STEP_READY,   PL_STEP_REPLICATE,
        PL_STEP_PUBLISH, PL_STEP_HEALTHY, PL_STEP_FAILED,
    };
    assert_int_equal(f->fake.log_len - first_call, ARRAY_SIZE(expected));
    for (size_t i = 0; i < ARRAY_SIZE(expected); i++) {
        assert_string_equal(pl_step_to_string(f->fake.log[first_call + i]),
                            pl_step_to_string(expected[i]));
        assert_true(f->fake.log_swap[first_call + i]);
    }
    /* N's own wake was no swap. */
    for (unsigned i = 0; i < first_call; i++)
        assert_false(f->fake.log_swap[i]);
    assert_int_equal(calls_while_not_serving, 0);

    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
    const pl_retirement *replaced = &f->fake.retirements[0];
    assert_int_equal(replaced->cause, PL_RETIRE_REPLACED);
    assert_true(replaced->graceful);
    assert_int_equal(replaced->attempt, 0);
    assert_false(replaced->record_attempt);

    assert_int_equal(result.count, 1);
    assert_int_equal(result.kind, PL_WAKE_SERVING);
    assert_int_equal(result.reason, PL_REASON_NONE);
    assert_int_equal(result.attempts, 1);
    assert_false(result.unproven);
    assert_non_null(strstr(result.message, "replaced is proven stopped"));
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_int_equal(pl_host_failure_streak(f->host), 0);

    /* The swap's milestones, in order, all marked as the swap's. */
    const pl_wake_event_type milestones[] = {
        PL_WAKE_EVENT_SWAP_STARTED, PL_WAKE_EVENT_ADMITTED,  PL_WAKE_EVENT_EXECUTED,
        PL_WAKE_EVENT_READY,        PL_WAKE_EVENT_PUBLISHED, PL_WAKE_EVENT_RETIRING,
        PL_WAKE_EVENT_RETIRED,      PL_WAKE_EVENT_SWAP_DONE,
    };
    unsigned from = first_event;
    for (size_t i = 0; i < ARRAY_SIZE(milestones); i++) {
        int at = find_since(&f->fake, from, milestones[i]);
        assert_true(at >= 0);
        from = (unsigned)at + 1;
    }
    for (unsigned i = first_event; i < f->fake.n_events; i++)
        assert_true(f->fake.events[i].swap);
    assert_false(f->fake.events[0].swap);
    /* Nothing says the host woke, parked or stopped serving. */
    const pl_wake_event_type absent[] = {
        PL_WAKE_EVENT_WAKING,      PL_WAKE_EVENT_SERVING, PL_WAKE_EVENT_PARKING,
        PL_WAKE_EVENT_PARKED,      PL_WAKE_EVENT_GAVE_UP, PL_WAKE_EVENT_CANCELLED,
        PL_WAKE_EVENT_SWAP_FAILED,
    };
    for (size_t i = 0; i < ARRAY_SIZE(absent); i++)
        assert_int_equal(count_since(&f->fake, first_event, absent[i]), 0);
    assert_string_equal(pl_wake_event_type_to_string(PL_WAKE_EVENT_SWAP_DONE), "swap_done");

    /* N+1 now serves, and can itself be replaced. */
    f->fake.on_call = NULL;
    fake_result next = {0};
    swap_and_wait(f, &next);
    assert_int_equal(next.kind, PL_WAKE_SERVING);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 3);
}

static void a_swap_whose_build_is_never_ready_leaves_n_serving(void **state)
{
    fixture *f = *state;
    f->config.max_starts = 2;
    make_host(f);
    /* A crash first, so the host has a failure-park streak to keep. */
    serve(f);
    assert_int_equal(pl_host_generation_exited(f->host, 1, false), 0);
    wait_parked(f);
    serve(f);
    assert_int_equal(pl_host_failure_streak(f->host), 1);
    unsigned retired_before = f->fake.calls[PL_STEP_FAILED];
    unsigned first_event = f->fake.n_events;

    f->fake.hang[PL_STEP_READY] = true;
    fake_result result = {0};
    swap_and_wait(f, &result);

    assert_int_equal(result.kind, PL_WAKE_FAILED);
    assert_int_equal(result.reason, PL_REASON_READY_TIMEOUT);
    assert_int_equal(result.step, PL_STEP_READY);
    assert_int_equal(result.attempts, 2);
    assert_non_null(strstr(result.message, "gave up after 2 starts"));
    assert_int_equal(f->fake.abandoned, 2);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED] - retired_before, 2);
    for (unsigned i = retired_before; i < f->fake.calls[PL_STEP_FAILED]; i++) {
        assert_int_equal(f->fake.retirements[i].cause, PL_RETIRE_ATTEMPT);
        assert_int_equal(f->fake.retirements[i].reason, PL_REASON_READY_TIMEOUT);
        assert_true(f->fake.retirements[i].record_attempt);
        assert_true(f->fake.retirements[i].exec_started);
        /* N+1 ran on N's live sockets: it is stopped gracefully, so the
         * connections it accepted are answered, not reset. */
        assert_true(f->fake.retirements[i].graceful);
    }
    /* The usual retry after the attempt backoff, and no failure-park delay:
     * the host never stopped serving. */
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_BACKOFF), 1);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_DEFERRED), 0);

    /* N is untouched: no retirement of it, no park, the host serves and its
     * streak is what it was. */
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_int_equal(pl_host_failure_streak(f->host), 1);
    const pl_wake_event_type absent[] = {PL_WAKE_EVENT_PARKING, PL_WAKE_EVENT_PARKED,
                                         PL_WAKE_EVENT_GAVE_UP, PL_WAKE_EVENT_SWAP_DONE,
                                         PL_WAKE_EVENT_PUBLISHED};
    for (size_t i = 0; i < ARRAY_SIZE(absent); i++)
        assert_int_equal(count_since(&f->fake, first_event, absent[i]), 0);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_SWAP_FAILED), 1);
    const fake_event *failed =
        &f->fake.events[find_since(&f->fake, first_event, PL_WAKE_EVENT_SWAP_FAILED)];
    assert_int_equal(failed->reason, PL_REASON_READY_TIMEOUT);
    assert_true(failed->swap);
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, NULL, NULL),
                     PL_WAKE_ALREADY_SERVING);

    /* N still parks like any serving generation. */
    assert_int_equal(pl_host_park(f->host, PL_PARK_REQUEST), 1);
    wait_parked(f);
    unsigned last = f->fake.calls[PL_STEP_FAILED] - 1;
    assert_int_equal(f->fake.retirements[last].cause, PL_RETIRE_PARK);
    assert_true(f->fake.retirements[last].graceful);
}

static void a_swap_refused_at_prepare_is_not_retried(void **state)
{
    fixture *f = *state;
    for (unsigned call = 1; call < FAKE_MAX_CALLS; call++)
        f->fake.outcome[PL_STEP_PREPARE][call] = PL_REASON_PIN_MISMATCH;
    make_host(f);
    serve(f);
    unsigned first_event = f->fake.n_events;
    fake_result result = {0};
    swap_and_wait(f, &result);
    fake_run_for(f->loop, 100); /* long enough for a retry at 20 ms to show */

    assert_int_equal(result.count, 1);
    assert_int_equal(result.kind, PL_WAKE_REFUSED);
    assert_int_equal(result.reason, PL_REASON_PIN_MISMATCH);
    assert_int_equal(result.step, PL_STEP_PREPARE);
    assert_non_null(strstr(result.message, "pin_mismatch"));
    assert_int_equal(f->fake.calls[PL_STEP_PREPARE], 2);
    assert_int_equal(f->fake.calls[PL_STEP_EXEC], 1); /* N's only */
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
    assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_ATTEMPT);
    assert_false(f->fake.retirements[0].record_attempt);
    assert_false(f->fake.retirements[0].exec_started);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_BACKOFF), 0);

    /* The step's refusal and the swap's failure are both told, both as the
     * swap's, so that nobody drains the sockets N serves. */
    int refused = find_since(&f->fake, first_event, PL_WAKE_EVENT_REFUSED);
    assert_true(refused >= 0);
    assert_true(f->fake.events[refused].swap);
    int failed = find_since(&f->fake, first_event, PL_WAKE_EVENT_SWAP_FAILED);
    assert_true(failed > refused);
    assert_int_equal(f->fake.events[failed].reason, PL_REASON_PIN_MISMATCH);
    assert_int_equal(f->fake.events[failed].step, PL_STEP_PREPARE);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_int_equal(pl_host_failure_streak(f->host), 0);
}

static void a_failure_after_publication_retires_n1_and_keeps_n(void **state)
{
    fixture *f = *state;
    f->fake.outcome[PL_STEP_HEALTHY][1] = PL_REASON_UNHEALTHY;
    make_host(f);
    serve(f);
    unsigned first_event = f->fake.n_events;
    fake_result result = {0};
    swap_and_wait(f, &result);
    fake_run_for(f->loop, 100);

    assert_int_equal(result.kind, PL_WAKE_FAILED);
    assert_int_equal(result.reason, PL_REASON_UNHEALTHY);
    assert_int_equal(result.step, PL_STEP_HEALTHY);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_PUBLISHED), 1);
    /* Uncertain: the claim may name N+1 now, so it is never retried. */
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
    assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_UNCERTAIN);
    assert_true(f->fake.retirements[0].record_attempt);
    assert_int_equal(f->fake.calls[PL_STEP_RESERVE], 2);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_BACKOFF), 0);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_int_equal(pl_host_failure_streak(f->host), 0);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_SWAP_FAILED), 1);
}

static void one_swap_at_a_time_and_wakes_find_the_host_serving(void **state)
{
    fixture *f = *state;
    fake_result result = {0}, second = {0}, woken = {0};
    swap_waiting_in_ready(f, &result);
    unsigned first_event = f->fake.n_events;

    assert_int_equal(pl_host_swap(f->host, fake_on_done, &second), -EBUSY);
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &woken),
                     PL_WAKE_ALREADY_SERVING);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_JOINED), 0);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);

    /* A cancel stops the swap: N+1 is retired, N serves on. */
    assert_int_equal(pl_host_cancel(f->host, PL_REASON_CANCELLED, "operator cancelled the swap"),
                     1);
    assert_true(fake_run_until(f->loop, &result.count, 1000));
    assert_int_equal(result.kind, PL_WAKE_CANCELLED);
    assert_int_equal(result.reason, PL_REASON_CANCELLED);
    assert_string_equal(result.message, "operator cancelled the swap");
    assert_int_equal(f->fake.abandoned, 1);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 1);
    assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_ATTEMPT);
    assert_true(f->fake.retirements[0].exec_started);
    assert_false(f->fake.retirements[0].record_attempt);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    const fake_event *failed =
        &f->fake.events[find_since(&f->fake, first_event, PL_WAKE_EVENT_SWAP_FAILED)];
    assert_int_equal(failed->reason, PL_REASON_CANCELLED);
    assert_int_equal(count_since(&f->fake, first_event, PL_WAKE_EVENT_PARKING), 0);
    assert_int_equal(pl_host_cancel(f->host, PL_REASON_CANCELLED, "nothing"), 0);
    fake_run_for(f->loop, 20);
    assert_int_equal(second.count, 0);
    assert_int_equal(woken.count, 0);

    /* With the first one over, the next swap runs. */
    f->fake.hang[PL_STEP_READY] = false;
    fake_result third = {0};
    swap_and_wait(f, &third);
    assert_int_equal(third.kind, PL_WAKE_SERVING);
}

static void a_swap_needs_a_serving_host_with_nothing_in_flight(void **state)
{
    fixture *f = *state;
    f->fake.delay_usec[PL_STEP_ADMIT] = 20 * MSEC;
    make_host(f);
    fake_result refused = {0};
    assert_int_equal(pl_host_swap(f->host, fake_on_done, &refused), -ESRCH);
    assert_int_equal(pl_host_swap(NULL, fake_on_done, &refused), -EINVAL);

    /* Waking: busy. */
    fake_result woken = {0};
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &woken),
                     PL_WAKE_STARTED);
    assert_int_equal(pl_host_swap(f->host, fake_on_done, &refused), -EBUSY);
    assert_true(fake_run_until(f->loop, &woken.count, 5000));
    assert_int_equal(woken.kind, PL_WAKE_SERVING);

    /* Retiring: busy; parked again: not serving. */
    f->fake.delay_usec[PL_STEP_FAILED] = 20 * MSEC;
    assert_int_equal(pl_host_park(f->host, PL_PARK_IDLE), 1);
    assert_int_equal(pl_host_swap(f->host, fake_on_done, &refused), -EBUSY);
    wait_parked(f);
    assert_int_equal(pl_host_swap(f->host, fake_on_done, &refused), -ESRCH);

    fake_run_for(f->loop, 20);
    assert_int_equal(refused.count, 0);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_SWAP_STARTED), 0);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 1);
}

static void park_during_a_swap_retires_n1_then_parks_n(void **state)
{
    fixture *f = *state;
    fake_result result = {0}, follower = {0};
    swap_waiting_in_ready(f, &result);

    assert_int_equal(pl_host_park(f->host, PL_PARK_REQUEST), 1);
    /* On its way to parked at once: a trigger now waits for the next wake. */
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_RETIRING);
    f->fake.hang[PL_STEP_READY] = false;
    assert_int_equal(pl_host_wake(f->host, PL_TRIGGER_CONNECTION, fake_on_done, &follower),
                     PL_WAKE_JOINED);
    assert_int_equal(pl_host_generation_exited(f->host, 1, false), -ESRCH);
    assert_true(fake_run_until(f->loop, &follower.count, 5000));

    assert_int_equal(result.kind, PL_WAKE_CANCELLED);
    assert_int_equal(result.reason, PL_REASON_CANCELLED);
    assert_non_null(strstr(result.message, "park requested"));
    /* N+1 first, as a cancelled attempt; then N, parked with grace. */
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 2);
    assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_ATTEMPT);
    assert_int_equal(f->fake.retirements[0].reason, PL_REASON_CANCELLED);
    assert_true(f->fake.retirements[0].exec_started);
    assert_false(f->fake.retirements[0].record_attempt);
    assert_int_equal(f->fake.retirements[1].cause, PL_RETIRE_PARK);
    assert_int_equal(f->fake.retirements[1].park_cause, PL_PARK_REQUEST);
    assert_true(f->fake.retirements[1].graceful);
    int swap_failed = fake_find_event(&f->fake, PL_WAKE_EVENT_SWAP_FAILED, 0);
    int parked = fake_find_event(&f->fake, PL_WAKE_EVENT_PARKED, 0);
    assert_true(swap_failed >= 0 && parked > swap_failed);

    /* The trigger that came during the park woke a fresh generation. */
    assert_int_equal(follower.kind, PL_WAKE_SERVING);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 3);
    assert_true(fake_find_event(&f->fake, PL_WAKE_EVENT_WAKING, 1) > parked);
    assert_int_equal(pl_host_failure_streak(f->host), 0);
}

/* N ended during the swap (how, the caller says): the swap is cancelled,
 * N+1 is retired first, then N without grace, and the host parks as after a
 * failure. */
static void expect_n1_then_n_retired_and_parked(fixture *f, fake_result *result,
                                                pl_retire_cause cause, pl_reason reason,
                                                const char *message)
{
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_RETIRING);
    assert_true(fake_run_until(f->loop, &result->count, 5000));
    wait_parked(f);

    assert_int_equal(result->kind, PL_WAKE_CANCELLED);
    assert_non_null(strstr(result->message, message));
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 2);
    assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_ATTEMPT);
    assert_false(f->fake.retirements[0].record_attempt);
    assert_int_equal(f->fake.retirements[1].cause, cause);
    assert_int_equal(f->fake.retirements[1].reason, reason);
    assert_false(f->fake.retirements[1].graceful);
    assert_true(fake_find_event(&f->fake, PL_WAKE_EVENT_PARKED, 0) >
                fake_find_event(&f->fake, PL_WAKE_EVENT_SWAP_FAILED, 0));
    assert_int_equal(pl_host_failure_streak(f->host), 1);
}

static void n_crashing_during_a_swap_cancels_it_and_parks_as_a_failure(void **state)
{
    fixture *f = *state;
    fake_result result = {0};
    swap_waiting_in_ready(f, &result);

    assert_int_equal(pl_host_generation_exited(f->host, 1, false), 0);
    assert_int_equal(pl_host_generation_exited(f->host, 1, false), -ESRCH);
    expect_n1_then_n_retired_and_parked(f, &result, PL_RETIRE_EXITED, PL_REASON_CRASHED,
                                        "exited with status 1");
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_EXITED), 1);

    /* N's crash is a failure park like any other: the next wake waits it
     * out. */
    f->fake.hang[PL_STEP_READY] = false;
    serve(f);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_DEFERRED), 1);
}

/* The same for N failing while it serves (a missed watchdog). */
static void n_failing_during_a_swap_cancels_it_and_parks_as_a_failure(void **state)
{
    fixture *f = *state;
    fake_result result = {0};
    swap_waiting_in_ready(f, &result);

    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_WATCHDOG, false,
                                               "host web1: no WATCHDOG=1 within 1 s"),
                     0);
    expect_n1_then_n_retired_and_parked(f, &result, PL_RETIRE_PARK, PL_REASON_WATCHDOG,
                                        "no WATCHDOG=1 within 1 s; during the swap");
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_FAULTED), 1);
}

static void while_n_is_replaced_exits_and_cancels_wait_and_a_park_parks_n1(void **state)
{
    fixture *f = *state;
    make_host(f);
    serve(f);
    /* N's graceful retirement takes a while, as its grace does. */
    f->fake.delay_usec[PL_STEP_FAILED] = 20 * MSEC;
    fake_result result = {0};
    start_swap(f, &result);
    run_until_called(f, PL_STEP_FAILED, 1);
    assert_int_equal(f->fake.retirements[0].cause, PL_RETIRE_REPLACED);
    assert_int_equal(result.count, 0);

    assert_int_equal(pl_host_generation_exited(f->host, 143, false), -EBUSY);
    assert_int_equal(pl_host_generation_failed(f->host, PL_REASON_WATCHDOG, false, "late"), -EBUSY);
    assert_int_equal(pl_host_cancel(f->host, PL_REASON_CANCELLED, "too late"), 0);
    assert_int_equal(pl_host_park(f->host, PL_PARK_IDLE), 1);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_RETIRING);

    /* The swap still completes, then what serves (N+1) parks. */
    assert_true(fake_run_until(f->loop, &result.count, 5000));
    assert_int_equal(result.kind, PL_WAKE_SERVING);
    wait_parked(f);
    assert_int_equal(f->fake.calls[PL_STEP_FAILED], 2);
    assert_int_equal(f->fake.retirements[1].cause, PL_RETIRE_PARK);
    assert_int_equal(f->fake.retirements[1].park_cause, PL_PARK_IDLE);
    assert_int_equal(fake_count_events(&f->fake, PL_WAKE_EVENT_SWAP_FAILED), 0);
    assert_true(fake_find_event(&f->fake, PL_WAKE_EVENT_PARKED, 0) >
                fake_find_event(&f->fake, PL_WAKE_EVENT_SWAP_DONE, 0));
}

static void an_unproven_n1_blocks_the_next_swap_until_proof_but_n_serves(void **state)
{
    fixture *f = *state;
    f->fake.outcome[PL_STEP_READY][1] = PL_REASON_CRASHED;
    f->fake.unproven[0] = true; /* the swap's retirement of N+1 */
    make_host(f);
    serve(f);
    fake_result first = {0};
    swap_and_wait(f, &first);
    assert_int_equal(first.kind, PL_WAKE_FAILED);
    assert_int_equal(first.reason, PL_REASON_CRASHED);
    assert_true(first.unproven);
    assert_int_equal(first.attempts, 1); /* retryable, but it may still run */
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);
    assert_true(pl_host_is_unproven(f->host));

    fake_result second = {0};
    swap_and_wait(f, &second);
    assert_int_equal(second.kind, PL_WAKE_REFUSED);
    assert_int_equal(second.reason, PL_REASON_UNPROVEN_STOP);
    assert_int_equal(f->fake.calls[PL_STEP_READ], 2);
    assert_int_equal(pl_host_get_state(f->host), PL_HOST_SERVING);

    pl_host_report_proof(f->host);
    fake_result third = {0};
    swap_and_wait(f, &third);
    assert_int_equal(third.kind, PL_WAKE_SERVING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_swap_starts_n1_beside_n_then_retires_n_gracefully, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_swap_whose_build_is_never_ready_leaves_n_serving, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_swap_refused_at_prepare_is_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failure_after_publication_retires_n1_and_keeps_n, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(one_swap_at_a_time_and_wakes_find_the_host_serving, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_swap_needs_a_serving_host_with_nothing_in_flight, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(park_during_a_swap_retires_n1_then_parks_n, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(n_failing_during_a_swap_cancels_it_and_parks_as_a_failure,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(n_crashing_during_a_swap_cancels_it_and_parks_as_a_failure,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            while_n_is_replaced_exits_and_cancels_wait_and_a_park_parks_n1, setup, teardown),
        cmocka_unit_test_setup_teardown(
            an_unproven_n1_blocks_the_next_swap_until_proof_but_n_serves, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
