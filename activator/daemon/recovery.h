/* What a previous daemon left running, resumed or retired with proof. */
#pragma once

#include "activator/daemon/context.h"

/* Resumes every leftover generation (leftovers.c) that its record and its
 * claim both name as this box's serving admission, and hands every other
 * leftover to the sweep (sweep.c), which retires it with proof once the
 * loop runs; then frees the leftovers. Never fails and never waits: a host
 * with a leftover refuses wakes (unproven_stop) until it is proven gone,
 * and the daemon serves the others. */
void ad_recover(ad_daemon *daemon);
