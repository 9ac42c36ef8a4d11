/* One wake's state (wake/internal.h): made at `read`, freed when the wake
 * ends, or when its host goes; and what the wake's compare-and-swaps share:
 * taking a write whose answer was lost for the success it was. */
#include "activator/daemon/wake/ops.h"

#include <inttypes.h>
#include <stdlib.h>

#include "activator/daemon/wake/internal.h"
#include "common/log.h"

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
    ad_wake_fetch_forget(w);
    rel_resolved_release(&w->resolved);
    probe_free(w->probe);
    if (host->wake_state == w)
        host->wake_state = NULL;
    free(w);
}

void ad_wake_take_landed_write(const ad_host *host, const char *what, const claim *sent,
                               const claim *current, int *result, uint64_t *new_revision)
{
    if (*result != CLAIMS_CHANGED ||
        !claim_is_landed_write(sent, current, host->daemon->incarnation))
        return;
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name},
                   "host %s: the claim is our %s (revision %" PRIu64
                   "): the write whose answer the store lost had landed",
                   host->name, what, current->revision);
    *result = 0;
    *new_revision = current->revision;
}
