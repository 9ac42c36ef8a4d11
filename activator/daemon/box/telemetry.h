/* The daemon's Prometheus metrics: the registry, its HTTP server
 * (MetricsListen=) and the gauges copied in before each scrape. The
 * counters are moved by the observers of transitions (generations/announce.c). */
#pragma once

#include <stdint.h>

#include "activator/control/control.h"
#include "activator/daemon/host/context.h"
#include "activator/metrics/server.h"

/* Registers the metric families (daemon->metrics) and serves them; fills
 * *observe with the control server's per-request counter. */
int ad_telemetry_open(ad_daemon *daemon, ctrl_observe_fn *observe, act_error *err);
void ad_telemetry_close(ad_daemon *daemon);

/* A server of the daemon's metrics on listen (ADDR:PORT; NULL for none),
 * bound but not yet the daemon's: a reload binds a new MetricsListen=
 * before it changes anything. */
int ad_telemetry_listen(ad_daemon *daemon, const char *listen, met_server **out, act_error *err);
/* Serves the metrics with server (taken; NULL: none) from now on; the old
 * server stops. */
void ad_telemetry_replace(ad_daemon *daemon, met_server *server);
/* claims_store_set_observer's observer (userdata: the daemon): each claim
 * store call's duration into activator_store_operation_duration_seconds. */
void ad_telemetry_observe_store(const char *operation, uint64_t duration_usec, int result,
                                void *userdata);
/* A host left the configuration: its gauges go from the metrics. */
void ad_telemetry_forget_host(ad_daemon *daemon, const char *host);
