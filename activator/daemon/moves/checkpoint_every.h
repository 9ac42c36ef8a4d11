/* CheckpointEverySec=: a serving host's state checkpointed every so often
 * and named on its claim, so that a box lost for good (move --force, a
 * takeover) loses at most what the host wrote since.
 *
 * With the built-in transport the serving generation is frozen (cgroup
 * freezer) while its state directory is archived, so the archive is what a
 * power cut at that instant would have left on disk, and thawed as soon as
 * the archive is written: clients meanwhile wait in the sockets' backlogs,
 * none is refused. The pause is the metric
 * activator_checkpoint_pause_seconds. ExecCheckpoint= with
 * CheckpointLive=yes snapshots the host without a pause. A checkpoint is
 * named only when the generation stayed frozen throughout (no thaw, park,
 * swap or retirement came in between) and the claim still names this
 * admission; otherwise it is discarded (left for CheckpointsKeep= to
 * prune). A host that is frozen (ParkMode=freeze), parked, swapping,
 * moving or being checkpointed already is skipped that round: a frozen or
 * parked host writes nothing. */
#pragma once

#include <stdbool.h>

#include "activator/daemon/host/host.h"

/* What the host's serving generation needs after a thaw: its supervision
 * again (the watchdog, the health checks), which a freeze stopped. */
typedef void (*ad_checkpoint_every_resume_fn)(ad_host *host);

/* The host serves: arms its timer when CheckpointEverySec= is set and it
 * is not armed (a reload's new value applies from the next serve). */
void ad_checkpoint_every_arm(ad_host *host, ad_checkpoint_every_resume_fn resume);

/* The host parks, fails, hands over or goes: the timer stops and a
 * checkpoint in flight is cancelled (one being named on the claim is
 * forgotten). A generation it froze is thawed when thaw_it says so (a
 * handover: the app runs on under the next daemon); otherwise its
 * retirement, which follows, thaws it as it must (a claim lost kills it
 * frozen). */
void ad_checkpoint_every_stop(ad_host *host, bool thaw_it);
