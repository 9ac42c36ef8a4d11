/* The back-to-back and open-loop clients of bench-swap (swap_clients.h). */
#include "bench/swap/swap_clients.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"

#define ANSWER_MAX 1024

static const char request_text[] = "GET / HTTP/1.0\r\nHost: bench\r\n\r\n";

/* A new sample at the end of c's list, or NULL when memory runs out. Returns
 * an index, since the list moves as it grows. */
static ssize_t new_sample(sc_client *c)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 65536;
        sc_sample *grown = realloc(c->samples, cap * sizeof(*grown));
        if (!grown) {
            c->failure = "out of memory for samples";
            return -1;
        }
        c->samples = grown;
        c->cap = cap;
    }
    c->samples[c->n] = (sc_sample){0};
    return (ssize_t)c->n++;
}

/* Ends a request: its time, and what it got (answer is NUL-terminated). */
static void finish(sc_sample *sample, const char *answer, size_t got, const char *error)
{
    sample->end = act_now_usec();
    const char *version = strstr(answer, "version=v");
    if (!error && (strncmp(answer, "HTTP/1.0 200 ", 13) != 0 || !version))
        error = got ? "status" : "empty";
    sample->version = error ? 0 : version[9];
    sample->error = error;
}

/* ---- back to back ---- */

/* One GET: connect, send, read the whole answer (the app closes after it). */
static void one_request(const lsn_address *target, sc_sample *sample)
{
    char answer[ANSWER_MAX];
    size_t got = 0;
    sample->start = sample->sent = act_now_usec();
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const char *error = NULL;
    if (fd < 0 || connect(fd, &target->addr.sa, target->len) < 0)
        error = "connect";
    else if (send(fd, request_text, sizeof(request_text) - 1, MSG_NOSIGNAL) !=
             sizeof(request_text) - 1)
        error = "send";
    while (!error) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = poll(&pfd, 1, SC_REQUEST_TIMEOUT_MS);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            error = "timeout";
            break;
        }
        ssize_t n = recv(fd, answer + got, sizeof(answer) - 1 - got, 0);
        if (n < 0) {
            error = "reset";
            break;
        }
        if (n == 0 || (got += (size_t)n) == sizeof(answer) - 1)
            break;
    }
    answer[got] = '\0';
    finish(sample, answer, got, error);
}

static void *back_to_back_thread(void *arg)
{
    sc_client *c = arg;
    while (!atomic_load(&c->stop)) {
        ssize_t i = new_sample(c);
        if (i < 0)
            break;
        one_request(&c->target, &c->samples[i]);
    }
    c->max_in_flight = 1;
    return NULL;
}

/* ---- open loop ---- */

typedef struct in_flight {
    int fd; /* -1: no request on this fd */
    size_t sample;
    bool sent;
    size_t got;
    char answer[ANSWER_MAX];
} in_flight;

/* Every step is O(1) in the number of requests open, so a client that falls
 * behind (a stall keeps thousands open) does not fall further behind. */
typedef struct open_loop {
    sc_client *c;
    int epoll_fd;
    in_flight *by_fd; /* indexed by the connection's fd, which epoll hands back */
    size_t n_by_fd;
    int *fd_of; /* by sample index: its connection's fd while open, else -1 */
    size_t fd_of_cap;
    size_t oldest; /* no sample before this one is open */
    size_t used;
} open_loop;

/* When request i is due: a fixed schedule from t0, so a late client catches
 * up by sending at once what it owes instead of sliding the schedule. */
static uint64_t scheduled(uint64_t t0, unsigned rate, uint64_t i)
{
    return t0 + i * 1000000 / rate;
}

static void end_request(open_loop *l, in_flight *f, const char *error)
{
    f->answer[f->got] = '\0';
    finish(&l->c->samples[f->sample], f->answer, f->got, error);
    epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, f->fd, NULL);
    close(f->fd);
    l->fd_of[f->sample] = -1;
    f->fd = -1;
    l->used--;
}

/* Room for fd in by_fd and for sample in fd_of. */
static bool make_room(open_loop *l, int fd, size_t sample)
{
    if ((size_t)fd >= l->n_by_fd) {
        size_t n = (size_t)fd + 1 > l->n_by_fd * 2 ? (size_t)fd + 1 : l->n_by_fd * 2;
        in_flight *grown = realloc(l->by_fd, n * sizeof(*grown));
        if (!grown)
            return false;
        for (size_t i = l->n_by_fd; i < n; i++)
            grown[i].fd = -1;
        l->by_fd = grown;
        l->n_by_fd = n;
    }
    if (sample >= l->fd_of_cap) {
        size_t n = l->fd_of_cap ? l->fd_of_cap * 2 : 65536;
        int *grown = realloc(l->fd_of, n * sizeof(*grown));
        if (!grown)
            return false;
        l->fd_of = grown;
        l->fd_of_cap = n;
    }
    return true;
}

typedef enum issued { ISSUED, OUT_OF_FDS, CANNOT_GO_ON } issued;

/* Opens the connection of the request due at due (non-blocking: the send
 * waits for EPOLLOUT). */
