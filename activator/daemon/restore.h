/* ExecRestore= and ExecReplicate=: the operator's programs that bring the
 * host's state directory to the claim's checkpoint before the first exec,
 * and keep it copied out while the host serves. */
#pragma once

#include "activator/daemon/generation.h"

typedef struct ad_restore ad_restore;

/* The pipeline's `restore` step. Runs ExecRestore= in its own leaf
 * (restore-<generation>) when the claim names a checkpoint the state
 * directory does not have, and records the checkpoint only once it
 * succeeded, so a retry never restores twice. Completes wake, at once or
 * later; while a restore runs, *slot points at it, and it clears *slot
 * when it ends. */
void ad_restore_start(ad_host *host, pl_wake *wake, const char *checkpoint, uint64_t generation,
                      ad_restore **slot);

/* Stops a restore in flight (the wake was cancelled): its leaf is killed in
 * the background and the wake is not completed. NULL is fine. */
void ad_restore_abandon(ad_restore *restore);

/* Starts ExecReplicate= (if set) inside gen's leaf, beside the main
 * process, so the generation's retirement stops it with the same proof. */
int ad_replicate_start(ad_generation *gen, act_error *err);
