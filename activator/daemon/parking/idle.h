/* Idle parking: a serving host with no connection on its sockets for
 * IdleTimeoutSec= is parked. */
#pragma once

#include "activator/daemon/host/host.h"

/* Starts (or stops) watching a serving host for idleness. */
void ad_idle_watch(ad_host *host, bool watch);
