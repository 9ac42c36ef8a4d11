/* Serves a metrics registry at http://MetricsListen=/metrics over NNG's HTTP
 * server.
 *
 * NNG calls the handler on its own thread; the handler only queues the
 * request for the event loop. The loop calls the refresh callback (where the
 * daemon copies gauges such as memory.current into the registry), renders the
 * registry and completes the request, so NNG never reads daemon state. */
#pragma once

#include <systemd/sd-event.h>

#include "activator/metrics/metrics.h"
#include "common/cleanup.h"
#include "common/error.h"

#define MET_DEFAULT_LISTEN "127.0.0.1:9464"
#define MET_PATH "/metrics"

typedef struct met_server met_server;

/* Loop thread, before each render. */
typedef void (*met_refresh_fn)(met_registry *metrics, void *userdata);

/* listen is ADDR:PORT ("127.0.0.1:9464", "[::1]:9464"; port 0 picks a free
 * one). refresh may be NULL. */
int met_server_new(sd_event *event, const char *listen, met_registry *metrics,
                   met_refresh_fn refresh, void *userdata, met_server **out, act_error *err);

/* The bound TCP port. */
int met_server_port(const met_server *server);

/* Loop thread. Answers queued scrapes with 503 and stops the server. */
void met_server_free(met_server *server);
DEFINE_TRIVIAL_CLEANUP_FUNC(met_server *, met_server_free)
