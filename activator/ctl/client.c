#include "activator/ctl/client.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>

#include "activator/events/events.h"
#include "common/clock.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"

/* How long a remote (tls+tcp) connection may take to come up. Local ipc
 * dials fail or succeed at once. */
#define CONNECT_TIMEOUT_MS 5000
/* The largest reply taken: NNG's default of 1 MiB would drop the reply of
 * "claims" or "boxes" for a fleet of a few thousand hosts. */
#define REPLY_MAX_BYTES ((size_t)64 * 1024 * 1024)

static atomic_bool req_pipe_lost;
static atomic_bool req_pipe_up;

static void on_req_pipe(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    if (ev == NNG_PIPE_EV_ADD_POST)
        atomic_store(&req_pipe_up, true);
    else if (ev == NNG_PIPE_EV_REM_POST)
        atomic_store(&req_pipe_lost, true);
}

static void print_unreachable(const char *url, const char *why)
{
    fprintf(stderr, "activatorctl: cannot reach activatord at %s: %s\n", url, why);
    if (strncmp(url, "ipc://", 6) == 0)
        fprintf(stderr,
                "hint: is activatord running (systemctl status activatord)? Only root, members "
                "of its ControlGroup= (operators) and of its ViewerGroup= (viewers) may "
                "connect; use --connect URL for another socket.\n");
    else
        fprintf(stderr, "hint: check the address, that activatord has ControlListen= there, and "
                        "the --tls-cert/--tls-key/--tls-ca files.\n");
}

/* A whole file as text, for nng, which takes PEM text rather than file
 * names; NULL when it cannot be read. */
static char *read_pem(const char *path)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    _cleanup_free_ char *text = NULL;
    size_t size = 0;
    if (getdelim(&text, &size, '\0', f) < 0)
        return NULL;
    return TAKE_PTR(text);
}

static int tls_setup(nng_dialer dialer, const ctl_options *options, const char *url)
{
    if (!options->tls_cert || !options->tls_key || !options->tls_ca) {
        fprintf(stderr, "activatorctl: %s needs --tls-cert, --tls-key and --tls-ca\n", url);
        return CTL_EXIT_USAGE;
    }
    nng_tls_config *config = NULL;
    int rv = nng_tls_config_alloc(&config, NNG_TLS_MODE_CLIENT);
    if (rv == 0)
        rv = nng_tls_config_ca_file(config, options->tls_ca);
    if (rv == 0) {
        _cleanup_free_ char *cert = read_pem(options->tls_cert);
        _cleanup_free_ char *key = read_pem(options->tls_key);
        rv = cert && key ? nng_tls_config_own_cert(config, cert, key, NULL) : NNG_ENOENT;
    }
    if (rv == 0)
        rv = nng_tls_config_auth_mode(config, NNG_TLS_AUTH_MODE_REQUIRED);
    if (rv == 0)
        rv = nng_dialer_set_ptr(dialer, NNG_OPT_TLS_CONFIG, config);
    if (config)
        nng_tls_config_free(config); /* the dialer holds its own reference */
    if (rv != 0) {
        fprintf(stderr, "activatorctl: TLS files (--tls-cert %s, --tls-key %s, --tls-ca %s): %s\n",
                options->tls_cert, options->tls_key, options->tls_ca, nng_strerror(rv));
        return CTL_EXIT_USAGE;
    }
    return CTL_EXIT_OK;
}

void ctl_events_url(const ctl_options *options, char *buf, size_t size)
{
    const char *url = options->connect_url;
    buf[0] = '\0';
    if (options->events_url) {
        snprintf(buf, size, "%s", options->events_url);
        return;
    }
    /* The daemon puts events.ipc beside control.ipc in RuntimeDirectory=. */
    if (strncmp(url, "ipc://", 6) != 0)
        return;
    const char *slash = strrchr(url, '/');
    if (!slash || (size_t)(slash - url) + 12 >= size)
        return;
    snprintf(buf, size, "%.*sevents.ipc", (int)(slash - url + 1), url);
}

