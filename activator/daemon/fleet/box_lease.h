/* This box's record in the claim store, kept alive on the loop. */
#pragma once

#include "activator/daemon/host/context.h"

/* Called with the daemon once the record is gone (or could not be
 * removed) after ad_box_lease_end. */
typedef void (*ad_box_lease_ended_fn)(void *daemon);

/* Puts the record (box, incarnation, start time, version, the URLs served
 * to other machines) under a lease of BoxLeaseSec= before the loop runs
 * (a store that does not take it is retried from the loop, logged), and
 * keeps renewing it. */
int ad_box_lease_start(ad_daemon *daemon, act_error *err);
/* For a clean stop, once nothing runs: stops the renewals, removes the
 * record (revoking its lease), then calls ended; at once when there is no
 * record. A second call does nothing. */
void ad_box_lease_end(ad_daemon *daemon, ad_box_lease_ended_fn ended);
/* For a handover (AD_HANDOVER_SIGNAL), just before the loop exits: stops
 * the renewals and renews the record once more, synchronously (unless the
 * store failed the last call), so it stays alive while the next daemon
 * starts and puts its own; the record is never removed by a handover, as
 * the box goes on running every generation. Nothing else is called after. */
void ad_box_lease_hand_over(ad_daemon *daemon);
/* Frees it; a call still out is the store's to cancel. */
void ad_box_lease_free(ad_daemon *daemon);
