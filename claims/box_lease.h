/* A box's record in the claim store (claims.h: box records), kept alive on
 * the store's sd-event loop: renewed every third of its lease, put again
 * when the store lost the lease (etcd restarted without its data, or the
 * store was out of reach for longer than the lease), and removed when its
 * owner ends it. At most one call is in flight. The daemon
 * (fleet/box_lease.c) and the fleet simulator (bench/fleet) keep one each. */
#pragma once

#include <systemd/sd-event.h>

#include "claims/claims.h"

typedef struct claims_box_lease claims_box_lease;

/* Called once the record is gone (or could not be removed) after
 * claims_box_lease_end. */
typedef void (*claims_box_lease_ended_fn)(void *userdata);

/* Puts record (its lease_ttl_usec is the lease) synchronously, before the
 * loop runs: a store that does not take it is retried from the loop,
 * logged. Then renews it every third of the lease. */
int claims_box_lease_start(claim_store *store, sd_event *loop, const claims_box *record,
                           claims_box_lease **out, act_error *err);
/* Puts record from the loop, without waiting: the start of a box that
 * does not block its loop. */
int claims_box_lease_start_async(claim_store *store, sd_event *loop, const claims_box *record,
                                 claims_box_lease **out, act_error *err);
/* Stops the renewals, removes the record (revoking its lease), then calls
 * ended; at once when there is no record. A second call does nothing. */
void claims_box_lease_end(claims_box_lease *lease, claims_box_lease_ended_fn ended, void *userdata);
/* Stops the renewals and renews the record once more, synchronously (unless
 * the store failed the last call), so that it stays alive for the lease's
 * length; it is never removed. For a handover: the box lives on under the
 * next daemon, which puts its own record. */
void claims_box_lease_hand_over(claims_box_lease *lease);
/* Stops the renewals and leaves the record to lapse with its lease: what
 * the fleet sees of a box that died. */
void claims_box_lease_abandon(claims_box_lease *lease);
/* What fencing needs to know of the lease (activator/daemon/hosts/
 * self_fence.c). fn is called after each call the store acknowledged
 * (lost false: the lease holds until at least acked_sent + ttl) and when a
 * renewal found the lease gone (lost true; a new one is being put). */
typedef void (*claims_box_lease_fn)(claims_box_lease *lease, bool lost, void *userdata);
void claims_box_lease_observe(claims_box_lease *lease, claims_box_lease_fn fn, void *userdata);
/* CLOCK_MONOTONIC of the send of the last put or renewal the store
 * acknowledged, which the store's lease outlives by at least its TTL; 0
 * when no lease is held (none granted yet, or it was found lost). */
uint64_t claims_box_lease_acked_sent(const claims_box_lease *lease);
/* The lease's TTL. */
uint64_t claims_box_lease_ttl(const claims_box_lease *lease);
/* The self-fencing margin M of a lease of ttl_usec: max(TTL/5, 500 ms).
 * A box fences its failover hosts at acked + TTL - M and retires them at
 * acked + TTL + M; another box takes them no sooner than M after the
 * lease expired (FailoverGraceSec=). docs/claim-protocol.md argues it. */
uint64_t claims_box_lease_margin(uint64_t ttl_usec);
/* Frees it; a call still out is the store's to cancel. */
void claims_box_lease_free(claims_box_lease *lease);
