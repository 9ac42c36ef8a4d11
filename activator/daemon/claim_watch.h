/* Claims that change under us, and the watch that tells us. */
#pragma once

#include "activator/daemon/context.h"

int act_claim_watch_start(act_daemon *daemon, act_error *err);
void act_claim_watch_stop(act_daemon *daemon);
