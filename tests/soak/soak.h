/* The chaos soak: a small fleet on this machine (a real etcd,
 * real activatord boxes with their own directories and cgroup roots, a
 * dozen hosts of different kinds on every box), open-loop clients at a fixed
 * rate, faults chosen at random from a printed seed, and the invariants
 * checked all along and at the end.
 *
 * The files, one job each:
 *   soak_main.c        the command line, the run's phases, the end
 *   soak_fleet.c       the fleet, its hosts and their builds
 *   soak_links.c       the control and event sockets to every box, open all run
 *   soak_clients.c     the clients, the router they ask, the fault windows
 *   soak_faults.c      the faults and their log
 *   soak_invariants.c  the checks: sampled continuously, at lulls, at the end
 *   soak_history.c     what was seen of each host lately, for a break's report
 *   soak_report.c      what is printed
 *
 * Nothing here decides by sleeping for an exact instant: faults land at
 * random times (which is the point), and the only thing timing decides is
 * how long a fault's window stays open once the fault is over (until the
 * host has answered again, at most SOAK_RECOVERY_MS). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tests/fleet/fleet.h"
#include "tests/image/registry_harness.h"

#include <nng/nng.h>

#define SOAK_HOSTS_MAX 16
#define SOAK_BOXES_DEFAULT 3
/* How long a host may take to answer again once the fault that broke it is
 * over: a restarted daemon's recovery, a failure park's backoff, a wake. */
#define SOAK_RECOVERY_MS 10000
/* A client request's bound: a cold wake with a slow ready is well inside it. */
#define SOAK_REQUEST_TIMEOUT_MS 5000
/* The faults remembered for the report of a broken invariant. */
#define SOAK_FAULT_LOG 32
/* The lines of each history a host keeps (soak_history.c). */
#define SOAK_HISTORY 10

/* ---- history: what was seen of a host lately ---- */

typedef struct soak_seen {
    uint64_t at_ms; /* soak_now_ms() */
    char what[176];
} soak_seen;

/* The last SOAK_HISTORY lines, oldest overwritten first. */
typedef struct soak_history {
    soak_seen lines[SOAK_HISTORY];
    unsigned added;
} soak_history;

/* ---- hosts ---- */

typedef enum soak_host_kind {
    SOAK_PLAIN,     /* socket-activated, never idle-parked in a run */
    SOAK_IDLE,      /* IdleTimeoutSec=1: parked between most requests */
    SOAK_LIMITS,    /* [Limits] MemoryMax=, PidsMax=, changed by reloads */
    SOAK_CRASHLOOP, /* crashes 600 ms after each start: a fault it declares itself */
    SOAK_COUNTER,   /* --counter: state that must never go backwards */
    SOAK_STUBBORN,  /* --ignore-sigterm: every retirement waits StopTimeoutSec, then kills */
    SOAK_SLOW,      /* --ready-delay-ms 400 */
    SOAK_WATCHDOG,  /* WatchdogSec=2s */
} soak_host_kind;

typedef struct soak_host {
    char name[32];
    soak_host_kind kind;
    int port;
    unsigned interval_ms;  /* the client's fixed period */
    unsigned next_variant; /* the next good build's number (v2, v3, ...) */

    /* The box index the claim names as executor, as the router last read
     * it (-1 before the first read). */
    atomic_int route;

    /* A swap of this host is in flight (from the request until its reply,
     * then for SOAK_SWAP_TAIL_MS while N retires): two generations of it on
     * one box are allowed only then. */
    atomic_int swaps_in_flight;
    atomic_uint_fast64_t swap_tail_until_ms;

    /* Fault windows (soak_clients.c), under the lock. */
    pthread_mutex_t lock;
    struct soak_window *windows;
    size_t n_windows, cap_windows;

    /* The client's view. */
    long last_counter;
    unsigned requests, answered, failed;

    /* What was seen of it lately (soak_history.c), under soak.history_lock:
     * each box's events, the claim's revisions as the router read them,
     * and the populated leaves as the sampler read them on each box. */
    soak_history events[FL_BOXES_MAX];
    soak_history claims;
    soak_history leaves[FL_BOXES_MAX];
    /* The kernel's TCP sockets on the host's port (listeners with their
     * accept queues, connections with their states), read when a request
     * failed with no fault window open on it. */
    soak_history sockets;
    uint64_t claim_revision_seen;
    char leaves_seen[FL_BOXES_MAX][96];
    bool failover; /* Failover=yes: a dead or cut-off box's other boxes take it */
} soak_host;

/* ---- links: the soak's own sockets to a box (soak_links.c) ---- */

typedef struct soak_link {
    nng_socket req, sub;
    bool req_open, sub_open;
    /* The REQ socket stopped reaching its box while a fresh socket did:
     * every later request to the box goes on a fresh socket. */
    atomic_bool stuck;
    uint64_t stuck_at_ms;
    pthread_t events_thread;
    bool events_running;
} soak_link;

/* ---- faults ---- */

