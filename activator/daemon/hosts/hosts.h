/* The API of hosts/: the host table (table.c: set up, found, torn down,
 * and what a reload applies to it) and the hosts' listening sockets
 * (sockets.c: handed over, drained). The room also holds the pipeline's
 * transition hook (transitions.c), the one place where a host's
 * transitions change what the daemon does next; it needs no API here, as
 * every host set up here gets it. What the room's files share among
 * themselves is in internal.h. */
#pragma once

#include "activator/daemon/host/host.h"

/* ---- the table (table.c) --------------------------------------------------------- */

/* Sets up a host for every loaded host file (configs, n_configs sorted by
 * name; taken, each host owning its own): its sockets bound (taken back
 * from systemd's FD store or from a generation that outlived the previous
 * daemon when they are still there), its pipeline, and its sockets watched
 * for demand. A host that cannot be set up is logged and left out. */
int ad_hosts_setup(ad_daemon *daemon, cfg_host *configs, size_t n_configs, act_error *err);
/* Frees every host, those a reload removed included; nothing of theirs may
 * be in flight. */
void ad_hosts_teardown(ad_daemon *daemon);
ad_host *ad_hosts_find(ad_daemon *daemon, const char *name);

/* ---- the sockets (sockets.c) ----------------------------------------------------- */

/* The daemon hands over to its successor: nothing is watched any more (the
 * next daemon watches the sockets), and every listening socket is put in
 * the FD store again, so none is missing there. Returns how many hosts have
 * a serving generation, which keeps running. */
size_t ad_hosts_hand_over(ad_daemon *daemon);

/* Accepts and closes the connections waiting on a host's sockets. */
void ad_hosts_drain_backlog(ad_host *host);

/* ---- reload (box/reload.c decides what changes; table.c applies it) ------------- */

/* Room for adding and removing hosts, so that applying cannot fail. */
int ad_hosts_reserve(ad_daemon *daemon, size_t adding, size_t removing, act_error *err);
/* A host for settings (taken) with its pipeline, not yet in the table: its
 * sockets are the caller's to fill before it is inserted, or it is
 * discarded (a reload that was refused). */
int ad_hosts_prepare(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err);
void ad_hosts_discard(ad_host *host);
/* Puts a prepared host in the table (room reserved): its directory made,
 * its sockets put in the FD store and watched for demand. */
void ad_hosts_insert(ad_daemon *daemon, ad_host *host);
/* Takes a host out of the table into the removed ones (room reserved): its
 * sockets closed and out of the FD store, a wake in flight cancelled and
 * its generation retired with proof; its claim is left as it is. */
void ad_hosts_remove(ad_daemon *daemon, ad_host *host);
/* Whether every removed host is at rest (a clean stop waits for them). */
bool ad_hosts_removed_at_rest(const ad_daemon *daemon);
/* The last removed host of that name, or NULL. */
ad_host *ad_hosts_find_removed(ad_daemon *daemon, const char *name);
/* The host's sockets become those of loaded's [Listen], holding fds
 * (loaded->n_listen, taken on success: the kept sockets taken out of their
 * slots, and the new ones bound), with loaded's Backlog=; the FD store
 * follows, and a parked host's new sockets are watched. Sockets dropped
 * are closed. A running generation keeps the sockets it was given. */
int ad_hosts_rebind(ad_host *host, const cfg_host *loaded, int *fds, act_error *err);
/* The [Limits] values for the leaves made from here on, and written into
 * the running ones at once. Fails with the first leaf that refused. */
int ad_hosts_set_limits(ad_host *host, const cfg_limits *limits, act_error *err);
/* Settings (taken; NULL for none) for the host's next start: in force at
 * once when the host is at rest. Returns whether they are still pending. */
bool ad_hosts_set_pending(ad_host *host, ad_host_settings *settings);
/* Every host's pipeline takes the daemon's budgets again. */
void ad_hosts_update_budgets(ad_daemon *daemon);
