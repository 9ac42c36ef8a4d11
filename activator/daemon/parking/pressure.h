/* The box's memory pressure (PSI): with frozen generations around, a box
 * whose memory runs short retires them, frozen longest ago first, rather
 * than let the kernel reclaim (or kill) what serves. */
#pragma once

#include "activator/daemon/host/context.h"

/* Arms (again) the trigger FreezeMemoryPressure= asks for on
 * /proc/pressure/memory (or the cgroup2 top's memory.pressure, the same
 * numbers): "some" stall of that long within 2 s. Every time it fires, the
 * coldest frozen generation is retired, so pressure that lasts retires one
 * every 2 s until it clears or none is frozen. Without
 * PSI (a kernel built without it, or psi=0) it logs that once and watches
 * nothing. */
void ad_pressure_configure(ad_daemon *daemon);
void ad_pressure_close(ad_daemon *daemon);
