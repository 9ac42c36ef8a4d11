/* Where a generation is killed with proof. Every generation ends through
 * ad_generation_retire, whatever the reason: a held child is killed and
 * reaped; SIGTERM and up to StopTimeoutSec= for the main process to exit
 * (graceful); then the cgroup kill of the whole leaf, and the proof that
 * the leaf is empty (cgroup.events says "populated 0"), bounded by a
 * timeout; the main process reaped; the leaf and the record removed; and
 * only then is it announced retired. Not proven in time, it is announced
 * failed, and the sweep (generations/sweep.c) goes on proving it stopped.
 *
 * Also the watch on the main process's exit (its pidfd), which ends the
 * grace period of a retirement or goes to on_exit, whose owner decides
 * whether to retire; and dropping a held child, which leaves the leaf empty
 * for the proof. */
#include "activator/daemon/generations/internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/generations/record_writes.h"
#include "common/log.h"

/* How long a cgroup kill may take to show an empty leaf before the stop is
 * called unproven. The kernel kills synchronously; this only bounds a leaf
 * stuck in uninterruptible sleep (a hung NFS read, say), which the sweep
 * (generations/sweep.c) then goes on proving stopped for as long as it takes. */
#define KILL_PROOF_TIMEOUT_USEC (10 * 1000 * 1000ull)

static void start_kill(ad_generation *gen);

static int on_process_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_generation *gen = userdata;
    siginfo_t info = {0};
    if (waitid(P_PIDFD, (id_t)fd, &info, WEXITED | WNOHANG) < 0) {
        if (errno != ECHILD || !gen->adopted)
            return 0;
        /* A resumed generation is not our child: the pidfd says it ended,
         * but its status went to whoever reaps orphans. Unknown is not a
         * clean exit, so it counts as a failure. */
        info.si_pid = gen->process.pid;
        info.si_code = CLD_EXITED;
        info.si_status = 255;
    } else if (info.si_pid == 0) {
        return 0;
    }
    gen->exit_source = sd_event_source_disable_unref(gen->exit_source);
    gen->exited = true;
    gen->exit_status = ad_exit_status_of(&info);
    /* Its exit is what counts now, not a keep-alive it can no longer send,
     * nor a replica that outlives it until the kill. */
    ad_generation_stop_supervision(gen);
    ad_generation_stop_replica(gen);
    const char *name = gen->host->name;
    act_log_fields(gen->exit_status == 0 ? LOG_INFO : LOG_WARNING,
                   &(act_log_ctx){.host = name, .generation = gen->number,
                                  .build = gen->build.version},
                   "host %s: generation %" PRIu64 " (pid %d) %s %d", name, gen->number,
                   (int)gen->process.pid,
                   info.si_code == CLD_EXITED ? "exited with status" : "was killed by signal",
                   info.si_status);

    if (gen->retired) {
        /* Retiring: the main process is gone, so the grace period is over
         * (and a kill in flight goes on to its proof). */
        if (gen->grace_timer) {
            gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
            start_kill(gen);
        }
        return 0;
    }
    if (gen->on_exit)
        gen->on_exit(gen, gen->on_exit_userdata);
    return 0;
}

int ad_generation_watch_exit(ad_generation *gen)
{
    /* The pidfd is watched for readability and reaped with waitid(P_PIDFD)
     * rather than through sd_event_add_child_pidfd: an adopted generation
     * is not our child (one path serves both), and child sources need
     * SIGCHLD blocked in every thread, NNG's and the workers' included. */
    return sd_event_add_io(gen->host->daemon->loop, &gen->exit_source, gen->process.pidfd, EPOLLIN,
                           on_process_exit, gen);
}

void ad_generation_drop_held(ad_generation *gen)
{
    cg_held_abandon(TAKE_PTR(gen->held));
}

void ad_generation_reap(ad_generation *gen)
{
    gen->exit_source = sd_event_source_disable_unref(gen->exit_source);
    if (gen->replica.process.pidfd >= 0) {
        /* The replica lived in the same leaf, so the proof of empty covers
         * it; this only collects its exit status. */
        siginfo_t info = {0};
        waitid(P_PIDFD, (id_t)gen->replica.process.pidfd, &info, WEXITED | WNOHANG);
        close(gen->replica.process.pidfd);
        gen->replica.process.pidfd = -1;
    }
    if (gen->process.pidfd >= 0 && !gen->exited) {
        siginfo_t info = {0};
        if (waitid(P_PIDFD, (id_t)gen->process.pidfd, &info, WEXITED | WNOHANG) == 0 &&
            info.si_pid != 0) {
            gen->exited = true;
            gen->exit_status = ad_exit_status_of(&info);
        }
    }
}

/* The end of a retirement: the event, then whoever asked. */
static void announce_retired(ad_generation *gen, bool proven, const char *why)
{
    ntf_free(TAKE_PTR(gen->notify));
    ad_host_log_free(TAKE_PTR(gen->log));
    if (gen->announced)
        ad_publish(gen->host, proven ? EV_EVENT_RETIRED : EV_EVENT_FAILED, gen,
                   proven ? NULL : "unproven_stop");
    void (*done)(ad_generation *, bool, const char *, void *) = gen->retired;
    gen->retired = NULL;
    if (done)
        done(gen, proven, why, gen->retired_userdata);
}

static void on_record_removed(void *userdata)
{
    announce_retired(userdata, true, NULL);
}

