/* Staging builds for control requests, and listing them, off the loop. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host/host.h"
#include "activator/daemon/builds/promote.h"

/* Stages (and promotes, when asked) on a worker; replies when done. */
void ad_stage_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply);

/* Lists host's staged versions on a worker; replies when done. */
void ad_releases_start(ad_host *host, ctrl_reply *reply);
