/* Clock readings in microseconds. */
#pragma once

#include <stdint.h>

/* CLOCK_MONOTONIC, for durations and timeouts. */
uint64_t act_now_usec(void);

/* CLOCK_REALTIME, for stamps a person or another box reads. */
uint64_t act_wallclock_usec(void);
