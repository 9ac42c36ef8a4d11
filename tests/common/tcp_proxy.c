/* A loopback TCP proxy for tests (tcp_proxy.h): one thread per proxy, one
 * poll() over the listener, a wake pipe and both ends of every connection. */
#include "tests/common/tcp_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROXY_CONNECTIONS_MAX 64
#define HOLD_NEEDLES_MAX 4
/* The request kept to look for needles in: etcd's requests are far smaller. */
#define REQUEST_KEPT_MAX (256 * 1024)

struct tcp_proxy_hold {
    pthread_mutex_t lock;
    bool armed;
    char *needles[HOLD_NEEDLES_MAX];
    size_t n_needles;
    unsigned dropped;
};

typedef struct proxy_connection {
    int client_fd, server_fd;
    /* What the client sent since the server last spoke: its request. */
    char *request;
    size_t request_len;
    bool answer_since_request;
    /* This connection's answers are dropped from now on. */
    bool dropping;
} proxy_connection;

struct tcp_proxy {
    int listen_fd, port;
    int wake_pipe[2];
    struct sockaddr_in target;
    tcp_proxy_hold *hold;
    pthread_t thread;
    proxy_connection connections[PROXY_CONNECTIONS_MAX];
    size_t n_connections;
};

tcp_proxy_hold *tcp_proxy_hold_new(void)
{
    tcp_proxy_hold *hold = calloc(1, sizeof(*hold));
    if (hold)
        pthread_mutex_init(&hold->lock, NULL);
    return hold;
}

static void hold_forget_needles(tcp_proxy_hold *hold)
{
    for (size_t i = 0; i < hold->n_needles; i++)
        free(hold->needles[i]);
    hold->n_needles = 0;
}

void tcp_proxy_hold_free(tcp_proxy_hold *hold)
{
    if (!hold)
        return;
    hold_forget_needles(hold);
    pthread_mutex_destroy(&hold->lock);
    free(hold);
}

void tcp_proxy_hold_arm(tcp_proxy_hold *hold, const char *const *needles, size_t n)
{
    pthread_mutex_lock(&hold->lock);
    hold_forget_needles(hold);
    for (size_t i = 0; i < n && i < HOLD_NEEDLES_MAX; i++)
        hold->needles[hold->n_needles++] = strdup(needles[i]);
    hold->armed = true;
    pthread_mutex_unlock(&hold->lock);
}

unsigned tcp_proxy_hold_dropped(tcp_proxy_hold *hold)
{
    pthread_mutex_lock(&hold->lock);
    unsigned dropped = hold->dropped;
    pthread_mutex_unlock(&hold->lock);
    return dropped;
}

/* Whether the answer now arriving on c is the one the hold waits for; if so
 * the hold is spent. */
static bool hold_takes(tcp_proxy_hold *hold, const proxy_connection *c)
{
    if (!hold)
        return false;
    pthread_mutex_lock(&hold->lock);
    bool takes = hold->armed && c->request_len > 0;
    for (size_t i = 0; takes && i < hold->n_needles; i++)
        takes = memmem(c->request, c->request_len, hold->needles[i], strlen(hold->needles[i]));
    if (takes) {
        hold->armed = false;
        hold->dropped++;
    }
    pthread_mutex_unlock(&hold->lock);
    return takes;
}

static void keep_request(proxy_connection *c, const char *data, size_t len)
{
    if (c->answer_since_request) {
        c->request_len = 0;
        c->answer_since_request = false;
    }
    if (c->request_len + len > REQUEST_KEPT_MAX)
        return;
    char *grown = realloc(c->request, c->request_len + len);
    if (!grown)
        return;
    c->request = grown;
    memcpy(c->request + c->request_len, data, len);
    c->request_len += len;
}

static bool send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static void connection_close(tcp_proxy *p, size_t i)
{
    proxy_connection *c = &p->connections[i];
    close(c->client_fd);
    close(c->server_fd);
    free(c->request);
    p->connections[i] = p->connections[--p->n_connections];
}

static void accept_one(tcp_proxy *p)
{
    int client = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0)
        return;
    int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->n_connections == PROXY_CONNECTIONS_MAX || server < 0 ||
        connect(server, (struct sockaddr *)&p->target, sizeof(p->target)) < 0) {
        /* The client sees its connection closed, as with a target down. */
        close(client);
        if (server >= 0)
            close(server);
        return;
    }
    p->connections[p->n_connections++] =
        (proxy_connection){.client_fd = client, .server_fd = server};
}

