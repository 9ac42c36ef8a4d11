/* What the files of one generation's life share, and nothing outside
 * generations/ uses: the one API is generation.h. The files call one way
 * only, from the top down: adopt.c, supervise.c, spawn.c, retire.c,
 * freezer.c, and generation.c (creation, records, counters) under them
 * all; limits.c is below the ones that use it. */
#pragma once

#include "activator/daemon/generations/generation.h"
#include "common/cleanup.h"

/* Ends the supervision of gen (supervise.c), which every end of its
 * serving shares: its exit, its retirement, a freeze, free. Defined here
 * rather than in supervise.c, which starts its health checks through
 * spawn.c: retire.c and freezer.c, below spawn.c, end it too. */
static inline void ad_generation_stop_supervision(ad_generation *gen)
{
    gen->on_notice = NULL;
    gen->watchdog_timer = sd_event_source_disable_unref(gen->watchdog_timer);
    gen->health_timer = sd_event_source_disable_unref(gen->health_timer);
    probe_free(TAKE_PTR(gen->health_probe));
    gen->health_failures = 0;
}

/* ---- freezer.c ------------------------------------------------------------- */

/* The freeze or thaw no longer settles through cgroup.events: the events fd
 * is the retirement's from here on (one fd cannot be watched twice). */
void ad_generation_stop_settling(ad_generation *gen);

/* ---- retire.c -------------------------------------------------------------- */

/* Watches gen's main process (its pidfd, process.pidfd) for its exit: an
 * exit during a retirement's grace period goes on to the kill, any other to
 * on_exit. Returns sd_event's negative errno when it cannot. */
int ad_generation_watch_exit(ad_generation *gen);
/* Reaps the main process if it is still ours to reap, so no zombie stays;
 * collects a helper's exit status (ExecReplicate=) too. */
void ad_generation_reap(ad_generation *gen);

/* ---- supervise.c ----------------------------------------------------------- */

/* What a notify datagram says to gen's supervision: WATCHDOG=1 starts the
 * watchdog's deadline again, WATCHDOG=trigger and STOPPING=1 are noticed.
 * Nothing while gen is not supervised. */
void ad_generation_supervision_heard(ad_generation *gen, const ntf_message *message);
