#include "common/clock.h"

#include <assert.h>
#include <sys/random.h>

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

uint64_t act_loop_now_usec(sd_event *loop)
{
    assert(loop);
    uint64_t now = 0;
    if (sd_event_now(loop, CLOCK_MONOTONIC, &now) < 0)
        now = act_now_usec();
    return now;
}

struct timespec act_monotonic_after(uint64_t usec)
{
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    uint64_t nsec = (uint64_t)at.tv_nsec + (usec % 1000000) * 1000;
    at.tv_sec += (time_t)(usec / 1000000 + nsec / 1000000000);
    at.tv_nsec = (long)(nsec % 1000000000);
    return at;
}

uint64_t act_draw_below(uint64_t bound)
{
    uint64_t draw = 0;
    /* The kernel's pool is ready long before a daemon starts; the clock
     * only stands in if it is not. */
    if (getrandom(&draw, sizeof(draw), GRND_NONBLOCK) != sizeof(draw))
        draw = act_now_usec();
    return bound ? draw % bound : 0;
}
