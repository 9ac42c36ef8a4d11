/* Control requests, already validated by activator/control/, turned into
 * actions on the daemon. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host/context.h"

/* The control server's dispatch callback (userdata: the daemon). */
void ad_dispatch(const ctrl_request *request, ctrl_reply *reply, void *userdata);
