/* `activatorctl promote HOST VERSION`, off the loop, and what it does to the
 * claim's pin: a promote of a version clears a pin that names another, so
 * the next start runs the promoted build (when this box runs the host). */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host/host.h"

/* A release/ error as a reply, with the code it stands for. */
void ad_reply_release_error(ctrl_reply *reply, int r, const act_error *err);

/* Verifies and promotes on a release worker, then clears a pin naming
 * another version, then answers reply, then collects old builds. */
void ad_promote_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply);

/* What follows a build made live (a promote, or a stage with --promote):
 * a pin naming another version cleared, then reply answered with result
 * (taken; "unpinned" or "pin" added when the pin was cleared or kept), then
 * old builds collected. */
void ad_promote_settle(ad_host *host, const char *version, json_object *result,
                       ctrl_reply *reply);
