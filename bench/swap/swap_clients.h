/* The two HTTP clients bench-swap measures a swap with, each on a thread of
 * its own, both HTTP/1.0 with one connection per request (the app closes
 * after answering):
 *
 * - back to back: the next request is sent when the previous one is
 *   answered. On a small box it keeps every core busy, so its tail measures
 *   contention as much as the daemon.
 * - open loop: requests are sent on a fixed schedule (rate per second),
 *   whatever happened to the ones before, from one thread driving
 *   non-blocking sockets with epoll, as many in flight as it takes. A
 *   request's latency runs from the time it was scheduled, not sent, so a
 *   stall that delays the client itself still shows (no coordinated
 *   omission). */
#pragma once

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "activator/listen/listen.h"
#include "common/error.h"

#define SC_REQUEST_TIMEOUT_MS 5000

typedef struct sc_sample {
    uint64_t start;    /* CLOCK_MONOTONIC, us: sent (back to back) or scheduled (open loop) */
    uint64_t sent;     /* when the connection was opened; start for back to back */
    uint64_t end;      /* when the answer was complete or the request failed */
    char version;      /* '1', '2', or 0 when the request failed */
    const char *error; /* what failed ("connect", "reset", "status", ...), or NULL */
} sc_sample;

typedef struct sc_client {
    lsn_address target;
    unsigned rate; /* requests per second; 0 for back to back */
    const cpu_set_t *cpus; /* where the thread runs; NULL: where its starter does */
    atomic_bool stop;
    sc_sample *samples;
    size_t n, cap;
    size_t max_in_flight; /* open loop: the most requests open at once */
    size_t out_of_fds;    /* open loop: times a request waited for an fd */
    const char *failure;  /* why the client thread gave up early, or NULL */
    char failure_text[128];
    pthread_t thread;
} sc_client;

/* Starts c's thread: back to back when c->rate is 0, else open loop at
 * c->rate, on c->cpus. c->target must be set; the rest zeroed but cpus. */
int sc_client_start(sc_client *c, act_error *err);

/* Tells the thread to stop sending, waits for the requests in flight (each
 * ends within SC_REQUEST_TIMEOUT_MS) and joins it. */
void sc_client_stop(sc_client *c);

void sc_client_free(sc_client *c);
