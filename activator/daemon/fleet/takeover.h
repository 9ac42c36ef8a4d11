/* Takeover: the failover hosts of a box whose lease expired are taken by
 * the boxes their claims allow, so a dead box strands nothing.
 *
 * A box that configures a Failover=yes host lists the boxes for liveness
 * (one store request) every quarter of BoxLeaseSec=. A box live at one
 * listing and not at the next is dead from then; FailoverGraceSec= later
 * (never below the self-fencing margin: by then the dead box, if it still
 * runs, has retired its own copies) this box lists the dead box's claims
 * and, host by host, takes each one whose claim says failover, lets this
 * box take it (failover.boxes) and names the dead box as executor, and that
 * this box configures: an assignment to itself with the dead box's release
 * taken as given (claim_apply_edit, as claim assign --force), written only
 * while the dead box has no live record (claims_cas_unless_live): a box that
 * came back is never taken from. Before each host it waits in proportion to
 * its own load (the hosts it runs or wakes), so the boxes that race for a
 * dead box's hosts spread them rather than all landing on the fastest; the
 * claim then decides who got each. The claim watch wakes a host newly
 * assigned here (fleet/claim_watch.c), and the wake restores the state the
 * claim names, the last checkpoint. A host parked on the dead box is taken
 * the same way: a released claim would let no box wake it.
 *
 * Not seen: a box that died before this daemon's first listing. A drained
 * box, and a fenced one, take nothing. */
#pragma once

#include "activator/daemon/host/context.h"

/* Starts listing when a configured host says Failover=yes. */
void ad_takeover_start(ad_daemon *daemon);
void ad_takeover_free(ad_daemon *daemon);
