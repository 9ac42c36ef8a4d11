/* What the files of hosts/ share; nothing outside the room includes it.
 * The calls go one way: table.c sets up a host with its pipeline, whose
 * hook is transitions.c's, and with its sockets (sockets.c); transitions.c
 * watches the sockets for demand again through sockets.c; sockets.c calls
 * neither. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "activator/daemon/host/host.h"

/* ---- sockets.c ---------------------------------------------------------------- */

/* Sockets handed back by systemd's FD store after a restart, sorted by
 * name (then fd, the store's order): each of 10,000 hosts finds its own by
 * a binary search, not a walk of all of them. */
typedef struct ad_hosts_inherited_socket {
    char *name;
    int fd; /* -1 once taken */
} ad_hosts_inherited_socket;

typedef struct ad_hosts_inherited_fds {
    ad_hosts_inherited_socket *items;
    size_t n;
} ad_hosts_inherited_fds;

/* The sockets a start bound, for the FD store: offered in runs while the
 * hosts are set up, which the manager reads in parallel, and all stored
 * before READY=1. */
typedef struct ad_hosts_store_queue {
    char **names; /* the hosts' own listen names */
    int *fds;
    size_t n, cap;
    size_t stored; /* those before it are in the store */
} ad_hosts_store_queue;

/* What a start binds its hosts' sockets with: the sockets the FD store
 * handed back, and the queue of those bound since. */
typedef struct ad_hosts_binding {
    ad_hosts_inherited_fds inherited;
    ad_hosts_store_queue queue;
} ad_hosts_binding;

/* Collects the sockets the FD store handed back (none: an empty binding). */
void ad_hosts_binding_open(ad_hosts_binding *binding);
/* Gives each of the host's slots its socket: from the FD store, else from
 * a generation that outlived the previous daemon, else newly bound (and
 * queued for the FD store). On failure nothing of the host's stays queued:
 * its sockets close with it. */
int ad_hosts_bind_sockets(ad_hosts_binding *binding, ad_host *host, act_error *err);
/* Offers what is queued to the FD store once a run is there, without
 * waiting (after each host set up). */
void ad_hosts_binding_offer(ad_hosts_binding *binding);
/* Closes the handed back sockets no host took, and puts every queued one
 * in the FD store, waiting for each. */
void ad_hosts_binding_close(ad_hosts_binding *binding);

/* Watches the host's sockets for demand (a connection wakes a parked host),
 * or stops watching them. */
void ad_hosts_watch_demand(ad_host *host, bool watch);
/* Puts the host's bound sockets in systemd's FD store, by their names. */
void ad_hosts_store_fds(ad_host *host);
/* Takes the host's sockets out of the FD store, by their names. */
void ad_hosts_unstore_fds(ad_host *host);

/* ---- transitions.c ------------------------------------------------------------ */

/* The pipeline's hook (pl_host_new's), userdata the host: every transition
 * of every host comes here. */
void ad_hosts_on_transition(pl_host *pipeline, const pl_wake_event *event, void *userdata);
/* What a host's pipeline reads of its configuration and of the daemon's
 * budgets. */
void ad_hosts_pipeline_config(const ad_daemon *daemon, const cfg_host *config, pl_config *out);
/* The pipeline takes what it reads of the host's configuration in force
 * and of the daemon's budgets again. */
void ad_hosts_update_pipeline(ad_host *host);
/* Puts a host's pending settings in force if nothing of the old ones is in
 * use (at a wake from parked, or a reload's at rest). */
void ad_hosts_apply_pending(ad_host *host);
