/* What the files of one generation's life share, and nothing outside
 * generations/ uses: the one API is generation.h. The files call one way
 * only, from the top down: adopt.c, supervise.c, replica.c, spawn.c,
 * retire.c, freezer.c, and generation.c (creation, records, counters) under
 * them all; limits.c is below the ones that use it. */
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include "activator/daemon/generations/generation.h"
#include "common/cleanup.h"

/* A reaped process's status as the generations tell it: 0..255, or 128 +
 * the signal that killed it, as a shell says it. */
static inline int ad_exit_status_of(const siginfo_t *info)
{
    return info->si_code == CLD_EXITED ? info->si_status : 128 + info->si_status;
}

/* Tells gen's supervisor what its supervision noticed; nothing while gen
 * is not supervised. */
static inline void ad_generation_tell(ad_generation *gen, ad_generation_notice what,
                                      const char *why)
{
    if (gen->on_notice)
        gen->on_notice(gen, what, why, gen->on_notice_userdata);
}

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

/* Ends the watch on gen's replica (replica.c): its exit is no longer told
 * nor restarted, and no restart is due. The end of gen's service calls it
 * (its main process's exit, its retirement, free), so that the kill that
 * ends a generation is never taken for the replica's failure. Defined here
 * for retire.c, below replica.c. The process stays in the leaf for the
 * kill, and its pidfd for ad_generation_reap. */
static inline void ad_generation_stop_replica(ad_generation *gen)
{
    gen->replica.exit_source = sd_event_source_disable_unref(gen->replica.exit_source);
    gen->replica.timer = sd_event_source_disable_unref(gen->replica.timer);
    gen->replica.restart_held = false;
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
 * collects the exit status of a replica (ExecReplicate=) still there too. */
void ad_generation_reap(ad_generation *gen);

/* ---- replica.c ------------------------------------------------------------- */

/* gen is supervised now: what came due while it was not goes ahead on the
 * loop's next turn, a restart a freeze held, or the word that a required
 * replica failed. */
void ad_generation_replica_supervised(ad_generation *gen);

/* ---- supervise.c ----------------------------------------------------------- */

/* What a notify datagram says to gen's supervision: WATCHDOG=1 starts the
 * watchdog's deadline again, WATCHDOG=trigger and STOPPING=1 are noticed.
 * Nothing while gen is not supervised. */
void ad_generation_supervision_heard(ad_generation *gen, const ntf_message *message);
