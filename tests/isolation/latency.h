/* The daemon's control latency, measured as an operator's tooling meets it:
 * `status` requests on one NNG REQ socket at a fixed pace (open loop). Each
 * request's latency runs from when it was due, not from when it was sent,
 * so a daemon that stalls is charged for every request that waited behind
 * the stall (no coordinated omission). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct latency_stats {
    size_t samples;
    size_t failed;       /* no reply within the request timeout, or an error */
    uint64_t p50_usec;
    uint64_t p99_usec;
    uint64_t max_usec;
    char first_failure[160];
} latency_stats;

/* The latencies of one or more windows, pooled. */
typedef struct latency_samples {
    uint64_t *usec;
    size_t n, cap;
    size_t failed;
    char first_failure[160];
} latency_samples;

/* status every period_ms for duration_ms against url (ipc://...), each
 * latency appended to samples. A request that fails counts as failed and as
 * timeout_ms of latency. Returns 0, or a negative errno when the socket
 * could not be made (why in samples->first_failure). */
int latency_measure(const char *url, int duration_ms, int period_ms, int timeout_ms,
                    latency_samples *samples);

/* The percentiles of samples (which it sorts). */
void latency_stats_of(latency_samples *samples, latency_stats *stats);
void latency_samples_free(latency_samples *samples);

/* "p50 0.41 ms, p99 0.93 ms, max 2.10 ms over 1000 samples, 0 failed" */
void latency_format(const latency_stats *stats, char *out, size_t size);
