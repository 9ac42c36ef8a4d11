#include "activator/metrics/server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "activator/listen/listen.h"
#include "common/cleanup.h"
#include "common/log.h"

/* Connections taken from the backlog per loop iteration: a burst of them
 * waits there for the next iteration rather than hold the loop. */
#define ACCEPT_BURST 16

typedef struct connection connection;

struct met_server {
    sd_event *event;
    sd_event_source *listener;
    met_registry *metrics;
    met_refresh_fn refresh;
    void *userdata;
    met_metric *refused_counter;
    connection *connections; /* a list, at most MET_MAX_CONNECTIONS */
    unsigned n_connections;
    uint64_t refused;
    int port;
};

struct connection {
    met_server *server;
    connection *next;
    sd_event_source *io;
    sd_event_source *deadline;
    char request[MET_REQUEST_MAX];
    size_t received;
    char *response; /* once the request is read: the whole answer */
    size_t response_len, sent;
};

static void connection_close(connection *conn)
{
    met_server *server = conn->server;
    for (connection **at = &server->connections; *at; at = &(*at)->next)
        if (*at == conn) {
            *at = conn->next;
            break;
        }
    server->n_connections--;
    sd_event_source_disable_unref(conn->io); /* owns the fd */
    sd_event_source_disable_unref(conn->deadline);
    free(conn->response);
    free(conn);
}

static int respond(connection *conn, int status, const char *reason, const char *type,
                   const char *body, size_t body_len)
{
    free(conn->response);
    char header[256];
    int header_len = snprintf(header, sizeof(header),
                              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                              "Connection: close\r\n\r\n",
                              status, reason, type, body_len);
    conn->response = malloc((size_t)header_len + body_len);
    if (!conn->response)
        return -ENOMEM;
    memcpy(conn->response, header, (size_t)header_len);
    memcpy(conn->response + header_len, body, body_len);
    conn->response_len = (size_t)header_len + body_len;
    conn->sent = 0;
    return 0;
}

#define TEXT "text/plain; charset=utf-8"

static int respond_text(connection *conn, int status, const char *reason, const char *text)
{
    return respond(conn, status, reason, TEXT, text, strlen(text));
}

/* The request line of a whole request: what to answer. */
static int answer(connection *conn)
{
    met_server *server = conn->server;
    char *line_end = strstr(conn->request, "\r\n");
    *line_end = '\0';
    char *method = conn->request;
    char *target = strchr(method, ' ');
    if (!target)
        return respond_text(conn, 400, "Bad Request", "not an HTTP request\n");
    *target++ = '\0';
    char *version = strchr(target, ' ');
    if (!version || strncmp(version + 1, "HTTP/1.", 7) != 0)
        return respond_text(conn, 400, "Bad Request", "not an HTTP/1.x request\n");
    *version = '\0';
    target[strcspn(target, "?")] = '\0';
    if (strcmp(target, MET_PATH) != 0)
        return respond_text(conn, 404, "Not Found", "metrics are at " MET_PATH "\n");
    if (strcmp(method, "GET") != 0)
        return respond_text(conn, 405, "Method Not Allowed", "use GET\n");
    if (server->refresh)
        server->refresh(server->metrics, server->userdata);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (met_render(server->metrics, &text, &len) < 0)
        return respond_text(conn, 500, "Internal Server Error", "out of memory rendering\n");
    return respond(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len);
}

static int on_connection_io(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    connection *conn = userdata;
    if (!conn->response) {
        ssize_t n = read(fd, conn->request + conn->received,
                         sizeof(conn->request) - 1 - conn->received);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (n <= 0) {
            connection_close(conn);
            return 0;
        }
        conn->received += (size_t)n;
        conn->request[conn->received] = '\0';
        if (!strstr(conn->request, "\r\n\r\n")) {
            if (conn->received < sizeof(conn->request) - 1)
                return 0; /* more to come */
            respond_text(conn, 431, "Request Header Fields Too Large", "request too large\n");
        } else if (answer(conn) < 0) {
            connection_close(conn);
            return 0;
        }
        if (!conn->response || sd_event_source_set_io_events(source, EPOLLOUT) < 0) {
            connection_close(conn);
            return 0;
        }
    }
    ssize_t n = send(fd, conn->response + conn->sent, conn->response_len - conn->sent,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n >= 0 && (conn->sent += (size_t)n) == conn->response_len)
        /* Our side ends here; a close alone, with bytes of the client's
         * still unread, could reset the connection before it read ours. */
        shutdown(fd, SHUT_WR);
    if (n < 0 || conn->sent == conn->response_len)
        connection_close(conn);
    return 0;
}

static int on_deadline(sd_event_source *source, uint64_t usec, void *userdata)
{
    connection_close(userdata);
    return 0;
}