typedef enum soak_fault_kind {
    F_WAKE,
    F_PARK,
    F_SWAP_GOOD,
    F_SWAP_BAD,
    F_STAGE_PROMOTE,
    F_ASSIGN,
    F_MOVE,
    F_KILL_DAEMON,
    F_HANDOVER,
    F_KILL_APP,
    F_STUBBORN_RETIRE,
    F_ETCD_STOP,
    F_ETCD_COMPACT,
    F_BAD_REQUESTS,
    F_RELOAD,
    F_FREEZE_PARK,   /* activatorctl freeze: the next connection thaws it */
    F_REGISTRY_STOP, /* the checkpoints' registry stopped, a move tried meanwhile */
    F_POWER_CUT,     /* a box's daemon and every process of its root killed, the box kept down */
    F_PARTITION,     /* the proxied box cut off from etcd for a while */
    F_DRAIN,         /* activatorctl drain of a box, then undrain */
    F__COUNT,
} soak_fault_kind;

/* A stretch of time in which a fault may make a host's requests fail. Open
 * (end_ms 0) while the fault is being made; once it is over, it stays open
 * until the host answers a request begun after end_ms, or SOAK_RECOVERY_MS. */
typedef struct soak_window {
    unsigned fault_id;
    soak_fault_kind kind;
    /* The box whose answer ends the window (-1: any box's). An answer of
     * the box a host is leaving says nothing of the one it goes to. */
    int recover_on;
    uint64_t start_ms, end_ms, recovered_ms;
} soak_window;

typedef struct soak_fault_record {
    unsigned id;
    soak_fault_kind kind;
    uint64_t at_ms; /* since the run began */
    char what[160];
} soak_fault_record;

/* ---- invariants ---- */

typedef enum soak_invariant {
    I_ONE_BOX,        /* never two boxes with a generation of one host */
    I_ONE_GENERATION, /* within a box, two generations only during a swap */
    I_IN_LEAVES,      /* no process outside the generation leaves (and the daemon's own) */
    I_LEAVES_KNOWN,   /* every populated leaf is the generation its daemon names */
    I_CLAIM_TRUE,     /* the claim names the box that serves (once settled) */
    I_COUNTER,        /* a stateful host's counter never goes backwards */
    I_FAILURES,       /* every failed request falls in a fault's window */
    I_REASONS,        /* every refusal has a code and a message */
    I_DAEMONS_ALIVE,  /* no daemon dies but those the soak kills */
    I_BASELINE,       /* fds and RSS back to their baseline once the faults stop */
    I_CLEAN_STOP,     /* every daemon stops cleanly and leaves nothing */
    I_TAKEN_OVER,     /* a dead box's failover hosts are claimed by a live box */
    I__COUNT,
} soak_invariant;

typedef struct soak_invariant_tally {
    atomic_uint_fast64_t checked, broken;
} soak_invariant_tally;

/* ---- the run ---- */

typedef struct soak {
    uint64_t seed;
    uint64_t rng;
    uint64_t duration_ms;
    size_t n_boxes;
    uint64_t start_ms;

    fl_fleet fleet;
    soak_link links[FL_BOXES_MAX];
    atomic_bool stop_events;
    char checkpoints[64];
    /* Where the moves' checkpoints go: a registry (Checkpoints=docker://)
     * when docker-registry is installed, else the checkpoints directory. */
    reg_harness registry;
    bool through_registry;
    claim_store *router_store; /* the router's own client of the store */

    soak_host hosts[SOAK_HOSTS_MAX];
    size_t n_hosts;

    /* Faults. */
    unsigned faults_made;
    unsigned fault_counts[F__COUNT];
    bool fault_off[F__COUNT]; /* left out by --only */
    /* --undeclared: the self-test. This fault's windows are not opened, so
     * the failures it makes are unexplained and must break I_FAILURES. */
    int undeclared; /* a soak_fault_kind, or -1 */
    soak_invariant first_broken;
    soak_fault_record fault_log[SOAK_FAULT_LOG];
    unsigned next_fault_id;
    atomic_bool daemon_down[FL_BOXES_MAX]; /* the soak stopped it on purpose */
    atomic_bool etcd_down;

    /* Invariants. */
    soak_invariant_tally tally[I__COUNT];
    atomic_bool broken;
    pthread_mutex_t broken_lock;
    char broken_what[2048];
    const soak_host *broken_host; /* the host the first break is about, or NULL */
    pthread_mutex_t history_lock;

    /* Failures by the fault kind whose window explained them, and why. */
    pthread_mutex_t failures_lock;
    unsigned failures_by_kind[F__COUNT];
    unsigned failures_declared;   /* the crash-looping host's own */
    char failure_reasons[8][96];
    unsigned failure_reason_counts[8];

    /* Baseline of each daemon, taken with every host parked. */
    long baseline_fds[FL_BOXES_MAX], baseline_rss_kib[FL_BOXES_MAX];
    long end_fds[FL_BOXES_MAX], end_rss_kib[FL_BOXES_MAX];
    long baseline_other_fds[FL_BOXES_MAX];
    long end_store_fds[FL_BOXES_MAX], end_host_dir_fds[FL_BOXES_MAX];
    char end_host_dir_names[FL_BOXES_MAX][256];
    char baseline_fd_kinds[FL_BOXES_MAX][1024];
    /* Lulls that found a host parked everywhere with a claim in phase
     * serving (a park's write-back lost to a store outage). */
    unsigned stale_serving_claims;

    /* Threads. */
    atomic_bool stop_clients, stop_sampler, stop_router;
    bool clients_running, sampler_running, router_running;
    pthread_t client_threads[SOAK_HOSTS_MAX], sampler_thread, router_thread;
} soak;

