/* Clock readings in microseconds. */
#pragma once

#include <stdint.h>
#include <time.h>

#include <systemd/sd-event.h>

/* CLOCK_MONOTONIC, for durations and timeouts. */
uint64_t act_now_usec(void);

/* CLOCK_REALTIME, for stamps a person or another box reads. */
uint64_t act_wallclock_usec(void);

/* The loop's CLOCK_MONOTONIC time of this iteration, not the clock's now:
 * every decision made while dispatching one event sees the same time, and
 * it is the base an sd-event timer's absolute time is counted from. The
 * clock's now before the loop first runs. */
uint64_t act_loop_now_usec(sd_event *loop);

/* A random whole number below bound (0 when bound is 0), for spreading the
 * boxes of a fleet in time: not for secrets. */
uint64_t act_draw_below(uint64_t bound);

/* CLOCK_MONOTONIC usec from now, as the absolute time pthread_cond_timedwait
 * takes on a condition set to that clock. */
struct timespec act_monotonic_after(uint64_t usec);
