/* What a previous daemon left running, resumed or retired with proof. */
#pragma once

#include "activator/daemon/host/context.h"

/* Resumes every leftover generation (generations/leftovers.c) that its record and its
 * claim both name as this box's serving admission, and hands every other
 * leftover to the sweep (generations/sweep.c), which retires it with proof once the
 * loop runs; then frees the leftovers. Never fails and never waits: a host
 * with a leftover refuses wakes (unproven_stop) until it is proven gone,
 * and the daemon serves the others. */
void ad_recover(ad_daemon *daemon);

/* The claim c of host, as the store lists it at start-up once ad_recover
 * ran: when it still says an admission of this box's serves, is frozen or
 * starts, and none was resumed, the previous daemon died before it wrote
 * what followed (its generation died with it, or was retired at this
 * start). It is written parked, as that park would have been. */
void ad_recover_settle_claim(ad_host *host, const claim *c);
