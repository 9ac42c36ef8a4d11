/* The operator's checkpoint ops: `activatorctl checkpoint HOST` (write one
 * now and name it on the claim) and `activatorctl checkpoints HOST` (list
 * them). */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host/host.h"

/* Writes a checkpoint of host and names it in the claim's state by
 * compare-and-swap, only while the claim still says this box executes the
 * host. The built-in transport (and ExecCheckpoint= without
 * CheckpointLive=yes) parks the host first, and wakes are refused until the
 * checkpoint is written; the reply says so. */
void ad_checkpoint_request_start(ad_host *host, ctrl_reply *reply);

/* hosts/transitions.c: host reached parked; a request waiting for it goes on. */
void ad_checkpoint_request_host_parked(ad_host *host);

/* Lists host's checkpoints in Checkpoints= (off the loop), newest first,
 * marking the one its claim names. */
void ad_checkpoints_list(ad_host *host, ctrl_reply *reply);
