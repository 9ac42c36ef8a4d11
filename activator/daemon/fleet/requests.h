/* The fleet ops on claims and boxes, through this box's daemon. */
#pragma once

#include "activator/control/control.h"
#include "activator/control/fleet.h"
#include "activator/daemon/host/context.h"

/* Answers a fleet op (ctrl_fleet_is_fleet_op) through reply, once the
 * store calls it needs have answered. */
void ad_fleet_request(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply);

/* Sends what fleet.c decided (a result, taken, or a refusal) as reply. */
void ad_fleet_reply(ctrl_reply *reply, ctrl_fleet_outcome *outcome);
