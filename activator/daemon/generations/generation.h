/* One start of a host: its cgroup leaf, its main process, its notify socket.
 * A generation lives from `reserve` until it is proven stopped. It knows how
 * to start, watch and retire itself; what an exit means for the host is
 * decided by whoever set on_exit (wake/supervise.c for the host's generations,
 * wake/restore.c for ExecRestore='s leaf), and what its supervision notices while
 * it serves, by whoever supervises it (wake/supervise.c).
 *
 * This header is its one API. Its code, by what it does:
 *   generation.c  creation (the leaf with the host's limits), records,
 *                 counters (stats)
 *   spawn.c       starting processes in the leaf as the host: the
 *                 environment, the main process (at once, or held before
 *                 its exec), helpers (ExecRestore=, ExecReplicate=), probes
 *   supervise.c   while it serves: watchdog, health checks, STOPPING=1,
 *                 and the notify socket they are heard on
 *   replica.c     ExecReplicate='s replica beside the main process: its
 *                 exits watched and told, restarts as ReplicateRestart=
 *                 says
 *   freezer.c     freezing and thawing the leaf (cgroup.freeze), settling
 *                 through cgroup.events
 *   retire.c      where a generation is killed with proof: SIGTERM and
 *                 StopTimeoutSec=, the cgroup kill, the proof of empty,
 *                 reaping; the watch on its main process's exit; free
 *   adopt.c       a generation that outlived the previous daemon, taken over
 *   limits.c      the [Limits] as the cgroup layer takes them
 * What those files share is internal.h. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/daemon/host/host.h"
#include "activator/daemon/generations/output.h"
#include "activator/notify/notify.h"
#include "activator/probe/probe.h"
#include "activator/records/records.h"

typedef struct ad_generation ad_generation;

typedef void (*ad_generation_exit_fn)(ad_generation *gen, void *userdata);
typedef void (*ad_generation_retired_fn)(ad_generation *gen, bool proven, const char *why,
                                         void *userdata);

/* What the supervision of a serving generation noticed. */
typedef enum ad_generation_notice {
    AD_NOTICE_WATCHDOG,  /* no WATCHDOG=1 within WatchdogSec=, or WATCHDOG=trigger */
    AD_NOTICE_UNHEALTHY, /* HealthCheckFailures= repeated health checks failed in a row */
    AD_NOTICE_STOPPING,  /* the app sent STOPPING=1 */
    /* ReplicateRequired=yes, and the replica exited and is not started
     * again (ReplicateRestart= does not restart that exit, or its
     * restarts in a row ran out) */
    AD_NOTICE_REPLICA_FAILED,
} ad_generation_notice;

/* why is one sentence, valid during the call. */
typedef void (*ad_generation_notice_fn)(ad_generation *gen, ad_generation_notice notice,
                                        const char *why, void *userdata);

struct ad_generation {
    ad_host *host;
    uint64_t number;
    bool announced;                  /* a generation proper ("g-N"), not a helper leaf */
    uint64_t session;
    uint64_t admission_revision;
    rec_build_ref build;
    /* When the build's executable is a "#!" script, its path inside the
     * build ("bin/run.sh"), by which it runs from the release store so that
     * its $0 finds the build's files; "" for any other executable. */
    char script_path[REL_PATH_SIZE];
    cg_leaf *leaf;
    cg_process process;              /* pid 0 / pidfd -1 before the exec */
    cg_held_spawn *held;             /* the main process, held before its exec; or NULL */
    /* ExecReplicate='s process beside the main one, in the same leaf
     * (replica.c): watched from its start, started again as
     * ReplicateRestart= says, until the main process exits or the
     * generation retires. */
    struct {
        cg_process process;           /* pidfd -1 while none runs */
        sd_event_source *exit_source; /* its pidfd, while it is watched */
        sd_event_source *timer;       /* its restart due, or the word of its failure */
        uint64_t started_usec;        /* CLOCK_MONOTONIC at its last start */
        unsigned restarts_in_a_row;   /* since one ran FailureResetSec= */
        bool restart_held;            /* its restart came due while the leaf was frozen */
        bool failed;                  /* down for good: it ended, and nothing restarts it */
        bool adopted;                 /* started by the previous daemon: not ours to reap */
        char failure[400];            /* ... in one sentence, once failed */
    } replica;
    int helper_stdout_fd;            /* a helper's stdout when it answers there
                                        (ExecCheckpoint=); -1: the journal, as for all */
    /* An exit of the main process while the generation is not being
     * retired goes here; none is noted only. */
    ad_generation_exit_fn on_exit;
    void *on_exit_userdata;
    sd_event_source *exit_source;    /* the pidfd, while the process runs */
    bool exited;
    int exit_status;                 /* 0..255, or 128 + signal */
    bool adopted;                    /* resumed after a daemon restart: not our child */
    ntf_socket *notify;              /* Ready=notify or WatchdogSec= only */
    ad_host_log *log;                /* its stdout and stderr, from its first spawn */
    /* The leaf's counters as last read (ad_generation_stats), and when. */
    cg_stats stats;
    int stats_result;
    uint64_t stats_usec;             /* CLOCK_MONOTONIC; 0: never read */
    ntf_handler on_message;          /* who opened it gets each datagram after us */
    bool ready;                      /* READY=1 seen */
    uint64_t exec_usec;              /* CLOCK_MONOTONIC at exec */
    uint64_t serving_usec;           /* CLOCK_MONOTONIC when published; 0 before */

