/* Checkpoints of a host's state directory: the one archive a move carries
 * from the box the host leaves to the box it goes to, and what an operator
 * makes on demand.
 *
 * Two transports: the built-in one (Checkpoints=dir:///PATH in [Activator],
 * a directory every box of the fleet mounts), which writes one archive with
 * its SHA-256 off the loop, and ExecCheckpoint= (the host's own program,
 * run in the host's cgroup with its credentials, which prints the id and
 * sha256 of what it wrote). A host with State=none has nothing to carry.
 *
 * The caller makes sure nothing writes the state directory meanwhile (every
 * generation retired with proof), unless ExecCheckpoint= says it snapshots
 * a live host. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/daemon/host/host.h"
#include "claims/claims.h"
#include "common/error.h"

/* Called once, on the loop: result 0 with *written describing the
 * checkpoint (an empty written->checkpoint for a State=none host: nothing
 * to carry), or a negative errno with err saying what failed and where. */
typedef void (*ad_checkpoint_done_fn)(ad_host *host, int result, const claim_state *written,
                                      const act_error *err, void *userdata);

/* Starts a checkpoint of host's state directory for generation (the one
 * whose state it holds; 0 when none ran). Returns 0 once started (done
 * follows, never from inside this call), or -errno with err filled when it
 * cannot start (no transport configured: -ENOTSUP, one already running:
 * -EBUSY), and then done is never called. On success the host's own record
 * of its state directory (records.h's checkpoint.json) names the new
 * checkpoint, so a rollback to this box restores nothing. */
int ad_checkpoint_start(ad_host *host, uint64_t generation, ad_checkpoint_done_fn done,
                        void *userdata, act_error *err);

/* Stops the checkpoint of host in flight, if any: done is not called, and
 * a half-written archive is removed. */
void ad_checkpoint_cancel(ad_host *host);

/* True when host has no state to carry (State=none). */
bool ad_checkpoint_stateless(const ad_host *host);
