/* bench-fleet's simulated fleet: N boxes in one process, several to an
 * sd-event thread, each running this project's own claim code unchanged:
 * its etcd store client (claims/store_etcd.c), its box lease
 * (claims/box_lease.c), its view of its own claims (claims/box_view.c:
 * the index listed, watched, listed again when the watch ends), the claim
 * transitions (claims/claim_predicates.c, claims/claim_move.c) and a wake
 * pipeline per host (activator/pipeline). What is faked is what touches a
 * process: reserve, materialize, prepare, exec, ready and the retirement
 * are timers, and a generation "runs" from its exec to its retirement.
 *
 * The glue that calls the claim code from each step is the simulator's
 * own (sim_host.c): the daemon's adapters (activator/daemon/wake) are bound
 * to cgroups, records and a process per box. It makes the same store calls
 * in the same order: read, admit (compare-and-swap), gate (read again,
 * same admission), publish (compare-and-swap), the parked write-back, the
 * release, and a move's drain and probe.
 *
 * The truth (sim_truth.c) is kept from the writers, not from what the boxes
 * say they saw: every write the simulator makes is recorded with the boxes
 * its claim named before and after, so that each watch event a box
 * receives can be judged as concerning it or not, and every generation's
 * run is recorded so that two boxes running one host are caught. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "activator/pipeline/pipeline.h"
#include "claims/box_lease.h"
#include "claims/box_view.h"
#include "claims/claims.h"

typedef struct sim_fleet sim_fleet;
typedef struct sim_box sim_box;
typedef struct sim_host sim_host;

/* ---- the truth, from the writers (sim_truth.c) ------------------------------ */

typedef struct sim_truth sim_truth;

/* boxes and hosts are counted from 0; box i is named "b%04u", host j
 * "h%06u". */
sim_truth *sim_truth_new(unsigned n_boxes, unsigned n_hosts);
void sim_truth_free(sim_truth *truth);
/* A write of host's claim landed at revision, before and after as written. */
void sim_truth_wrote(sim_truth *truth, uint64_t revision, const claim *before, const claim *after);
/* Whether the write at revision named box (before or after it); -1 when the
 * simulator did not make (or did not hear back from) a write there. */
int sim_truth_names(sim_truth *truth, uint64_t revision, unsigned box);
/* How many recorded writes named box: what its watch owes it. */
uint64_t sim_truth_owed(sim_truth *truth, unsigned box);
/* A generation of host starts running on box, or stops. A start while
 * another box runs the host is a fencing violation, counted and said. */
void sim_truth_runs(sim_truth *truth, unsigned host, unsigned box);
void sim_truth_stops(sim_truth *truth, unsigned host, unsigned box);
uint64_t sim_truth_violations(sim_truth *truth);
uint64_t sim_truth_runs_started(sim_truth *truth);

/* ---- latency samples, shared by every thread ---------------------------------- */

typedef struct sim_samples {
    pthread_mutex_t lock;
    double *values;
    size_t n, cap;
} sim_samples;

void sim_samples_add(sim_samples *samples, double value);
/* Sorts and returns the q-quantile (0 for none). Not while adding. */
double sim_samples_quantile(sim_samples *samples, double q);

/* ---- the fleet ------------------------------------------------------------- */

typedef struct sim_config {
    unsigned n_boxes;
    unsigned hosts_per_box;
    unsigned threads;
    char store_url[512];
    double wakes_pct_per_min;    /* of a box's hosts, Poisson */
    double swaps_per_box_min;    /* swaps of a serving host */
    double moves_per_box_min;    /* moves of a parked host to another box */
    uint64_t idle_usec;          /* a serving host parks after this */
    uint64_t lease_usec;         /* BoxLeaseSec= */
    uint64_t watch_timeout_usec; /* StoreWatchTimeoutSec= */
} sim_config;

