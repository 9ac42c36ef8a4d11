#include "activator/metrics/server.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
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

struct met_server {
    sd_event *event;
    char listen[160]; /* as configured, for messages */
    struct MHD_Daemon *mhd;
    sd_event_source *listener;  /* our listening socket (owns the fd) */
    sd_event_source *resume;    /* accepting again after a pause */
    sd_event_source *mhd_io;    /* MHD's epoll fd (MHD's to close) */
    sd_event_source *mhd_timer; /* MHD_get_timeout's deadline */
    met_registry *metrics;
    met_refresh_fn refresh;
    void *userdata;
    met_metric *refused_counter;
    uint64_t refused;
    unsigned accept_pauses; /* in a row, 0 while accepting works */
    int port;
    char mhd_message[256]; /* MHD's last message, for a failed start */
};

/* MHD's own messages (a client's protocol error, a reset): every client
 * can cause them, so they are debug lines; our own lines say what matters. */
__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    met_server *server = cls;
    vsnprintf(server->mhd_message, sizeof(server->mhd_message), fmt, ap);
    server->mhd_message[strcspn(server->mhd_message, "\n")] = '\0';
    act_log(LOG_DEBUG, "metrics: libmicrohttpd: %s", server->mhd_message);
}

/* ---- answers ------------------------------------------------------------ */

#define TEXT "text/plain; charset=utf-8"
#define EXPOSITION "text/plain; version=0.0.4; charset=utf-8"

/* Queues one answer; body is free()d by MHD with must_free, else static. */
static enum MHD_Result answer(struct MHD_Connection *connection, unsigned status, const char *type,
                              char *body, size_t len, bool must_free)
{
    struct MHD_Response *response = MHD_create_response_from_buffer(
        len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!response) {
        if (must_free)
            free(body);
        return MHD_NO; /* closes the connection */
    }
    enum MHD_Result r = MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    /* One request per connection: a scraper comes back seconds later, and a
     * connection kept open meanwhile would only hold a slot. */
    if (r == MHD_YES)
        r = MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    if (r == MHD_YES && status == MHD_HTTP_METHOD_NOT_ALLOWED)
        r = MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET");
    if (r == MHD_YES)
        r = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return r;
}

static enum MHD_Result answer_text(struct MHD_Connection *connection, unsigned status,
                                   const char *text)
{
    return answer(connection, status, TEXT, (char *)text, strlen(text), false);
}

/* MHD_AccessHandlerCallback, on the loop thread (inside MHD_run). Answered
 * on the first call, once the request line and headers are in; a body is
 * not wanted and not read. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **request_context)
{
    met_server *server = cls;
    if (*request_context) { /* a body's bytes, after the answer was queued */
        *upload_data_size = 0;
        return MHD_YES;
    }
    *request_context = server;
    if (strcmp(url, MET_PATH) != 0)
        return answer_text(connection, MHD_HTTP_NOT_FOUND, "metrics are at " MET_PATH "\n");
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
        return answer_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "use GET\n");
    if (server->refresh)
        server->refresh(server->metrics, server->userdata);
    char *text = NULL;
    size_t len = 0;
    if (met_render(server->metrics, &text, &len) < 0)
        return answer_text(connection, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "out of memory rendering the metrics\n");
    return answer(connection, MHD_HTTP_OK, EXPOSITION, text, len, true);
}

/* ---- MHD on the loop ------------------------------------------------------ */

/* After anything MHD did: its next deadline (a connection's timeout, or 0
 * when it has data in hand it did not get to) on the timer, or none. */
static void arm_mhd_timer(met_server *server)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout(server->mhd, &ms) != MHD_YES) {
        sd_event_source_set_enabled(server->mhd_timer, SD_EVENT_OFF);
        return;
    }
    uint64_t usec = ms > UINT64_MAX / 1000 ? UINT64_MAX : (uint64_t)ms * 1000;
    int r = sd_event_source_set_time_relative(server->mhd_timer, usec);
    if (r >= 0)
        r = sd_event_source_set_enabled(server->mhd_timer, SD_EVENT_ONESHOT);
    if (r < 0) /* without the timer a timeout could wait for the next event */
        act_log(LOG_ERR, "metrics: cannot arm the connection timer: %s", strerror(-r));
}