/* Relays what is readable on one end of connection i; false when the
 * connection ended. */
static bool relay(tcp_proxy *p, size_t i, bool from_client)
{
    proxy_connection *c = &p->connections[i];
    char buffer[16384];
    ssize_t n = recv(from_client ? c->client_fd : c->server_fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR)
        return true;
    if (n <= 0)
        return false;
    if (from_client) {
        keep_request(c, buffer, (size_t)n);
        return send_all(c->server_fd, buffer, (size_t)n);
    }
    if (!c->dropping && !c->answer_since_request && hold_takes(p->hold, c))
        c->dropping = true;
    c->answer_since_request = true;
    return c->dropping || send_all(c->client_fd, buffer, (size_t)n);
}

static void *proxy_main(void *arg)
{
    tcp_proxy *p = arg;
    struct pollfd fds[2 + 2 * PROXY_CONNECTIONS_MAX];
    for (;;) {
        size_t n_conn = p->n_connections;
        fds[0] = (struct pollfd){.fd = p->wake_pipe[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < n_conn; i++) {
            fds[2 + 2 * i] = (struct pollfd){.fd = p->connections[i].client_fd, .events = POLLIN};
            fds[3 + 2 * i] = (struct pollfd){.fd = p->connections[i].server_fd, .events = POLLIN};
        }
        if (poll(fds, 2 + 2 * n_conn, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents)
            break;
        /* From the last connection down, so that a close (which moves the
         * last one into its place) leaves the ones still to look at. */
        for (size_t i = n_conn; i-- > 0;) {
            bool open = true;
            if (fds[2 + 2 * i].revents)
                open = relay(p, i, true);
            if (open && fds[3 + 2 * i].revents)
                open = relay(p, i, false);
            if (!open)
                connection_close(p, i);
        }
        if (fds[1].revents)
            accept_one(p);
    }
    return NULL;
}

tcp_proxy *tcp_proxy_start(const char *listen_address, const char *target_address, int target_port,
                           tcp_proxy_hold *hold, act_error *err)
{
    tcp_proxy *p = calloc(1, sizeof(*p));
    if (!p) {
        act_error_set(err, ENOMEM, "tcp proxy: out of memory");
        return NULL;
    }
    p->hold = hold;
    p->target = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(target_port)};
    struct sockaddr_in listen_at = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, target_address, &p->target.sin_addr) != 1 ||
        inet_pton(AF_INET, listen_address, &listen_at.sin_addr) != 1) {
        act_error_set(err, EINVAL, "tcp proxy: %s or %s is not an IPv4 address", listen_address,
                      target_address);
        free(p);
        return NULL;
    }
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof(listen_at);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&listen_at, len) < 0 ||
        listen(p->listen_fd, 64) < 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&listen_at, &len) < 0 ||
        pipe2(p->wake_pipe, O_CLOEXEC) < 0) {
        act_error_set(err, errno, "tcp proxy: cannot listen on %s: %s", listen_address,
                      strerror(errno));
        if (p->listen_fd >= 0)
            close(p->listen_fd);
        free(p);
        return NULL;
    }
    p->port = ntohs(listen_at.sin_port);
    int r = pthread_create(&p->thread, NULL, proxy_main, p);
    if (r != 0) {
        act_error_set(err, r, "tcp proxy: cannot start its thread: %s", strerror(r));
        close(p->listen_fd);
        close(p->wake_pipe[0]);
        close(p->wake_pipe[1]);
        free(p);
        return NULL;
    }
    return p;
}

int tcp_proxy_port(const tcp_proxy *proxy)
{
    return proxy->port;
}

void tcp_proxy_stop(tcp_proxy *proxy)
{
    if (!proxy)
        return;
    char stop = 1;
    if (write(proxy->wake_pipe[1], &stop, 1) == 1)
        pthread_join(proxy->thread, NULL);
    while (proxy->n_connections > 0)
        connection_close(proxy, proxy->n_connections - 1);
    close(proxy->listen_fd);
    close(proxy->wake_pipe[0]);
    close(proxy->wake_pipe[1]);
    free(proxy);
}
