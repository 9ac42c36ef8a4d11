/* activatord's shared state: one daemon, a table of hosts, and for each host
 * the generations it runs. Everything here is owned by the sd-event loop's
 * thread. The workers of daemon->offload (record_writes.c, stage.c) run
 * blocking file work from copies made on the loop and touch nothing here.
 *
 * The parts, each in its own file:
 *   main.c        the command line, --check-config
 *   daemon.c      start-up, signals, sd_notify, shutdown
 *   hosts.c       the host table, listening sockets, demand watching
 *   generation.c  one running generation: leaf, process, notify socket, retirement
 *   wake_ops.c    the pipeline's operations over claims/, release/ and cgroup/
 *   restore.c     ExecRestore= in its own leaf, ExecReplicate= beside the app
 *   idle.c        idle parking from the kernel's count of connections
 *   swap.c        zero-downtime swaps: verify, pin, N+1 beside N, retire N
 *   recovery.c    what a previous daemon left running: resume or retire
 *   claim_watch.c claims that change under us
 *   dispatch.c    control requests
 *   stage.c       staging builds for control requests, off the loop
 *   record_writes.c  the generation records' durable writes, off the loop
 *   announce.c    pipeline transitions to logs and events
 *   telemetry.c   Prometheus metrics */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <systemd/sd-event.h>

#include "activator/config/config.h"
#include "activator/control/control.h"
#include "activator/events/events.h"
#include "activator/metrics/daemon_metrics.h"
#include "activator/metrics/server.h"
#include "activator/notify/notify.h"
#include "activator/pipeline/pipeline.h"
#include "activator/probe/probe.h"
#include "activator/records/records.h"
#include "cgroup/cgroup.h"
#include "claims/claims.h"
#include "common/offload.h"
#include "release/release.h"

typedef struct act_daemon act_daemon;
typedef struct act_daemon_host act_daemon_host;
typedef struct act_generation act_generation;
typedef struct act_wake_state act_wake_state;
typedef struct act_leftover act_leftover;

/* One start of a host: its cgroup leaf, its main process, its notify socket.
 * It lives from `reserve` until it is proven stopped. */
struct act_generation {
    act_daemon_host *host;
    uint64_t number;
    bool announced;                  /* a generation proper ("g-N"), not a helper leaf */
    uint64_t session;
    uint64_t admission_revision;
    act_build_ref build;
    cg_leaf *leaf;
    cg_process process;              /* pid 0 / pidfd -1 before the exec */
    cg_process helper;               /* ExecReplicate= in the same leaf; pidfd -1 when none */
    /* When set, an exit of the main process goes here instead of to the
     * pipeline: helper leaves (ExecRestore=) wait for their own outcome. */
    void (*on_exit)(act_generation *gen, void *userdata);
    void *on_exit_userdata;
    sd_event_source *exit_source;    /* the pidfd, while the process runs */
    bool exited;
    int exit_status;                 /* 0..255, or 128 + signal */
    bool adopted;                    /* resumed after a daemon restart: not our child */
    act_notify *notify;              /* Ready=notify only */
    bool ready;                      /* READY=1 seen */
    uint64_t exec_usec;              /* CLOCK_MONOTONIC at exec */
    uint64_t serving_usec;           /* CLOCK_MONOTONIC when published; 0 before */

    /* Retirement in flight. */
    sd_event_source *grace_timer;    /* SIGTERM sent, waiting for the main process */
    sd_event_source *empty_source;   /* the leaf's cgroup.events */
    sd_event_source *kill_timer;     /* bound on proving the leaf empty */
    void (*retired)(act_generation *gen, bool proven, const char *why, void *userdata);
    void *retired_userdata;
};

/* What one wake knows, from `read` to its end. Kept apart from the host so
 * that 10,000 parked hosts do not each carry two claims and a build. */
struct act_wake_state {
    act_daemon_host *host;
    claim observed;                  /* the claim read at `read` */
    claim admitted;                  /* our admission, revision = its fencing token */
    rel_resolved resolved;           /* the verified build (exec_fd -1 when none) */
    act_probe *probe;                /* readiness or health probe in flight */
    act_wake *waiting_wake;          /* an op waiting for an async answer */
    sd_event_source *test_hold;      /* a test hook pausing before gate or publish */
    act_generation *restoring;       /* ExecRestore= in flight */
    sd_event_source *restore_timer;
};