static void run_mhd(met_server *server)
{
    if (MHD_run(server->mhd) != MHD_YES)
        act_log(LOG_ERR, "metrics: libmicrohttpd failed to run: %s", server->mhd_message);
    arm_mhd_timer(server);
}

static int on_mhd_io(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    run_mhd(userdata);
    return 0;
}

static int on_mhd_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    run_mhd(userdata);
    return 0;
}

/* ---- accepting -------------------------------------------------------------- */

static void refused(met_server *server, const struct sockaddr_storage *peer, int why)
{
    if (server->refused_counter)
        met_metric_add(server->refused_counter, NULL, 1);
    if (server->refused++ > 0)
        return;
    char address[INET6_ADDRSTRLEN] = "?";
    if (peer->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)peer)->sin_addr, address, sizeof(address));
    else if (peer->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)peer)->sin6_addr, address,
                  sizeof(address));
    unsigned open = met_server_connections(server);
    if (why == ENFILE && open >= MET_MAX_CONNECTIONS)
        act_log(LOG_WARNING,
                "metrics: refused a connection from %s: %u connections are open, the limit; "
                "further refusals are only counted (activator_metrics_connections_refused_total)",
                address, open);
    else if (why == ENFILE)
        act_log(LOG_WARNING,
                "metrics: refused a connection from %s: it has %d open, the limit for one "
                "address; further refusals are only counted "
                "(activator_metrics_connections_refused_total)",
                address, MET_MAX_CONNECTIONS_PER_ADDRESS);
    else
        act_log(LOG_WARNING,
                "metrics: refused a connection from %s: %s; further refusals are only counted "
                "(activator_metrics_connections_refused_total)",
                address, strerror(why));
}

static int on_resume(sd_event_source *source, uint64_t usec, void *userdata)
{
    met_server *server = userdata;
    int r = sd_event_source_set_enabled(server->listener, SD_EVENT_ON);
    if (r < 0)
        act_log(LOG_ERR, "metrics: %s: cannot watch the listening socket again: %s", server->listen,
                strerror(-r));
    return 0;
}

/* accept() failed for want of a resource: a level-triggered listener would
 * fire again at once and fail the same way, so it is turned off for a
 * while (MHD's own accept would busy-wait here when it holds no
 * connection). */
static void pause_accepting(met_server *server, int why)
{
    if (server->accept_pauses++ == 0)
        act_log(LOG_WARNING,
                "metrics: %s: cannot accept a connection: %s; trying again every %llu ms "
                "meanwhile (if fds run out, raise the daemon's LimitNOFILE=)",
                server->listen, strerror(why), MET_ACCEPT_PAUSE_USEC / 1000);
    int r = sd_event_source_set_enabled(server->listener, SD_EVENT_OFF);
    if (r >= 0)
        r = sd_event_source_set_time_relative(server->resume, MET_ACCEPT_PAUSE_USEC);
    if (r >= 0)
        r = sd_event_source_set_enabled(server->resume, SD_EVENT_ONESHOT);
    if (r < 0) {
        act_log(LOG_ERR, "metrics: %s: cannot pause accepting: %s", server->listen, strerror(-r));
        sd_event_source_set_enabled(server->listener, SD_EVENT_ON);
    }
}

/* Errors of one connection that accept() passes on (accept(2)): the next
 * one may be fine. */
static bool error_of_one_connection(int why)
{
    switch (why) {
    case ECONNABORTED:
    case EPROTO:
    case EPERM: /* a firewall rule */
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case EINTR:
        return true;
    default:
        return false;
    }
}

static int on_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    met_server *server = userdata;
    for (int i = 0; i < ACCEPT_BURST; i++) {
        struct sockaddr_storage peer = {0};
        socklen_t len = sizeof(peer);
        int conn = accept4(fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (conn < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (error_of_one_connection(errno))
                continue;
            pause_accepting(server, errno);
            break;
        }
        if (server->accept_pauses) {
            act_log(LOG_INFO, "metrics: %s: accepting connections again", server->listen);
            server->accept_pauses = 0;
        }
        /* MHD checks its limits (in all, and per address) and closes the
         * socket itself when it does not take it. */
        if (MHD_add_connection(server->mhd, conn, (const struct sockaddr *)&peer, len) != MHD_YES)
            refused(server, &peer, errno);
    }
    /* A connection taken has a deadline now, and may already have its
     * request in: MHD sees it on its epoll fd, or at the deadline. */
    arm_mhd_timer(server);
    return 0;
}

