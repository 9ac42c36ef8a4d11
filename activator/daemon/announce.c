/* Pipeline transitions, told to the journal, to NNG subscribers and to the
 * metrics. Nothing here decides anything. */
#include "activator/daemon/announce.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

void act_publish(act_daemon_host *host, act_event_kind kind, const act_generation *gen,
                 const char *reason)
{
    act_events *events = act_daemon_host_daemon(host)->events;
    if (!events)
        return;
    act_event event = {
        .kind = kind,
        .host = act_daemon_host_name(host),
        .generation = gen ? gen->number : 0,
        .version = gen && gen->build.version[0] ? gen->build.version : NULL,
        .digest = gen && gen->build.build_digest[0] ? gen->build.build_digest : NULL,
        .pid = gen ? gen->process.pid : 0,
        .reason = reason,
    };
    act_events_publish(events, &event);
}

static int priority_of(act_wake_event_type type)
{
    switch (type) {
    case ACT_WAKE_EVENT_FAILED:
    case ACT_WAKE_EVENT_GAVE_UP:
        return LOG_WARNING;
    case ACT_WAKE_EVENT_UNPROVEN:
        return LOG_ERR;
    case ACT_WAKE_EVENT_STEP:
    case ACT_WAKE_EVENT_JOINED:
    case ACT_WAKE_EVENT_ENDED:
        return LOG_DEBUG;
    default:
        return LOG_INFO;
    }
}

static void log_event(const act_daemon_host *host, const act_wake_event *event,
                      const act_generation *gen)
{
    const char *name = act_daemon_host_name(host);
    const char *reason =
        event->reason != ACT_REASON_NONE ? act_reason_to_string(event->reason) : NULL;
    act_log_ctx ctx = {
        .host = name,
        .generation = gen ? gen->number : 0,
        .build = gen && gen->build.version[0] ? gen->build.version : NULL,
        .reason = reason,
    };
    const char *type = act_wake_event_type_to_string(event->type);
    if (event->type == ACT_WAKE_EVENT_STEP)
        act_log_fields(LOG_DEBUG, &ctx, "host %s: step %s (attempt %u)", name,
                       act_step_to_string(event->step), event->attempt);
    else if (event->message)
        act_log_fields(priority_of(event->type), &ctx, "host %s: %s: %s", name, type,
                       event->message);
    else if (event->delay_usec)
        act_log_fields(priority_of(event->type), &ctx, "host %s: %s for %" PRIu64 " ms", name,
                       type, event->delay_usec / 1000);
    else
        act_log_fields(priority_of(event->type), &ctx, "host %s: %s", name, type);
}

/* The NNG event that a pipeline transition is, or -1 for none. */
static int event_kind_of(const act_daemon_host *host, const act_wake_event *event)
{
    switch (event->type) {
    case ACT_WAKE_EVENT_WAKING:
        return ACT_EVENT_WAKING;
    case ACT_WAKE_EVENT_ADMITTED:
        return ACT_EVENT_ADMITTED;
    case ACT_WAKE_EVENT_STEP:
        return event->step == ACT_STEP_RESTORE && act_daemon_host_config(host)->exec_restore
                   ? ACT_EVENT_RESTORING
                   : -1;
    case ACT_WAKE_EVENT_EXECUTED:
        return ACT_EVENT_EXEC;
    case ACT_WAKE_EVENT_READY:
        return ACT_EVENT_READY;
    case ACT_WAKE_EVENT_PUBLISHED:
        return ACT_EVENT_PUBLISHED;
    case ACT_WAKE_EVENT_SERVING:
        return ACT_EVENT_SERVING;
    case ACT_WAKE_EVENT_PARKING:
        return ACT_EVENT_PARKING;
    case ACT_WAKE_EVENT_PARKED:
        return ACT_EVENT_PARKED;
    /* retiring and retired are published by the generation itself
     * (generation.c), which knows which one it is: in a swap, N. */
    case ACT_WAKE_EVENT_FAILED:
    case ACT_WAKE_EVENT_GAVE_UP:
        return ACT_EVENT_FAILED;
    case ACT_WAKE_EVENT_EXITED:
        /* Status 0 is an idle park; anything else, a serving generation failed. */
        return event->status != 0 ? ACT_EVENT_FAILED : -1;
    case ACT_WAKE_EVENT_CANCELLED:
        /* A park request says so with parking; another cause (the claim
         * went to another box) ends the wake unserved and is told. */
        if (event->reason == ACT_REASON_CANCELLED)
            return -1;
        return act_reason_is_refusal(event->reason) ? ACT_EVENT_REFUSED : ACT_EVENT_FAILED;
    case ACT_WAKE_EVENT_REFUSED:
        return ACT_EVENT_REFUSED;
    case ACT_WAKE_EVENT_SWAP_STARTED:
        return ACT_EVENT_SWAP_STARTED;
    case ACT_WAKE_EVENT_SWAP_DONE:
        return ACT_EVENT_SWAP_DONE;
    case ACT_WAKE_EVENT_SWAP_FAILED:
        return ACT_EVENT_SWAP_FAILED;
    default:
        return -1;
    }
}

static void count_wake(const act_daemon_metrics *metrics, const char *outcome, act_reason reason)
{
    act_metric_add(metrics->wakes,
                   ACT_LABELS(outcome, reason == ACT_REASON_NONE ? "none"
                                                                 : act_reason_to_string(reason)),
                   1);
}

/* The counters a transition moves. The wake's start is kept on the host so
 * that its duration can be observed when it serves. */
static void count_event(act_daemon_host *host, const act_wake_event *event)
{
    const act_daemon_metrics *metrics = act_daemon_host_daemon(host)->metrics;
    if (!metrics)
        return;
    if (event->reason == ACT_REASON_STORE_ERROR &&
        (event->type == ACT_WAKE_EVENT_FAILED || event->type == ACT_WAKE_EVENT_REFUSED))
        act_metric_add(metrics->store_errors, ACT_LABELS(act_step_to_string(event->step)), 1);
    uint64_t started = act_daemon_host_wake_started(host);
    switch (event->type) {
    case ACT_WAKE_EVENT_WAKING:
        act_daemon_host_set_wake_started(host, event->at_usec);
        break;
    case ACT_WAKE_EVENT_SERVING:
        count_wake(metrics, "serving", ACT_REASON_NONE);
        if (started && event->at_usec >= started)
            act_metric_observe(metrics->wake_duration, NULL,
                               (double)(event->at_usec - started) / 1e6);
        break;
    case ACT_WAKE_EVENT_REFUSED:
        count_wake(metrics, "refused", event->reason);
        break;
    case ACT_WAKE_EVENT_GAVE_UP:
        count_wake(metrics, "failed", event->reason);
        break;
    case ACT_WAKE_EVENT_EXECUTED:
        act_metric_add(metrics->generations_started, NULL, 1);
        break;
    case ACT_WAKE_EVENT_RETIRED:
        act_metric_add(metrics->generations_retired, NULL, 1);
        break;
    default:
        break;
    }
}

void act_announce_transition(act_daemon_host *host, const act_wake_event *event)
{
    const act_generation *gen = act_daemon_host_current_generation(host);
    log_event(host, event, gen);
    count_event(host, event);
    int kind = event_kind_of(host, event);
    if (kind < 0)
        return;
    const char *reason = event->reason != ACT_REASON_NONE ? act_reason_to_string(event->reason)
                         : event->type == ACT_WAKE_EVENT_EXITED
                             ? act_reason_to_string(ACT_REASON_CRASHED)
                             : NULL;
    act_publish(host, (act_event_kind)kind, gen, reason);
}
