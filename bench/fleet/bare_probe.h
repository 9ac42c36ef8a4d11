/* etcd alone, at the same moment: a thread that, beside the simulated
 * fleet, reads and compare-and-swaps one key of its own with a plain
 * blocking libcurl handle (no event loop, no store client), as a box's
 * admission does (a range, then a transaction comparing the revision
 * read). Its latency is what etcd itself gives under the fleet's load on
 * this machine; an admission's latency beside it is what the box's own
 * code adds. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bench/fleet/sim.h"

typedef struct bare_probe {
    char endpoint[64]; /* "127.0.0.1:<port>" of the member it asks */
    uint64_t mean_gap_usec;
    atomic_bool stop;
    pthread_t thread;
    bool started;
    /* Each read, each compare-and-swap, and the two together. */
    sim_samples read_usec, cas_usec, both_usec;
    uint64_t failures;
} bare_probe;

/* Starts the probe against endpoint, a read and a CAS about every
 * mean_gap_usec (drawn at random around it). -1 when its thread cannot
 * start. */
int bare_probe_start(bare_probe *probe, const char *endpoint, uint64_t mean_gap_usec);
/* Stops the thread; the samples stay for reading, then bare_probe_free. */
void bare_probe_stop(bare_probe *probe);
void bare_probe_free(bare_probe *probe);
