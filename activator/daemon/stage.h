/* Staging builds for control requests, off the loop. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host.h"

/* Stages (and promotes, when asked) on a worker; replies when done. */
void ad_stage_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply);

/* A release/ error as a reply, with the code it stands for. */
void ad_reply_release_error(ctrl_reply *reply, int r, const act_error *err);
