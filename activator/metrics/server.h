/* Serves a metrics registry at http://MetricsListen=/metrics, on the event
 * loop itself: the registry is the loop's, rendering is quick, and a
 * scrape is one small request, so a thread of its own would buy nothing
 * but a hand-off.
 *
 * It holds at most MET_MAX_CONNECTIONS connections at once: one more is
 * answered 503 and closed at once, and counted. Each connection carries one
 * request (HTTP/1.0 or 1.1, answered with Connection: close) of at most
 * MET_REQUEST_MAX bytes, and has MET_CONNECTION_TIMEOUT_USEC to send it and
 * read the answer, so a client that never finishes (or never reads) cannot
 * keep a slot. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "activator/metrics/metrics.h"
#include "common/cleanup.h"
#include "common/error.h"

#define MET_DEFAULT_LISTEN "127.0.0.1:9464"
#define MET_PATH "/metrics"
#define MET_MAX_CONNECTIONS 16
#define MET_REQUEST_MAX 8192
#define MET_CONNECTION_TIMEOUT_USEC (5 * 1000 * 1000ull)

typedef struct met_server met_server;

/* Loop thread, before each render. */
typedef void (*met_refresh_fn)(met_registry *metrics, void *userdata);

/* listen is ADDR:PORT ("127.0.0.1:9464", "[::1]:9464"; port 0 picks a free
 * one). refresh may be NULL. */
int met_server_new(sd_event *event, const char *listen, met_registry *metrics,
                   met_refresh_fn refresh, void *userdata, met_server **out, act_error *err);

/* Counts each connection refused over the bound into refused (a counter
 * family without labels of the same registry; NULL: not counted there). */
void met_server_count_refusals(met_server *server, met_metric *refused);

/* The bound TCP port. */
int met_server_port(const met_server *server);

/* Connections refused so far, and those open now. */
uint64_t met_server_refused(const met_server *server);
unsigned met_server_connections(const met_server *server);

/* Closes every connection and the listening socket. */
void met_server_free(met_server *server);
DEFINE_TRIVIAL_CLEANUP_FUNC(met_server *, met_server_free)
