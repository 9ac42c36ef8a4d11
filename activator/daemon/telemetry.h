/* The daemon's Prometheus metrics: the registry, its HTTP server
 * (MetricsListen=) and the gauges copied in before each scrape. The
 * counters are moved by the observers of transitions (announce.c). */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/context.h"

/* Registers the metric families (daemon->metrics) and serves them; fills
 * *observe with the control server's per-request counter. */
int ad_telemetry_open(ad_daemon *daemon, ctrl_observe_fn *observe, act_error *err);
void ad_telemetry_close(ad_daemon *daemon);
