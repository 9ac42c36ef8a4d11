/* claim.wait through this box's daemon: answered once the host's claim is
 * written after the revision the request names, or when its wait runs
 * out. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host/context.h"

/* Claim waits open at once on one box. Each holds one of the control
 * server's contexts for up to CTRL_CLAIM_WAIT_MAX_SEC, so waits alone never
 * take every context; one more is refused as busy. */
#define AD_CLAIM_WAITS_MAX 8

/* Starts a claim.wait; reply is answered from the loop. */
void ad_claim_wait_start(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply);

/* Ends every open wait, before the control server is freed (which makes
 * their reply handles invalid). A clean stop answers each with "stopping"
 * while the replies can still be sent; a handover answers none: the control
 * socket closes under them, as under every request in flight then, and
 * their clients see the connection end (a wait is safe to ask again, of
 * the next daemon). */
void ad_claim_waits_end(ad_daemon *daemon, bool handover);

/* Frees what is left of the waits (answered ones whose read was still out
 * when the store was freed, which cancels it unanswered): at the daemon's
 * exit, after the store. */
void ad_claim_waits_free(ad_daemon *daemon);
