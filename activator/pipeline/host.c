/* A host's pipeline: triggers, swaps, joins, cancellation, parks, exits and
 * proofs. The step machine itself is in wake.c. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/pipeline/pipeline-internal.h"
#include "common/clock.h"

uint64_t act_host_now(const act_host *host)
{
    assert(host);
    uint64_t now = 0;
    /* The loop's timestamp of this iteration: every decision made while
     * dispatching one event sees the same time. */
    if (sd_event_now(host->loop, CLOCK_MONOTONIC, &now) < 0)
        now = act_now_usec();
    return now;
}

void act_host_emit(act_host *host, const act_wake_event *event)
{
    assert(host);
    assert(event);
    if (!host->on_event)
        return;
    act_wake_event stamped = *event;
    stamped.at_usec = act_now_usec();
    host->on_event(host, &stamped, host->event_userdata);
}

static void emit_host(act_host *host, act_wake_event_type type, act_reason reason,
                      act_trigger trigger, act_park_cause cause, int status, const char *message)
{
    act_wake_event event = {
        .type = type,
        .step = ACT_STEP_NONE,
        .reason = reason,
        .trigger = trigger,
        .park_cause = cause,
        .status = status,
        .message = message,
    };
    act_host_emit(host, &event);
}

int act_host_new(sd_event *loop, const char *name, const act_pipeline_config *config,
                 const act_pipeline_ops *ops, void *ops_userdata, act_wake_event_fn on_event,
                 void *event_userdata, act_host **ret, act_error *err)
{
    int r;

    if (!loop || !config || !ops || !ret)
        return act_error_set(err, EINVAL, "pipeline: loop, config, ops and ret are required");
    r = act_name_check("host", name, err);
    if (r < 0)
        return r;
    r = act_pipeline_config_check(config, err);
    if (r < 0)
        return act_error_prefix(err, "host %s", name);

    act_host *host = calloc(1, sizeof(*host));
    if (!host)
        return act_error_set(err, ENOMEM, "host %s: out of memory for its pipeline", name);
    host->loop = sd_event_ref(loop);
    snprintf(host->name, sizeof(host->name), "%s", name);
    host->config = *config;
    host->ops = ops;
    host->ops_userdata = ops_userdata;
    host->on_event = on_event;
    host->event_userdata = event_userdata;
    host->state = ACT_HOST_PARKED;
    if (config->start_rate_per_sec > 0) {
        r = act_token_bucket_init(&host->bucket, config->start_rate_per_sec, act_host_now(host),
                                  err);
        if (r < 0) {
            sd_event_unref(host->loop);
            free(host);
            return act_error_prefix(err, "host %s", name);
        }
        host->rate_limited = true;
    }
    *ret = host;
    return 0;
}

int act_host_free(act_host *host)
{
    if (!host)
        return 0;
    if (host->current)
        return -EBUSY;
    sd_event_unref(host->loop);
    free(host);
    return 0;
}

/* The wake that decides what a new trigger or a cancel gets: a retirement
 * queued behind a swap is where the host is going, not the swap ending first. */
static act_wake *pending_wake(const act_host *host)
{
    act_wake *wake = host->current;
    return wake && wake->queued_retirement ? wake->queued_retirement : wake;
}

int act_host_wake(act_host *host, act_trigger trigger, act_wake_done_fn done, void *userdata)
{
    assert(host);
    if ((unsigned)trigger >= _ACT_TRIGGER_MAX)
        return -EINVAL;
    if (host->state == ACT_HOST_SERVING)
        return ACT_WAKE_ALREADY_SERVING;

    act_joiner *joiner = calloc(1, sizeof(*joiner));
    if (!joiner)
        return -ENOMEM;
    joiner->done = done;
    joiner->userdata = userdata;

    act_wake *wake = pending_wake(host);
    if (wake) {
        /* A retirement, or a wake already told to stop, cannot give this
         * trigger what it asks for: it waits for the next wake instead. */
        bool follows = wake->mode == ACT_WAKE_MODE_RETIRE || wake->cancel_requested;
        act_joiner_list_append(follows ? &wake->followers : &wake->joiners, joiner);
        emit_host(host, ACT_WAKE_EVENT_JOINED, ACT_REASON_NONE, trigger, ACT_PARK_IDLE, 0, NULL);
        return ACT_WAKE_JOINED;
    }

    int r = act_wake_new(host, ACT_WAKE_MODE_START, trigger, &wake);
    if (r < 0) {
        free(joiner);
        return r;
    }
    act_joiner_list_append(&wake->joiners, joiner);
    host->current = wake;
    host->state = ACT_HOST_WAKING;
    act_wake_kick(wake);
    return ACT_WAKE_STARTED;
}

