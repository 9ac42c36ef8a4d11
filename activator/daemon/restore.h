/* ExecRestore= and ExecReplicate=: the operator's programs that bring the
 * host's state directory to the claim's checkpoint before the first exec,
 * and keep it copied out while the host serves. */
#pragma once

#include "activator/daemon/daemon.h"

/* The pipeline's `restore` step. Runs ExecRestore= in its own leaf
 * (restore-<N>) when the claim names a checkpoint the state directory does
 * not have, and records the checkpoint only once it succeeded, so a retry
 * never restores twice. Completes wake. */
void act_restore_start(act_daemon_host *host, act_wake *wake);

/* Stops a restore in flight (the wake was cancelled); its leaf is killed. */
void act_restore_abandon(act_daemon_host *host);

/* Starts ExecReplicate= (if set) inside gen's leaf, beside the main
 * process, so the generation's retirement stops it with the same proof. */
int act_replicate_start(act_daemon_host *host, act_generation *gen, act_error *err);
