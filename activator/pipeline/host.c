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

static void emit_host(pl_host *host, pl_wake_event_type type, pl_reason reason, pl_trigger trigger,
                      pl_park_cause cause, int status, const char *message)
{
    pl_wake_event event = {
        .type = type,
        .step = PL_STEP_NONE,
        .reason = reason,
        .trigger = trigger,
        .park_cause = cause,
        .status = status,
        .message = message,
    };
    pl_host_emit(host, &event);
}

/* A start rate of 0 is no limit; any other starts a full bucket now. */
static int set_rate(pl_host *host, double rate_per_sec, act_error *err)
{
    host->rate_limited = rate_per_sec > 0;
    if (!host->rate_limited)
        return 0;
    int r = pl_token_bucket_init(&host->bucket, rate_per_sec, act_loop_now_usec(host->loop), err);
    if (r < 0) {
        host->rate_limited = false;
        return act_error_prefix(err, "host %s", host->name);
    }
    return 0;
}

int pl_host_new(sd_event *loop, const char *name, const pl_config *config, const pl_ops *ops,
                void *ops_userdata, pl_wake_event_fn on_event, void *event_userdata, pl_host **ret,
                act_error *err)
{
    int r;

    if (!loop || !config || !ops || !ret)
        return act_error_set(err, EINVAL, "pipeline: loop, config, ops and ret are required");
    r = act_name_check("host", name, err);
    if (r < 0)
        return r;
    r = pl_config_check(config, err);
    if (r < 0)
        return act_error_prefix(err, "host %s", name);

    pl_host *host = calloc(1, sizeof(*host));
    if (!host)
        return act_error_set(err, ENOMEM, "host %s: out of memory for its pipeline", name);
    host->loop = sd_event_ref(loop);
    snprintf(host->name, sizeof(host->name), "%s", name);
    host->config = *config;
    host->ops = ops;
    host->ops_userdata = ops_userdata;
    host->on_event = on_event;
    host->event_userdata = event_userdata;
    host->state = PL_HOST_PARKED;
    r = set_rate(host, config->start_rate_per_sec, err);
    if (r < 0) {
        sd_event_unref(host->loop);
        free(host);
        return r;
    }
    *ret = host;
    return 0;
}

int pl_host_set_config(pl_host *host, const pl_config *config, act_error *err)
{
    assert(host && config);
    int r = pl_config_check(config, err);
    if (r < 0)
        return act_error_prefix(err, "host %s", host->name);
    if (config->start_cap != host->config.start_cap)
        return act_error_set(err, EINVAL,
                             "host %s: the start cap is the box's and cannot be swapped",
                             host->name);
    if (config->start_rate_per_sec != host->config.start_rate_per_sec &&
        (r = set_rate(host, config->start_rate_per_sec, err)) < 0)
        return r;
    host->config = *config;
    return 0;
}

const pl_config *pl_host_config(const pl_host *host)
{
    assert(host);
    return &host->config;
}

int pl_host_free(pl_host *host)
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
static pl_wake *pending_wake(const pl_host *host)
{
    pl_wake *wake = host->current;
    return wake && wake->queued_retirement ? wake->queued_retirement : wake;
}

int pl_host_wake(pl_host *host, pl_trigger trigger, pl_wake_done_fn done, void *userdata)
{
    assert(host);
    if ((unsigned)trigger >= _PL_TRIGGER_MAX)
        return -EINVAL;
    if (host->state == PL_HOST_SERVING)
        return PL_WAKE_ALREADY_SERVING;

    pl_joiner *joiner = calloc(1, sizeof(*joiner));
    if (!joiner)
        return -ENOMEM;
    joiner->done = done;
    joiner->userdata = userdata;

    pl_wake *wake = pending_wake(host);
    if (wake) {
        /* A retirement, or a wake already told to stop, cannot give this
         * trigger what it asks for: it waits for the next wake instead. */
        bool follows = wake->mode == PL_WAKE_MODE_RETIRE || wake->cancel_requested;
        pl_joiner_list_append(follows ? &wake->followers : &wake->joiners, joiner);
        emit_host(host, PL_WAKE_EVENT_JOINED, PL_REASON_NONE, trigger, PL_PARK_IDLE, 0, NULL);
        return PL_WAKE_JOINED;
    }

    int r = pl_wake_new(host, PL_WAKE_MODE_START, trigger, &wake);
    if (r < 0) {
        free(joiner);
        return r;
    }
    pl_joiner_list_append(&wake->joiners, joiner);
    host->current = wake;
    host->state = PL_HOST_WAKING;
    pl_wake_kick(wake);
    return PL_WAKE_STARTED;
}

