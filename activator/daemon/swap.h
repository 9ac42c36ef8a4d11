/* Zero-downtime build swaps: `activatorctl swap HOST VERSION`. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host.h"

/* Verifies the version, pins it on the claim, and starts N+1 beside N (or,
 * stop-first, after N). Replies when the swap ends (or at once, no_wait). */
void ad_swap_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply);

/* The host came to rest parked: a stop-first swap now starts its pinned
 * generation. */
void ad_swap_host_parked(ad_host *host);

/* The version swap (may be NULL) goes to, for gc to keep; NULL for none. */
const char *ad_swap_version(const ad_swap *swap);
