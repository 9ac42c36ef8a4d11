/* Until the checkpoint slice lands (branch move-checkpoint), no host has a
 * transport for its state: every host is treated as stateless (State=none),
 * so a move carries nothing and the target starts with what its state
 * directory holds. Removed when checkpoint.c arrives. */
#include "activator/daemon/checkpoint.h"

int ad_checkpoint_start(ad_host *host, uint64_t generation, ad_checkpoint_done_fn done,
                        void *userdata, act_error *err)
{
    return act_error_set(err, ENOTSUP, "host %s: no checkpoint transport is built in",
                         ad_host_name(host));
}

void ad_checkpoint_cancel(ad_host *host)
{
}

bool ad_checkpoint_stateless(const ad_host *host)
{
    return true;
}
