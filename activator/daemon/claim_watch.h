/* Claims that change under us, and the watch that tells us. */
#pragma once

#include "activator/daemon/context.h"

int ad_claim_watch_start(ad_daemon *daemon, act_error *err);
void ad_claim_watch_stop(ad_daemon *daemon);
