/* One wake's state (wake/internal.h): made at `read`, freed when the wake
 * ends, or when its host goes. */
#include "activator/daemon/wake/ops.h"

#include <stdlib.h>

#include "activator/daemon/wake/internal.h"

ad_wake_state *ad_wake_state_new(pl_wake *wake, ad_host *host)
{
    ad_wake_state *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->host = host;
    w->resolved.exec_fd = -1;
    host->wake_state = w;
    pl_wake_set_data(wake, w, ad_wake_state_free);
    return w;
}

void ad_wake_state_free(void *data)
{
    ad_wake_state *w = data;
    if (!w)
        return;
    ad_host *host = w->host;
    ad_restore_abandon(w->restore);
    ad_wake_early_start_discard(w);
    ad_wake_early_forget(w);
    rel_resolved_release(&w->resolved);
    probe_free(w->probe);
    if (host->wake_state == w)
        host->wake_state = NULL;
    free(w);
}