struct act_daemon_host {
    act_daemon *daemon;
    const act_host_config *config;
    act_host *pipeline;
    int host_dirfd;                  /* <state>/hosts/<host> */
    int *listen_fds;                 /* config->n_listen, bound at start-up */
    char **listen_names;             /* LISTEN_FDNAMES entries */
    sd_event_source **demand_sources; /* watching the sockets while parked */
    cg_seccomp_program *seccomp;     /* a filter of its own, or NULL */
    uid_t uid;                       /* User=, or ours */
    gid_t gid;
    bool have_credentials;

    act_generation *serving;         /* the published generation, if any */
    act_generation *starting;        /* the generation the wake in flight starts */

    act_wake_state *w;               /* what the wake in flight knows; NULL between wakes */
    bool claim_ours;                 /* the last claim seen names this box as executor */

    bool unproven_at_start;          /* recovery could not prove an old generation stopped */
    char last_reason[32];
    char last_message[256];
    uint64_t failed_attempts;        /* attempts recorded against a build */
    uint64_t wake_started_usec;      /* for the wake-duration histogram */
    struct swap_request *swap;       /* the swap in flight (one per host) */
    bool swap_waits_for_park;        /* stop-first: N is being retired first */
    act_generation *replaced;        /* a swap's N, from N+1's publication to its retirement */
    sd_event_source *idle_timer;     /* while serving with IdleTimeoutSec= */
    uint64_t last_active_usec;       /* last check that found a connection */
};

struct act_daemon {
    sd_event *loop;
    act_daemon_config config;
    act_host_config *host_configs;   /* every host file that loaded */
    size_t n_host_configs;
    act_daemon_host *hosts;          /* the hosts set up, sorted by name */
    size_t n_hosts;
    cg_seccomp_program *default_seccomp; /* SystemCallFilter=default, shared */
    char incarnation[33];            /* random per start */
    int state_dirfd;
    claim_store *store;
    act_offload *offload;            /* workers for the records' durable writes */
    claims_watch *watch;
    act_leftover *leftovers;         /* leaves found at start-up, until recovery ran */
    size_t n_leftovers;
    uint64_t watch_revision;
    rel_store *releases;
    cg_root *cgroups;
    act_start_cap start_cap;
    act_events *events;
    act_control *control;
    act_metrics *metrics;
    act_daemon_metrics telemetry;
    act_metrics_server *metrics_server;
    struct rlimit nofile;            /* as we were started: what generations get */
    sd_event_source *status_timer;   /* a pending STATUS= update */
    bool stopping;
    uint64_t stop_deadline_usec;
    int exit_code;
};

/* daemon.c: STATUS= for systemctl status, with counts of hosts by state. */
void act_daemon_update_status(act_daemon *daemon);
/* A host changed state: STATUS= is updated shortly (coalesced). */
void act_daemon_status_changed(act_daemon *daemon);

/* hosts.c */
int act_hosts_setup(act_daemon *daemon, act_error *err);
void act_hosts_teardown(act_daemon *daemon);
act_daemon_host *act_hosts_find(act_daemon *daemon, const char *name);
/* Watches a parked host's sockets for the first connection (or stops). */
void act_host_watch_demand(act_daemon_host *host, bool watch);
/* <state>/hosts/<host>, opened (and created) when first needed and kept
 * open only while the host is active: 10,000 parked hosts hold no dir fd. */
int act_host_dir(act_daemon_host *host, act_error *err);
void act_host_dir_close(act_daemon_host *host);
/* <state>/hosts/<host>/state, the app's STATE_DIRECTORY, owned by User=:
 * made before the first program (ExecRestore= or the build) runs in it. */
int act_host_state_directory(act_daemon_host *host, act_error *err);
/* What a published generation serves on, for routers reading the claim: its
 * listening addresses, or "<box>/g-<N>" for a host without sockets. */
void act_host_format_handle(const act_daemon_host *host, uint64_t generation, char *out,
                            size_t size);
/* The compiled SystemCallFilter= of the host (shared for the plain default). */
const cg_seccomp_program *act_host_seccomp(const act_daemon_host *host);
/* Accepts and closes the connections waiting on a host's sockets. */
void act_host_drain_backlog(act_daemon_host *host);

/* idle.c: parks a serving host after IdleTimeoutSec= with no connection. */
void act_idle_watch(act_daemon_host *host, bool watch);

/* generation.c */
/* Creates the leaf <kind>-<number> ("g-7", "restore-7") with the host's limits. */
int act_generation_new(act_daemon_host *host, const char *kind, uint64_t number,
                       act_generation **out, act_error *err);
