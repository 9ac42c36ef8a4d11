#include "activator/daemon/telemetry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "activator/daemon/generation.h"
#include "activator/metrics/server.h"
#include "common/log.h"

struct act_telemetry {
    act_metrics *registry;
    act_daemon_metrics families;
    act_metrics_server *server;
};

static void on_control_request(const char *op, const char *outcome, uint64_t duration_usec,
                               void *userdata)
{
    act_daemon *daemon = userdata;
    if (daemon->metrics)
        act_metric_add(daemon->metrics->control_requests, ACT_LABELS(op, outcome), 1);
}

/* One host's memory and pids, while a generation serves. */
static void refresh_host(const act_daemon_metrics *m, const act_daemon_host *host)
{
    const char *name = act_daemon_host_name(host);
    const act_generation *serving = act_daemon_host_serving(host);
    cg_stats stats;
    if (serving && cg_leaf_stats(serving->leaf, &stats, NULL) == 0) {
        act_metric_set(m->host_memory_current, ACT_LABELS(name), (double)stats.memory_current);
        act_metric_set(m->host_pids_current, ACT_LABELS(name), (double)stats.pids_current);
    } else {
        act_metric_remove(m->host_memory_current, ACT_LABELS(name));
        act_metric_remove(m->host_pids_current, ACT_LABELS(name));
    }
}

/* Before each scrape: hosts by state, per-host memory and pids, and the
 * events sequence. Reading cgroup files per serving host is cheap next to a
 * scrape interval. */
static void refresh(act_metrics *metrics, void *userdata)
{
    act_daemon *daemon = userdata;
    const act_daemon_metrics *m = daemon->metrics;
    double by_state[_ACT_HOST_STATE_MAX] = {0};
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        const act_daemon_host *host = daemon->hosts[i];
        by_state[act_host_get_state(act_daemon_host_pipeline(host))]++;
        refresh_host(m, host);
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
    act_telemetry *telemetry = calloc(1, sizeof(*telemetry));
    if (!telemetry)
        return act_error_set(err, ENOMEM, "out of memory");
    daemon->telemetry = telemetry;
    telemetry->registry = act_metrics_new();
    if (!telemetry->registry)
        return act_error_set(err, ENOMEM, "out of memory");
    int r = act_daemon_metrics_register(telemetry->registry, &telemetry->families, err);
    if (r < 0)
        return r;
    daemon->metrics = &telemetry->families;
    if (!daemon->config.metrics_listen)
        return 0;
    r = act_metrics_server_new(daemon->loop, daemon->config.metrics_listen, telemetry->registry,
                               refresh, daemon, &telemetry->server, err);
    return r < 0 ? act_error_prefix(err, "MetricsListen=%s", daemon->config.metrics_listen) : 0;
}

void act_telemetry_close(act_daemon *daemon)
{
    act_telemetry *telemetry = daemon->telemetry;
    if (!telemetry)
        return;
    daemon->metrics = NULL;
    act_metrics_server_free(telemetry->server);
    act_metrics_free(telemetry->registry);
    free(telemetry);
    daemon->telemetry = NULL;
}
