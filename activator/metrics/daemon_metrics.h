/* The daemon's metric families (issue 6), registered in one place so their
 * names and labels are fixed and documented here:
 *
 *   activator_hosts{state}                        gauge: hosts per pipeline state
 *   activator_wakes_total{outcome,reason}         counter: outcome serving|refused|failed,
 *                                                 reason a reason code or "none"
 *   activator_wake_duration_seconds               histogram: trigger to serving
 *   activator_generations_started_total           counter
 *   activator_generations_retired_total           counter
 *   activator_host_memory_current_bytes{host}     gauge: the generation's memory.current
 *   activator_host_pids_current{host}             gauge: the generation's pids.current
 *   activator_store_errors_total{operation}       counter: claim store failures
 *   activator_events_published_total              counter
 *   activator_control_requests_total{op,outcome}  counter: outcome "ok" or the error code
 *   activator_metrics_connections_refused_total   counter: scrapes refused over the
 *                                                 metrics server's connection bound */
#pragma once

#include "activator/metrics/metrics.h"

typedef struct met_daemon_metrics {
    met_metric *hosts;
    met_metric *wakes;
    met_metric *wake_duration;
    met_metric *generations_started;
    met_metric *generations_retired;
    met_metric *host_memory_current;
    met_metric *host_pids_current;
    met_metric *store_errors;
    met_metric *events_published;
    met_metric *control_requests;
    met_metric *metrics_refused;
    met_metric *frozen_hosts;         /* gauge: hosts whose generation is frozen */
    met_metric *thaws;                /* counter by outcome: served, retired */
    met_metric *thaw_duration;        /* histogram: readable socket to the app running */
    met_metric *pressure_retirements; /* counter: frozen generations retired on pressure */
} met_daemon_metrics;

int met_daemon_metrics_register(met_registry *metrics, met_daemon_metrics *out, act_error *err);