/* Execs the verified build (host->resolved) with the host's sockets. */
int act_generation_spawn(act_generation *gen, act_error *err);
/* Execs an operator-installed helper (argv[0] absolute) in gen's leaf, with
 * extra_env ("KEY=VALUE" or NULL) added; as gen's main process or, with
 * main_process false, beside it (ExecReplicate=). */
int act_generation_spawn_helper(act_generation *gen, char *const *argv, const char *extra_env,
                                bool main_process, act_error *err);
/* Retires gen: SIGTERM and up to grace_usec (graceful) then cgroup kill,
 * proof of empty bounded by kill_timeout_usec, leaf and record removed. done
 * runs on the loop, once. */
int act_generation_retire(act_generation *gen, bool graceful,
                          void (*done)(act_generation *gen, bool proven, const char *why,
                                       void *userdata),
                          void *userdata);
void act_generation_free(act_generation *gen);
/* Resumes supervising a serving generation that outlived the previous
 * daemon: its leaf, its main process (main_pidfd is taken), its notify
 * socket; the host becomes serving without a wake. */
int act_generation_adopt(act_daemon_host *host, const char *leaf_name,
                         const act_generation_record *record, const claim *current,
                         int main_pidfd, act_error *err);
/* gen's record as it stands, to be written with phase. */
void act_generation_fill_record(act_generation *gen, act_generation_phase phase,
                                act_generation_record *record);
/* Writes it now, on the loop: only where nothing else runs yet (recovery). */
int act_generation_write_record(act_generation *gen, act_generation_phase phase, act_error *err);

/* record_writes.c: the same off the loop, in the host's lane. With
 * build_state, the build state is noted first (written if the build
 * changed). written(host, result, err) follows on the loop. */
typedef void (*act_record_written_fn)(act_daemon_host *host, int result, const act_error *err);
int act_generation_write_record_async(act_generation *gen, act_generation_phase phase,
                                      const act_build_state *build_state,
                                      act_record_written_fn written, act_error *err);
/* Removes gen's record (it is proven stopped); failures are logged, and
 * removed(gen) follows on the loop either way. */
typedef void (*act_record_removed_fn)(act_generation *gen);
void act_generation_remove_record_async(act_generation *gen, act_record_removed_fn removed);

/* wake_ops.c */
extern const act_pipeline_ops act_wake_ops;
/* Frees a wake's state (the pipeline calls it when the wake ends). */
void act_wake_state_free(void *state);

/* recovery.c: first scan what the previous daemon left (before the hosts'
 * sockets are bound, so a socket still held by a surviving generation can be
 * taken back), then resume or retire each leftover. */
int act_recovery_scan(act_daemon *daemon, act_error *err);
int act_recovery_take_socket(act_daemon *daemon, const char *host, unsigned index,
                             const act_listen_address *address);
/* Never fails: what cannot be proven stopped leaves its host refusing wakes
 * (unproven_stop), and the daemon serves the others. */
void act_recover(act_daemon *daemon);
void act_recovery_discard(act_daemon *daemon);

/* claim_watch.c */
int act_claim_watch_start(act_daemon *daemon, act_error *err);

/* dispatch.c */
void act_dispatch(const act_request *request, act_control_reply *reply, void *userdata);
/* A release/ error as a reply, with the code it stands for. */
void act_reply_release_error(act_control_reply *reply, int r, const act_error *err);

/* stage.c: stages (and promotes, when asked) on a worker; replies when done. */
void act_stage_start(act_daemon_host *host, const act_request *request, act_control_reply *reply);

/* telemetry.c: the metrics registry and its HTTP server (MetricsListen=). */
int act_telemetry_open(act_daemon *daemon, act_control_observe_fn *observe, act_error *err);
void act_telemetry_close(act_daemon *daemon);
void act_telemetry_wake_event(act_daemon_host *host, const act_wake_event *event);

/* swap.c: activatorctl swap. */
void act_swap_start(act_daemon_host *host, const act_request *request, act_control_reply *reply);
/* The host parked: a stop-first swap now starts its pinned generation. */
void act_swap_host_parked(act_daemon_host *host);

/* dispatch.c: the status object of one host, as control replies carry it. */
json_object *act_host_status_json(act_daemon_host *host);

/* announce.c */
void act_announce(act_host *pipeline, const act_wake_event *event, void *userdata);
void act_publish(act_daemon_host *host, act_event_kind kind, const act_generation *gen,
                 const char *reason);

/* The daemon's own clock for generations' timings. */
uint64_t act_daemon_now(const act_daemon *daemon);
