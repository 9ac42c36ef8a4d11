/* The step machine of one wake (or of one swap, or of one retirement of a
 * serving generation).
 *
 * Operations complete into pl_wake_complete / pl_wake_retired, which only
 * record the outcome and arm the wake's advance source. The machine moves on
 * from that source, from its timers, or from a budget grant delivered the same
 * way, so it is never re-entered from inside an operation and never runs a
 * joiner's callback from inside an API call. */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/pipeline/pipeline-internal.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

/* Timers here are policy (backoff, windows), not measurement: a millisecond
 * of coalescing slack keeps them cheap without blurring test-scale delays. */
#define TIMER_ACCURACY_USEC 1000ULL
#define USEC_PER_MSEC 1000ULL

static void wake_finish(pl_wake *wake, pl_wake_kind kind, pl_reason reason, pl_step step,
                        const char *message);
static void wake_call(pl_wake *wake, pl_step step);
static void wake_begin_attempt(pl_wake *wake);
static void wake_try_budget(pl_wake *wake);
static void wake_cancel_cleanup(pl_wake *wake);

void pl_joiner_list_append(pl_joiner_list *list, pl_joiner *joiner)
{
    assert(list);
    assert(joiner);
    joiner->next = NULL;
    if (list->tail)
        list->tail->next = joiner;
    else
        list->head = joiner;
    list->tail = joiner;
}

void pl_joiner_list_move(pl_joiner_list *to, pl_joiner_list *from)
{
    assert(to);
    assert(from);
    if (!from->head)
        return;
    if (to->tail)
        to->tail->next = from->head;
    else
        to->head = from->head;
    to->tail = from->tail;
    from->head = from->tail = NULL;
}

static void joiner_list_free(pl_joiner_list *list)
{
    pl_joiner *joiner = list->head;
    while (joiner) {
        pl_joiner *next = joiner->next;
        free(joiner);
        joiner = next;
    }
    list->head = list->tail = NULL;
}

static void emit(pl_wake *wake, pl_wake_event_type type, pl_step step, pl_reason reason,
                 uint64_t delay_usec, const char *message)
{
    pl_wake_event event = {
        .type = type,
        .step = step,
        .attempt = wake->attempt,
        .reason = reason,
        .trigger = wake->trigger,
        .park_cause = wake->retirement.park_cause,
        .delay_usec = delay_usec,
        .message = message,
        .swap = wake->mode == PL_WAKE_MODE_SWAP,
    };
    pl_host_emit(wake->host, &event);
}

static pl_step_fn op_of(const pl_ops *ops, pl_step step)
{
    switch (step) {
    case PL_STEP_READ:
        return ops->read;
    case PL_STEP_ADMIT:
        return ops->admit;
    case PL_STEP_RESTORE:
        return ops->restore;
    case PL_STEP_RESERVE:
        return ops->reserve;
    case PL_STEP_MATERIALIZE:
        return ops->materialize;
    case PL_STEP_PREPARE:
        return ops->prepare;
    case PL_STEP_GATE:
        return ops->gate;
    case PL_STEP_EXEC:
        return ops->exec;
    case PL_STEP_READY:
        return ops->ready;
    case PL_STEP_REPLICATE:
        return ops->replicate;
    case PL_STEP_PUBLISH:
        return ops->publish;
    case PL_STEP_HEALTHY:
        return ops->healthy;
    case PL_STEP_FAILED:
        return ops->failed;
    default:
        return NULL;
    }
}

void pl_wake_kick(pl_wake *wake)
{
    assert(wake);
    int r = sd_event_source_set_enabled(wake->advance, SD_EVENT_ONESHOT);
    if (r < 0)
        act_log(LOG_ERR, "host %s: cannot schedule the next pipeline step: %s", wake->host->name,
                strerror(-r));
}

static void stop_timer(sd_event_source **source)
{
    *source = sd_event_source_disable_unref(*source);
}

static int timer_fired(sd_event_source *source, uint64_t usec, void *userdata);
static int window_closed(sd_event_source *source, uint64_t usec, void *userdata);

static int arm(pl_wake *wake, sd_event_source **source, uint64_t delay_usec,
               sd_event_time_handler_t handler)
{
    stop_timer(source);
    return sd_event_add_time_relative(wake->host->loop, source, CLOCK_MONOTONIC, delay_usec,
                                      TIMER_ACCURACY_USEC, handler, wake);
}

static void release_slot(pl_wake *wake)
{
    if (!wake->holds_slot)
        return;
    wake->holds_slot = false;
    pl_start_cap_release(wake->host->config.start_cap);
}

static void record_completion(pl_wake *wake, pl_reason reason, bool proven, const char *fmt,
                              va_list ap) __attribute__((format(printf, 4, 0)));