    /* Supervision while it serves (ad_generation_supervise); none while it
     * is retired. */
    ad_generation_notice_fn on_notice; /* NULL: not supervised */
    void *on_notice_userdata;
    sd_event_source *watchdog_timer; /* WatchdogSec=: re-armed by each WATCHDOG=1 */
    sd_event_source *health_timer;   /* HealthCheckIntervalSec=: the next check */
    probe_run *health_probe;         /* the check in flight */
    unsigned health_failures;        /* checks failed in a row */

    /* The freezer (ParkMode=freeze, parking/freeze.c decides when). */
    bool frozen;                    /* cgroup.freeze is 1: frozen, or on its way there */
    /* Writes of cgroup.freeze so far: a freeze that still holds is the
     * same one while this has not moved (a periodic checkpoint's archive
     * is crash-consistent only then). */
    uint64_t freezer_writes;
    sd_event_source *freeze_source; /* cgroup.events while a freeze or thaw settles */
    void (*settled)(ad_generation *gen, void *userdata);
    void *settled_userdata;

    /* Retirement in flight. */
    sd_event_source *grace_timer;    /* SIGTERM sent, waiting for the main process */
    sd_event_source *empty_source;   /* the leaf's cgroup.events */
    sd_event_source *kill_timer;     /* bound on proving the leaf empty */
    ad_generation_retired_fn retired;
    void *retired_userdata;
};

/* Creates the leaf <kind>-<number> ("g-7", "restore-7") with the host's limits. */
int ad_generation_new(ad_host *host, const char *kind, uint64_t number, ad_generation **out,
                      act_error *err);
/* The [Limits] values as the cgroup layer takes them for leaves of root
 * ("infinity" is the cgroup's default, so it is not written). PidsMax= left
 * to its default stays out of the leaf where root cannot enforce it (no
 * pids controller delegated, as in some containers), and, for a host with
 * a uid of its own (own_uid: RLIMIT_NPROC holds it there instead), where
 * only a v1 pids hierarchy could, whose join would cost every spawn a
 * migration. A PidsMax= the file sets is enforced or refused. */
/* Whether a MemoryMax= left to its default (of memory_max bytes) goes
 * into a leaf on this box (limits.c). */
bool ad_default_memory_in_leaf(const cg_root *root, uint64_t memory_max);

void ad_limits_from_config(const cg_root *root, const cfg_limits *limits, bool own_uid,
                           cg_limits *out);
/* Rewrites the limits of gen's running leaf (a reload). */
int ad_generation_set_limits(ad_generation *gen, const cfg_limits *limits, act_error *err);
/* Execs the verified build exec_fd with the host's sockets; or, when a
 * child is held (ad_generation_spawn_held), lets it exec, exec_fd unused. */
int ad_generation_spawn(ad_generation *gen, int exec_fd, act_error *err);
/* Makes the main process ready in gen's leaf and holds it before its exec
 * (cgroup.h: cg_spawn_hold): the build, its view and credentials as
 * ad_generation_spawn would run them, from gen as it is now. */
int ad_generation_spawn_held(ad_generation *gen, int exec_fd, act_error *err);
/* Kills and reaps a held child, if any, leaving the leaf empty. */
void ad_generation_drop_held(ad_generation *gen);
/* Execs an operator-installed helper (argv[0] absolute) in gen's leaf, with
 * extra_env ("KEY=VALUE" or NULL) added; as gen's main process or, with
 * main_process false, beside it as its replica (replica.process). */
int ad_generation_spawn_helper(ad_generation *gen, char *const *argv, const char *extra_env,
                               bool main_process, act_error *err);
/* Starts ExecReplicate= (when the host has one) in gen's leaf beside its
 * main process, where the generation's retirement stops it with the same
 * proof, and keeps it running: each exit is logged, published
 * (replica.exited) and counted, and, as ReplicateRestart= says, followed
 * by a restart after ReplicateRestartSec= doubled for each restart in a
 * row, at most 5 in a row. One that stays down is replica.failed; with
 * ReplicateRequired=yes it is noticed (AD_NOTICE_REPLICA_FAILED) as soon as
 * gen is supervised. Nothing of this goes on once the main process exited
 * or the retirement began: its kill is the generation's end, not a
 * failure of the replica. */
