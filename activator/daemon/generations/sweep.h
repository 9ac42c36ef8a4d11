/* Leaves not proven stopped, killed again and watched until they are:
 * a generation whose retirement found its cgroup still populated after the
 * kill, and the leaves a previous daemon left that recovery does not
 * resume. Until every such leaf of a host is proven empty, the host refuses
 * wakes with unproven_stop (the pipeline's flag); then the refusal clears. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/daemon/host/host.h"

/* Retires leaf (taken), one a previous daemon left: main_pidfd (taken; -1
 * for none) gets SIGTERM and the host's StopTimeoutSec to end, then the
 * leaf is killed (at once for a host not configured, host NULL, which only
 * names it by host_name). generation: the number of its record, 0 for a
 * leaf without one. Nothing happens before the loop runs, so a start-up
 * that fails after this touches nothing. The caller makes the host refuse
 * wakes meanwhile. -ENOMEM or the error of watching its cgroup.events,
 * with leaf and main_pidfd freed. */
int ad_sweep_leftover(ad_daemon *daemon, ad_host *host, const char *host_name, cg_leaf *leaf,
                      uint64_t generation, int main_pidfd, act_error *err);

/* Takes every leaf host keeps whose retirement was not proven (wake/ops.c
 * keeps them): each is watched from now on and killed again after 1 s, 2 s,
 * ... up to every 60 s, until it is proven empty. */
void ad_sweep_take_unproven(ad_host *host);

/* Whether the sweep still holds a leaf of host. */
bool ad_sweep_holds(const ad_daemon *daemon, const ad_host *host);

/* Frees the sweep; its leaves stay as they are, for the next daemon. */
void ad_sweep_free(ad_daemon *daemon);
