/* Pipeline transitions, and the exits and restarts of a generation's
 * replica, told to the journal, to NNG subscribers and to the metrics.
 * Nothing here decides anything. */
#include "activator/daemon/generations/announce.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"

/* event, about host, to subscribers (once the messaging is open). */
static void publish(ad_host *host, ev_event *event)
{
    ev_publisher *events = host->daemon->events;
    event->host = host->name;
    if (events)
        ev_publish(events, event);
}

void ad_publish(ad_host *host, ev_event_kind kind, const ad_generation *gen, const char *reason)
{
    assert(host);
    publish(host, &(ev_event){
                      .kind = kind,
                      .generation = gen ? gen->number : 0,
                      .version = gen && gen->build.version[0] ? gen->build.version : NULL,
                      .digest = gen && gen->build.build_digest[0] ? gen->build.build_digest : NULL,
                      .pid = gen ? gen->process.pid : 0,
                      .reason = reason,
                  });
}

void ad_announce_swept(ad_host *host, const char *leaf_name, uint64_t generation)
{
    assert(host && leaf_name);
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name, .generation = generation},
                   "host %s: leaf %s is proven stopped and removed", host->name, leaf_name);
    if (!generation)
        return;
    const met_daemon_metrics *metrics = host->daemon->metrics;
    if (metrics)
        met_metric_add(metrics->generations_retired, NULL, 1);
    publish(host, &(ev_event){.kind = EV_EVENT_RETIRED, .generation = generation});
}

const char *ad_replica_next_name(ad_replica_next next)
{
    static const char *const names[] = {
        [AD_REPLICA_RESTARTING] = "restarting",
        [AD_REPLICA_STOPPED] = "stopped",
        [AD_REPLICA_EXHAUSTED] = "exhausted",
    };
    static_assert(ARRAY_SIZE(names) == _AD_REPLICA_NEXT_MAX, "a replica outcome without a name");
    return (unsigned)next < ARRAY_SIZE(names) ? names[next] : "unknown";
}

/* The journal's fields for gen, with reason (may be NULL). */
static act_log_ctx log_ctx_of(const ad_generation *gen, const char *reason)
{
    return (act_log_ctx){
        .host = gen->host->name,
        .generation = gen->number,
        .build = gen->build.version[0] ? gen->build.version : NULL,
        .reason = reason,
    };
}

/* A replica event: gen's, with the replica's pid rather than the main
 * process's. */
static void publish_replica(const ad_generation *gen, ev_event_kind kind, pid_t pid,
                            const char *reason)
{
    publish(gen->host, &(ev_event){
                           .kind = kind,
                           .generation = gen->number,
                           .version = gen->build.version[0] ? gen->build.version : NULL,
                           .digest = gen->build.build_digest[0] ? gen->build.build_digest : NULL,
                           .pid = pid,
                           .reason = reason,
                       });
}

void ad_announce_replica_exited(const ad_generation *gen, pid_t pid, ad_replica_next next,
                                const char *how, const char *what_next)
{
    assert(gen && how && what_next);
    const char *name = gen->host->name, *outcome = ad_replica_next_name(next);
    act_log_ctx ctx = log_ctx_of(gen, NULL);
    char who[32] = "";
    if (pid > 0)
        snprintf(who, sizeof(who), " (pid %d)", (int)pid);
    /* A replica that stays down leaves the host without its copy. */
    act_log_fields(next == AD_REPLICA_RESTARTING ? LOG_WARNING : LOG_ERR, &ctx,
                   "host %s: generation %" PRIu64 "'s replica%s %s; %s", name, gen->number, who,
                   how, what_next);
    /* Counted before it is published: whoever hears the event finds it
     * counted. */
    const met_daemon_metrics *metrics = gen->host->daemon->metrics;
    if (metrics)
        met_metric_add(metrics->replica_exits, MET_LABELS(name, outcome), 1);
    char reason[256];
    snprintf(reason, sizeof(reason), "%s: %s", outcome, how);
    publish_replica(gen, EV_EVENT_REPLICA_EXITED, pid, reason);
}

