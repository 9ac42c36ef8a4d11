/* Zero-downtime build swaps: `activatorctl swap HOST VERSION`. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host.h"

/* Verifies the version, pins it on the claim, and starts N+1 beside N (or,
 * stop-first, after N). Replies when the swap ends (or at once, no_wait). */
void act_swap_start(act_daemon_host *host, const act_request *request, act_control_reply *reply);

/* The host came to rest parked: a stop-first swap now starts its pinned
 * generation. */
void act_swap_host_parked(act_daemon_host *host);
