/* A move, as each of its two boxes takes part in it (claims.h has the
 * table of phases). The orchestrator (activatorctl move) starts it with
 * move/draining; from there the claim drives every box:
 *
 *   source (op.from, exec in draining): no wake is admitted (the phase
 *     refuses them); whatever runs is retired with proof; a checkpoint of
 *     the state directory is written (none for State=none); then one CAS
 *     to move/moving names it, hands exec to the target and stamps the
 *     source's release, since nothing of the host runs here any more. A
 *     checkpoint that fails rolls the move back (failure phase draining).
 *   target (op.to, exec from moving): a probe wake, the only wake the
 *     phase admits and only under the op's id; its admission makes the op
 *     probe/probing; restore, exec, ready, HealthCheck=, publication as
 *     serving/serving ends the move. It must serve within ProbeTimeoutSec=
 *     of its first exec (journalled in probe.json, so a restarted daemon
 *     keeps the deadline); anything else rolls the move back to the source
 *     with the reason, and the target then releases what it admitted.
 *
 * Every step is a CAS at the revision read, so a step that lost to another
 * writer (an abort, another box) changes nothing. A daemon that died in a
 * step finds its part again from the first list of the claims and does it
 * again from the start of that part (a source drains and checkpoints again;
 * a target makes its probe again, within the same deadline).
 *
 * The files: move.c takes the claims and hands this box's part to
 * source.c or target.c; both write the claim through fence.c, whose top
 * comment says what fences a move. */
#pragma once

#include <stddef.h>

#include "activator/daemon/host/host.h"
#include "activator/pipeline/pipeline.h"
#include "claims/claims.h"

/* A claim of host was seen (a watch change, a list after a heal, the list
 * at start-up): a phase that asks this box to act starts its part, and a
 * claim that left the move ends what this box did for it. */
void ad_move_claim_seen(ad_host *host, const claim *c);

/* hosts/transitions.c's ad_hosts_on_transition tells every transition: a move
 * waits for the host to be at rest (source) and for its probe's end (target). */
void ad_move_on_transition(ad_host *host, const pl_wake_event *event);

/* What status shows of the host's move ("draining for box-2",
 * "probing from box-1"), or NULL when it takes part in none. */
const char *ad_move_describe(const ad_host *host, char *out, size_t size);

/* Ends host's part in a move without writing anything (the host goes
 * away, or the daemon stops): the next daemon takes it up again. */
void ad_move_free(ad_host *host);
