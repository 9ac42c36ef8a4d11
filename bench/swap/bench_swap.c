/* bench-swap: request latency while activatord swaps builds, against the
 * steady state of the same run, and the number of failed requests.
 *
 * One host runs act-testapp (HTTP/1.0, one connection per request) on
 * 127.0.0.1. A client thread makes requests back to back for the whole run
 * and stamps each one. The main thread alternates quiet periods with
 * overlap swaps v1 -> v2 -> v1 ... through the control socket, each one
 * timed from the request to its reply (the reply comes once N+1 serves and
 * N is retired with proof). A request is "during a swap" when its own
 * interval overlaps a swap's, "steady" when it overlaps none.
 *
 * Requests during a swap are also split by who answered: N (the build
 * swapped from) or N+1 (the build swapped to), since a freshly started
 * process answers its first requests cold (page faults, lazy binding).
 *
 * An error is any request that is refused, reset, times out, or is not
 * answered "200 OK" by the app. Targets: p99 ratio <= 2, errors 0. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "activator/listen/listen.h"
#include "bench/wake/bench_daemon.h"
#include "common/cleanup.h"
#include "common/clock.h"

#ifndef ACT_TESTAPP
#error "ACT_TESTAPP must name the act-testapp executable"
#endif

#define BENCH "bench-swap"
#define HOST "web"
#define SWAPS 30
#define QUIET_MS 400
#define TARGET_P99 2.0
#define REQUEST_TIMEOUT_MS 5000

typedef struct request_sample {
    uint64_t start, end; /* CLOCK_MONOTONIC, us */
    char version;        /* '1', '2', or 0 when the request failed */
    const char *error;   /* what failed ("connect", "reset", "status"), or NULL */
} request_sample;

typedef struct client {
    lsn_address target;
    atomic_bool stop;
    request_sample *samples;
    size_t n, cap;
    pthread_t thread;
} client;

/* One GET: connect, send, read the whole answer (the app closes after it). */
static void one_request(const lsn_address *target, request_sample *sample)
{
    static const char request[] = "GET / HTTP/1.0\r\nHost: bench\r\n\r\n";
    char answer[1024];
    size_t got = 0;
    sample->start = act_now_usec();
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const char *error = NULL;
    if (fd < 0 || connect(fd, &target->addr.sa, target->len) < 0)
        error = "connect";
    else if (send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) != sizeof(request) - 1)
        error = "send";
    while (!error) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = poll(&pfd, 1, REQUEST_TIMEOUT_MS);
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
    sample->end = act_now_usec();
    answer[got] = '\0';
    const char *version = strstr(answer, "version=v");
    if (!error && (strncmp(answer, "HTTP/1.0 200 ", 13) != 0 || !version))
        error = got ? "status" : "empty";
    sample->version = error ? 0 : version[9];
    sample->error = error;
}

static void *client_thread(void *arg)
{
    client *c = arg;
    while (!atomic_load(&c->stop)) {
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 65536;
            request_sample *grown = realloc(c->samples, cap * sizeof(*grown));
            if (!grown)
                break;
            c->samples = grown;
            c->cap = cap;
        }
        one_request(&c->target, &c->samples[c->n++]);
    }
    return NULL;
}

typedef struct window {
    uint64_t start, end;
    char to; /* the version swapped to: '1' or '2' */
    bool ok;
} window;

/* The swap a request overlaps, or NULL. */
static const window *overlapped_swap(const request_sample *s, const window *windows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s->start <= windows[i].end && s->end >= windows[i].start)
            return &windows[i];
    return NULL;
}

/* The first answer that started after a swap's reply must come from the
 * build it swapped to: the proof that the swaps happened at all. */
static bool new_build_answers(const client *c, const window *w)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->samples[i].start > w->end && c->samples[i].version)
            return c->samples[i].version == w->to;
    return false;
}

/* The latency of the first answer N+1 gave within a swap's window (the
 * request a fresh process answers cold), or a negative value if none. */
static double first_new_answer_usec(const client *c, const window *w)
{
    for (size_t i = 0; i < c->n; i++) {
        const request_sample *s = &c->samples[i];
        if (s->start <= w->end && s->end >= w->start && s->version == w->to)
            return (double)(s->end - s->start);
    }
    return -1;
}

