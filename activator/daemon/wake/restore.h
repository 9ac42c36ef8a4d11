/* Restores: the state directory brought to the claim's checkpoint before
 * the first exec (by the built-in transport of Checkpoints=, or the
 * operator's ExecRestore=). ExecReplicate=, which keeps it copied out while
 * the host serves, is the generation's (generations/replica.c). */
#pragma once

#include "activator/daemon/generations/generation.h"

typedef struct ad_restore ad_restore;

/* The pipeline's `restore` step, for the claim's state (the admitted
 * claim's): when it names a checkpoint the state directory does not have,
 * runs ExecRestore= in its own leaf (restore-<generation>), or else, with
 * Checkpoints= set, verifies the archive against state->sha256 and
 * restores it off the loop (checkpoint/). A State=none host restores
 * nothing. The checkpoint is recorded only once it succeeded, so a retry
 * never restores twice. Completes wake, at once or later (a mismatch, a
 * missing archive or a failed extraction with PL_REASON_RESTORE_FAILED and
 * the state directory unchanged); while a restore runs, *slot points at
 * it, and it clears *slot when it ends. */
void ad_restore_start(ad_host *host, pl_wake *wake, const claim_state *state, uint64_t generation,
                      ad_restore **slot);

/* Whether ad_restore_start would restore anything for state (a checkpoint
 * other than the one the host's state directory holds). */
bool ad_restore_would_run(ad_host *host, const claim_state *state);

/* Stops a restore in flight (the wake was cancelled): its leaf is killed in
 * the background and the wake is not completed. NULL is fine. */
void ad_restore_abandon(ad_restore *restore);
