/* What several benchmarks share: a median, and a shell command timed (the
 * by-hand baselines run the standard tools). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Sorts values and returns their median (the mean of the middle two for an
 * even n); values[0] and values[n - 1] are then the spread. */
uint64_t bench_median_u64(uint64_t *values, size_t n);

/* Runs script with sh -c and waits for it; its time into *usec (may be
 * NULL). 0 when it exited 0, else a negative errno. */
int bench_run_sh(const char *script, uint64_t *usec);