int pl_host_swap(pl_host *host, pl_wake_done_fn done, void *userdata)
{
    if (!host)
        return -EINVAL;
    /* One thing at a time per host: a second swap, or a swap racing a wake
     * or a retirement, would leave the claim naming whichever came last. */
    if (host->current)
        return -EBUSY;
    if (host->state != PL_HOST_SERVING)
        return -ESRCH;

    pl_joiner *joiner = calloc(1, sizeof(*joiner));
    if (!joiner)
        return -ENOMEM;
    joiner->done = done;
    joiner->userdata = userdata;
    pl_wake *wake = NULL;
    /* An operator's request, like activatorctl wake. */
    int r = pl_wake_new(host, PL_WAKE_MODE_SWAP, PL_TRIGGER_WARM, &wake);
    if (r < 0) {
        free(joiner);
        return r;
    }
    pl_joiner_list_append(&wake->joiners, joiner);
    host->current = wake;
    pl_wake_kick(wake);
    return PL_WAKE_STARTED;
}

static int cancel_with(pl_host *host, pl_reason reason, const char *message)
{
    pl_wake *wake = pending_wake(host);
    if (!wake)
        return 0;
    /* N+1 serves already and N is on its way out: undoing that would take a
     * second swap, not a cancel. */
    if (pl_wake_is_replacing(wake))
        return 0;
    if (wake->mode == PL_WAKE_MODE_RETIRE || wake->cancel_requested) {
        /* The retirement (or the stop already asked for) goes on; what gets
         * cancelled are the triggers waiting behind it. */
        if (!wake->followers.head)
            return 0;
        pl_joiner_list_move(&wake->joiners, &wake->followers);
        if (!wake->cancel_requested) {
            wake->cancel_requested = true;
            wake->cancel_reason = reason;
            snprintf(wake->cancel_message, sizeof(wake->cancel_message), "%s", message);
        }
        return 1;
    }
    pl_wake_request_cancel(wake, reason, message);
    return 1;
}