static int run(dd_daemon *d, act_error *err)
{
    char address[64];
    int r = bd_start_one_host(d, "swap", HOST, "act-testapp", 5, address, sizeof(address), err);
    if (r < 0 || (r = dd_stage(d, HOST, "v1", ACT_TESTAPP, true, err)) < 0 ||
        (r = dd_stage(d, HOST, "v2", ACT_TESTAPP, false, err)) < 0 ||
        (r = dd_request(d, 30000, NULL, err, "{\"v\":1,\"op\":\"wake\",\"host\":\"" HOST "\"}")) <
            0)
        return r;

    client c = {0};
    if ((r = lsn_parse(address, "client target", &c.target, err)) < 0)
        return r;
    if (pthread_create(&c.thread, NULL, client_thread, &c) != 0)
        return act_error_set(err, EAGAIN, "cannot start the client thread");

    window windows[SWAPS];
    size_t n_windows = 0;
    act_error swap_err = {0};
    unsigned failed_swaps = 0;
    dd_sleep_ms(QUIET_MS);
    for (int i = 0; i < SWAPS; i++) {
        window *w = &windows[n_windows++];
        w->to = i % 2 == 0 ? '2' : '1';
        w->start = act_now_usec();
        int s = dd_request(d, 60000, NULL, &swap_err,
                           "{\"v\":1,\"op\":\"swap\",\"host\":\"" HOST "\",\"version\":\"v%c\"}",
                           w->to);
        w->end = act_now_usec();
        w->ok = s == 0;
        if (s < 0) {
            failed_swaps++;
            fprintf(stderr, BENCH ": swap %d: %s\n", i + 1, swap_err.message);
        }
        dd_sleep_ms(QUIET_MS);
    }
    atomic_store(&c.stop, true);
    pthread_join(c.thread, NULL);

    bd_samples steady = {0}, during = {0}, during_old = {0}, during_new = {0}, swap_ms = {0},
               first_new = {0};
    size_t errors_steady = 0, errors_during = 0;
    char first_error[64] = "";
    for (size_t i = 0; i < c.n; i++) {
        const request_sample *s = &c.samples[i];
        const window *swap = overlapped_swap(s, windows, n_windows);
        bool in_swap = swap != NULL;
        if (!s->version) {
            if (!first_error[0])
                snprintf(first_error, sizeof(first_error), "%s (%s)", s->error,
                         in_swap ? "during a swap" : "steady");
            *(in_swap ? &errors_during : &errors_steady) += 1;
            continue;
        }
        bd_samples_add(in_swap ? &during : &steady, (double)(s->end - s->start));
        if (in_swap)
            bd_samples_add(s->version == swap->to ? &during_new : &during_old,
                           (double)(s->end - s->start));
    }
    unsigned switched = 0;
    for (size_t i = 0; i < n_windows; i++) {
        bd_samples_add(&swap_ms, (double)(windows[i].end - windows[i].start) / 1000.0);
        switched += windows[i].ok && new_build_answers(&c, &windows[i]);
        double first = first_new_answer_usec(&c, &windows[i]);
        if (first >= 0)
            bd_samples_add(&first_new, first);
    }

    size_t errors = errors_steady + errors_during;
    printf(BENCH ": %d overlap swaps v1 <-> v2 of act-testapp, %d ms apart, under a client making "
                 "HTTP requests back to back (%zu requests); state in %s\n",
           SWAPS, QUIET_MS, c.n, bd_base_dir());
    printf("  %-28s n=%7zu  p50 %8.0f us  p99 %8.0f us\n", "steady (no swap in flight)", steady.n,
           bd_samples_quantile(&steady, 0.5), bd_samples_quantile(&steady, 0.99));
    printf("  %-28s n=%7zu  p50 %8.0f us  p99 %8.0f us\n", "during a swap", during.n,
           bd_samples_quantile(&during, 0.5), bd_samples_quantile(&during, 0.99));
    printf("  %-28s n=%7zu  p50 %8.0f us  p99 %8.0f us\n", "  of which answered by N", during_old.n,
           bd_samples_quantile(&during_old, 0.5), bd_samples_quantile(&during_old, 0.99));
    printf("  %-28s n=%7zu  p50 %8.0f us  p99 %8.0f us\n", "  of which answered by N+1",
           during_new.n, bd_samples_quantile(&during_new, 0.5),
           bd_samples_quantile(&during_new, 0.99));
    printf("  N+1's first answer in each swap (a fresh process answers cold): p50 %.0f us over "
           "%zu swaps\n",
           bd_samples_quantile(&first_new, 0.5), first_new.n);
    printf("  swap request -> reply (N+1 serving, N retired): p50 %.1f ms, p99 %.1f ms\n",
           bd_samples_quantile(&swap_ms, 0.5), bd_samples_quantile(&swap_ms, 0.99));
    printf("  swaps refused or failed: %u; swaps after which the new build answered: %u/%d\n",
           failed_swaps, switched, SWAPS);
    printf("  failed requests: %zu during swaps, %zu steady%s%s\n", errors_during, errors_steady,
           first_error[0] ? "; first: " : "", first_error);
    double p99 = bd_samples_quantile(&during, 0.99) / bd_samples_quantile(&steady, 0.99);
    double p50 = bd_samples_quantile(&during, 0.5) / bd_samples_quantile(&steady, 0.5);
    printf("RATIO p50 during/steady = %.2f\n", p50);
    printf("RATIO p99 during/steady = %.2f (target <= %.0f: %s)\n", p99, TARGET_P99,
           p99 <= TARGET_P99 ? "met" : "NOT met");
    printf("ERRORS %zu (target 0: %s)\n", errors, errors == 0 ? "met" : "NOT met");

    bd_samples_free(&steady);
    bd_samples_free(&during);
    bd_samples_free(&during_old);
    bd_samples_free(&during_new);
    bd_samples_free(&first_new);
    bd_samples_free(&swap_ms);
    free(c.samples);
    if (failed_swaps || switched != SWAPS)
        return act_error_set(err, EPROTO,
                             "%u of %d swaps failed and the new build answered after %u: the "
                             "numbers above do not measure %d swaps",
                             failed_swaps, SWAPS, switched, SWAPS);
    return 0;
}

int main(void)
{
    return bd_main(BENCH, run);
}
