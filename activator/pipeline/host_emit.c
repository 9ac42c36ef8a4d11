/* What a host's pipeline shares with its wakes: the time of the loop's
 * iteration, and the events told to whoever made the host (pl_host_new's
 * on_event), each stamped as it goes out. */
#include <assert.h>

#include "activator/pipeline/pipeline-internal.h"
#include "common/clock.h"

uint64_t pl_host_now(const pl_host *host)
{
    assert(host);
    uint64_t now = 0;
    /* The loop's timestamp of this iteration: every decision made while
     * dispatching one event sees the same time. */
    if (sd_event_now(host->loop, CLOCK_MONOTONIC, &now) < 0)
        now = act_now_usec();
    return now;
}

void pl_host_emit(pl_host *host, const pl_wake_event *event)
{
    assert(host);
    assert(event);
    if (!host->on_event)
        return;
    pl_wake_event stamped = *event;
    stamped.at_usec = act_now_usec();
    host->on_event(host, &stamped, host->event_userdata);
}