int ctl_client_open(ctl_client *client, const ctl_options *options)
{
    memset(client, 0, sizeof(*client));
    client->options = options;
    ctl_events_url(options, client->events_url, sizeof(client->events_url));
    const char *url = options->connect_url;

    int rv = nng_req0_open(&client->req);
    if (rv != 0) {
        fprintf(stderr, "activatorctl: opening a REQ socket: %s\n", nng_strerror(rv));
        return CTL_EXIT_UNREACHABLE;
    }
    client->req_open = true;
    /* The daemon answers a wake when it is done; a resend would only start a
     * second identical request, so requests are sent exactly once. */
    nng_socket_set_ms(client->req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(client->req, NNG_OPT_SENDTIMEO, CONNECT_TIMEOUT_MS);
    nng_socket_set_size(client->req, NNG_OPT_RECVMAXSZ, REPLY_MAX_BYTES);
    nng_pipe_notify(client->req, NNG_PIPE_EV_ADD_POST, on_req_pipe, NULL);
    nng_pipe_notify(client->req, NNG_PIPE_EV_REM_POST, on_req_pipe, NULL);

    nng_dialer dialer;
    rv = nng_dialer_create(&dialer, client->req, url);
    if (rv != 0) {
        fprintf(stderr, "activatorctl: --connect %s: %s; use ipc:///path/control.ipc or "
                        "tls+tcp://HOST:PORT\n",
                url, nng_strerror(rv));
        return CTL_EXIT_USAGE;
    }
    bool remote = strncmp(url, "ipc://", 6) != 0;
    if (strncmp(url, "tls+tcp://", 10) == 0) {
        int r = tls_setup(dialer, options, url);
        if (r != CTL_EXIT_OK)
            return r;
    }
    /* A local dial answers at once (refused, no such file, permission). A
     * remote one is started in the background and given a bounded time. */
    rv = nng_dialer_start(dialer, remote ? NNG_FLAG_NONBLOCK : 0);
    if (rv != 0) {
        /* NNG reports a missing socket file as "connection refused"; saying
         * that the file is not there points at the real cause. */
        struct stat st;
        if (!remote && stat(url + 6, &st) < 0) {
            char why[300];
            snprintf(why, sizeof(why), "no socket file %s (%s)", url + 6, strerror(errno));
            print_unreachable(url, why);
            return CTL_EXIT_UNREACHABLE;
        }
        print_unreachable(url, nng_strerror(rv));
        return CTL_EXIT_UNREACHABLE;
    }
    if (remote) {
        uint64_t deadline = act_now_usec() + CONNECT_TIMEOUT_MS * 1000ull;
        while (!atomic_load(&req_pipe_up) && act_now_usec() < deadline)
            nng_msleep(10);
        if (!atomic_load(&req_pipe_up)) {
            print_unreachable(url, "no connection within 5 seconds");
            return CTL_EXIT_UNREACHABLE;
        }
    }
    return CTL_EXIT_OK;
}

bool ctl_client_subscribe(ctl_client *client, const char *prefix, bool required)
{
    if (!client->events_url[0]) {
        if (required)
            fprintf(stderr, "activatorctl: no events socket for %s; name it with --events URL\n",
                    client->options->connect_url);
        return false;
    }
    int rv = nng_sub0_open(&client->sub);
    if (rv == 0) {
        client->sub_open = true;
        rv = nng_socket_set(client->sub, NNG_OPT_SUB_SUBSCRIBE, prefix, strlen(prefix));
    }
    if (rv == 0)
        nng_socket_set_int(client->sub, NNG_OPT_RECVBUF, 1024);
    if (rv == 0)
        rv = nng_dial(client->sub, client->events_url, NULL, 0);
    if (rv != 0) {
        if (required)
            print_unreachable(client->events_url, nng_strerror(rv));
        return false;
    }
    return true;
}

static int recv_fd(nng_socket socket)
{
    int fd = -1;
    if (nng_socket_get_int(socket, NNG_OPT_RECVFD, &fd) != 0)
        return -1;
    return fd;
}

/* One JSON value from len bytes that need not end in a NUL; NULL when they
 * are not one. */
static json_object *parse_bytes(const char *text, size_t len)
{
    _cleanup_(json_tokener_freep) json_tokener *tok = json_tokener_new();
    return tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL;
}

/* Events delivered per pass at most: under a flood of events (a claim
 * rewritten a thousand times a second) the next one is always there, and a
 * drain that took them all would never return to its caller's loop, which
 * checks for SIGINT (watch) or the reply (a request). */
#define DRAIN_BATCH 256

/* Delivers the events already received, DRAIN_BATCH at most. */
static void drain_events(ctl_client *client, ctl_event_fn on_event, void *userdata)
{
    nng_msg *msg;
    for (unsigned n = 0; n < DRAIN_BATCH && client->sub_open &&
                         nng_recvmsg(client->sub, &msg, NNG_FLAG_NONBLOCK) == 0;
         n++) {
        size_t topic_len;
        const char *json;
        const char *body = nng_msg_body(msg);
        size_t len = nng_msg_len(msg);
        if (on_event && ev_split(body, len, &topic_len, &json) == 0) {
            _cleanup_(json_object_putp) json_object *event =
                parse_bytes(json, len - (size_t)(json - body));
            if (event && json_object_is_type(event, json_type_object))
                on_event(event, userdata);
        }
        nng_msg_free(msg);
    }
}

/* The reply arrives through an aio whose callback (on an NNG thread) only
 * writes a byte to a pipe, so the main thread can poll the reply and the
 * events together. One receive is started for the whole wait: with REQ, a
 * receive that times out or is cancelled abandons the request itself, so
 * short non-blocking receives in a loop would, now and then, throw away the
 * reply that was on its way. */
typedef struct reply_wait {
    int pipe[2];
} reply_wait;

static void on_reply(void *arg)
{
    reply_wait *wait = arg;
    ssize_t n = write(wait->pipe[1], "r", 1);
    (void)n;
}

static int parse_reply(const char *url, nng_msg *msg, json_object **reply)
{
    _cleanup_(json_object_putp) json_object *parsed =
        parse_bytes(nng_msg_body(msg), nng_msg_len(msg));
    nng_msg_free(msg);
    if (!parsed || !json_object_is_type(parsed, json_type_object)) {
        fprintf(stderr, "activatorctl: %s answered with something that is not a JSON "
                        "object; is that really activatord?\n",
                url);
        return CTL_EXIT_UNREACHABLE;
    }
    *reply = TAKE_PTR(parsed);
    return CTL_EXIT_OK;
}

int ctl_client_call(ctl_client *client, json_object *request, int timeout_sec,
                    ctl_event_fn on_event, void *userdata, json_object **reply)
{
    const char *url = client->options->connect_url;
    size_t len;
    const char *text = json_object_to_json_string_length(request, JSON_C_TO_STRING_PLAIN, &len);
    int rv = nng_send(client->req, (void *)text, len, 0);
    if (rv != 0) {
        print_unreachable(url, nng_strerror(rv));
        return CTL_EXIT_UNREACHABLE;
    }

    reply_wait wait = {.pipe = {-1, -1}};
    nng_aio *aio = NULL;
    if (pipe2(wait.pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
        nng_aio_alloc(&aio, on_reply, &wait) != 0) {
        fprintf(stderr, "activatorctl: cannot wait for the reply: out of resources\n");
        if (wait.pipe[0] >= 0) {
            close(wait.pipe[0]);
            close(wait.pipe[1]);
        }
        return CTL_EXIT_UNREACHABLE;
    }
    nng_aio_set_timeout(aio, (nng_duration)timeout_sec * 1000);
    nng_recv_aio(client->req, aio);

    int result = CTL_EXIT_UNREACHABLE;
    int events_fd = client->sub_open ? recv_fd(client->sub) : -1;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = wait.pipe[0], .events = POLLIN},
                                {.fd = events_fd, .events = POLLIN}};
        /* A short poll slice lets a lost connection end the wait promptly. */
        if (poll(pfd, events_fd >= 0 ? 2 : 1, 200) < 0 && errno != EINTR) {
            fprintf(stderr, "activatorctl: poll: %m\n");
            break;
        }
        drain_events(client, on_event, userdata);
        if (pfd[0].revents & POLLIN) {
            rv = nng_aio_result(aio);
            if (rv == 0) {
                /* Events published just before the reply belong before it. */
                drain_events(client, on_event, userdata);
                result = parse_reply(url, nng_aio_get_msg(aio), reply);
            } else if (rv == NNG_ETIMEDOUT) {
                char why[96];
                snprintf(why, sizeof(why), "no reply within %d seconds", timeout_sec);
                print_unreachable(url, why);
            } else {
                print_unreachable(url, nng_strerror(rv));
            }
            break;
        }
        if (atomic_load(&req_pipe_lost)) {
            print_unreachable(url, "the connection closed before the reply (did activatord stop "
                                   "or refuse an oversized request?)");
            break;
        }
    }
    nng_aio_stop(aio);
    nng_aio_free(aio);
    close(wait.pipe[0]);
    close(wait.pipe[1]);
    return result;
}

int ctl_client_watch(ctl_client *client, volatile bool *stop, ctl_event_fn on_event,
                     void *userdata)
{
    int fd = recv_fd(client->sub);
    while (!*stop) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 500) < 0 && errno != EINTR) {
            fprintf(stderr, "activatorctl: poll: %m\n");
            return CTL_EXIT_UNREACHABLE;
        }
        drain_events(client, on_event, userdata);
    }
    return CTL_EXIT_OK;
}

void ctl_client_close(ctl_client *client)
{
    /* The sockets are left to the kernel: activatorctl exits right after
     * this, and nng_close in NNG 1.5.2 (Debian 12) can deadlock when a SUB
     * socket closes while a message arrives (nanomsg/nng#1543, fixed after
     * 1.5.2), which would hang the command after its work was done. The
     * sockets stay reachable from NNG's socket table, so nothing leaks. */
    client->sub_open = client->req_open = false;
}
