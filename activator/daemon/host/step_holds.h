/* Test holds (built with -Dtest_hooks=true only, never in a release build).
 *
 * ACTIVATOR_TEST_HOLD=STEP:PATH[,STEP:PATH...] holds every wake of every host
 * just before operation STEP (read, admit, restore, reserve, materialize,
 * prepare, gate, exec, replicate, publish, healthy, failed) until PATH
 * exists, and logs "host H: step STEP held: waiting for PATH" when it does.
 * A test can then change a claim, or kill the daemon, at an exact point of a
 * wake. `ready` cannot be held: its window is the pipeline's own timer. The
 * wait is an inotify watch on PATH's directory, not a poll.
 *
 * STEP may also name a point of a move outside the pipeline: "drained" (the
 * source has retired the host, before its checkpoint) and "checkpointed"
 * (the checkpoint is written, before the compare-and-swap to moving); or
 * "admitted": a wake's admission has its answer from the store, which the
 * wake takes only once PATH exists (what was begun beside it is done); or
 * "swap_failed": a swap's N+1 failed and N serves on, and the claim's
 * write-back of N again (and so the pin's failure after it) waits for PATH;
 * or "fleet_cas": a fleet op (claim assign, claim release, hold, unhold,
 * unpin, move) has read the claim and decided, and its compare-and-swap
 * waits for PATH (each one it makes), so a test can write the claim in
 * between. */
#pragma once

#include "activator/pipeline/pipeline.h"

/* The table to give the pipeline: ops itself when no hold is asked for. */
const pl_ops *ad_step_holds_ops(const pl_ops *ops, sd_event *loop);

/* ACTIVATOR_TEST_RELEASE_HOLD=PATH holds every job of the release workers
 * (stage, promote, a swap's verification, gc) before it starts, on its
 * worker, until PATH exists, after logging "release work what of host H
 * held: waiting for PATH". A test so knows that such work is in flight, as
 * long hashing would be, while it wakes another host. Called on a worker;
 * a no-op without test hooks. */
#ifdef ACTIVATOR_TEST_HOOKS
/* ACTIVATOR_TEST_FREEZE_HOLD=PATH holds a freeze that cgroup.events says
 * is done (the app is frozen) before the daemon takes it as frozen, until
 * PATH exists, after logging "host H: freeze held: waiting for PATH": a
 * test connects in the middle of the freeze. Returns true when held (fn
 * runs once PATH exists), false when not (the caller goes on). */
bool ad_test_hold_freeze(const char *host, sd_event *loop, void (*fn)(void *), void *userdata);
void ad_test_hold_release_work(const char *what, const char *host);
#else
static inline void ad_test_hold_release_work(const char *what, const char *host)
{
    (void)what;
    (void)host;
}
#endif

typedef struct ad_host ad_host;

/* Runs go(host) at the point named point ("drained", "checkpointed",
 * "admitted", "swap_failed"): at once when it is not held, else from the loop once its
 * PATH exists. go must check that what it goes on with (the move, the
 * wake) is still there. */
void ad_step_holds_point(ad_host *host, const char *point, void (*go)(ad_host *host));

/* The same for a point of no host of this box's ("fleet_cas": a fleet op
 * may name any host of the store): go(userdata) at once when it is not held,
 * else from the loop once its PATH exists; what names the op in the log
 * line that says it is held. */
void ad_step_holds_call(const char *point, const char *what, void (*go)(void *userdata),
                        void *userdata);