void ad_announce_replica_restarted(const ad_generation *gen, unsigned restart)
{
    assert(gen);
    act_log_ctx ctx = log_ctx_of(gen, NULL);
    pid_t pid = gen->replica.process.pid;
    act_log_fields(LOG_NOTICE, &ctx,
                   "host %s: generation %" PRIu64 "'s replica runs again (pid %d, restart %u in "
                   "a row)",
                   gen->host->name, gen->number, (int)pid, restart);
    publish_replica(gen, EV_EVENT_REPLICA_RESTARTED, pid, NULL);
}

static int priority_of(pl_wake_event_type type)
{
    switch (type) {
    case PL_WAKE_EVENT_FAILED:
    case PL_WAKE_EVENT_GAVE_UP:
    case PL_WAKE_EVENT_FAULTED:
        return LOG_WARNING;
    case PL_WAKE_EVENT_UNPROVEN:
        return LOG_ERR;
    case PL_WAKE_EVENT_STEP:
    case PL_WAKE_EVENT_JOINED:
    case PL_WAKE_EVENT_ENDED:
        return LOG_DEBUG;
    default:
        return LOG_INFO;
    }
}

static void log_event(const ad_host *host, const pl_wake_event *event, const ad_generation *gen)
{
    const char *name = host->name;
    const char *reason =
        event->reason != PL_REASON_NONE ? pl_reason_to_string(event->reason) : NULL;
    act_log_ctx ctx = {
        .host = name,
        .generation = gen ? gen->number : 0,
        .build = gen && gen->build.version[0] ? gen->build.version : NULL,
        .reason = reason,
    };
    const char *type = pl_wake_event_type_to_string(event->type);
    if (event->type == PL_WAKE_EVENT_STEP)
        act_log_fields(LOG_DEBUG, &ctx, "host %s: step %s (attempt %u)", name,
                       pl_step_to_string(event->step), event->attempt);
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
static int event_kind_of(const ad_host *host, const pl_wake_event *event)
{
    switch (event->type) {
    case PL_WAKE_EVENT_WAKING:
        return EV_EVENT_WAKING;
    case PL_WAKE_EVENT_ADMITTED:
        return EV_EVENT_ADMITTED;
    case PL_WAKE_EVENT_STEP:
        return event->step == PL_STEP_RESTORE && ad_host_config(host)->exec_restore
                   ? EV_EVENT_RESTORING
                   : -1;
    case PL_WAKE_EVENT_EXECUTED:
        return EV_EVENT_EXEC;
    case PL_WAKE_EVENT_READY:
        return EV_EVENT_READY;
    case PL_WAKE_EVENT_PUBLISHED:
        return EV_EVENT_PUBLISHED;
    case PL_WAKE_EVENT_SERVING:
        return EV_EVENT_SERVING;
    case PL_WAKE_EVENT_PARKING:
        return EV_EVENT_PARKING;
    case PL_WAKE_EVENT_PARKED:
        return EV_EVENT_PARKED;
    /* retiring and retired are published by the generation itself
     * (generations/retire.c), which knows which one it is: in a swap, N. */
    case PL_WAKE_EVENT_FAILED:
    case PL_WAKE_EVENT_GAVE_UP:
    case PL_WAKE_EVENT_FAULTED: /* a serving generation failed (watchdog, unhealthy) */
        return EV_EVENT_FAILED;
    case PL_WAKE_EVENT_EXITED:
        /* Status 0 is an idle park; anything else, a serving generation failed. */
        return event->status != 0 ? EV_EVENT_FAILED : -1;
    case PL_WAKE_EVENT_CANCELLED:
        /* A park request says so with parking; another cause (the claim
         * went to another box) ends the wake unserved and is told. */
        if (event->reason == PL_REASON_CANCELLED)
            return -1;
        return pl_reason_is_refusal(event->reason) ? EV_EVENT_REFUSED : EV_EVENT_FAILED;
    case PL_WAKE_EVENT_REFUSED:
        return EV_EVENT_REFUSED;
    case PL_WAKE_EVENT_SWAP_STARTED:
        return EV_EVENT_SWAP_STARTED;
    case PL_WAKE_EVENT_SWAP_DONE:
        return EV_EVENT_SWAP_DONE;
    case PL_WAKE_EVENT_SWAP_FAILED:
        return EV_EVENT_SWAP_FAILED;
    case PL_WAKE_EVENT_PROVEN:
        return EV_EVENT_PROVEN;
    default:
        return -1;
    }
}

static const char *reason_label(pl_reason reason)
{
    return reason == PL_REASON_NONE ? "none" : pl_reason_to_string(reason);
}

static void count_wake(const met_daemon_metrics *metrics, const char *outcome, pl_reason reason)
{
    met_metric_add(metrics->wakes, MET_LABELS(outcome, reason_label(reason)), 1);
}

/* The counters a transition moves. The wake's start is kept on the host so
 * that its duration can be observed when it serves. */
static void count_event(ad_host *host, const pl_wake_event *event)
{
    const met_daemon_metrics *metrics = host->daemon->metrics;
    if (!metrics)
        return;
    if (event->reason == PL_REASON_STORE_ERROR &&
        (event->type == PL_WAKE_EVENT_FAILED || event->type == PL_WAKE_EVENT_REFUSED))
        met_metric_add(metrics->store_errors, MET_LABELS(pl_step_to_string(event->step)), 1);
    uint64_t started = host->wake_started_usec;
    switch (event->type) {
    case PL_WAKE_EVENT_WAKING:
        host->wake_started_usec = event->at_usec;
        break;
    case PL_WAKE_EVENT_SERVING:
        count_wake(metrics, "serving", PL_REASON_NONE);
        if (started && event->at_usec >= started)
            met_metric_observe(metrics->wake_duration, NULL,
                               (double)(event->at_usec - started) / 1e6);
        break;
    case PL_WAKE_EVENT_REFUSED:
        count_wake(metrics, "refused", event->reason);
        break;
    case PL_WAKE_EVENT_GAVE_UP:
        count_wake(metrics, "failed", event->reason);
        met_metric_add(metrics->failure_parks, MET_LABELS(reason_label(event->reason)), 1);
        break;
    case PL_WAKE_EVENT_EXITED:
        if (event->status != 0)
            met_metric_add(metrics->failure_parks, MET_LABELS("exited"), 1);
        break;
    case PL_WAKE_EVENT_FAULTED:
        met_metric_add(metrics->failure_parks, MET_LABELS(reason_label(event->reason)), 1);
        break;
    case PL_WAKE_EVENT_DEFERRED:
        met_metric_add(metrics->failure_backoff_deferrals, NULL, 1);
        break;
    case PL_WAKE_EVENT_HELD:
        met_metric_add(metrics->budget_deferrals, MET_LABELS(event->delay_usec ? "rate" : "slot"),
                       1);
        break;
    case PL_WAKE_EVENT_SWAP_DONE:
        met_metric_add(metrics->swaps, MET_LABELS("done", "none"), 1);
        break;
    case PL_WAKE_EVENT_SWAP_FAILED:
        met_metric_add(metrics->swaps, MET_LABELS("failed", reason_label(event->reason)), 1);
        break;
    case PL_WAKE_EVENT_EXECUTED:
        met_metric_add(metrics->generations_started, NULL, 1);
        break;
    case PL_WAKE_EVENT_RETIRED:
        met_metric_add(metrics->generations_retired, NULL, 1);
        break;
    default:
        break;
    }
}

void ad_announce_transition(ad_host *host, const pl_wake_event *event)
{
    assert(host && event);
    /* An exit or a fault is the serving generation's own, even while a
     * swap starts its successor; a proof is about the host's leaves not
     * proven stopped, none of which is a generation it may serve now. */
    bool about_serving =
        event->type == PL_WAKE_EVENT_EXITED || event->type == PL_WAKE_EVENT_FAULTED;
    const ad_generation *gen = event->type == PL_WAKE_EVENT_PROVEN ? NULL
                               : about_serving                     ? host->serving
                                               : ad_host_current_generation(host);
    log_event(host, event, gen);
    count_event(host, event);
    int kind = event_kind_of(host, event);
    if (kind < 0)
        return;
    const char *reason = event->reason != PL_REASON_NONE ? pl_reason_to_string(event->reason)
                         : event->type == PL_WAKE_EVENT_EXITED
                             ? pl_reason_to_string(PL_REASON_CRASHED)
                             : NULL;
    ad_publish(host, (ev_event_kind)kind, gen, reason);
}
