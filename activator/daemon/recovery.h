/* What a previous daemon left running, resumed or retired with proof. */
#pragma once

#include "activator/daemon/context.h"

/* Resumes every leftover generation (leftovers.c) that its record and its
 * claim both name as this box's serving admission, and retires every other
 * leftover with proof; then frees the leftovers. Never fails: what cannot be
 * proven stopped leaves its host refusing wakes (unproven_stop), and the
 * daemon serves the others. */
void ad_recover(ad_daemon *daemon);