static void finish_retire(ad_generation *gen, bool proven, const char *why)
{
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    gen->empty_source = sd_event_source_disable_unref(gen->empty_source);
    gen->kill_timer = sd_event_source_disable_unref(gen->kill_timer);
    ad_generation_reap(gen);
    if (!proven) {
        announce_retired(gen, false, why);
        return;
    }
    act_error err = {0};
    if (cg_leaf_remove(gen->leaf, &err) < 0)
        act_log(LOG_WARNING, "host %s: %s", gen->host->name, err.message);
    /* Retired is announced once the record is gone too: whoever sees the
     * event finds nothing of the generation left. */
    ad_record_remove_async(gen->host, gen->number, on_record_removed, gen);
}

static void check_empty(ad_generation *gen)
{
    bool populated = true;
    act_error err = {0};
    if (cg_leaf_populated(gen->leaf, &populated, &err) < 0) {
        finish_retire(gen, false, err.message);
        return;
    }
    if (!populated)
        finish_retire(gen, true, NULL);
}

static int on_leaf_events(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    check_empty(userdata);
    return 0;
}

static int on_kill_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    char why[160];
    snprintf(why, sizeof(why), "cgroup %s still has processes %llu s after the kill",
             cg_leaf_path(gen->leaf), KILL_PROOF_TIMEOUT_USEC / 1000000ull);
    finish_retire(gen, false, why);
    return 0;
}

static void start_kill(ad_generation *gen)
{
    ad_daemon *daemon = gen->host->daemon;
    act_error err = {0};
    int events_fd = cg_leaf_events_fd(gen->leaf, &err);
    if (events_fd < 0 ||
        sd_event_add_io(daemon->loop, &gen->empty_source, events_fd, CG_LEAF_EVENTS_POLL,
                        on_leaf_events, gen) < 0 ||
        sd_event_add_time_relative(daemon->loop, &gen->kill_timer, CLOCK_MONOTONIC,
                                   KILL_PROOF_TIMEOUT_USEC, 0, on_kill_timeout, gen) < 0) {
        finish_retire(gen, false, events_fd < 0 ? err.message : "cannot watch cgroup.events");
        return;
    }
    if (cg_leaf_kill_start(gen->leaf, &err) < 0) {
        finish_retire(gen, false, err.message);
        return;
    }
    /* Killed frozen: the kill reaches frozen processes, and the thaw after
     * it leaves no frozen leaf behind, whatever else was in it. */
    if (gen->frozen) {
        if (cg_leaf_freeze(gen->leaf, false, &err) < 0)
            act_log(LOG_WARNING, "host %s: %s", gen->host->name, err.message);
        gen->frozen = false;
    }
    check_empty(gen);
}

static int on_grace_over(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    act_log(LOG_NOTICE,
            "host %s: generation %" PRIu64 " did not stop within StopTimeoutSec; killing",
            gen->host->name, gen->number);
    start_kill(gen);
    return 0;
}

void ad_generation_retire(ad_generation *gen, bool graceful, ad_generation_retired_fn done,
                          void *userdata)
{
    assert(gen && !gen->retired);
    /* A held child ran nothing but our code: killed and reaped here, it
     * leaves the leaf empty for the proof below. */
    ad_generation_drop_held(gen);
    ad_generation_stop_supervision(gen);
    ad_generation_stop_replica(gen);
    ad_generation_stop_settling(gen);
    gen->retired = done;
    gen->retired_userdata = userdata;
    if (gen->announced)
        ad_publish(gen->host, EV_EVENT_RETIRING, gen, NULL);
    const ad_host *host = gen->host;
    bool running = gen->process.pidfd >= 0 && !gen->exited;
    if (gen->frozen) {
        /* SIGTERM's grace needs the app running. A host whose claim moved
         * is killed frozen instead (start_kill thaws after the kill): a
         * thaw would let it take a waiting client it must not serve. */
        act_error err = {0};
        if (!graceful || !host->claim_ours) {
            graceful = false;
        } else if (cg_leaf_freeze(gen->leaf, false, &err) < 0) {
            act_log(LOG_WARNING, "host %s: %s; killing it frozen", host->name, err.message);
            graceful = false;
        } else {
            gen->frozen = false;
        }
    }
    if (graceful && running &&
        syscall(SYS_pidfd_send_signal, gen->process.pidfd, SIGTERM, NULL, 0) == 0 &&
        sd_event_add_time_relative(host->daemon->loop, &gen->grace_timer, CLOCK_MONOTONIC,
                                   ad_host_config(host)->stop_timeout_usec, 0, on_grace_over,
                                   gen) >= 0)
        return; /* on_process_exit or on_grace_over goes on */
    start_kill(gen);
}

/* ---- free ------------------------------------------------------------------ */

void ad_generation_free(ad_generation *gen)
{
    if (!gen)
        return;
    ad_generation_stop_supervision(gen);
    ad_generation_stop_replica(gen);
    ad_generation_stop_settling(gen);
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    gen->empty_source = sd_event_source_disable_unref(gen->empty_source);
    gen->kill_timer = sd_event_source_disable_unref(gen->kill_timer);
    ad_generation_reap(gen);
    ad_generation_drop_held(gen);
    ntf_free(gen->notify);
    ad_host_log_free(gen->log);
    if (gen->process.pidfd >= 0)
        close(gen->process.pidfd);
    cg_leaf_free(gen->leaf);
    free(gen);
}
