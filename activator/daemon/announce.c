/* Pipeline transitions, told to the journal, to NNG subscribers, and to the
 * host's socket watching. */
#include "activator/daemon/daemon.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

void act_publish(act_daemon_host *host, act_event_kind kind, const act_generation *gen,
                 const char *reason)
{
    if (!host->daemon->events)
        return;
    act_event event = {
        .kind = kind,
        .host = host->config->name,
        .generation = gen ? gen->number : 0,
        .version = gen && gen->build.version[0] ? gen->build.version : NULL,
        .digest = gen && gen->build.build_digest[0] ? gen->build.build_digest : NULL,
        .pid = gen ? gen->process.pid : 0,
        .reason = reason,
    };
    act_events_publish(host->daemon->events, &event);
}

/* The generation a transition is about: the one starting, else the one
 * serving (or being retired). */
static const act_generation *current_generation(const act_daemon_host *host)
{
    return host->starting ? host->starting : host->serving;
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
        return LOG_DEBUG;
    default:
        return LOG_INFO;
    }
}

static void log_event(act_daemon_host *host, const act_wake_event *event,
                      const act_generation *gen)
{
    const char *reason =
        event->reason != ACT_REASON_NONE ? act_reason_to_string(event->reason) : NULL;
    act_log_ctx ctx = {
        .host = host->config->name,
        .generation = gen ? gen->number : 0,
        .build = gen && gen->build.version[0] ? gen->build.version : NULL,
        .reason = reason,
    };
    const char *type = act_wake_event_type_to_string(event->type);
    if (event->type == ACT_WAKE_EVENT_STEP)
        act_log_fields(LOG_DEBUG, &ctx, "host %s: step %s (attempt %u)", host->config->name,
                       act_step_to_string(event->step), event->attempt);
    else if (event->message)
        act_log_fields(priority_of(event->type), &ctx, "host %s: %s: %s", host->config->name, type,
                       event->message);
    else if (event->delay_usec)
        act_log_fields(priority_of(event->type), &ctx, "host %s: %s for %" PRIu64 " ms",
                       host->config->name, type, event->delay_usec / 1000);
    else
        act_log_fields(priority_of(event->type), &ctx, "host %s: %s", host->config->name, type);
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
        return event->step == ACT_STEP_RESTORE && host->config->exec_restore ? ACT_EVENT_RESTORING
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

void act_announce(act_host *pipeline, const act_wake_event *event, void *userdata)
{
    act_daemon_host *host = userdata;
    const act_generation *gen = current_generation(host);
    log_event(host, event, gen);
    act_telemetry_wake_event(host, event);

    /* Status shows why the last wake did not serve; a served wake clears it. */
    if (event->type == ACT_WAKE_EVENT_SERVING) {
        host->last_reason[0] = '\0';
        host->last_message[0] = '\0';
    } else if (event->reason != ACT_REASON_NONE && event->reason != ACT_REASON_CANCELLED &&
               (event->type == ACT_WAKE_EVENT_FAILED || event->type == ACT_WAKE_EVENT_REFUSED ||
                event->type == ACT_WAKE_EVENT_GAVE_UP || event->type == ACT_WAKE_EVENT_EXITED ||
                event->type == ACT_WAKE_EVENT_CANCELLED)) {
        snprintf(host->last_reason, sizeof(host->last_reason), "%s",
                 act_reason_to_string(event->reason));
        snprintf(host->last_message, sizeof(host->last_message), "%s",
                 event->message ? event->message : "");
    }

    int kind = event_kind_of(host, event);
    if (kind >= 0) {
        const char *reason =
            event->reason != ACT_REASON_NONE ? act_reason_to_string(event->reason)
            : event->type == ACT_WAKE_EVENT_EXITED ? act_reason_to_string(ACT_REASON_CRASHED)
                                                  : NULL;
        act_publish(host, (act_event_kind)kind, gen, reason);
    }

    if (event->type == ACT_WAKE_EVENT_SERVING || event->type == ACT_WAKE_EVENT_PARKED)
        act_daemon_status_changed(host->daemon);

    switch (event->type) {
    case ACT_WAKE_EVENT_SERVING:
        act_idle_watch(host, true);
        break;
    case ACT_WAKE_EVENT_PARKING:
        act_idle_watch(host, false);
        break;
    case ACT_WAKE_EVENT_PARKED:
        /* Parked: the sockets are ours to watch again, for the next client. */
        act_idle_watch(host, false);
        if (!host->serving && !host->starting)
            act_host_dir_close(host);
        if (!host->daemon->stopping)
            act_host_watch_demand(host, true);
        act_swap_host_parked(host);
        break;
    case ACT_WAKE_EVENT_WAKING:
        act_host_watch_demand(host, false);
        break;
    case ACT_WAKE_EVENT_GAVE_UP:
    case ACT_WAKE_EVENT_CANCELLED:
        /* A wake that ended unserved leaves the host parked without a PARKED
         * event: its sockets are watched again, so the clients waiting there
         * wake it after the failure-park backoff. */
        if (!event->swap && !host->daemon->stopping &&
            act_host_get_state(pipeline) == ACT_HOST_PARKED)
            act_host_watch_demand(host, true);
        break;
    case ACT_WAKE_EVENT_REFUSED:
        /* A refused wake will be refused again: waiting clients are closed
         * now rather than left to time out and re-trigger it. Not in a swap:
         * those clients are N's, and N serves on. */
        if (!event->swap)
            act_host_drain_backlog(host);
        break;
    default:
        break;
    }
}
