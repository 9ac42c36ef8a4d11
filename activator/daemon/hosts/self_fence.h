/* Self-fencing: a box that cannot prove its lease stops serving the hosts
 * another box may take over (the claim's failover policy, Failover=yes)
 * before that lease can have expired in the store.
 *
 * The lease is measured from the send of the last put or renewal the store
 * acknowledged (claims/box_lease.h): the store's lease runs at least its
 * TTL from then, whatever the network did with the answer. With TTL the
 * lease's length and M = max(TTL/5, 500 ms) the margin:
 *   - at acked + TTL - M the box fences itself: each failover host's
 *     serving generation is frozen (so no request is answered), a wake in
 *     flight cancelled, and new wakes refused `fenced`;
 *   - at acked + TTL + M the lease is certainly gone (and so it is when a
 *     renewal finds it lost): the fenced generations are retired, killed
 *     frozen as for a claim lost, since another box may run them now;
 *   - when the store acknowledges a renewal again (or a new lease) the
 *     fence is lifted host by host: a host whose claim still names this
 *     box's admission thaws and serves on; one another box took is retired.
 * Hosts without failover serve on through a store outage, as always. At a
 * daemon's start the lease is put before any generation is resumed: while
 * it is not proven, failover hosts are resumed fenced. docs/claim-protocol.md
 * has the arithmetic of the margin. */
#pragma once

#include "activator/daemon/host/context.h"

/* Watches the box's lease (after ad_box_lease_start), fencing at once when
 * no lease could be put. */
void ad_self_fence_start(ad_daemon *daemon);

/* Recovery resumed host's serving generation: fenced when the lease is not
 * proven and the claim says failover. */
void ad_self_fence_resumed(ad_host *host);

/* Stop, handover: timers end; fenced generations stay as they are (the
 * next daemon decides). */
void ad_self_fence_free(ad_daemon *daemon);
