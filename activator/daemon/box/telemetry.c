#include "activator/daemon/box/telemetry.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/generations/announce.h"
#include "activator/daemon/generations/generation.h"
#include "activator/metrics/server.h"
#include "common/log.h"

#ifndef ACTIVATOR_VERSION
#define ACTIVATOR_VERSION "unknown"
#endif

struct ad_telemetry {
    met_registry *registry;
    met_daemon_metrics families;
    met_server *server;
};

static void on_control_request(const char *op, const char *outcome, uint64_t duration_usec,
                               void *userdata)
{
    ad_daemon *daemon = userdata;
    if (daemon->metrics)
        met_metric_add(daemon->metrics->control_requests, MET_LABELS(op, outcome), 1);
}

static void forget_host(const met_daemon_metrics *m, const char *name)
{
    met_metric_remove(m->host_memory_current, MET_LABELS(name));
    met_metric_remove(m->host_pids_current, MET_LABELS(name));
}

/* One host's memory and pids, while a generation serves. */
static void refresh_host(const met_daemon_metrics *m, const ad_host *host)
{
    const char *name = host->name;
    const ad_generation *serving = host->serving;
    cg_stats stats;
    if (serving && ad_generation_stats(serving, &stats) == 0) {
        met_metric_set(m->host_memory_current, MET_LABELS(name), (double)stats.memory_current);
        met_metric_set(m->host_pids_current, MET_LABELS(name), (double)stats.pids_current);
    } else {
        forget_host(m, name);
    }
}

void ad_telemetry_forget_host(ad_daemon *daemon, const char *host)
{
    assert(daemon && host);
    if (!daemon->metrics)
        return;
    forget_host(daemon->metrics, host);
    /* Counted while the host was configured, and of no host now. */
    for (ad_replica_next next = 0; next < _AD_REPLICA_NEXT_MAX; next++)
        met_metric_remove(daemon->metrics->replica_exits,
                          MET_LABELS(host, ad_replica_next_name(next)));
}

/* Before each scrape: hosts by state, per-host memory and pids, and the
 * events sequence. Reading cgroup files per serving host is cheap next to a
 * scrape interval. */
/* The store's own counters of what went over the wire. */
static void refresh_store_traffic(const met_daemon_metrics *m, const claim_store *store)
{
    if (!store)
        return;
    claims_store_traffic traffic[32];
    size_t n = claims_store_traffic_get(store, traffic, ARRAY_SIZE(traffic));
    for (size_t i = 0; i < n; i++) {
        const char *op = traffic[i].operation;
        met_metric_set(m->store_requests, MET_LABELS(op), (double)traffic[i].requests);
        met_metric_set(m->store_bytes, MET_LABELS(op, "sent"), (double)traffic[i].bytes_sent);
        met_metric_set(m->store_bytes, MET_LABELS(op, "received"),
                       (double)traffic[i].bytes_received);
    }
}

static void refresh(met_registry *metrics, void *userdata)
{
    ad_daemon *daemon = userdata;
    const met_daemon_metrics *m = daemon->metrics;
    double by_state[_PL_HOST_STATE_MAX] = {0};
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        const ad_host *host = daemon->hosts[i];
        by_state[pl_host_get_state(host->pipeline)]++;
        refresh_host(m, host);
    }
    for (int state = 0; state < _PL_HOST_STATE_MAX; state++)
        met_metric_set(m->hosts, MET_LABELS(pl_host_state_to_string((pl_host_state)state)),
                       by_state[state]);
    met_metric_set(m->frozen_hosts, NULL, (double)ad_freeze_count(daemon));
    if (daemon->events)
        met_metric_set(m->events_published, NULL, (double)ev_sequence(daemon->events));
    refresh_store_traffic(m, daemon->store);
}

/* claims_observe_fn: every asynchronous claim store call's duration. The
 * store outlives nothing of the telemetry's, but may be opened first. */
void ad_telemetry_observe_store(const char *operation, uint64_t duration_usec, int result,
                                void *userdata)
{
    ad_daemon *daemon = userdata;
    if (daemon->metrics)
        met_metric_observe(daemon->metrics->store_duration,
                           MET_LABELS(operation, result < 0 ? "error" : "ok"),
                           (double)duration_usec / 1e6);
}

int ad_telemetry_open(ad_daemon *daemon, ctrl_observe_fn *observe, act_error *err)
{
    assert(daemon && observe);
    *observe = on_control_request;
    ad_telemetry *telemetry = calloc(1, sizeof(*telemetry));
    if (!telemetry)
        return act_error_set(err, ENOMEM, "out of memory");
    daemon->telemetry = telemetry;
    telemetry->registry = met_new();
    if (!telemetry->registry)
        return act_error_set(err, ENOMEM, "out of memory");
    int r = met_daemon_metrics_register(telemetry->registry, &telemetry->families, err);
    if (r < 0)
        return r;
    daemon->metrics = &telemetry->families;
    met_metric_set(telemetry->families.box_info, MET_LABELS(daemon->config.box, ACTIVATOR_VERSION),
                   1);
    return ad_telemetry_listen(daemon, daemon->config.metrics_listen, &telemetry->server, err);
}

int ad_telemetry_listen(ad_daemon *daemon, const char *listen, met_server **out, act_error *err)
{
    assert(daemon && daemon->telemetry && out);
    *out = NULL;
    if (!listen)
        return 0;
    /* Its errors name MetricsListen= and the address themselves. */
    int r = met_server_new(daemon->loop, listen, daemon->telemetry->registry, refresh, daemon,
                           out, err);
    if (r < 0)
        return r;
    met_server_count_refusals(*out, daemon->telemetry->families.metrics_refused);
    return 0;
}

void ad_telemetry_replace(ad_daemon *daemon, met_server *server)
{
    assert(daemon && daemon->telemetry);
    met_server_free(daemon->telemetry->server);
    daemon->telemetry->server = server;
}

void ad_telemetry_close(ad_daemon *daemon)
{
    ad_telemetry *telemetry = daemon->telemetry;
    if (!telemetry)
        return;
    daemon->metrics = NULL;
    met_server_free(telemetry->server);
    met_free(telemetry->registry);
    free(telemetry);
    daemon->telemetry = NULL;
}
