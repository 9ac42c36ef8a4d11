/* activatorctl drain and undrain. A drain marks the box (box.drain: no host
 * is assigned, moved to it or claimed by it any more, and the mark outlives
 * the box's restarts), then moves every host the box runs, serving or
 * parked, with its state to the other boxes that are live and not drained,
 * a few at a time, each by the move command's own steps, and follows each
 * to its end, printing one line per step. The box stays drained until
 * undrain lifts the mark. */
#pragma once

#include <stdint.h>

#include "activator/ctl/move.h"

/* More moves at once than this only queue on the boxes' release workers. */
#define CTL_DRAIN_PARALLEL_MAX 32

typedef struct ctl_drain_args {
    const char *box;
    unsigned parallel;      /* moves in flight at once, 1..CTL_DRAIN_PARALLEL_MAX */
    uint64_t deadline_usec; /* the whole drain; 0 = none. Then the moves in flight are
                             * rolled back and what is left is listed. */
} ctl_drain_args;

/* Runs the drain: 0 once the box runs no host, 1 when a host could not be
 * moved (each named with why and where it runs), 3 when nothing could be
 * reached. */
int ctl_drain_run(const ctl_options *options, const ctl_drain_args *args, ctl_move_call_fn call);

/* Lifts box's drain mark: 0, or 1/3 as above. */
int ctl_undrain_run(const ctl_options *options, const char *box, ctl_move_call_fn call);
