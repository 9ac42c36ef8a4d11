/* The box-wide context of activatord: the handles every part of the daemon
 * uses (the loop, the configuration, the claim store, the releases, the
 * cgroup root, the workers) and the host table. daemon.c sets it up and
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
typedef struct ad_leftovers ad_leftovers;
typedef struct ad_telemetry ad_telemetry;
typedef struct ad_box_lease ad_box_lease;

/* Told of every transition of every host, after the host's own reactions
 * (hosts.c); daemon.c uses it for STATUS= and to see a clean stop finish. */
typedef void (*ad_hosts_observer_fn)(ad_daemon *daemon, ad_host *host, const pl_wake_event *event);

struct ad_daemon {
    sd_event *loop;
    cfg_daemon config;
    cfg_host *host_configs; /* every host file that loaded, sorted by name */
    size_t n_host_configs;
    ad_host **hosts; /* the hosts set up (hosts.c), sorted by name */
    size_t n_hosts;
    ad_hosts_observer_fn observe_hosts;
    cg_seccomp_program *default_seccomp; /* SystemCallFilter=default, shared by hosts */
    char incarnation[33];            /* random per start */
    int state_dirfd;
    claim_store *store;
    act_offload *offload;            /* workers for durable writes and staging */
    rel_store *releases;
    cg_root *cgroups;
    pl_start_cap start_cap;
    ev_publisher *events;            /* NULL until the messaging is open */
    met_daemon_metrics *metrics;     /* the metric families; NULL until registered */
    struct rlimit nofile;            /* as we were started: what generations get */
    bool stopping;                   /* a clean stop began: nothing new starts */

    ad_claim_watch *claim_watch; /* claim_watch.c */
    ad_leftovers *leftovers;     /* leftovers.c, from start-up until recovery ran */
    ad_telemetry *telemetry;     /* telemetry.c */
    ad_box_lease *box_lease;     /* box_lease.c */
};

/* The loop's time of this iteration (CLOCK_MONOTONIC). */
static inline uint64_t ad_now(const ad_daemon *daemon)
{
    uint64_t now = 0;
    sd_event_now(daemon->loop, CLOCK_MONOTONIC, &now);
    return now;
}
