/* Open-loop control latency (latency.h). */
#include "latency.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdbool.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

static uint64_t now_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void sleep_until(uint64_t at_usec)
{
    uint64_t now = now_usec();
    if (at_usec <= now)
        return;
    struct timespec ts = {.tv_sec = (time_t)((at_usec - now) / 1000000),
                          .tv_nsec = (long)((at_usec - now) % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The value below which fraction of the sorted samples lie (nearest rank). */
static uint64_t percentile(const uint64_t *sorted, size_t n, double fraction)
{
    if (n == 0)
        return 0;
    size_t rank = (size_t)(fraction * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    return sorted[rank > n ? n - 1 : rank - 1];
}

static int append(latency_samples *samples, uint64_t usec)
{
    if (samples->n == samples->cap) {
        size_t cap = samples->cap ? 2 * samples->cap : 1024;
        uint64_t *grown = realloc(samples->usec, cap * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        samples->usec = grown;
        samples->cap = cap;
    }
    samples->usec[samples->n++] = usec;
    return 0;
}

int latency_measure(const char *url, int duration_ms, int period_ms, int timeout_ms,
                    latency_samples *samples)
{
    nng_socket req;
    int rv = nng_req0_open(&req);
    if (rv) {
        snprintf(samples->first_failure, sizeof(samples->first_failure), "nng_req0_open: %s",
                 nng_strerror(rv));
        return -EIO;
    }
    /* A request that timed out is over: never resend it behind our back. */
    nng_socket_set_ms(req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(req, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_size(req, NNG_OPT_RECVMAXSZ, 16 * 1024 * 1024);
    rv = nng_dial(req, url, NULL, 0);
    if (rv) {
        nng_close(req);
        snprintf(samples->first_failure, sizeof(samples->first_failure), "dial %s: %s", url,
                 nng_strerror(rv));
        return -EIO;
    }
    static const char request[] = "{\"v\":1,\"op\":\"status\"}";
    size_t planned = (size_t)(duration_ms / period_ms) + 1;
    uint64_t start = now_usec();
    /* A daemon that stopped answering must not hold the window open for a
     * timeout per planned request. */
    uint64_t end = start + ((uint64_t)duration_ms + (uint64_t)timeout_ms) * 1000;
    for (size_t i = 0; i < planned && now_usec() < end; i++) {
        uint64_t due = start + (uint64_t)i * (uint64_t)period_ms * 1000;
        sleep_until(due);
        rv = nng_send(req, (void *)request, sizeof(request) - 1, 0);
        nng_msg *reply = NULL;
        if (rv == 0)
            rv = nng_recvmsg(req, &reply, 0);
        bool ok = rv == 0 && nng_msg_len(reply) > 0 &&
                  memmem(nng_msg_body(reply), nng_msg_len(reply), "\"ok\":true", 9);
        uint64_t latency = now_usec() - due;
        if (!ok) {
            if (samples->failed++ == 0)
                snprintf(samples->first_failure, sizeof(samples->first_failure),
                         "request %zu: %s", i, rv ? nng_strerror(rv) : "the reply is not ok");
            if (latency < (uint64_t)timeout_ms * 1000)
                latency = (uint64_t)timeout_ms * 1000;
        }
        if (reply)
            nng_msg_free(reply);
        if (append(samples, latency) < 0) {
            nng_close(req);
            return -ENOMEM;
        }
    }
    nng_close(req);
    return 0;
}

void latency_stats_of(latency_samples *samples, latency_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    qsort(samples->usec, samples->n, sizeof(*samples->usec), compare_u64);
    stats->samples = samples->n;
    stats->failed = samples->failed;
    stats->p50_usec = percentile(samples->usec, samples->n, 0.50);
    stats->p99_usec = percentile(samples->usec, samples->n, 0.99);
    stats->max_usec = samples->n ? samples->usec[samples->n - 1] : 0;
    snprintf(stats->first_failure, sizeof(stats->first_failure), "%s", samples->first_failure);
}

void latency_samples_free(latency_samples *samples)
{
    free(samples->usec);
    *samples = (latency_samples){0};
}

void latency_format(const latency_stats *stats, char *out, size_t size)
{
    snprintf(out, size, "p50 %.2f ms, p99 %.2f ms, max %.2f ms over %zu samples, %zu failed",
             (double)stats->p50_usec / 1000, (double)stats->p99_usec / 1000,
             (double)stats->max_usec / 1000, stats->samples, stats->failed);
}
