#include "activator/metrics/server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "activator/control/handoff.h"
#include "activator/control/nng_errno.h"
#include "common/cleanup.h"
#include "common/log.h"

/* One scrape waiting for the loop. */
typedef struct scrape {
    ctrl_handoff_node node; /* first: a node pointer is a scrape pointer */
    nng_aio *aio;
} scrape;

struct met_server {
    nng_http_server *http;
    nng_url *url;
    ctrl_handoff *handoff;
    met_registry *metrics;
    met_refresh_fn refresh;
    void *userdata;
    /* Guards stopping and the window between deferring an aio and queueing
     * it, so a cancellation always finds a queued scrape or none at all. */
    pthread_mutex_t lock;
    bool stopping;
    int port;
};

static void finish(nng_aio *aio, uint16_t status, const char *body, size_t len)
{
    nng_http_res *res = NULL;
    int rv = nng_http_res_alloc(&res);
    if (rv == 0)
        rv = nng_http_res_set_status(res, status);
    if (rv == 0)
        rv = nng_http_res_set_header(res, "Content-Type",
                                     status == 200 ? "text/plain; version=0.0.4; charset=utf-8"
                                                   : "text/plain; charset=utf-8");
    if (rv == 0)
        rv = nng_http_res_copy_data(res, body, len);
    if (rv != 0) {
        if (res)
            nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

/* NNG thread: cancellation (the connection closed or the server stops). */
static void on_cancel(nng_aio *aio, void *arg, int rv)
{
    scrape *pending = arg;
    met_server *server = nng_aio_get_input(aio, 3);
    pthread_mutex_lock(&server->lock);
    bool removed = ctrl_handoff_remove(server->handoff, &pending->node);
    pthread_mutex_unlock(&server->lock);
    /* Not found means the loop holds it and will finish it. */
    if (removed) {
        free(pending);
        nng_aio_finish(aio, rv);
    }
}

/* NNG thread: queue the scrape for the loop, nothing else. */
static void on_http(nng_aio *aio)
{
    nng_http_handler *handler = nng_aio_get_input(aio, 1);
    met_server *server = nng_http_handler_get_data(handler);
    scrape *pending = calloc(1, sizeof(*pending));
    if (!pending) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    pending->aio = aio;
    pthread_mutex_lock(&server->lock);
    if (server->stopping) {
        pthread_mutex_unlock(&server->lock);
        free(pending);
        static const char msg[] = "activatord is stopping\n";
        finish(aio, 503, msg, sizeof(msg) - 1);
        return;
    }
    nng_aio_set_input(aio, 3, server);
    nng_aio_defer(aio, on_cancel, pending);
    ctrl_handoff_push(server->handoff, &pending->node);
    pthread_mutex_unlock(&server->lock);
}

/* Loop thread: render and answer one scrape. */
static void on_scrape(ctrl_handoff_node *node, void *userdata)
{
    met_server *server = userdata;
    scrape *pending = (scrape *)node;
    if (server->refresh)
        server->refresh(server->metrics, server->userdata);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (met_render(server->metrics, &text, &len) < 0) {
        static const char msg[] = "out of memory rendering metrics\n";
        finish(pending->aio, 500, msg, sizeof(msg) - 1);
    } else {
        finish(pending->aio, 200, text, len);
    }
    free(pending);
}

static void answer_queued(ctrl_handoff_node *node, void *userdata)
{
    scrape *pending = (scrape *)node;
    static const char msg[] = "activatord is stopping\n";
    finish(pending->aio, 503, msg, sizeof(msg) - 1);
    free(pending);
}

void met_server_free(met_server *server)
{
    if (!server)
        return;
    if (server->http) {
        pthread_mutex_lock(&server->lock);
        server->stopping = true;
        pthread_mutex_unlock(&server->lock);
        /* Scrapes already queued are answered now: stopping the HTTP server
         * waits for them, and the loop (this thread) could not get to them. */
        if (server->handoff)
            ctrl_handoff_drain_with(server->handoff, answer_queued, server);
        nng_http_server_stop(server->http);
        nng_http_server_release(server->http);
    }
    ctrl_handoff_free(server->handoff);
    if (server->url)
        nng_url_free(server->url);
    pthread_mutex_destroy(&server->lock);
    free(server);
}

/* Holds and starts the HTTP server at url with the scrape handler; an nng
 * error number on failure, with server->http NULL: a server that never
 * started is released here, without the stop that met_server_free
 * gives a running one. */
static int start_http(met_server *server, const char *url)
{
    nng_http_handler *handler = NULL;
    int rv = nng_url_parse(&server->url, url);
    if (rv == 0)
        rv = nng_http_server_hold(&server->http, server->url);
    if (rv == 0)
        rv = nng_http_handler_alloc(&handler, MET_PATH, on_http);
    if (rv == 0)
        rv = nng_http_handler_set_method(handler, "GET");
    if (rv == 0)
        rv = nng_http_handler_set_data(handler, server, NULL);
    if (rv == 0) {
        rv = nng_http_server_add_handler(server->http, handler);
        if (rv != 0)
            nng_http_handler_free(handler);
    } else if (handler) {
        nng_http_handler_free(handler);
    }
    if (rv == 0)
        rv = nng_http_server_start(server->http);
    if (rv != 0 && server->http) {
        nng_http_server_release(server->http);
        server->http = NULL;
    }
    return rv;
}

int met_server_new(sd_event *event, const char *listen, met_registry *metrics,
                   met_refresh_fn refresh, void *userdata, met_server **out, act_error *err)
{
    assert(event);
    assert(metrics);
    assert(out);
    if (!listen || !*listen || strchr(listen, '/'))
        return act_error_set(err, EINVAL,
                             "MetricsListen=%s is not ADDR:PORT; use e.g. 127.0.0.1:9464",
                             listen ? listen : "");
    _cleanup_(met_server_freep) met_server *server = calloc(1, sizeof(*server));
    if (!server)
        return act_error_set(err, ENOMEM, "out of memory for the metrics server");
    pthread_mutex_init(&server->lock, NULL);
    server->metrics = metrics;
    server->refresh = refresh;
    server->userdata = userdata;

    int r = ctrl_handoff_new(event, on_scrape, server, &server->handoff, err);
    if (r < 0)
        return r;
    char url[300];
    snprintf(url, sizeof(url), "http://%s", listen);
    int rv = start_http(server, url);
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv),
                             "MetricsListen=%s: %s; use a free local ADDR:PORT such as "
                             "127.0.0.1:9464",
                             listen, nng_strerror(rv));
    nng_sockaddr addr;
    if (nng_http_server_get_addr(server->http, &addr) == 0) {
        if (addr.s_family == NNG_AF_INET)
            server->port = ntohs(addr.s_in.sa_port);
        else if (addr.s_family == NNG_AF_INET6)
            server->port = ntohs(addr.s_in6.sa_port);
    }
    *out = TAKE_PTR(server);
    return 0;
}

int met_server_port(const met_server *server)
{
    assert(server);
    return server->port;
}
