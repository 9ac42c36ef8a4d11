/* The host table, and the one place where a host's transitions change what
 * the daemon does next. */
#pragma once

#include "activator/daemon/host.h"

/* Sets up a host for every loaded host file: its sockets bound (taken back
 * from systemd's FD store or from a generation that outlived the previous
 * daemon when they are still there), its pipeline, and its sockets watched
 * for demand. A host that cannot be set up is logged and left out. */
int ad_hosts_setup(ad_daemon *daemon, act_error *err);
/* Frees every host; nothing of theirs may be in flight. */
void ad_hosts_teardown(ad_daemon *daemon);
ad_host *ad_hosts_find(ad_daemon *daemon, const char *name);

/* The daemon hands over to its successor: nothing is watched any more (the
 * next daemon watches the sockets), and every listening socket is put in
 * the FD store again, so none is missing there. Returns how many hosts have
 * a serving generation, which keeps running. */
size_t ad_hosts_hand_over(ad_daemon *daemon);

/* A host at rest: parked, with no generation and no wake. */
bool ad_hosts_at_rest(const ad_host *host);

/* Accepts and closes the connections waiting on a host's sockets. */
void ad_hosts_drain_backlog(ad_host *host);
