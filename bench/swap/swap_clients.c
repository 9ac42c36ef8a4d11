/* The back-to-back and open-loop clients of bench-swap (swap_clients.h). */
#include "bench/swap/swap_clients.h"

#include <errno.h>
#include <poll.h>
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
    int fd; /* -1: a free slot */
    size_t sample;
    bool sent;
    size_t got;
    char answer[ANSWER_MAX];
} in_flight;

typedef struct open_loop {
    sc_client *c;
    int epoll_fd;
    in_flight *slots;
    size_t n_slots, used;
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
    f->fd = -1;
    l->used--;
}

/* A free slot's index, or -1. Slots move as they grow, so epoll knows a
 * connection by its slot's index, never its address. */
static ssize_t free_slot(open_loop *l)
{
    for (size_t i = 0; i < l->n_slots; i++)
        if (l->slots[i].fd < 0)
            return (ssize_t)i;
    size_t n = l->n_slots ? l->n_slots * 2 : 64;
    in_flight *grown = realloc(l->slots, n * sizeof(*grown));
    if (!grown)
        return -1;
    for (size_t i = l->n_slots; i < n; i++)
        grown[i].fd = -1;
    ssize_t slot = (ssize_t)l->n_slots;
    l->slots = grown;
    l->n_slots = n;
    return slot;
}

/* Opens request number i's connection (non-blocking: the send waits for
 * EPOLLOUT). Returns false when the client cannot go on. */
static bool issue(open_loop *l, uint64_t due)
{
    ssize_t i = new_sample(l->c);
    ssize_t slot = i < 0 ? -1 : free_slot(l);
    if (slot < 0) {
        l->c->failure = l->c->failure ? l->c->failure : "out of memory for connections";
        return false;
    }
    in_flight *f = &l->slots[slot];
    sc_sample *sample = &l->c->samples[i];
    sample->start = due;
    sample->sent = act_now_usec();
    *f = (in_flight){.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0),
                     .sample = (size_t)i};
    if (f->fd < 0) {
        /* Out of fds is the client's limit, not the daemon's failure. */
        l->c->failure = "cannot open a socket (raise RLIMIT_NOFILE or lower the rate)";
        return false;
    }
    l->used++;
    if (connect(f->fd, &l->c->target.addr.sa, l->c->target.len) < 0 && errno != EINPROGRESS) {
        end_request(l, f, "connect");
        return true;
    }
    struct epoll_event event = {.events = EPOLLOUT | EPOLLIN, .data.u64 = (uint64_t)slot};
    if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, f->fd, &event) < 0) {
        end_request(l, f, "epoll");
        return true;
    }
    if (l->used > l->c->max_in_flight)
        l->c->max_in_flight = l->used;
    return true;
}

static void on_event(open_loop *l, size_t slot, uint32_t events)
{
    in_flight *f = &l->slots[slot];
    if (!f->sent) {
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        if (getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &so_error, &len) < 0 || so_error) {
            end_request(l, f, "connect");
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        if (send(f->fd, request_text, sizeof(request_text) - 1, MSG_NOSIGNAL) !=
            sizeof(request_text) - 1) {
            end_request(l, f, "send");
            return;
        }
        f->sent = true;
        struct epoll_event event = {.events = EPOLLIN, .data.u64 = slot};
        epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, f->fd, &event);
        return;
    }
    for (;;) {
        ssize_t n = recv(f->fd, f->answer + f->got, sizeof(f->answer) - 1 - f->got, 0);
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

static void end_overdue(open_loop *l, uint64_t now)
{
    for (size_t i = 0; i < l->n_slots; i++) {
        in_flight *f = &l->slots[i];
        if (f->fd >= 0 && now - l->c->samples[f->sample].start > SC_REQUEST_TIMEOUT_MS * 1000ULL)
            end_request(l, f, "timeout");
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
        while (sending && scheduled(t0, c->rate, next) <= now)
            if (!issue(&l, scheduled(t0, c->rate, next++)))
                sending = false;
        end_overdue(&l, now);
        if (!sending && !l.used)
            break;
        /* Wake for the next request due, or every 10 ms while draining (to
         * end overdue ones). */
        uint64_t wait_us = 10000;
        if (sending) {
            uint64_t due = scheduled(t0, c->rate, next);
            wait_us = due > now ? due - now : 0;
        }
        struct timespec timeout = {.tv_sec = (time_t)(wait_us / 1000000),
                                   .tv_nsec = (long)(wait_us % 1000000) * 1000};
        struct epoll_event events[64];
        int n = epoll_pwait2(l.epoll_fd, events, 64, &timeout, NULL);
        for (int i = 0; i < n; i++)
            on_event(&l, (size_t)events[i].data.u64, events[i].events);
    }
    for (size_t i = 0; i < l.n_slots; i++)
        if (l.slots[i].fd >= 0)
            close(l.slots[i].fd);
    free(l.slots);
    close(l.epoll_fd);
    return NULL;
}

int sc_client_start(sc_client *c, act_error *err)
{
    if (pthread_create(&c->thread, NULL, c->rate ? open_loop_thread : back_to_back_thread, c) != 0)
        return act_error_set(err, EAGAIN, "cannot start the client thread");
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
