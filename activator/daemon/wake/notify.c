/* A generation's notify socket (wake/internal.h): READY=1 on it completes
 * the wake's `ready` step when the host's Ready= is notify. Opened at
 * materialize, or by an early start beside the admission. */
#include "activator/daemon/wake/internal.h"

static void on_notify(ntf_socket *notify, const ntf_message *message, void *userdata)
{
    ad_generation *gen = userdata;
    ad_host *host = gen->host;
    /* With another Ready=, the socket is there for the watchdog, and the
     * probe in flight is what completes `ready`. */
    if (!message->ready || gen->ready || ad_host_config(host)->ready.kind != PROBE_NOTIFY)
        return;
    gen->ready = true;
    if (gen == host->starting && host->wake_state->waiting_wake &&
        pl_wake_step(host->wake_state->waiting_wake) == PL_STEP_READY)
        pl_wake_ok(take_wake(host));
}

int ad_wake_open_notify(ad_generation *gen, act_error *err)
{
    if (!ad_generation_wants_notify(ad_host_config(gen->host)) || gen->notify)
        return 0;
    return ad_generation_open_notify(gen, on_notify, err);
}