int act_host_swap(act_host *host, act_wake_done_fn done, void *userdata)
{
    if (!host)
        return -EINVAL;
    /* One thing at a time per host: a second swap, or a swap racing a wake
     * or a retirement, would leave the claim naming whichever came last. */
    if (host->current)
        return -EBUSY;
    if (host->state != ACT_HOST_SERVING)
        return -ESRCH;

    act_joiner *joiner = calloc(1, sizeof(*joiner));
    if (!joiner)
        return -ENOMEM;
    joiner->done = done;
    joiner->userdata = userdata;
    act_wake *wake = NULL;
    /* An operator's request, like activatorctl wake. */
    int r = act_wake_new(host, ACT_WAKE_MODE_SWAP, ACT_TRIGGER_WARM, &wake);
    if (r < 0) {
        free(joiner);
        return r;
    }
    act_joiner_list_append(&wake->joiners, joiner);
    host->current = wake;
    act_wake_kick(wake);
    return ACT_WAKE_STARTED;
}

static int cancel_with(act_host *host, act_reason reason, const char *message)
{
    act_wake *wake = pending_wake(host);
    if (!wake)
        return 0;
    /* N+1 serves already and N is on its way out: undoing that would take a
     * second swap, not a cancel. */
    if (act_wake_is_replacing(wake))
        return 0;
    if (wake->mode == ACT_WAKE_MODE_RETIRE || wake->cancel_requested) {
        /* The retirement (or the stop already asked for) goes on; what gets
         * cancelled are the triggers waiting behind it. */
        if (!wake->followers.head)
            return 0;
        act_joiner_list_move(&wake->joiners, &wake->followers);
        if (!wake->cancel_requested) {
            wake->cancel_requested = true;
            wake->cancel_reason = reason;
            snprintf(wake->cancel_message, sizeof(wake->cancel_message), "%s", message);
        }
        return 1;
    }
    act_wake_request_cancel(wake, reason, message);
    return 1;
}

