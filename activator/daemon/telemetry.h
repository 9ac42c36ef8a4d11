/* The daemon's Prometheus metrics: the registry, its HTTP server
 * (MetricsListen=) and the gauges copied in before each scrape. The
 * counters are moved by the observers of transitions (announce.c). */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/context.h"

/* Registers the metric families (daemon->metrics) and serves them; fills
 * *observe with the control server's per-request counter. */
int act_telemetry_open(act_daemon *daemon, act_control_observe_fn *observe, act_error *err);
void act_telemetry_close(act_daemon *daemon);