static void record_completion(pl_wake *wake, pl_reason reason, bool proven, const char *fmt,
                              va_list ap)
{
    wake->completed_reason = reason;
    wake->completed_proven = proven;
    wake->completed_message[0] = '\0';
    if (fmt)
        vsnprintf(wake->completed_message, sizeof(wake->completed_message), fmt, ap);
    else if (reason != PL_REASON_NONE)
        snprintf(wake->completed_message, sizeof(wake->completed_message),
                 "host %s: step %s failed: %s", wake->host->name, pl_step_to_string(wake->step),
                 pl_reason_to_string(reason));
}

/* Records an outcome the pipeline itself decided for the step in flight. */
static void complete_internally(pl_wake *wake, pl_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void complete_internally(pl_wake *wake, pl_reason reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record_completion(wake, reason, reason == PL_REASON_NONE, fmt, ap);
    va_end(ap);
    wake->phase = PL_PHASE_COMPLETED;
    pl_wake_kick(wake);
}

int pl_wake_complete(pl_wake *wake, pl_reason reason, const char *fmt, ...)
{
    if (!wake || wake->phase != PL_PHASE_OP || wake->step == PL_STEP_FAILED ||
        (unsigned)reason >= _PL_REASON_MAX)
        return -ESTALE;
    va_list ap;
    va_start(ap, fmt);
    record_completion(wake, reason, reason == PL_REASON_NONE, fmt, ap);
    va_end(ap);
    stop_timer(&wake->window);
    wake->phase = PL_PHASE_COMPLETED;
    pl_wake_kick(wake);
    return 0;
}

int pl_wake_retired(pl_wake *wake, bool proven, const char *fmt, ...)
{
    if (!wake || wake->phase != PL_PHASE_OP || wake->step != PL_STEP_FAILED)
        return -ESTALE;
    va_list ap;
    va_start(ap, fmt);
    record_completion(wake, PL_REASON_NONE, proven, fmt, ap);
    va_end(ap);
    wake->phase = PL_PHASE_COMPLETED;
    pl_wake_kick(wake);
    return 0;
}

/* What is left of WakeTimeoutSec= (0 when it passed); UINT64_MAX without
 * a bound. */
static uint64_t wake_time_left_usec(const pl_wake *wake)
{
    uint64_t bound = wake->host->config.wake_timeout_usec;
    if (!bound)
        return UINT64_MAX;
    uint64_t spent = act_loop_now_usec(wake->host->loop) - wake->read_usec;
    return spent >= bound ? 0 : bound - spent;
}

/* ReadyTimeoutSec=, cut so that it ends within WakeTimeoutSec=, and for a
 * build with a fallback, a fallback's window before that. */
static uint64_t ready_window_usec(pl_wake *wake)
{
    const pl_config *config = &wake->host->config;
    uint64_t window = config->ready_timeout_usec;
    uint64_t left = wake_time_left_usec(wake);
    if (left != UINT64_MAX && wake->room_for_fallback) {
        uint64_t reserve = config->ready_timeout_usec < config->wake_timeout_usec / 2
                               ? config->ready_timeout_usec
                               : config->wake_timeout_usec / 2;
        left = left > reserve ? left - reserve : 0;
    }
    if (left < window)
        window = left;
    /* A window of nothing would close before the exec could answer. */
    wake->window_usec = window > USEC_PER_MSEC ? window : USEC_PER_MSEC;
    return wake->window_usec;
}

static void wake_call(pl_wake *wake, pl_step step)
{
    pl_host *host = wake->host;
    wake->step = step;
    wake->phase = PL_PHASE_OP;
    if (step == PL_STEP_RESERVE) {
        wake->starts++;
        wake->attempt_live = true;
        wake->exec_started = false;
        wake->room_for_fallback = false;
    }
    emit(wake, step == PL_STEP_FAILED ? PL_WAKE_EVENT_RETIRING : PL_WAKE_EVENT_STEP, step,
         step == PL_STEP_FAILED ? wake->retirement.reason : PL_REASON_NONE, 0, NULL);
    if (step == PL_STEP_READY) {
        /* The window is the pipeline's, not the operation's, so a ready
         * probe that never answers cannot hold the host forever. */
        int r = arm(wake, &wake->window, ready_window_usec(wake), window_closed);
        if (r < 0) {
            complete_internally(wake, PL_REASON_SETUP_FAILED,
                                "host %s: cannot arm the ready window timer: %s", host->name,
                                strerror(-r));
            return;
        }
    }
    pl_step_fn op = op_of(host->ops, step);
    if (!op) {
        complete_internally(wake, PL_REASON_NONE, NULL);
        return;
    }
    op(wake, host->ops_userdata);
}

static void wake_abandon(pl_wake *wake)
{
    /* COMPLETED first, so that a completion the operation sends while
     * abandoning is refused as stale. */
    wake->phase = PL_PHASE_COMPLETED;
    stop_timer(&wake->window);
    if (wake->host->ops->abandon)
        wake->host->ops->abandon(wake, wake->step, wake->host->ops_userdata);
}

static int window_closed(sd_event_source *source, uint64_t usec, void *userdata)
{
    pl_wake *wake = userdata;
    if (wake->phase != PL_PHASE_OP || wake->step != PL_STEP_READY)
        return 0;
    wake_abandon(wake);
    complete_internally(wake, PL_REASON_READY_TIMEOUT,
                        "host %s: attempt %u was not ready within %llu ms (ReadyTimeoutSec%s)",
                        wake->host->name, wake->attempt,
                        (unsigned long long)(wake->window_usec / USEC_PER_MSEC),
                        wake->window_usec >= wake->host->config.ready_timeout_usec ? ""
                        : wake->room_for_fallback ? ", cut short by WakeTimeoutSec to leave its "
                                                    "fallback a window"
                                                  : ", cut short by WakeTimeoutSec");
    return 0;
}

static bool step_in_attempt(pl_step step)
{
    return step >= PL_STEP_RESERVE && step <= PL_STEP_READY;
}

static bool step_after_ready(pl_step step)
{
    return step >= PL_STEP_REPLICATE && step <= PL_STEP_HEALTHY;
}

/* Runs `failed` for the live attempt with what the wake is handling. */
static void wake_retire_attempt(pl_wake *wake, pl_reason reason, bool record)
{
    wake->retirement = (pl_retirement){
        .cause = wake->published || step_after_ready(wake->step) ? PL_RETIRE_UNCERTAIN
                                                                 : PL_RETIRE_ATTEMPT,
        .reason = reason,
        .attempt = wake->attempt,
        .record_attempt = record,
        .exec_started = wake->exec_started,
        /* A start's attempt holds no client: waiting ones sit in the backlog,
         * so it is killed at once. A swap's attempt runs on the live sockets
         * beside N and may hold accepted connections: SIGTERM and the grace
         * first, so they are answered, not reset. */
        .graceful = wake->mode == PL_WAKE_MODE_SWAP,
        .park_cause = PL_PARK_FAILURE,
    };
    wake_call(wake, PL_STEP_FAILED);
}

static void wake_step_failed(pl_wake *wake)
{
    pl_step step = wake->step;
    pl_reason reason = wake->completed_reason;

    wake->failure_reason = reason;
    wake->failure_step = step;
    /* A gate refusal is a refusal whatever its reason: the gate exists to
     * stop an exec, and what it stops is never the build's failure. */
    wake->failure_refused = pl_reason_is_refusal(reason) || step == PL_STEP_GATE;
    /* Nothing after ready is retried: from there on the claim may already
     * name this generation, and a blind retry could run two. */
    wake->failure_retry =
        step_in_attempt(step) && step != PL_STEP_GATE && pl_reason_is_retryable(reason);
    snprintf(wake->failure_message, sizeof(wake->failure_message), "%s", wake->completed_message);

    emit(wake, wake->failure_refused ? PL_WAKE_EVENT_REFUSED : PL_WAKE_EVENT_FAILED, step, reason,
         0, wake->failure_message);

    if (!wake->attempt_live) {
        /* read, admit and restore start nothing the pipeline must retire;
         * their own operations clean up after themselves. */
        wake_finish(wake, wake->failure_refused ? PL_WAKE_REFUSED : PL_WAKE_FAILED, reason, step,
                    wake->failure_message);
        return;
    }
    bool record = step != PL_STEP_GATE && pl_reason_blames_build(reason);
    wake_retire_attempt(wake, reason, record);
}

/* N+1 is published and healthy: the swap's last step retires the generation
 * it replaces, with the grace a park gives, for N's requests in flight. */
static void wake_retire_replaced(pl_wake *wake)
{
    wake->retirement = (pl_retirement){
        .cause = PL_RETIRE_REPLACED,
        .reason = PL_REASON_NONE,
        .graceful = true,
    };
    wake_call(wake, PL_STEP_FAILED);
}

bool pl_wake_is_replacing(const pl_wake *wake)
{
    assert(wake);
    return wake->mode == PL_WAKE_MODE_SWAP && wake->step == PL_STEP_FAILED &&
           wake->retirement.cause == PL_RETIRE_REPLACED;
}

static void wake_finish_serving(pl_wake *wake, const char *replaced)
{
    pl_host *host = wake->host;
    /* Room for the note about the replaced generation (up to three messages). */
    char message[PL_MESSAGE_MAX * 4];
    snprintf(message, sizeof(message), "host %s %s (attempt %u of %u)%s", host->name,
             wake->mode == PL_WAKE_MODE_SWAP ? "serves its new generation" : "serves",
             wake->attempt, host->config.max_starts, replaced ? replaced : "");
    wake_finish(wake, PL_WAKE_SERVING, PL_REASON_NONE, PL_STEP_HEALTHY, message);
}

static void wake_retired(pl_wake *wake)
{
    pl_host *host = wake->host;
    bool proven = wake->completed_proven;
    char message[PL_MESSAGE_MAX * 3];

    emit(wake, proven ? PL_WAKE_EVENT_RETIRED : PL_WAKE_EVENT_UNPROVEN, PL_STEP_FAILED,
         wake->retirement.reason, 0, wake->completed_message[0] ? wake->completed_message : NULL);
    wake->attempt_live = false;
    wake->exec_started = false;
    release_slot(wake);
    if (!proven)
        host->unproven = true;

    if (wake->mode == PL_WAKE_MODE_RETIRE) {
        wake_finish(wake, PL_WAKE_CANCELLED, PL_REASON_CANCELLED, PL_STEP_FAILED,
                    wake->cancel_message);
        return;
    }
    if (pl_wake_is_replacing(wake)) {
        /* N+1 serves whatever became of N; an unproven N only holds back
         * later starts, as any unproven generation does. */
        if (proven) {
            wake_finish_serving(wake, "; the generation it replaced is proven stopped");
            return;
        }
        snprintf(message, sizeof(message),
                 "; the generation it replaced is not proven stopped (%s), so no further start "
                 "until a proof",
                 wake->completed_message[0] ? wake->completed_message : "no detail");
        wake_finish_serving(wake, message);
        return;
    }
    if (wake->cancel_requested) {
        wake_finish(wake, PL_WAKE_CANCELLED, wake->cancel_reason, wake->step, wake->cancel_message);
        return;
    }
    pl_wake_kind kind = wake->failure_refused ? PL_WAKE_REFUSED : PL_WAKE_FAILED;
    if (!proven) {
        /* No further start while the last one may still run: the same rule
         * as the check that opens every wake. */
        snprintf(message, sizeof(message),
                 "%s; host %s: attempt %u is not proven stopped (%s), so no further start "
                 "until a proof",
                 wake->failure_message, host->name, wake->attempt,
                 wake->completed_message[0] ? wake->completed_message : "no detail");
        wake_finish(wake, kind, wake->failure_reason, wake->failure_step, message);
        return;
    }
    bool at_once = wake->next_attempt_now;
    wake->next_attempt_now = false;
    if (wake->failure_retry && wake->attempt < host->config.max_starts) {
        uint64_t delay =
            at_once ? 0 : pl_attempt_backoff_usec(wake->attempt, host->config.backoff_unit_usec);
        if (delay >= wake_time_left_usec(wake)) {
            snprintf(message, sizeof(message),
                     "%s; host %s: no further start, as WakeTimeoutSec (%llu ms) %s",
                     wake->failure_message, host->name,
                     (unsigned long long)(host->config.wake_timeout_usec / USEC_PER_MSEC),
                     delay ? "would pass during the backoff" : "passed");
            wake_finish(wake, kind, wake->failure_reason, wake->failure_step, message);
            return;
        }
        if (at_once) {
            wake_begin_attempt(wake);
            return;
        }
        int r = arm(wake, &wake->timer, delay, timer_fired);
        if (r >= 0) {
            wake->phase = PL_PHASE_BACKOFF;
            emit(wake, PL_WAKE_EVENT_BACKOFF, wake->failure_step, wake->failure_reason, delay,
                 NULL);
            return;
        }
        snprintf(message, sizeof(message), "%s; host %s: cannot arm the backoff timer: %s",
                 wake->failure_message, host->name, strerror(-r));
        wake_finish(wake, kind, wake->failure_reason, wake->failure_step, message);
        return;
    }
    if (wake->failure_retry)
        snprintf(message, sizeof(message), "%s; host %s: gave up after %u starts",
                 wake->failure_message, host->name, wake->starts);
    else
        snprintf(message, sizeof(message), "%s", wake->failure_message);
    wake_finish(wake, kind, wake->failure_reason, wake->failure_step, message);
}

static void wake_step_done(pl_wake *wake)
{
    pl_step step = wake->step;

    if (step == PL_STEP_FAILED) {
        wake_retired(wake);
        return;
    }
    if (wake->cancel_requested) {
        wake_cancel_cleanup(wake);
        return;
    }
    if (wake->completed_reason != PL_REASON_NONE) {
        wake_step_failed(wake);
        return;
    }
    switch (step) {
    case PL_STEP_READ:
        wake_call(wake, PL_STEP_ADMIT);
        return;
    case PL_STEP_ADMIT:
        emit(wake, PL_WAKE_EVENT_ADMITTED, step, PL_REASON_NONE, 0, NULL);
        wake_call(wake, PL_STEP_RESTORE);
        return;
    case PL_STEP_RESTORE:
        wake_begin_attempt(wake);
        return;
    case PL_STEP_RESERVE:
    case PL_STEP_MATERIALIZE:
    case PL_STEP_PREPARE:
    case PL_STEP_GATE:
        wake_call(wake, step + 1);
        return;
    case PL_STEP_EXEC:
        wake->exec_started = true;
        emit(wake, PL_WAKE_EVENT_EXECUTED, step, PL_REASON_NONE, 0, NULL);
        wake_call(wake, PL_STEP_READY);
        return;
    case PL_STEP_READY:
        emit(wake, PL_WAKE_EVENT_READY, step, PL_REASON_NONE, 0, NULL);
        /* A ready generation no longer counts as a start in flight. */
        release_slot(wake);
        wake_call(wake, PL_STEP_REPLICATE);
        return;
    case PL_STEP_REPLICATE:
        wake_call(wake, PL_STEP_PUBLISH);
        return;
    case PL_STEP_PUBLISH:
        wake->published = true;
        emit(wake, PL_WAKE_EVENT_PUBLISHED, step, PL_REASON_NONE, 0, NULL);
        wake_call(wake, PL_STEP_HEALTHY);
        return;
    case PL_STEP_HEALTHY:
        /* The generation serves: it is no attempt any more, and nothing
         * retires it as one. */
        wake->attempt_live = false;
        if (wake->mode == PL_WAKE_MODE_SWAP)
            wake_retire_replaced(wake);
        else
            wake_finish_serving(wake, NULL);
        return;
    default:
        return;
    }
}

static void wake_refuse_budget(pl_wake *wake, const char *message)
{
    emit(wake, PL_WAKE_EVENT_REFUSED, PL_STEP_RESERVE, PL_REASON_BUDGET, 0, message);
    wake_finish(wake, PL_WAKE_REFUSED, PL_REASON_BUDGET, PL_STEP_RESERVE, message);
}

static void slot_granted(pl_start_waiter *waiter, void *userdata)
{
    pl_wake *wake = userdata;
    wake->holds_slot = true;
    stop_timer(&wake->timer);
    wake->phase = PL_PHASE_GRANTED;
    pl_wake_kick(wake);
}

static void wake_try_budget(pl_wake *wake)
{
    pl_host *host = wake->host;
    const pl_config *config = &host->config;
    char message[PL_MESSAGE_MAX];
    int r;

    if (host->rate_limited) {
        uint64_t wait = pl_token_bucket_take(&host->bucket, act_loop_now_usec(host->loop));
        if (wait > config->budget_wait_max_usec) {
            snprintf(message, sizeof(message),
                     "host %s: start rate limit of %g per second reached; the next start is "
                     "possible in %llu ms, past the %llu ms a wake waits",
                     host->name, config->start_rate_per_sec,
                     (unsigned long long)(wait / USEC_PER_MSEC),
                     (unsigned long long)(config->budget_wait_max_usec / USEC_PER_MSEC));
            wake_refuse_budget(wake, message);
            return;
        }
        if (wait > 0) {
            r = arm(wake, &wake->timer, wait, timer_fired);
            if (r < 0)
                goto timer_failed;
            wake->phase = PL_PHASE_TOKEN;
            emit(wake, PL_WAKE_EVENT_HELD, PL_STEP_RESERVE, PL_REASON_BUDGET, wait, NULL);
            return;
        }
    }
    if (config->start_cap &&
        !pl_start_cap_acquire(config->start_cap, &wake->waiter, slot_granted, wake)) {
        r = arm(wake, &wake->timer, config->budget_wait_max_usec, timer_fired);
        if (r < 0) {
            pl_start_cap_withdraw(config->start_cap, &wake->waiter);
            goto timer_failed;
        }
        wake->phase = PL_PHASE_SLOT;
        emit(wake, PL_WAKE_EVENT_HELD, PL_STEP_RESERVE, PL_REASON_BUDGET, 0, NULL);
        return;
    }
    wake->holds_slot = config->start_cap != NULL;
    wake_call(wake, PL_STEP_RESERVE);
    return;

timer_failed:
    snprintf(message, sizeof(message), "host %s: cannot arm the budget timer: %s", host->name,
             strerror(-r));
    emit(wake, PL_WAKE_EVENT_FAILED, PL_STEP_RESERVE, PL_REASON_SETUP_FAILED, 0, message);
    wake_finish(wake, PL_WAKE_FAILED, PL_REASON_SETUP_FAILED, PL_STEP_RESERVE, message);
}

static void wake_begin_attempt(pl_wake *wake)
{
    wake->attempt++;
    wake->published = false;
    wake_try_budget(wake);
}

static void wake_check_and_read(pl_wake *wake)
{
    pl_host *host = wake->host;
    if (host->unproven) {
        char message[PL_MESSAGE_MAX];
        snprintf(message, sizeof(message),
                 "host %s: an earlier generation is not proven stopped; no wake runs until its "
                 "stop is proven (its cgroup found empty)",
                 host->name);
        emit(wake, PL_WAKE_EVENT_REFUSED, PL_STEP_NONE, PL_REASON_UNPROVEN_STOP, 0, message);
        wake_finish(wake, PL_WAKE_REFUSED, PL_REASON_UNPROVEN_STOP, PL_STEP_NONE, message);
        return;
    }
    wake->read_usec = act_loop_now_usec(host->loop);
    wake_call(wake, PL_STEP_READ);
}

static void wake_begin(pl_wake *wake)
{
    pl_host *host = wake->host;

    if (wake->mode == PL_WAKE_MODE_RETIRE) {
        wake_call(wake, PL_STEP_FAILED);
        return;
    }
    emit(wake, wake->mode == PL_WAKE_MODE_SWAP ? PL_WAKE_EVENT_SWAP_STARTED : PL_WAKE_EVENT_WAKING,
         PL_STEP_NONE, PL_REASON_NONE, 0, NULL);
    if (wake->cancel_requested) {
        wake_cancel_cleanup(wake);
        return;
    }
    /* A swap never waits here in practice: the wake that made N serve waited
     * the delay out, and only a park or a failed wake (never a failed swap)
     * starts a new one. */
    uint64_t delay =
        pl_failure_park_delay_usec(host->failure_streak, host->config.park_backoff_base_usec,
                                   host->config.park_backoff_max_usec);
    uint64_t since = act_loop_now_usec(host->loop) - host->last_failure_park_usec;
    if (delay > since) {
        int r = arm(wake, &wake->timer, delay - since, timer_fired);
        if (r >= 0) {
            wake->phase = PL_PHASE_DELAY;
            emit(wake, PL_WAKE_EVENT_DEFERRED, PL_STEP_NONE, PL_REASON_NONE, delay - since, NULL);
            return;
        }
        /* Without a timer the backoff cannot be honoured; waking at once is
         * safer than never waking, and the failure is logged. */
        act_log(LOG_ERR, "host %s: cannot arm the failure-park backoff timer: %s", host->name,
                strerror(-r));
    }
    wake_check_and_read(wake);
}

static void wake_cancel_cleanup(pl_wake *wake)
{
    if (wake->attempt_live) {
        wake_retire_attempt(wake, wake->cancel_reason, false);
        return;
    }
    wake_finish(wake, PL_WAKE_CANCELLED, wake->cancel_reason, wake->step, wake->cancel_message);
}

static int advance(sd_event_source *source, void *userdata)
{
    pl_wake *wake = userdata;
    switch (wake->phase) {
    case PL_PHASE_QUEUED:
        wake_begin(wake);
        break;
    case PL_PHASE_COMPLETED:
        wake_step_done(wake);
        break;
    case PL_PHASE_GRANTED:
        if (wake->cancel_requested)
            wake_cancel_cleanup(wake);
        else
            wake_call(wake, PL_STEP_RESERVE);
        break;
    case PL_PHASE_STOPPING:
        wake_cancel_cleanup(wake);
        break;
    default:
        break;
    }
    return 0;
}

static int timer_fired(sd_event_source *source, uint64_t usec, void *userdata)
{
    pl_wake *wake = userdata;
    pl_host *host = wake->host;
    stop_timer(&wake->timer);
    switch (wake->phase) {
    case PL_PHASE_DELAY:
        wake_check_and_read(wake);
        break;
    case PL_PHASE_TOKEN:
        wake_try_budget(wake);
        break;
    case PL_PHASE_SLOT: {
        char message[PL_MESSAGE_MAX];
        pl_start_cap_withdraw(host->config.start_cap, &wake->waiter);
        snprintf(message, sizeof(message),
                 "host %s: held for %llu ms behind the box-wide cap of %u starts in flight; "
                 "raise MaxConcurrentStarts= or find what keeps starts slow",
                 host->name,
                 (unsigned long long)(host->config.budget_wait_max_usec / USEC_PER_MSEC),
                 host->config.start_cap->limit);
        wake_refuse_budget(wake, message);
        break;
    }
    case PL_PHASE_BACKOFF:
        wake_begin_attempt(wake);
        break;
    default:
        break;
    }
    return 0;
}

void pl_wake_request_cancel(pl_wake *wake, pl_reason reason, const char *message)
{
    assert(wake);
    assert(message);
    wake->cancel_requested = true;
    wake->cancel_reason = reason;
    snprintf(wake->cancel_message, sizeof(wake->cancel_message), "%s", message);

    switch (wake->phase) {
    case PL_PHASE_DELAY:
    case PL_PHASE_TOKEN:
    case PL_PHASE_SLOT:
    case PL_PHASE_BACKOFF:
        /* Waits are step boundaries: end them now. */
        stop_timer(&wake->timer);
        if (wake->phase == PL_PHASE_SLOT)
            pl_start_cap_withdraw(wake->host->config.start_cap, &wake->waiter);
        wake->phase = PL_PHASE_STOPPING;
        pl_wake_kick(wake);
        break;
    case PL_PHASE_OP:
        /* Waiting for readiness changes nothing, so it is abandoned at once;
         * any other operation acts and is let finish, so that what it did is
         * known before `failed` undoes it. */
        if (wake->step == PL_STEP_READY) {
            wake_abandon(wake);
            complete_internally(wake, PL_REASON_CANCELLED, "%s", message);
        }
        break;
    default:
        /* QUEUED, GRANTED and COMPLETED look at the request when the advance
         * source runs. */
        break;
    }
}

static void deliver(pl_host *host, pl_joiner_list *joiners, const pl_wake_result *result)
{
    for (pl_joiner *joiner = joiners->head; joiner; joiner = joiner->next)
        if (joiner->done)
            joiner->done(host, result, joiner->userdata);
    joiner_list_free(joiners);
}

static pl_wake_event_type terminal_event(pl_wake_kind kind)
{
    switch (kind) {
    case PL_WAKE_SERVING:
        return PL_WAKE_EVENT_SERVING;
    case PL_WAKE_CANCELLED:
        return PL_WAKE_EVENT_CANCELLED;
    case PL_WAKE_FAILED:
    default:
        return PL_WAKE_EVENT_GAVE_UP;
    }
}

/* Last, once the wake and its data are gone and its triggers have their
 * outcome: the host is at rest (or already in the next wake), so what reacts
 * to its state sees the state it will keep. */
static void emit_ended(pl_host *host, pl_wake_mode mode, pl_reason reason, pl_step step)
{
    pl_host_emit(host, &(pl_wake_event){.type = PL_WAKE_EVENT_ENDED,
                                        .reason = reason,
                                        .step = step,
                                        .swap = mode == PL_WAKE_MODE_SWAP});
}

static void wake_finish(pl_wake *wake, pl_wake_kind kind, pl_reason reason, pl_step step,
                        const char *message)
{
    pl_host *host = wake->host;
    pl_wake_mode mode = wake->mode;
    char text[PL_MESSAGE_MAX * 3];
    pl_joiner_list joiners = wake->joiners, followers = wake->followers;

    snprintf(text, sizeof(text), "%s", message ? message : "");
    wake->phase = PL_PHASE_DONE;
    stop_timer(&wake->timer);
    stop_timer(&wake->window);
    if (host->config.start_cap)
        pl_start_cap_withdraw(host->config.start_cap, &wake->waiter);
    release_slot(wake);
    wake->joiners = wake->followers = (pl_joiner_list){0};

    pl_wake_result result = {
        .kind = kind,
        .reason = reason,
        .step = step,
        .attempts = wake->starts,
        .unproven = host->unproven,
        .message = text,
    };

    host->current = NULL;
    if (wake->mode == PL_WAKE_MODE_RETIRE) {
        host->state = PL_HOST_PARKED;
        emit(wake, PL_WAKE_EVENT_PARKED, PL_STEP_FAILED, wake->retirement.reason, 0,
             host->unproven ? "the generation is not proven stopped" : NULL);
        if (!joiners.head && !followers.head) {
            pl_wake_free(wake);
            emit_ended(host, mode, reason, step);
            return;
        }
        /* Triggers that came during the retirement start the next wake;
         * those a later park cancelled get that outcome. */
        snprintf(text, sizeof(text), "%s",
                 wake->cancel_message[0] ? wake->cancel_message : "park requested");
        result.kind = PL_WAKE_CANCELLED;
        result.reason = wake->cancel_requested ? wake->cancel_reason : PL_REASON_CANCELLED;
        result.step = PL_STEP_NONE;
    } else if (wake->mode == PL_WAKE_MODE_SWAP) {
        /* The host served throughout (N, or N+1 now), so its state and its
         * failure-park streak stay as they are; a park or an exit that came
         * meanwhile already made it RETIRING and queued its retirement. */
        emit(wake, kind == PL_WAKE_SERVING ? PL_WAKE_EVENT_SWAP_DONE : PL_WAKE_EVENT_SWAP_FAILED,
             step, reason, 0, text);
    } else {
        host->state = kind == PL_WAKE_SERVING ? PL_HOST_SERVING : PL_HOST_PARKED;
        if (kind == PL_WAKE_FAILED) {
            /* A wake that gave up ends its tenure in failure: the next one
             * waits out the failure-park backoff. */
            host->failure_streak =
                pl_failure_streak_next(host->failure_streak, PL_PARK_FAILURE, false);
            host->last_failure_park_usec = act_loop_now_usec(host->loop);
        }
        /* A refused wake already said so with its REFUSED event; the other
         * endings are announced here. */
        if (kind != PL_WAKE_REFUSED)
            emit(wake, terminal_event(kind), step, reason, 0, text);
    }

    if (wake->queued_retirement) {
        /* Triggers that came meanwhile already follow the retirement. */
        host->current = TAKE_PTR(wake->queued_retirement);
        pl_wake_kick(host->current);
    } else if (followers.head) {
        pl_wake *next = NULL;
        if (pl_wake_new(host, PL_WAKE_MODE_START, wake->trigger, &next) >= 0) {
            next->joiners = followers;
            host->current = next;
            host->state = PL_HOST_WAKING;
            pl_wake_kick(next);
        } else {
            pl_wake_result failed = {
                .kind = PL_WAKE_FAILED,
                .reason = PL_REASON_SETUP_FAILED,
                .step = PL_STEP_NONE,
                .message = "out of memory starting the next wake",
            };
            deliver(host, &followers, &failed);
        }
    }
    pl_wake_free(wake);
    deliver(host, &joiners, &result);
    emit_ended(host, mode, reason, step);
}

int pl_wake_new(pl_host *host, pl_wake_mode mode, pl_trigger trigger, pl_wake **ret)
{
    assert(host);
    assert(ret);
    pl_wake *wake = calloc(1, sizeof(*wake));
    if (!wake)
        return -ENOMEM;
    wake->host = host;
    wake->mode = mode;
    wake->trigger = trigger;
    wake->phase = PL_PHASE_QUEUED;
    int r = sd_event_add_defer(host->loop, &wake->advance, advance, wake);
    if (r < 0) {
        free(wake);
        return r;
    }
    r = sd_event_source_set_enabled(wake->advance, SD_EVENT_OFF);
    if (r < 0) {
        sd_event_source_unref(wake->advance);
        free(wake);
        return r;
    }
    *ret = wake;
    return 0;
}

void pl_wake_free(pl_wake *wake)
{
    if (!wake)
        return;
    if (wake->host->config.start_cap)
        pl_start_cap_withdraw(wake->host->config.start_cap, &wake->waiter);
    release_slot(wake);
    stop_timer(&wake->advance);
    stop_timer(&wake->timer);
    stop_timer(&wake->window);
    joiner_list_free(&wake->joiners);
    joiner_list_free(&wake->followers);
    pl_wake_free(wake->queued_retirement);
    if (wake->destroy)
        wake->destroy(wake->data);
    free(wake);
}

pl_host *pl_wake_host(const pl_wake *wake)
{
    assert(wake);
    return wake->host;
}

pl_step pl_wake_step(const pl_wake *wake)
{
    assert(wake);
    return wake->step;
}

unsigned pl_wake_attempt(const pl_wake *wake)
{
    assert(wake);
    return wake->attempt;
}

const pl_retirement *pl_wake_retirement(const pl_wake *wake)
{
    assert(wake);
    return &wake->retirement;
}

const char *pl_wake_failure_message(const pl_wake *wake)
{
    assert(wake);
    return wake->failure_message;
}

void pl_wake_next_attempt_at_once(pl_wake *wake)
{
    assert(wake);
    wake->next_attempt_now = true;
}

void pl_wake_keep_room_for_fallback(pl_wake *wake)
{
    assert(wake);
    wake->room_for_fallback = true;
}

bool pl_wake_is_swap(const pl_wake *wake)
{
    return wake && wake->mode == PL_WAKE_MODE_SWAP;
}

void pl_wake_set_data(pl_wake *wake, void *data, void (*destroy)(void *data))
{
    assert(wake);
    if (wake->destroy && wake->data != data)
        wake->destroy(wake->data);
    wake->data = data;
    wake->destroy = destroy;
}

void *pl_wake_get_data(const pl_wake *wake)
{
    assert(wake);
    return wake->data;
}
