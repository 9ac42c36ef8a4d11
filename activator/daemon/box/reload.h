/* Reload: `systemctl reload activatord` (ExecReload= runs `activatorctl
 * reload`), `activatorctl reload` and SIGHUP all apply the configuration
 * files again in place, or, if anything in them is wrong, change nothing
 * and report every problem. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host/context.h"

/* Reads and checks the daemon's file and every host file, then applies
 * them. reply (NULL for SIGHUP) gets what changed, or every problem. A
 * reload asked for while one runs follows it, so that it reads the files
 * as they are after the asking. */
void ad_reload(ad_daemon *daemon, ctrl_reply *reply);

/* What the last reload did, for STATUS=: "" before the first. */
const char *ad_reload_summary(const ad_daemon *daemon);

/* Frees the reload state; the offload must be freed first (a reload
 * reading the files is then ended without an answer). */
void ad_reload_free(ad_daemon *daemon);
