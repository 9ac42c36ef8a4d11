/* The replica: the process ExecReplicate= runs beside a generation's main
 * process, in its leaf, keeping the host's state copied out while it
 * serves. Started at the `replicate` step, its exit is watched through its
 * pidfd and told (the journal, the replica.exited event, the
 * activator_replica_exits_total counter) with what follows: a restart as
 * ReplicateRestart= says, or nothing more for this generation.
 *
 * A restart storm is bounded twice over: each restart in a row waits
 * ReplicateRestartSec= doubled once more (up to RESTART_WAIT_MAX_USEC), and
 * after RESTARTS_IN_A_ROW_MAX of them the replica stays down. Only a
 * replica that ran for FailureResetSec= starts the count again, as a
 * generation that served that long ends its host's failure streak.
 *
 * What a replica that stays down means for the host is its supervisor's to
 * decide (AD_NOTICE_REPLICA_FAILED, told with ReplicateRequired=yes). The
 * end of the generation's service stops all of this
 * (ad_generation_stop_replica): the kill of a retirement ends the
 * generation, it is no failure of its replica. */
#include "activator/daemon/generations/internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/generations/record_writes.h"
#include "activator/pipeline/backoff.h"
#include "common/clock.h"
#include "common/log.h"

#define USEC_PER_MSEC UINT64_C(1000)

/* Restarts in a row after which the replica is left down: one that fails
 * at once is tried 5 times over 31 of ReplicateRestartSec= (31 s by
 * default), not for as long as the generation serves. */
#define RESTARTS_IN_A_ROW_MAX 5u
/* The longest wait before a restart, whatever ReplicateRestartSec= and the
 * doubling make of it. */
#define RESTART_WAIT_MAX_USEC (30 * 1000 * USEC_PER_MSEC)
/* A restart is late by at most this: the waits are short in tests. */
#define RESTART_ACCURACY_USEC USEC_PER_MSEC

static int on_exit_readable(sd_event_source *source, int fd, uint32_t revents, void *userdata);

/* Starts the replica in gen's leaf and watches its pidfd. On failure,
 * replica.process still holds a replica that runs unwatched (its pidfd is
 * kept for the reap), or none. */
static int start(ad_generation *gen, act_error *err)
{
    /* A start that fails counts as a run of no time: it must not look
     * like one that ran for FailureResetSec= and start the count again. */
    gen->replica.started_usec = act_now_usec();
    int r = ad_generation_spawn_helper(gen, ad_host_config(gen->host)->exec_replicate, NULL, false,
                                       err);
    if (r < 0)
        return r;
    r = sd_event_add_io(gen->host->daemon->loop, &gen->replica.exit_source,
                        gen->replica.process.pidfd, EPOLLIN, on_exit_readable, gen);
    if (r < 0)
        return act_error_set(err, -r, "cannot watch its pid %d: %s", (int)gen->replica.process.pid,
                             strerror(-r));
    return 0;
}

/* Which exits ReplicateRestart= restarts, and whether restarts are left. */
static ad_replica_next next_after(const ad_generation *gen, bool failed)
{
    uint8_t policy = ad_host_config(gen->host)->replicate_restart;
    bool wanted = policy == CFG_REPLICATE_RESTART_ALWAYS ||
                  (policy == CFG_REPLICATE_RESTART_ON_FAILURE && failed);
    if (!wanted)
        return AD_REPLICA_STOPPED;
    return gen->replica.restarts_in_a_row < RESTARTS_IN_A_ROW_MAX ? AD_REPLICA_RESTARTING
                                                                  : AD_REPLICA_EXHAUSTED;
}

static int arm(ad_generation *gen, uint64_t wait_usec, sd_event_time_handler_t handler)
{
    return sd_event_add_time_relative(gen->host->daemon->loop, &gen->replica.timer, CLOCK_MONOTONIC,
                                      wait_usec, RESTART_ACCURACY_USEC, handler, gen);
}

static int on_restart_due(sd_event_source *source, uint64_t usec, void *userdata);

/* Arms the next restart in a row: ReplicateRestartSec= doubled once for
 * each restart before it. what_next says so in words. */
