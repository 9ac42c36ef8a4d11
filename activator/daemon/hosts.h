/* The host table, and the one place where a host's transitions change what
 * the daemon does next. */
#pragma once

#include "activator/daemon/host.h"

/* Sets up a host for every loaded host file: its sockets bound (taken back
 * from systemd's FD store or from a generation that outlived the previous
 * daemon when they are still there), its pipeline, and its sockets watched
 * for demand. A host that cannot be set up is logged and left out. */
int act_hosts_setup(act_daemon *daemon, act_error *err);
/* Frees every host; nothing of theirs may be in flight. */
void act_hosts_teardown(act_daemon *daemon);
act_daemon_host *act_hosts_find(act_daemon *daemon, const char *name);

/* A host at rest: parked, with no generation and no wake. */
bool act_hosts_at_rest(const act_daemon_host *host);

/* Accepts and closes the connections waiting on a host's sockets. */
void act_hosts_drain_backlog(act_daemon_host *host);
