/* An HTTP client of act-testapp that records every answer, and a steady load
 * of it on threads. Requests are HTTP/1.0 on a fresh connection each, so
 * every request is also a new connection the listening socket must take:
 * the thing a swap or a cold start must not refuse. */
#include "activation.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"

uint64_t ah_wallclock_usec(void)
{
    return act_wallclock_usec();
}

void ah_sleep_ms(long ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
        ;
}

static int failed(ah_sample *out, const char *where, int error)
{
    out->end_usec = ah_wallclock_usec();
    out->failed_at = where;
    out->error = error ? error : EIO;
    return out->error;
}

int ah_get(int port, ah_sample *out)
{
    memset(out, 0, sizeof(*out));
    out->start_usec = ah_wallclock_usec();
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return failed(out, "socket", errno);
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
        return failed(out, "connect", errno);
    out->connect_usec = ah_wallclock_usec();
    static const char request[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(request) - 1))
        return failed(out, "send", errno);
    char buf[1024];
    size_t used = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + used, sizeof(buf) - 1 - used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return failed(out, "recv", errno);
        if (n == 0 || used + (size_t)n >= sizeof(buf) - 1) {
            used += (size_t)n;
            break;
        }
        used += (size_t)n;
    }
    buf[used] = '\0';
    const char *body = strstr(buf, "\r\n\r\n");
    unsigned long long generation = 0;
    if (!body || strncmp(buf, "HTTP/1.0 200", 12) != 0 ||
        sscanf(body + 4, "demo version=%31s generation=%llu pid=%d", out->version, &generation,
               &out->pid) != 3)
        return failed(out, "answer", EPROTO);
    out->generation = generation;
    out->end_usec = ah_wallclock_usec();
    return 0;
}

void ah_print_failures(const ah_sample *samples, size_t n)
{
    unsigned shown = 0;
    for (size_t i = 0; i < n && shown < 10; i++) {
        if (!samples[i].error)
            continue;
        fprintf(stderr, "request %zu failed at %s: %s (started %llu, ended %llu)\n", i,
                samples[i].failed_at, strerror(samples[i].error),
                (unsigned long long)samples[i].start_usec, (unsigned long long)samples[i].end_usec);
        shown++;
    }
}

/* ---- steady load ---------------------------------------------------------- */

struct ah_load {
    int port;
    unsigned n_threads;
    pthread_t threads[16];
    atomic_bool stop;
    atomic_size_t done;
    pthread_mutex_t lock;
    ah_sample *samples;
    size_t n_samples, cap_samples;
};

static void keep(ah_load *load, const ah_sample *sample)
{
    pthread_mutex_lock(&load->lock);
    if (load->n_samples == load->cap_samples) {
        size_t cap = load->cap_samples ? load->cap_samples * 2 : 4096;
        ah_sample *grown = realloc(load->samples, cap * sizeof(*grown));
        if (!grown) {
            pthread_mutex_unlock(&load->lock);
            abort();
        }
        load->samples = grown;
        load->cap_samples = cap;
    }
    load->samples[load->n_samples++] = *sample;
    pthread_mutex_unlock(&load->lock);
}

static void *load_thread(void *arg)
{
    ah_load *load = arg;
    while (!atomic_load(&load->stop)) {
        ah_sample sample;
        ah_get(load->port, &sample);
        keep(load, &sample);
        atomic_fetch_add(&load->done, 1);
    }
    return NULL;
}

ah_load *ah_load_start(int port, unsigned threads)
{
    ah_load *load = calloc(1, sizeof(*load));
    assert_non_null(load);
    assert_true(threads >= 1 && threads <= 16);
    load->port = port;
    pthread_mutex_init(&load->lock, NULL);
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&load->threads[i], NULL, load_thread, load) != 0)
            fail_msg("cannot start load thread %u", i);
        load->n_threads++;
    }
    return load;
}

size_t ah_load_done(ah_load *load)
{
    return atomic_load(&load->done);
}

bool ah_load_wait(ah_load *load, size_t count, int timeout_ms)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    while (ah_load_done(load) < count) {
        if (act_now_usec() >= deadline)
            return false;
        ah_sleep_ms(5);
    }
    return true;
}

const ah_sample *ah_load_stop(ah_load *load, size_t *n)
{
    atomic_store(&load->stop, true);
    for (unsigned i = 0; i < load->n_threads; i++)
        pthread_join(load->threads[i], NULL);
    load->n_threads = 0;
    *n = load->n_samples;
    return load->samples;
}

void ah_load_free(ah_load *load)
{
    if (!load)
        return;
    size_t n;
    ah_load_stop(load, &n);
    pthread_mutex_destroy(&load->lock);
    free(load->samples);
    free(load);
}

/* ---- events and numbers --------------------------------------------------- */

const dh_event *ah_find_event(dh_daemon *d, const char *host, const char *name, uint64_t gen,
                              uint64_t after_seq)
{
    for (size_t i = 0; i < d->n_events; i++) {
        const dh_event *event = &d->events[i];
        if (event->seq > after_seq && strcmp(event->host, host) == 0 &&
            strcmp(event->name, name) == 0 && (gen == 0 || event->generation == gen))
            return event;
    }
    return NULL;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ah_median(const double *values, size_t n)
{
    if (n == 0)
        return 0;
    double *sorted = malloc(n * sizeof(*sorted));
    assert_non_null(sorted);
    memcpy(sorted, values, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), compare_doubles);
    double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    free(sorted);
    return median;
}
