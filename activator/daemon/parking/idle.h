/* Idle parking: a serving host with no connection on its sockets for
 * IdleTimeoutSec= is parked. */
#pragma once

#include "activator/daemon/host/host.h"

/* Starts watching a serving host for idleness (again): once it had no
 * connection for IdleTimeoutSec=, the watch ends and on_idle(host) decides
 * what follows. A host without sockets or without IdleTimeoutSec= is not
 * watched. */
void ad_idle_watch(ad_host *host, ad_host_idle_fn on_idle);
/* Stops watching host; nothing if it was not watched. */
void ad_idle_unwatch(ad_host *host);
