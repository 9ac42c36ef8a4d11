#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/activator/daemon/harness.h"

static void close_pair(fl_proxy_pair *pair)
{
    /* A reset, as a box would see a connection the network lost. */
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    setsockopt(pair->down, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(pair->down);
    if (pair->up >= 0)
        close(pair->up);
}

static void drop_pair(fl_proxy *proxy, size_t i)
{
    close_pair(&proxy->pairs[i]);
    proxy->pairs[i] = proxy->pairs[--proxy->n_pairs];
}

static int connect_upstream(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void accept_one(fl_proxy *proxy)
{
    int down = accept4(proxy->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (down < 0)
        return;
    int up = atomic_load(&proxy->cut) ? -1 : connect_upstream(proxy->upstream_port);
    if (proxy->n_pairs == FL_PROXY_PAIRS_MAX || (up < 0 && !atomic_load(&proxy->cut))) {
        close_pair(&(fl_proxy_pair){down, up});
        return;
    }
    proxy->pairs[proxy->n_pairs++] = (fl_proxy_pair){down, up};
}

/* Moves what from has to to (or drops it while cut); false once either
 * side is gone. */
static bool forward(fl_proxy *proxy, int from, int to)
{
    char buf[65536];
    /* Never waits: poll said from had something, but an error or a hang-up
     * may be all it had. */
    ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    /* A connection held across a heal is half a conversation: it goes. */
    if (n <= 0 || proxy->healed < atomic_load(&proxy->heals))
        return false;
    if (atomic_load(&proxy->cut) || to < 0)
        return true;
    for (ssize_t sent = 0; sent < n;) {
        ssize_t w = write(to, buf + sent, (size_t)(n - sent));
        if (w <= 0)
            return false;
        sent += w;
    }
    return true;
}

static void *run(void *arg)
{
    fl_proxy *proxy = arg;
    while (!atomic_load(&proxy->stop)) {
        /* A heal drops everything held: the box connects afresh. */
        while (proxy->healed < atomic_load(&proxy->heals)) {
            proxy->healed++;
            while (proxy->n_pairs)
                drop_pair(proxy, 0);
        }
        struct pollfd fds[2 + 2 * FL_PROXY_PAIRS_MAX];
        size_t n = 0;
        fds[n++] = (struct pollfd){.fd = proxy->wake[0], .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = proxy->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < proxy->n_pairs; i++) {
            fds[n++] = (struct pollfd){.fd = proxy->pairs[i].down, .events = POLLIN};
            fds[n++] = (struct pollfd){.fd = proxy->pairs[i].up, .events = POLLIN};
        }
        if (poll(fds, n, -1) < 0 && errno != EINTR)
            break;
        if (fds[0].revents) {
            char drain[64];
            if (read(proxy->wake[0], drain, sizeof(drain)) < 0)
                continue;
        }
        /* Only the pairs polled have their entries in fds: one accepted
         * now is polled next time round. */
        size_t polled = proxy->n_pairs;
        if (fds[1].revents & POLLIN)
            accept_one(proxy);
        for (size_t i = polled; i-- > 0;) {
            const struct pollfd *down = &fds[2 + 2 * i], *up = &fds[3 + 2 * i];
            bool alive = true;
            if (down->revents)
                alive = forward(proxy, proxy->pairs[i].down, proxy->pairs[i].up);
            if (alive && up->revents && proxy->pairs[i].up >= 0)
                alive = forward(proxy, proxy->pairs[i].up, proxy->pairs[i].down);
            if (!alive)
                drop_pair(proxy, i);
        }
    }
    while (proxy->n_pairs)
        drop_pair(proxy, 0);
    return NULL;
}

static void poke(fl_proxy *proxy)
{
    if (write(proxy->wake[1], "x", 1) < 0)
        fail_msg("the proxy's wake pipe: %s", strerror(errno));
}

void fl_proxy_start(fl_proxy *proxy, int upstream_port)
{
    memset(proxy, 0, sizeof(*proxy));
    proxy->upstream_port = upstream_port;
    proxy->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    socklen_t len = sizeof(addr);
    if (proxy->listen_fd < 0 ||
        bind(proxy->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        listen(proxy->listen_fd, 64) < 0 ||
        getsockname(proxy->listen_fd, (struct sockaddr *)&addr, &len) < 0 ||
        pipe2(proxy->wake, O_CLOEXEC) < 0)
        fail_msg("the proxy's socket: %s", strerror(errno));
    proxy->port = ntohs(addr.sin_port);
    atomic_init(&proxy->cut, false);
    atomic_init(&proxy->stop, false);
    atomic_init(&proxy->heals, 0);
    if (pthread_create(&proxy->thread, NULL, run, proxy) != 0)
        fail_msg("the proxy's thread");
    proxy->running = true;
}

void fl_proxy_cut(fl_proxy *proxy)
{
    atomic_store(&proxy->cut, true);
    poke(proxy);
}

void fl_proxy_heal(fl_proxy *proxy)
{
    atomic_fetch_add(&proxy->heals, 1);
    atomic_store(&proxy->cut, false);
    poke(proxy);
}

void fl_proxy_stop(fl_proxy *proxy)
{
    if (!proxy->running)
        return;
    atomic_store(&proxy->stop, true);
    poke(proxy);
    pthread_join(proxy->thread, NULL);
    close(proxy->listen_fd);
    close(proxy->wake[0]);
    close(proxy->wake[1]);
    proxy->running = false;
}