static issued issue(open_loop *l, uint64_t due)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
        /* The client's own limit: the request waits for a connection to
         * end, and its latency still runs from due. */
        l->c->out_of_fds++;
        return OUT_OF_FDS;
    }
    if (fd < 0) {
        snprintf(l->c->failure_text, sizeof(l->c->failure_text), "cannot open a socket: %s",
                 strerror(errno));
        l->c->failure = l->c->failure_text;
        return CANNOT_GO_ON;
    }
    ssize_t i = new_sample(l->c);
    if (i < 0 || !make_room(l, fd, (size_t)i)) {
        close(fd);
        l->c->failure = l->c->failure ? l->c->failure : "out of memory for connections";
        return CANNOT_GO_ON;
    }
    in_flight *f = &l->by_fd[fd];
    sc_sample *sample = &l->c->samples[i];
    sample->start = due;
    sample->sent = act_now_usec();
    *f = (in_flight){.fd = fd, .sample = (size_t)i};
    l->fd_of[i] = fd;
    l->used++;
    if (connect(fd, &l->c->target.addr.sa, l->c->target.len) < 0 && errno != EINPROGRESS) {
        end_request(l, f, "connect");
        return ISSUED;
    }
    struct epoll_event event = {.events = EPOLLOUT | EPOLLIN, .data.fd = fd};
    if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &event) < 0) {
        end_request(l, f, "epoll");
        return ISSUED;
    }
    if (l->used > l->c->max_in_flight)
        l->c->max_in_flight = l->used;
    return ISSUED;
}

static void on_event(open_loop *l, int fd, uint32_t events)
{
    in_flight *f = &l->by_fd[fd];
    if (f->fd < 0)
        return;
    if (!f->sent) {
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) < 0 || so_error) {
            end_request(l, f, "connect");
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        if (send(fd, request_text, sizeof(request_text) - 1, MSG_NOSIGNAL) !=
            sizeof(request_text) - 1) {
            end_request(l, f, "send");
            return;
        }
        f->sent = true;
        struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, fd, &event);
        return;
    }
    for (;;) {
        ssize_t n = recv(fd, f->answer + f->got, sizeof(f->answer) - 1 - f->got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n < 0) {
            end_request(l, f, "reset");
            return;
        }
        if (n == 0 || (f->got += (size_t)n) == sizeof(f->answer) - 1) {
            end_request(l, f, NULL);
            return;
        }
    }
}

/* Requests are due in order, so the overdue ones are the oldest open. */
static void end_overdue(open_loop *l, uint64_t now)
{
    for (; l->oldest < l->c->n; l->oldest++) {
        int fd = l->fd_of[l->oldest];
        if (fd < 0)
            continue;
        if (now - l->c->samples[l->oldest].start <= SC_REQUEST_TIMEOUT_MS * 1000ULL)
            break;
        end_request(l, &l->by_fd[fd], "timeout");
    }
}

static void *open_loop_thread(void *arg)
{
    sc_client *c = arg;
    /* The default 50 us of timer slack would be lag of our own on every
     * request at a sub-millisecond interval. */
    prctl(PR_SET_TIMERSLACK, 1UL);
    open_loop l = {.c = c, .epoll_fd = epoll_create1(EPOLL_CLOEXEC)};
    if (l.epoll_fd < 0) {
        c->failure = "epoll_create1 failed";
        return NULL;
    }
    uint64_t t0 = act_now_usec(), next = 0;
    bool sending = true;
    while (sending || l.used) {
        uint64_t now = act_now_usec();
        sending = sending && !atomic_load(&c->stop);
        bool out_of_fds = false;
        while (sending && !out_of_fds && scheduled(t0, c->rate, next) <= now) {
            issued r = issue(&l, scheduled(t0, c->rate, next));
            next += r == ISSUED;
            out_of_fds = r == OUT_OF_FDS;
            sending = r != CANNOT_GO_ON;
        }
        end_overdue(&l, now);
        if (!sending && !l.used)
            break;
        /* Wake for the next request due, or every 10 ms while draining (to
         * end overdue ones), or once a connection has ended when out of fds. */
        uint64_t wait_us = 10000;
        if (sending && !out_of_fds) {
            uint64_t due = scheduled(t0, c->rate, next);
            wait_us = due > now ? due - now : 0;
        }
        struct timespec timeout = {.tv_sec = (time_t)(wait_us / 1000000),
                                   .tv_nsec = (long)(wait_us % 1000000) * 1000};
        struct epoll_event events[64];
        int n = epoll_pwait2(l.epoll_fd, events, 64, &timeout, NULL);
        for (int i = 0; i < n; i++)
            on_event(&l, events[i].data.fd, events[i].events);
    }
    for (size_t i = 0; i < l.n_by_fd; i++)
        if (l.by_fd[i].fd >= 0)
            close(l.by_fd[i].fd);
    free(l.by_fd);
    free(l.fd_of);
    close(l.epoll_fd);
    return NULL;
}

int sc_client_start(sc_client *c, act_error *err)
{
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    if (c->cpus)
        pthread_attr_setaffinity_np(&attributes, sizeof(*c->cpus), c->cpus);
    int r = pthread_create(&c->thread, &attributes,
                           c->rate ? open_loop_thread : back_to_back_thread, c);
    pthread_attr_destroy(&attributes);
    if (r != 0)
        return act_error_set(err, r, "cannot start the client thread: %s", strerror(r));
    return 0;
}

void sc_client_stop(sc_client *c)
{
    atomic_store(&c->stop, true);
    pthread_join(c->thread, NULL);
}

void sc_client_free(sc_client *c)
{
    free(c->samples);
    c->samples = NULL;
    c->n = c->cap = 0;
}
