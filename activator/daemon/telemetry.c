/* The daemon's Prometheus metrics: counters moved as things happen on the
 * loop, gauges copied in just before each scrape is rendered. */
#include "activator/daemon/daemon.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"

static void on_control_request(const char *op, const char *outcome, uint64_t duration_usec,
                               void *userdata)
{
    act_daemon *daemon = userdata;
    act_metric_add(daemon->telemetry.control_requests, ACT_LABELS(op, outcome), 1);
}

/* Before each scrape: hosts by state, per-host memory and pids, and the
 * events sequence. Reading cgroup files per serving host is cheap next to a
 * scrape interval. */
static void refresh(act_metrics *metrics, void *userdata)
{
    act_daemon *daemon = userdata;
    const act_daemon_metrics *m = &daemon->telemetry;
    double by_state[_ACT_HOST_STATE_MAX] = {0};
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        act_daemon_host *host = &daemon->hosts[i];
        by_state[act_host_get_state(host->pipeline)]++;
        const char *name = host->config->name;
        cg_stats stats;
        if (host->serving && cg_leaf_stats(host->serving->leaf, &stats, NULL) == 0) {
            act_metric_set(m->host_memory_current, ACT_LABELS(name), (double)stats.memory_current);
            act_metric_set(m->host_pids_current, ACT_LABELS(name), (double)stats.pids_current);
        } else {
            act_metric_remove(m->host_memory_current, ACT_LABELS(name));
            act_metric_remove(m->host_pids_current, ACT_LABELS(name));
        }
    }
    for (int state = 0; state < _ACT_HOST_STATE_MAX; state++)
        act_metric_set(m->hosts, ACT_LABELS(act_host_state_to_string((act_host_state)state)),
                       by_state[state]);
    if (daemon->events)
        act_metric_set(m->events_published, NULL, (double)act_events_sequence(daemon->events));
}

int act_telemetry_open(act_daemon *daemon, act_control_observe_fn *observe, act_error *err)
{
    *observe = on_control_request;
    daemon->metrics = act_metrics_new();
    if (!daemon->metrics)
        return act_error_set(err, ENOMEM, "out of memory");
    int r = act_daemon_metrics_register(daemon->metrics, &daemon->telemetry, err);
    if (r < 0 || !daemon->config.metrics_listen)
        return r;
    r = act_metrics_server_new(daemon->loop, daemon->config.metrics_listen, daemon->metrics,
                               refresh, daemon, &daemon->metrics_server, err);
    return r < 0 ? act_error_prefix(err, "MetricsListen=%s", daemon->config.metrics_listen) : 0;
}

void act_telemetry_close(act_daemon *daemon)
{
    act_metrics_server_free(daemon->metrics_server);
    daemon->metrics_server = NULL;
    act_metrics_free(daemon->metrics);
    daemon->metrics = NULL;
}

static void count_wake(act_daemon_host *host, const char *outcome, act_reason reason)
{
    act_metric_add(host->daemon->telemetry.wakes,
                   ACT_LABELS(outcome, reason == ACT_REASON_NONE ? "none"
                                                                 : act_reason_to_string(reason)),
                   1);
}

void act_telemetry_wake_event(act_daemon_host *host, const act_wake_event *event)
{
    act_daemon *daemon = host->daemon;
    if (!daemon->metrics)
        return;
    const act_daemon_metrics *m = &daemon->telemetry;
    if (event->reason == ACT_REASON_STORE_ERROR &&
        (event->type == ACT_WAKE_EVENT_FAILED || event->type == ACT_WAKE_EVENT_REFUSED))
        act_metric_add(m->store_errors, ACT_LABELS(act_step_to_string(event->step)), 1);
    switch (event->type) {
    case ACT_WAKE_EVENT_WAKING:
        host->wake_started_usec = event->at_usec;
        break;
    case ACT_WAKE_EVENT_SERVING:
        count_wake(host, "serving", ACT_REASON_NONE);
        if (host->wake_started_usec && event->at_usec >= host->wake_started_usec)
            act_metric_observe(m->wake_duration, NULL,
                               (double)(event->at_usec - host->wake_started_usec) / 1e6);
        break;
    case ACT_WAKE_EVENT_REFUSED:
        count_wake(host, "refused", event->reason);
        break;
    case ACT_WAKE_EVENT_GAVE_UP:
        count_wake(host, "failed", event->reason);
        break;
    case ACT_WAKE_EVENT_EXECUTED:
        act_metric_add(m->generations_started, NULL, 1);
        break;
    case ACT_WAKE_EVENT_RETIRED:
        act_metric_add(m->generations_retired, NULL, 1);
        break;
    default:
        break;
    }
}
