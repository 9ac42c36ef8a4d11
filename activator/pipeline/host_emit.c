/* What a host's pipeline shares with its wakes: the events told to whoever
 * made the host (pl_host_new's on_event), each stamped as it goes out. */
#include <assert.h>

#include "activator/pipeline/pipeline-internal.h"
#include "common/clock.h"

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