int pl_host_cancel(pl_host *host, pl_reason reason, const char *fmt, ...)
{
    assert(host);
    assert(fmt);
    char message[PL_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    if ((unsigned)reason >= _PL_REASON_MAX || reason == PL_REASON_NONE)
        reason = PL_REASON_CANCELLED;
    return cancel_with(host, reason, message);
}

/* Retires the serving generation now, or, during a swap, once the swap has
 * ended: `failed` retires one generation at a time. The swap is cancelled
 * unless N is already being replaced, so that what gets parked is N with no
 * N+1 beside it; cancel_reason and cancel_message say why. */
static int start_retirement(pl_host *host, const pl_retirement *retirement, pl_reason cancel_reason,
                            const char *cancel_message)
{
    pl_wake *wake = NULL;
    int r = pl_wake_new(host, PL_WAKE_MODE_RETIRE, PL_TRIGGER_WARM, &wake);
    if (r < 0)
        return r;
    wake->retirement = *retirement;
    host->state = PL_HOST_RETIRING;

    pl_wake *swap = host->current;
    if (swap) {
        /* Only a swap runs beside a serving generation, and a queued
         * retirement makes the host RETIRING, so there is never a second. */
        swap->queued_retirement = wake;
        if (!swap->cancel_requested && !pl_wake_is_replacing(swap))
            pl_wake_request_cancel(swap, cancel_reason, cancel_message);
        return 1;
    }
    host->current = wake;
    pl_wake_kick(wake);
    return 1;
}

static void note_park(pl_host *host, pl_park_cause cause, bool served_long_enough)
{
    host->failure_streak = pl_failure_streak_next(host->failure_streak, cause, served_long_enough);
    if (cause == PL_PARK_FAILURE)
        host->last_failure_park_usec = act_loop_now_usec(host->loop);
}

int pl_host_park(pl_host *host, pl_park_cause cause)
{
    assert(host);
    char message[PL_MESSAGE_MAX];

    if ((unsigned)cause >= _PL_PARK_CAUSE_MAX)
        return -EINVAL;
    switch (host->state) {
    case PL_HOST_SERVING: {
        static const pl_reason reason_of[_PL_PARK_CAUSE_MAX] = {
            [PL_PARK_IDLE] = PL_REASON_NONE,
            [PL_PARK_REQUEST] = PL_REASON_CANCELLED,
            [PL_PARK_CLAIM_LOST] = PL_REASON_NOT_OWNER,
            [PL_PARK_FAILURE] = PL_REASON_UNHEALTHY,
        };
        pl_retirement retirement = {
            .cause = PL_RETIRE_PARK,
            .reason = reason_of[cause],
            /* A failing generation gets no grace: it is not serving anyway. */
            .graceful = cause != PL_PARK_FAILURE,
            .park_cause = cause,
        };
        snprintf(message, sizeof(message),
                 "host %s: park requested (%s) during the swap; the new generation is retired "
                 "before the serving one parks",
                 host->name, pl_park_cause_to_string(cause));
        int r = start_retirement(
            host, &retirement,
            cause == PL_PARK_CLAIM_LOST ? PL_REASON_NOT_OWNER : PL_REASON_CANCELLED, message);
        if (r < 0)
            return r;
        note_park(host, cause, false);
        emit_host(host, PL_WAKE_EVENT_PARKING, retirement.reason, PL_TRIGGER_WARM, cause, 0, NULL);
        return 1;
    }
    case PL_HOST_WAKING:
    case PL_HOST_RETIRING:
        snprintf(message, sizeof(message), "host %s: park requested (%s) during the wake",
                 host->name, pl_park_cause_to_string(cause));
        return cancel_with(
            host, cause == PL_PARK_CLAIM_LOST ? PL_REASON_NOT_OWNER : PL_REASON_CANCELLED, message);
    case PL_HOST_PARKED:
    default:
        return 0;
    }
}

/* The serving generation ended its tenure by itself (an exit, a fault): it
 * is retired now, or after the swap in flight is cancelled. */
static int serving_ended(pl_host *host, const pl_retirement *retirement, bool served_long_enough,
                         const char *swap_message)
{
    if (host->state != PL_HOST_SERVING)
        return -ESRCH;
    if (host->current && pl_wake_is_replacing(host->current))
        return -EBUSY;
    int r = start_retirement(host, retirement, PL_REASON_CANCELLED, swap_message);
    if (r < 0)
        return r;
    note_park(host, retirement->park_cause, served_long_enough);
    return 0;
}

int pl_host_generation_exited(pl_host *host, int status, bool served_long_enough)
{
    assert(host);
    char message[PL_MESSAGE_MAX];

    pl_park_cause cause = status == 0 ? PL_PARK_IDLE : PL_PARK_FAILURE;
    pl_retirement retirement = {
        .cause = PL_RETIRE_EXITED,
        .reason = status == 0 ? PL_REASON_NONE : PL_REASON_CRASHED,
        .graceful = false,
        .park_cause = cause,
    };
    snprintf(message, sizeof(message),
             "host %s: the serving generation exited with status %d during the swap; the new "
             "generation is retired and the host parks",
             host->name, status);
    int r = serving_ended(host, &retirement, served_long_enough, message);
    if (r < 0)
        return r;
    emit_host(host, PL_WAKE_EVENT_EXITED, retirement.reason, PL_TRIGGER_WARM, cause, status, NULL);
    return 0;
}

int pl_host_generation_failed(pl_host *host, pl_reason reason, bool served_long_enough,
                              const char *fmt, ...)
{
    assert(host);
    assert(fmt);
    char why[PL_MESSAGE_MAX], message[PL_MESSAGE_MAX * 2];

    if ((unsigned)reason >= _PL_REASON_MAX || reason == PL_REASON_NONE ||
        pl_reason_is_refusal(reason))
        return -EINVAL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    pl_retirement retirement = {
        .cause = PL_RETIRE_PARK,
        .reason = reason,
        .graceful = false,
        .park_cause = PL_PARK_FAILURE,
    };
    snprintf(message, sizeof(message),
             "%s; during the swap, so the new generation is retired and the host parks", why);
    int r = serving_ended(host, &retirement, served_long_enough, message);
    if (r < 0)
        return r;
    emit_host(host, PL_WAKE_EVENT_FAULTED, reason, PL_TRIGGER_WARM, PL_PARK_FAILURE, 0, why);
    return 0;
}

int pl_host_adopt_serving(pl_host *host)
{
    assert(host);
    if (host->state != PL_HOST_PARKED || host->current || host->unproven)
        return -EBUSY;
    host->state = PL_HOST_SERVING;
    emit_host(host, PL_WAKE_EVENT_SERVING, PL_REASON_NONE, PL_TRIGGER_WARM, PL_PARK_IDLE, 0,
              "resumed a generation that outlived the previous daemon");
    return 0;
}

void pl_host_mark_unproven(pl_host *host)
{
    assert(host);
    host->unproven = true;
}

void pl_host_report_proof(pl_host *host)
{
    assert(host);
    if (!host->unproven)
        return;
    host->unproven = false;
    emit_host(host, PL_WAKE_EVENT_PROVEN, PL_REASON_NONE, PL_TRIGGER_WARM, PL_PARK_IDLE, 0, NULL);
}

const char *pl_host_name(const pl_host *host)
{
    assert(host);
    return host->name;
}

pl_host_state pl_host_get_state(const pl_host *host)
{
    assert(host);
    return host->state;
}

bool pl_host_is_unproven(const pl_host *host)
{
    assert(host);
    return host->unproven;
}

unsigned pl_host_failure_streak(const pl_host *host)
{
    assert(host);
    return host->failure_streak;
}