static int schedule_restart(ad_generation *gen, char *what_next, size_t size)
{
    const cfg_host *config = ad_host_config(gen->host);
    unsigned restart = gen->replica.restarts_in_a_row + 1;
    uint64_t unit = config->replicate_restart_usec ? config->replicate_restart_usec
                                                   : CFG_REPLICATE_RESTART_USEC_DEFAULT;
    uint64_t wait = pl_doubling_delay_usec(restart, unit, RESTART_WAIT_MAX_USEC);
    int r = arm(gen, wait, on_restart_due);
    if (r < 0)
        return r;
    gen->replica.restarts_in_a_row = restart;
    snprintf(what_next, size, "restarting it in %" PRIu64 " ms (restart %u of at most %u in a row)",
             wait / USEC_PER_MSEC, restart, RESTARTS_IN_A_ROW_MAX);
    return 0;
}

/* Why a replica that ended is not restarted, in words. */
static void why_not_restarted(const ad_generation *gen, ad_replica_next next, bool may_restart,
                              char *why_not, size_t size)
{
    if (next == AD_REPLICA_EXHAUSTED)
        snprintf(why_not, size, "its %u restarts in a row are exhausted", RESTARTS_IN_A_ROW_MAX);
    else if (!may_restart)
        snprintf(why_not, size, "it runs on, unwatched, until the generation ends");
    else if (ad_host_config(gen->host)->replicate_restart == CFG_REPLICATE_RESTART_NO)
        snprintf(why_not, size, "ReplicateRestart=no");
    else
        snprintf(why_not, size, "ReplicateRestart=on-failure, and it ended well");
}

/* The replica stays down for the rest of the generation: marked failed,
 * with its failure in one sentence, and what_next in words. */
static void stay_down(ad_generation *gen, const char *how, const char *why_not, char *what_next,
                      size_t size)
{
    gen->replica.failed = true;
    snprintf(gen->replica.failure, sizeof(gen->replica.failure),
             "host %s: generation %" PRIu64 "'s replica %s and is not restarted (%s)",
             gen->host->name, gen->number, how, why_not);
    if (ad_host_config(gen->host)->replicate_required)
        snprintf(what_next, size,
                 "not restarted (%s); ReplicateRequired=yes, so generation %" PRIu64 " fails",
                 why_not, gen->number);
    else
        snprintf(what_next, size, "not restarted (%s); the host serves on without it", why_not);
}

/* The replica ended (pid 0: it could not start; failed: not with status
 * 0; how: "exited with status 1"): what follows is decided, told, and set
 * going. may_restart is false for one that runs on unwatched, which a
 * second must not join. */
static void ended(ad_generation *gen, pid_t pid, bool failed, bool may_restart, const char *how)
{
    if (act_now_usec() - gen->replica.started_usec >= gen->host->daemon->config.failure_reset_usec)
        gen->replica.restarts_in_a_row = 0;
    ad_replica_next next = may_restart ? next_after(gen, failed) : AD_REPLICA_STOPPED;
    char why_not[96] = "", what_next[320] = "";
    if (next == AD_REPLICA_RESTARTING) {
        int r = schedule_restart(gen, what_next, sizeof(what_next));
        if (r < 0) {
            next = AD_REPLICA_STOPPED;
            snprintf(why_not, sizeof(why_not), "its restart cannot be scheduled: %s", strerror(-r));
        }
    } else {
        why_not_restarted(gen, next, may_restart, why_not, sizeof(why_not));
    }
    if (next != AD_REPLICA_RESTARTING)
        stay_down(gen, how, why_not, what_next, sizeof(what_next));
    ad_announce_replica_exited(gen, pid, next, how, what_next);
    /* Last: the supervisor may retire gen. */
    if (gen->replica.failed && ad_host_config(gen->host)->replicate_required)
        ad_generation_tell(gen, AD_NOTICE_REPLICA_FAILED, gen->replica.failure);
}

static int on_exit_readable(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_generation *gen = userdata;
    siginfo_t info = {0};
    char how[96];
    int status;
    if (gen->replica.adopted) {
        /* The previous daemon's child: reaped by whoever inherited it. */
        status = 255;
        snprintf(how, sizeof(how), "ended (started by the previous daemon: its status is unknown)");
    } else if (waitid(P_PIDFD, (id_t)fd, &info, WEXITED | WNOHANG) < 0) {
        /* Our child, so this cannot be; and an fd that stays readable must
         * not keep the loop spinning. */
        status = 255;
        snprintf(how, sizeof(how), "ended, its status unknown (%s)", strerror(errno));
    } else if (info.si_pid == 0) {
        return 0;
    } else {
        status = ad_exit_status_of(&info);
        snprintf(how, sizeof(how), "%s %d",
                 info.si_code == CLD_EXITED ? "exited with status" : "was killed by signal",
                 info.si_status);
    }
    pid_t pid = gen->replica.process.pid;
    gen->replica.exit_source = sd_event_source_disable_unref(gen->replica.exit_source);
    close(gen->replica.process.pidfd);
    gen->replica.process = (cg_process){.pidfd = -1};
    gen->replica.adopted = false;
    ended(gen, pid, status != 0, true, how);
    return 0;
}

