/* Staging builds for control requests, off the loop. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host.h"

/* Stages (and promotes, when asked) on a worker; replies when done. */
void act_stage_start(act_daemon_host *host, const act_request *request, act_control_reply *reply);

/* A release/ error as a reply, with the code it stands for. */
void act_reply_release_error(act_control_reply *reply, int r, const act_error *err);