int act_host_cancel(act_host *host, act_reason reason, const char *fmt, ...)
{
    assert(host);
    assert(fmt);
    char message[ACT_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    if ((unsigned)reason >= _ACT_REASON_MAX || reason == ACT_REASON_NONE)
        reason = ACT_REASON_CANCELLED;
    return cancel_with(host, reason, message);
}

/* Retires the serving generation now, or, during a swap, once the swap has
 * ended: `failed` retires one generation at a time. The swap is cancelled
 * unless N is already being replaced, so that what gets parked is N with no
 * N+1 beside it; cancel_reason and cancel_message say why. */
static int start_retirement(act_host *host, const act_retirement *retirement,
                            act_reason cancel_reason, const char *cancel_message)
{
    act_wake *wake = NULL;
    int r = act_wake_new(host, ACT_WAKE_MODE_RETIRE, ACT_TRIGGER_WARM, &wake);
    if (r < 0)
        return r;
    wake->retirement = *retirement;
    host->state = ACT_HOST_RETIRING;

    act_wake *swap = host->current;
    if (swap) {
        /* Only a swap runs beside a serving generation, and a queued
         * retirement makes the host RETIRING, so there is never a second. */
        swap->queued_retirement = wake;
        if (!swap->cancel_requested && !act_wake_is_replacing(swap))
            act_wake_request_cancel(swap, cancel_reason, cancel_message);
        return 1;
    }
    host->current = wake;
    act_wake_kick(wake);
    return 1;
}

static void note_park(act_host *host, act_park_cause cause, bool served_long_enough)
{
    host->failure_streak = act_failure_streak_next(host->failure_streak, cause, served_long_enough);
    if (cause == ACT_PARK_FAILURE)
        host->last_failure_park_usec = act_host_now(host);
}

int act_host_park(act_host *host, act_park_cause cause)
{
    assert(host);
    char message[ACT_MESSAGE_MAX];

    if ((unsigned)cause >= _ACT_PARK_CAUSE_MAX)
        return -EINVAL;
    switch (host->state) {
    case ACT_HOST_SERVING: {
        static const act_reason reason_of[_ACT_PARK_CAUSE_MAX] = {
            [ACT_PARK_IDLE] = ACT_REASON_NONE,
            [ACT_PARK_REQUEST] = ACT_REASON_CANCELLED,
            [ACT_PARK_CLAIM_LOST] = ACT_REASON_NOT_OWNER,
            [ACT_PARK_FAILURE] = ACT_REASON_UNHEALTHY,
        };
        act_retirement retirement = {
            .cause = ACT_RETIRE_PARK,
            .reason = reason_of[cause],
            /* A failing generation gets no grace: it is not serving anyway. */
            .graceful = cause != ACT_PARK_FAILURE,
            .park_cause = cause,
        };
        snprintf(message, sizeof(message),
                 "host %s: park requested (%s) during the swap; the new generation is retired "
                 "before the serving one parks",
                 host->name, act_park_cause_to_string(cause));
        int r = start_retirement(
            host, &retirement,
            cause == ACT_PARK_CLAIM_LOST ? ACT_REASON_NOT_OWNER : ACT_REASON_CANCELLED, message);
        if (r < 0)
            return r;
        note_park(host, cause, false);
        emit_host(host, ACT_WAKE_EVENT_PARKING, retirement.reason, ACT_TRIGGER_WARM, cause, 0,
                  NULL);
        return 1;
    }
    case ACT_HOST_WAKING:
    case ACT_HOST_RETIRING:
        snprintf(message, sizeof(message), "host %s: park requested (%s) during the wake",
                 host->name, act_park_cause_to_string(cause));
        return cancel_with(
            host, cause == ACT_PARK_CLAIM_LOST ? ACT_REASON_NOT_OWNER : ACT_REASON_CANCELLED,
            message);
    case ACT_HOST_PARKED:
    default:
        return 0;
    }
}

int act_host_generation_exited(act_host *host, int status, bool served_long_enough)
{
    assert(host);
    char message[ACT_MESSAGE_MAX];

    if (host->state != ACT_HOST_SERVING)
        return -ESRCH;
    if (host->current && act_wake_is_replacing(host->current))
        return -EBUSY;
    act_park_cause cause = status == 0 ? ACT_PARK_IDLE : ACT_PARK_FAILURE;
    act_retirement retirement = {
        .cause = ACT_RETIRE_EXITED,
        .reason = status == 0 ? ACT_REASON_NONE : ACT_REASON_CRASHED,
        .graceful = false,
        .park_cause = cause,
    };
    snprintf(message, sizeof(message),
             "host %s: the serving generation exited with status %d during the swap; the new "
             "generation is retired and the host parks",
             host->name, status);
    int r = start_retirement(host, &retirement, ACT_REASON_CANCELLED, message);
    if (r < 0)
        return r;
    note_park(host, cause, served_long_enough);
    emit_host(host, ACT_WAKE_EVENT_EXITED, retirement.reason, ACT_TRIGGER_WARM, cause, status,
              NULL);
    return 0;
}

int act_host_adopt_serving(act_host *host)
{
    assert(host);
    if (host->state != ACT_HOST_PARKED || host->current || host->unproven)
        return -EBUSY;
    host->state = ACT_HOST_SERVING;
    emit_host(host, ACT_WAKE_EVENT_SERVING, ACT_REASON_NONE, ACT_TRIGGER_WARM, ACT_PARK_IDLE, 0,
              "resumed a generation that outlived the previous daemon");
    return 0;
}

void act_host_report_proof(act_host *host)
{
    assert(host);
    if (!host->unproven)
        return;
    host->unproven = false;
    emit_host(host, ACT_WAKE_EVENT_PROVEN, ACT_REASON_NONE, ACT_TRIGGER_WARM, ACT_PARK_IDLE, 0,
              NULL);
}

const char *act_host_name(const act_host *host)
{
    assert(host);
    return host->name;
}

act_host_state act_host_get_state(const act_host *host)
{
    assert(host);
    return host->state;
}

bool act_host_is_unproven(const act_host *host)
{
    assert(host);
    return host->unproven;
}

unsigned act_host_failure_streak(const act_host *host)
{
    assert(host);
    return host->failure_streak;
}