int ad_generation_start_replica(ad_generation *gen, act_error *err);
/* gen was resumed from the previous daemon, whose record named its replica
 * as pid: watched on with pidfd (the caller's no more), as if this daemon
 * had started it, though its exit status is not ours to read (it was the
 * previous daemon's child): its end counts as a failure. pidfd -1: it ended
 * while no daemon watched it, and is handled as such an end at once. */
void ad_generation_adopt_replica(ad_generation *gen, pid_t pid, int pidfd);
/* How gen's exec: probes (Ready=, HealthCheck=) run: in its leaf, as the
 * host's user with its seccomp filter, its environment and its main
 * process's mount namespace, never as the daemon. gen must outlive the
 * probes started with it. */
probe_runner ad_generation_probe_runner(ad_generation *gen);
/* The leaf's counters (memory, pids, cpu), read at most once a second:
 * status and every scrape read them for every serving host, and a burst of
 * requests must not become a burst of cgroup file reads. A cache, so it
 * takes a const generation. */
int ad_generation_stats(const ad_generation *gen, cg_stats *out);
/* Notify datagrams heard and refused (ntf_refused_count); 0 without a
 * notify socket. */
uint64_t ad_generation_notify_refused(const ad_generation *gen);
/* Whether the host's generations get a NOTIFY_SOCKET: for Ready=notify, and
 * for WatchdogSec=, whose keep-alives arrive there. */
bool ad_generation_wants_notify(const cfg_host *config);
/* Opens the generation's NOTIFY_SOCKET, which only takes datagrams from
 * processes in its leaf. The generation reads what concerns its supervision
 * (STATUS=, WATCHDOG=, STOPPING=), then on_message (may be NULL) gets the
 * datagram. */
int ad_generation_open_notify(ad_generation *gen, ntf_handler on_message, act_error *err);
/* Starts supervising a serving generation as its host file says: its
 * watchdog (WatchdogSec=, from now), its repeated health checks
 * (HealthCheckIntervalSec=), its STOPPING=1 and the failure of a required
 * replica, told on the loop's next turn when it failed before. on_notice
 * gets what they notice; it may retire the generation. A restart of the
 * replica that a freeze held goes ahead now. Once supervised, a second
 * call changes nothing; retiring or freeing the generation ends it. */
void ad_generation_supervise(ad_generation *gen, ad_generation_notice_fn on_notice, void *userdata);
/* Freezes every process of gen's leaf (cgroup.freeze) and stops its
 * supervision (a frozen app sends no keep-alive and answers no check).
 * settled(gen, userdata) runs once cgroup.events says "frozen 1", learnt
 * through the leaf's events fd; it does not run if a thaw or a retirement
 * comes first. */
int ad_generation_freeze(ad_generation *gen, void (*settled)(ad_generation *, void *),
                         void *userdata, act_error *err);
/* Thaws gen at once: its processes run when this returns. settled (may be
 * NULL) runs once cgroup.events says "frozen 0". A freeze still settling is
 * abandoned. The caller supervises it again. */
int ad_generation_thaw(ad_generation *gen, void (*settled)(ad_generation *, void *), void *userdata,
                       act_error *err);
/* Retires gen: SIGTERM and up to StopTimeoutSec (graceful) then cgroup
 * kill, proof of empty bounded by a timeout, leaf and record removed. done
 * runs on the loop, once. A frozen gen is thawed first when it retires
 * gracefully, since a frozen process cannot act on SIGTERM; when it is
 * killed at once, or its host's claim names another box, it is killed
 * frozen and thawed after, so it never runs again and takes no client of
 * the box that owns the host now. */
void ad_generation_retire(ad_generation *gen, bool graceful, ad_generation_retired_fn done,
                          void *userdata);
void ad_generation_free(ad_generation *gen);
/* Resumes supervising a serving generation that outlived the previous
 * daemon: its leaf, its main process (main_pidfd is taken), its notify
 * socket; its exits go to on_exit. The caller makes it the host's serving
 * generation. */
int ad_generation_adopt(ad_host *host, const char *leaf_name, const rec_generation_record *record,
                        const claim *current, int main_pidfd, ad_generation_exit_fn on_exit,
                        ad_generation **out, act_error *err);
/* gen's record as it stands, to be written with phase. */
void ad_generation_fill_record(ad_generation *gen, rec_generation_phase phase,
                               rec_generation_record *record);
/* Writes it off the loop, in the host's lane of the workers (ordered with
 * the host's later record writes); a failure is logged. */
void ad_generation_write_record(ad_generation *gen, rec_generation_phase phase);