static void on_record_written(ad_host *host, int result, const act_error *err)
{
    if (result < 0)
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name},
                       "host %s: the record of its replica's restart was not written (the next "
                       "daemon would not watch it): %s",
                       host->name, err->message);
}

/* A published generation's record names its replica, so that the next
 * daemon watches the one that runs now (publication writes the first). */
static void record_the_replica(ad_generation *gen)
{
    if (!gen->serving_usec)
        return;
    rec_generation_record record;
    ad_generation_fill_record(gen, gen->frozen ? REC_GEN_FROZEN : REC_GEN_SERVING, &record);
    act_error err = {0};
    if (ad_record_write_async(gen->host, &record, NULL, on_record_written, &err) < 0)
        on_record_written(gen->host, -EIO, &err);
}

static int on_restart_due(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    gen->replica.timer = sd_event_source_disable_unref(gen->replica.timer);
    /* A process started into a frozen leaf freezes before its exec, which
     * the spawn waits for: the restart waits for the thaw instead. */
    if (gen->frozen) {
        gen->replica.restart_held = true;
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = gen->host->name, .generation = gen->number},
                       "host %s: generation %" PRIu64 " is frozen; its replica restarts once "
                       "it is thawed",
                       gen->host->name, gen->number);
        return 0;
    }
    assert(gen->replica.process.pidfd < 0);
    act_error err = {0};
    if (start(gen, &err) == 0) {
        ad_announce_replica_restarted(gen, gen->replica.restarts_in_a_row);
        record_the_replica(gen);
        return 0;
    }
    char how[sizeof(err.message) + 32];
    snprintf(how, sizeof(how), "could not start again: %s", err.message);
    ended(gen, gen->replica.process.pid, true, gen->replica.process.pidfd < 0, how);
    return 0;
}

static int on_failure_due(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    gen->replica.timer = sd_event_source_disable_unref(gen->replica.timer);
    ad_generation_tell(gen, AD_NOTICE_REPLICA_FAILED, gen->replica.failure);
    return 0;
}

int ad_generation_start_replica(ad_generation *gen, act_error *err)
{
    assert(gen);
    if (!ad_host_config(gen->host)->exec_replicate)
        return 0;
    assert(gen->replica.process.pidfd < 0);
    return start(gen, err);
}

void ad_generation_adopt_replica(ad_generation *gen, pid_t pid, int pidfd)
{
    assert(gen && gen->replica.process.pidfd < 0);
    gen->replica.started_usec = act_now_usec();
    if (pidfd >= 0) {
        gen->replica.process = (cg_process){.pid = pid, .pidfd = pidfd};
        gen->replica.adopted = true;
        int r = sd_event_add_io(gen->host->daemon->loop, &gen->replica.exit_source, pidfd, EPOLLIN,
                                on_exit_readable, gen);
        if (r >= 0)
            return;
        act_log_fields(LOG_ERR, &(act_log_ctx){.host = gen->host->name, .generation = gen->number},
                       "host %s: generation %" PRIu64 "'s replica (pid %d) cannot be watched: %s; "
                       "it runs on unwatched",
                       gen->host->name, gen->number, (int)pid, strerror(-r));
        return;
    }
    /* Ended between the two daemons: what its end calls for follows. */
    ended(gen, pid, true, true, "ended while no daemon watched it");
}

void ad_generation_replica_supervised(ad_generation *gen)
{
    /* On the loop's next turn, not inside the caller, which is busy
     * making gen the serving one. */
    int r = 0;
    if (gen->replica.restart_held) {
        gen->replica.restart_held = false;
        r = arm(gen, 0, on_restart_due);
    } else if (gen->replica.failed && ad_host_config(gen->host)->replicate_required &&
               !gen->replica.timer) {
        r = arm(gen, 0, on_failure_due);
    }
    if (r < 0)
        act_log(LOG_ERR,
                "host %s: generation %" PRIu64 "'s replica: cannot schedule what came due "
                "while it was not supervised: %s",
                gen->host->name, gen->number, strerror(-r));
}