/* Counters a box's thread writes and the main thread reads. */
typedef struct sim_box_stats {
    _Atomic uint64_t events; /* watch events received */
    /* Judged against the truth a moment after they came (the writer may
     * hear back from its write after the watch told it): */
    _Atomic uint64_t events_judged;
    _Atomic uint64_t events_concerning; /* about a write that named this box */
    _Atomic uint64_t events_unknown;    /* about a write the truth does not know */
    _Atomic uint64_t watch_ends;
    _Atomic uint64_t last_watch_end_usec; /* CLOCK_MONOTONIC */
    _Atomic uint64_t heals_ok, heals_failed;
    _Atomic uint64_t last_heal_usec; /* CLOCK_MONOTONIC of the last heal that succeeded */
    _Atomic uint64_t wakes, wakes_skipped, swaps, moves;
    _Atomic uint64_t admissions, publications;
    _Atomic uint64_t refusals_store;    /* wakes refused: store unavailable or failing */
    _Atomic uint64_t last_refusal_usec; /* CLOCK_MONOTONIC of the last of them */
    _Atomic uint64_t refusals_other;
} sim_box_stats;

/* The phases whose latencies are kept apart. */
typedef enum sim_phase {
    SIM_STEADY,
    SIM_HEAL, /* from the member's restart on */
    _SIM_PHASE_MAX,
} sim_phase;

struct sim_fleet {
    sim_config config;
    sim_truth *truth;
    atomic_bool workload; /* wakes, swaps and moves are being made */
    _Atomic int phase;    /* sim_phase */
    sim_samples admission_usec[_SIM_PHASE_MAX], published_usec[_SIM_PHASE_MAX];
    /* Where an admission's time goes: the store's read and compare-and-swap
     * (from the call to its answer on the loop), and how late each
     * thread's loop runs what is due (a 10 ms timer's lateness). */
    sim_samples read_usec[_SIM_PHASE_MAX], cas_usec[_SIM_PHASE_MAX];
    sim_samples loop_lag_usec[_SIM_PHASE_MAX];
    /* Why watches ended, by phase: the first words of each reason. */
    pthread_mutex_t ends_lock;
    struct sim_end_reason {
        char reason[96];
        unsigned count[_SIM_PHASE_MAX];
    } end_reasons[16];
    size_t n_end_reasons;
    sim_box **boxes;
};

/* ---- a box (sim_box.c) ------------------------------------------------------ */

/* Opens the box's store on loop, puts its record under a lease and lists
 * its index (both without waiting), with its hosts [first, first + n)
 * parked. */
int sim_box_start(sim_fleet *fleet, unsigned index, sd_event *loop, sim_box **out, act_error *err);
/* Called every 100 ms on the box's loop: the workload's draws. */
void sim_box_tick(sim_box *box);
/* Stops renewing the box's lease: the fleet sees it die once the lease
 * lapses. Safe from any thread; takes effect at the next tick. */
void sim_box_abandon_lease(sim_box *box);
sim_box_stats *sim_box_stats_of(sim_box *box);
claim_store *sim_box_store(sim_box *box);
/* Whether the box's first list came back. */
bool sim_box_listed(sim_box *box);
void sim_box_free(sim_box *box);

/* What a host of a box needs of it (sim_host.c calls these). */
const char *sim_box_name(const sim_box *box);
unsigned sim_box_index(const sim_box *box);
const char *sim_box_incarnation(const sim_box *box);
sd_event *sim_box_loop(const sim_box *box);
sim_fleet *sim_box_fleet(const sim_box *box);
bool sim_box_store_unavailable(const sim_box *box);

/* ---- a host on a box (sim_host.c) ---------------------------------------------- */

int sim_host_new(sim_box *box, unsigned global, sim_host **out, act_error *err);
void sim_host_free(sim_host *host);
const char *sim_host_name(const sim_host *host);
/* Where the host's claim stands at the box's start, without the reactions
 * of a change (as the daemon's baseline: nothing wakes because of it). */
void sim_host_baseline(sim_host *host, const claim *c);
/* The claim changed (a watch event, or a heal's list standing for one). */
void sim_host_claim_changed(sim_host *host, const claim_change *change);
/* The workload: a connection, a swap, a move to box to. Return true when
 * the host could take it. */
bool sim_host_connect(sim_host *host);
bool sim_host_swap(sim_host *host);
bool sim_host_move(sim_host *host, const char *to);
