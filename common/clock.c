#include "common/clock.h"

#include <time.h>

static uint64_t clock_usec(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t act_now_usec(void)
{
    return clock_usec(CLOCK_MONOTONIC);
}

uint64_t act_wallclock_usec(void)
{
    return clock_usec(CLOCK_REALTIME);
}
