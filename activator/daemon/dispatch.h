/* Control requests, already validated by activator/control/, turned into
 * actions on the daemon. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/context.h"

/* The control server's dispatch callback (userdata: the daemon). */
void act_dispatch(const act_request *request, act_control_reply *reply, void *userdata);
