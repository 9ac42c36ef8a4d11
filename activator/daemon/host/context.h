/* The box-wide context of activatord: the handles every part of the daemon
 * uses (the loop, the configuration, the claim store, the releases, the
 * cgroup root, the workers) and the host table. box/daemon.c sets it up and
 * tears it down; every other file only reads these handles. State that
 * belongs to one part (the claim watch, the leftovers of a previous daemon,
 * the metrics server, the stop) lives behind that part's own pointer.
 *
 * Everything here is owned by the sd-event loop's thread. The workers of
 * `offload` run blocking file work from copies made on the loop and touch
 * nothing here. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <systemd/sd-event.h>

#include "activator/config/config.h"
#include "activator/events/events.h"
#include "activator/metrics/daemon_metrics.h"
#include "activator/pipeline/pipeline.h"
#include "cgroup/cgroup.h"
#include "claims/claims.h"
#include "common/offload.h"
#include "release/release.h"

typedef struct ad_daemon ad_daemon;
typedef struct ad_host ad_host;
typedef struct ad_claim_watch ad_claim_watch;
typedef struct ad_claim_wait ad_claim_wait;
typedef struct ad_leftovers ad_leftovers;
typedef struct ad_sweep ad_sweep;
typedef struct ad_telemetry ad_telemetry;
typedef struct ad_reload_state ad_reload_state;
typedef struct ad_dynamic_users ad_dynamic_users;
typedef struct ad_userdb ad_userdb;
typedef struct ad_pressure ad_pressure;

/* The daemon's starts and handovers on this box (box/lifetime.c keeps them in
 * <state>/daemon.json). */
typedef struct ad_lifetime {
    uint64_t starts;              /* this start included */
    uint64_t started_usec;        /* wall clock of this start */
    uint64_t last_handover_usec;  /* wall clock of the last handover; 0: none */
    uint64_t handovers;           /* handovers so far */
} ad_lifetime;

/* The claim store as the claim watch last found it. fleet/claim_watch.c is its
 * only writer; the wake's read and admit steps (wake/admit.c) refuse while it
 * is unavailable, and status shows it. */
typedef struct ad_store_state {
    bool unavailable;    /* the claims could not be listed again after the watch ended */
    uint64_t since_usec; /* wall clock: when it stopped answering */
    char last_error[512];
    char refusal[1024];  /* the sentence a refused wake gets */
} ad_store_state;

/* What the box (box/daemon.c) observes of its hosts, set once before the
 * hosts are set up. Observers only observe: they update STATUS= and see a
 * clean stop end; they change no host. Each is called after the reactions
 * to what it is told of are done. */
typedef struct ad_box_observers {
    /* Every transition of every host, last in hosts/transitions.c's hook. */
    void (*host_transition)(ad_daemon *daemon, ad_host *host, const pl_wake_event *event);
    /* The claim write-backs of a host ended (claim/write_backs.c), after
     * whoever waited for them went on: a clean stop waits for them. */
    void (*claim_reports_ended)(ad_daemon *daemon, ad_host *host);
} ad_box_observers;

struct ad_daemon {
    sd_event *loop;
    const char *config_path; /* the daemon's file, read again by a reload */
    cfg_daemon config;
    ad_host **hosts; /* the hosts set up (hosts/table.c), sorted by name; each owns its config */
    size_t n_hosts;
    size_t cap_hosts;
    /* Hosts a reload took out of the configuration (hosts/table.c): kept until
     * exit, because what they started may still call back with them (claim
     * calls, record writes, their retirement). */
    ad_host **removed_hosts;
    size_t n_removed_hosts;
    size_t cap_removed_hosts;
    const ad_box_observers *observers;   /* box/daemon.c's; NULL: none (no box, a unit test) */
    cg_seccomp_program *default_seccomp; /* the default SystemCallFilter=, shared by hosts */
    cg_fs_view *shared_fs_view;          /* of the hosts without ReadWritePaths= (host/host.c) */
    ad_dynamic_users *dynamic_users;     /* the uids of hosts without User= */
    ad_userdb *userdb;                   /* them in the box's user database; NULL: not */
    char incarnation[33];            /* random per start */
    int state_dirfd;
    claim_store *store;
    act_offload *offload;            /* workers for durable writes and prepare's hashing */
    struct record_write *record_writes_in_flight; /* generations/record_writes.c */
    struct prepare_job *prepares_in_flight;       /* wake/build_prepare.c */
    /* Workers for whole builds (stage, promote, a swap's verification, gc):
     * a large build hashed there never delays another host's wake, whose
     * record writes and prepare run on offload. */
    act_offload *release_work;
    rel_store *releases;
    cg_root *cgroups;
    struct ad_log_keeper *log_keeper; /* generations/log_keeper_link.c */
    pl_start_cap start_cap;
    ev_publisher *events;            /* NULL until the messaging is open */
    met_daemon_metrics *metrics;     /* the metric families; NULL until registered */
    bool stopping;                   /* a stop or handover began: nothing new starts */
    /* hosts/self_fence.c: the lease cannot be proven, so failover hosts are
     * fenced; its state. */
    bool fenced;
    struct ad_self_fence *self_fence;
    struct ad_takeover *takeover;    /* fleet/takeover.c: the dead boxes' failover hosts */
    struct ad_checkpoint_naming *namings; /* moves/checkpoint_naming.c: checkpoints being named */
    ad_lifetime lifetime;            /* this daemon's starts and handovers (box/lifetime.c) */
    ad_store_state store_state;      /* fleet/claim_watch.c */

    ad_claim_watch *claim_watch; /* fleet/claim_watch.c */
    ad_claim_wait *claim_waits;  /* fleet/claim_waits.c: the open claim.wait requests */
    unsigned n_claim_waits;
    ad_leftovers *leftovers;     /* generations/leftovers.c, from start-up until recovery ran */
    ad_sweep *sweep;             /* generations/sweep.c: leaves not proven stopped yet; NULL: none ever */
    ad_telemetry *telemetry;     /* box/telemetry.c */
    ad_reload_state *reload;     /* box/reload.c, from the first reload on */
    struct claims_box_lease *box_lease; /* fleet/box_lease.c */
    ad_pressure *pressure;       /* parking/pressure.c: the memory pressure trigger; NULL: none */
};