/* One over the bound: told so in one non-blocking write, then closed. */
static void refuse(met_server *server, int fd)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " TEXT
                               "\r\nContent-Length: 22\r\nConnection: close\r\n\r\n"
                               "too many connections\r\n";
    (void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    if (server->refused++ == 0)
        act_log(LOG_WARNING,
                "metrics: %u connections are open, refusing more; further refusals are only "
                "counted (activator_metrics_connections_refused_total)",
                server->n_connections);
    if (server->refused_counter)
        met_metric_add(server->refused_counter, NULL, 1);
}

static void take(met_server *server, int fd)
{
    connection *conn = calloc(1, sizeof(*conn));
    if (!conn) {
        close(fd);
        return;
    }
    conn->server = server;
    if (sd_event_add_io(server->event, &conn->io, fd, EPOLLIN, on_connection_io, conn) < 0) {
        close(fd);
        free(conn);
        return;
    }
    sd_event_source_set_io_fd_own(conn->io, 1);
    conn->next = server->connections;
    server->connections = conn;
    server->n_connections++;
    if (sd_event_add_time_relative(server->event, &conn->deadline, CLOCK_MONOTONIC,
                                   MET_CONNECTION_TIMEOUT_USEC, 0, on_deadline, conn) < 0)
        connection_close(conn);
}

static int on_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    met_server *server = userdata;
    for (int i = 0; i < ACCEPT_BURST; i++) {
        int conn_fd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (conn_fd < 0)
            break; /* EAGAIN, or a connection reset before we took it */
        if (server->n_connections >= MET_MAX_CONNECTIONS)
            refuse(server, conn_fd);
        else
            take(server, conn_fd);
    }
    return 0;
}

void met_server_free(met_server *server)
{
    if (!server)
        return;
    while (server->connections)
        connection_close(server->connections);
    sd_event_source_disable_unref(server->listener);
    free(server);
}

/* lsn_parse's forms, and port 0 (a free port, for tests), which a listening
 * address of a host never has. */
static int parse_listen(const char *listen, lsn_address *address)
{
    if (!listen || !*listen || listen[0] == '/')
        return -EINVAL;
    char copy[256];
    size_t len = strlen(listen);
    if (len >= sizeof(copy))
        return -EINVAL;
    memcpy(copy, listen, len + 1);
    bool any_port = len > 2 && strcmp(copy + len - 2, ":0") == 0;
    if (any_port)
        copy[len - 1] = '1';
    act_error ignored = {0};
    if (lsn_parse(copy, "MetricsListen", address, &ignored) < 0)
        return -EINVAL;
    if (any_port && address->addr.sa.sa_family == AF_INET)
        address->addr.in4.sin_port = 0;
    else if (any_port)
        address->addr.in6.sin6_port = 0;
    return 0;
}

int met_server_new(sd_event *event, const char *listen, met_registry *metrics,
                   met_refresh_fn refresh, void *userdata, met_server **out, act_error *err)
{
    assert(event);
    assert(metrics);
    assert(out);
    lsn_address address;
    if (parse_listen(listen, &address) < 0)
        return act_error_set(err, EINVAL,
                             "MetricsListen=%s is not ADDR:PORT; use e.g. 127.0.0.1:9464",
                             listen ? listen : "");
    _cleanup_(met_server_freep) met_server *server = calloc(1, sizeof(*server));
    if (!server)
        return act_error_set(err, ENOMEM, "out of memory for the metrics server");
    server->event = event;
    server->metrics = metrics;
    server->refresh = refresh;
    server->userdata = userdata;
    act_error bind_err = {0};
    int fd = lsn_bind(&address, MET_MAX_CONNECTIONS * 4, &bind_err);
    if (fd < 0)
        return act_error_set(err, -fd,
                             "MetricsListen=%s: %s; use a free local ADDR:PORT such as "
                             "127.0.0.1:9464",
                             listen, bind_err.message);
    int r = sd_event_add_io(event, &server->listener, fd, EPOLLIN, on_accept, server);
    if (r < 0) {
        close(fd);
        return act_error_set(err, -r, "cannot watch the metrics socket: %s", strerror(-r));
    }
    sd_event_source_set_io_fd_own(server->listener, 1);
    struct sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &len) == 0)
        server->port = ntohs(bound.ss_family == AF_INET6
                                 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                 : ((struct sockaddr_in *)&bound)->sin_port);
    *out = TAKE_PTR(server);
    return 0;
}

void met_server_count_refusals(met_server *server, met_metric *refused)
{
    assert(server);
    server->refused_counter = refused;
}

int met_server_port(const met_server *server)
{
    assert(server);
    return server->port;
}

uint64_t met_server_refused(const met_server *server)
{
    return server->refused;
}

unsigned met_server_connections(const met_server *server)
{
    return server->n_connections;
}