/* ---- the server ------------------------------------------------------------- */

void met_server_free(met_server *server)
{
    if (!server)
        return;
    sd_event_source_disable_unref(server->mhd_io);
    sd_event_source_disable_unref(server->mhd_timer);
    if (server->mhd)
        MHD_stop_daemon(server->mhd); /* closes every connection and its epoll fd */
    sd_event_source_disable_unref(server->resume);
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

static int start_mhd(met_server *server, act_error *err)
{
    /* No listening socket of MHD's (ours is handed each connection), no
     * thread (MHD_USE_INTERNAL_POLLING_THREAD unset: MHD_run on the loop),
     * epoll for the connections. */
    server->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request,
        server, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, server, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)MET_MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)MET_MAX_CONNECTIONS_PER_ADDRESS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)MET_CONNECTION_TIMEOUT_SEC, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)MET_CONNECTION_MEMORY, MHD_OPTION_END);
    if (!server->mhd)
        return act_error_set(err, EIO,
                             "MetricsListen=%s: cannot start libmicrohttpd: %s; check the "
                             "daemon's log and its limits (fds, memory)",
                             server->listen,
                             server->mhd_message[0] ? server->mhd_message : "no reason given");
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(server->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info || info->epoll_fd < 0)
        return act_error_set(err, EIO,
                             "MetricsListen=%s: libmicrohttpd gives no epoll fd; it must be "
                             "built with epoll support (Debian's is)",
                             server->listen);
    int r =
        sd_event_add_io(server->event, &server->mhd_io, info->epoll_fd, EPOLLIN, on_mhd_io, server);
    if (r >= 0)
        r = sd_event_add_time_relative(server->event, &server->mhd_timer, CLOCK_MONOTONIC, 0, 1000,
                                       on_mhd_timer, server);
    if (r < 0)
        return act_error_set(err, -r, "MetricsListen=%s: cannot watch libmicrohttpd: %s",
                             server->listen, strerror(-r));
    sd_event_source_set_enabled(server->mhd_timer, SD_EVENT_OFF);
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
        return act_error_set(err, ENOMEM, "MetricsListen=%s: out of memory for its server", listen);
    server->event = event;
    server->metrics = metrics;
    server->refresh = refresh;
    server->userdata = userdata;
    snprintf(server->listen, sizeof(server->listen), "%s", listen);

    act_error bind_err = {0};
    /* The kernel's largest backlog: a burst of scrapes, or of connections
     * to refuse, waits there rather than have its SYNs dropped. */
    int fd = lsn_bind(&address, SOMAXCONN, &bind_err);
    if (fd < 0)
        return act_error_set(err, -fd, "MetricsListen=%s: %s; choose a free ADDR:PORT", listen,
                             bind_err.message);
    int r = sd_event_add_io(event, &server->listener, fd, EPOLLIN, on_accept, server);
    if (r < 0) {
        close(fd);
        return act_error_set(err, -r, "MetricsListen=%s: cannot watch the socket: %s", listen,
                             strerror(-r));
    }
    sd_event_source_set_io_fd_own(server->listener, 1);
    r = sd_event_add_time_relative(event, &server->resume, CLOCK_MONOTONIC, MET_ACCEPT_PAUSE_USEC,
                                   0, on_resume, server);
    if (r < 0)
        return act_error_set(err, -r, "MetricsListen=%s: cannot make a timer: %s", listen,
                             strerror(-r));
    sd_event_source_set_enabled(server->resume, SD_EVENT_OFF);

    r = start_mhd(server, err);
    if (r < 0)
        return r;

    struct sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &len) < 0)
        return act_error_set(err, errno, "MetricsListen=%s: cannot read the bound port: %s", listen,
                             strerror(errno));
    server->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                     : ((struct sockaddr_in *)&bound)->sin_port);
    *out = TAKE_PTR(server);
    return 0;
}

void met_server_count_refusals(met_server *server, met_metric *refused_counter)
{
    assert(server);
    server->refused_counter = refused_counter;
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
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(server->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info ? info->num_connections : 0;
}
