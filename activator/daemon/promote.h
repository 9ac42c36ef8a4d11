/* `activatorctl promote HOST VERSION`, off the loop, and what it does to the
 * claim's pin: a promote of a version clears a pin that names another, so
 * the next start runs the promoted build (when this box runs the host). */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host.h"

/* Verifies and promotes on a release worker, then clears a pin naming
 * another version, then answers reply, then collects old builds. */
void ad_promote_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply);