/* soak_main.c */
uint64_t soak_now_ms(void);
uint64_t soak_random(soak *s);                   /* xorshift64* from the seed */
uint64_t soak_random_below(soak *s, uint64_t n); /* 0..n-1 */

/* soak_fleet.c */
int soak_fleet_setup(soak *s);
const char *soak_host_kind_name(soak_host_kind kind);
/* Stages the next good build of host on every box (not promoted): its version. */
void soak_stage_good(soak *s, soak_host *host, char *version, size_t size);
/* Stages the crashing build (/bin/false behind the host's Exec= name). */
void soak_stage_bad(soak *s, soak_host *host, char *version, size_t size);
/* Restarts box index's daemon after the soak stopped it. */
int soak_restart_daemon(soak *s, size_t index);
/* A control request to box index (on its link); the reply (caller puts
 * it) or NULL when the daemon did not answer. Refusals are checked for a
 * reason here. */
json_object *soak_request(soak *s, size_t index, int timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void soak_fleet_teardown(soak *s, bool keep_logs);

/* soak_links.c */
/* Opens every box's request socket and subscriber and starts reading the
 * events; they redial by themselves when a box restarts. */
int soak_links_open(soak *s);
/* Closes them, while the daemons still run (an NNG 1.5.2 close that meets
 * a redial can hang). */
void soak_links_close(soak *s);
/* One request on box's link: 0 with *reply malloc'd (NUL-terminated), or
 * the NNG error. */
int soak_link_request(soak *s, size_t box, int timeout_ms, const char *body, size_t len,
                      char **reply);

/* soak_history.c */
void soak_history_add(soak *s, soak_history *history, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An event of box's daemon, into its host's history. */
void soak_history_event(soak *s, size_t box, const dd_event *event);
/* The claim of h as the router read it, when its revision is new. */
void soak_history_claim(soak *s, soak_host *h, const claim *c);
/* The populated leaves of h on box as the sampler read them ("g-4 g-5",
 * "" for none), when they changed. */
void soak_history_leaves(soak *s, soak_host *h, size_t box, const char *leaves);
/* Everything the soak saw of h lately, and its leaves now, on stdout. */
/* Adds to h's history what /proc/net/tcp says of the sockets on port of
 * the box at address: a line each, with state, queues, uid and inode. */
void soak_history_sockets(soak *s, soak_host *h, const char *address, int port);
void soak_history_print(soak *s, const soak_host *h);

/* soak_clients.c */
void soak_clients_start(soak *s);
void soak_clients_stop(soak *s);
void soak_router_start(soak *s);
void soak_router_stop(soak *s);
/* Opens a window on host (or every host with host NULL; every host routed
 * to box with box >= 0) that only an answer from recover_on (-1: any box)
 * ends once the fault is over; the fault id closes it. */
void soak_window_open(soak *s, soak_host *host, int box, int recover_on, unsigned fault_id,
                      soak_fault_kind kind);
void soak_window_close(soak *s, unsigned fault_id);
/* The swap of h in flight was answered: it is no longer in flight. */
void soak_swap_answered(soak_host *h);

/* soak_faults.c */
const char *soak_fault_name(soak_fault_kind kind);
/* --only wake,park,...: only these faults; -1 (and a message) for a name
 * that is none. */
int soak_faults_only(soak *s, const char *list);
/* The fault named token (as --only names them), or -1. */
int soak_fault_by_token(const char *token);
void soak_fault_one(soak *s);
void soak_fault_log_print(const soak *s);

/* soak_invariants.c */
const char *soak_invariant_name(soak_invariant inv);
void soak_check(soak *s, soak_invariant inv, bool held, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for a check about one host: a break's report shows what the
 * soak saw of it. */
void soak_check_host(soak *s, soak_invariant inv, const soak_host *h, bool held, const char *fmt,
                     ...) __attribute__((format(printf, 5, 6)));
void soak_sampler_start(soak *s);
void soak_sampler_stop(soak *s);
/* Waits (bounded) for every host to be at rest or serving, then checks
 * what only holds then: leaves known, claims true, app pids in leaves. */
void soak_check_settled(soak *s, const char *when);
/* Parks every host and records (baseline) or compares (end) fds and RSS. */
void soak_measure_baseline(soak *s, bool at_end);
/* Stops every daemon cleanly and checks that nothing is left. */
void soak_check_clean_stop(soak *s);

/* soak_report.c */
void soak_report(const soak *s);
void soak_report_broken(soak *s);
