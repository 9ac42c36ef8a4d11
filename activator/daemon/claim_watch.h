/* Claims that change under us, and the watch that tells us: it heals by
 * listing every claim again whenever it ends. */
#pragma once

#include "activator/daemon/context.h"

/* Lists every claim (the daemon is not ready before the store answered)
 * and watches from there. */
int ad_claim_watch_start(ad_daemon *daemon, act_error *err);
void ad_claim_watch_stop(ad_daemon *daemon);