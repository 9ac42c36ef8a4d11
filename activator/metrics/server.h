/* Serves a metrics registry at http://MetricsListen=/metrics, on the event
 * loop itself: the registry is the loop's, rendering is quick, and a
 * scrape is one small request, so a thread of its own would buy nothing
 * but a hand-off.
 *
 * HTTP is libmicrohttpd's, run by the loop: no thread of its own, its epoll
 * fd watched by the loop and its connection timeouts on a loop timer. The
 * listening socket and accept() are ours, so that every connection MHD
 * refuses is known and counted, and so that accept() failing for want of
 * fds pauses accepting rather than spinning the loop.
 *
 * What it guarantees:
 *   - GET /metrics (any query string) is answered 200 with the registry in
 *     the Prometheus text format (0.0.4), refreshed just before; another
 *     path is answered 404, another method on /metrics 405. Each answer
 *     closes its connection.
 *   - At most MET_MAX_CONNECTIONS connections are open at once, and at most
 *     MET_MAX_CONNECTIONS_PER_ADDRESS from one client address, so that
 *     connections from one address cannot keep scrapes from another out.
 *     A connection over either limit is closed at once, unanswered, and
 *     counted (met_server_refused, and the counter of
 *     met_server_count_refusals).
 *   - A connection on which nothing was received or sent for
 *     MET_CONNECTION_TIMEOUT_SEC is closed, so an idle or stuck client
 *     keeps its slot no longer than that.
 *   - A connection holds at most MET_CONNECTION_MEMORY bytes of request
 *     (the request line and headers; a larger one is refused with a 4xx)
 *     besides the answer.
 *   - When accept() fails for want of fds or memory (EMFILE, ENFILE,
 *     ENOBUFS, ENOMEM), accepting stops for MET_ACCEPT_PAUSE_USEC and is
 *     tried again; meanwhile connections wait in the listen backlog. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "activator/metrics/metrics.h"
#include "common/cleanup.h"
#include "common/error.h"

#define MET_DEFAULT_LISTEN "127.0.0.1:9464"
#define MET_PATH "/metrics"
#define MET_MAX_CONNECTIONS 64
#define MET_MAX_CONNECTIONS_PER_ADDRESS 8
#define MET_CONNECTION_TIMEOUT_SEC 5
#define MET_CONNECTION_MEMORY (16 * 1024)
#define MET_ACCEPT_PAUSE_USEC (250 * 1000ull)

typedef struct met_server met_server;

/* Loop thread, before each render. */
typedef void (*met_refresh_fn)(met_registry *metrics, void *userdata);

/* listen is ADDR:PORT ("127.0.0.1:9464", "[::1]:9464"; port 0 picks a free
 * one), bound exactly. refresh may be NULL. An error names listen, what
 * failed and what to do. */
int met_server_new(sd_event *event, const char *listen, met_registry *metrics,
                   met_refresh_fn refresh, void *userdata, met_server **out, act_error *err);

/* Counts each connection refused over a limit into refused (a counter
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
