/* activatorctl --store: the fleet ops against the claim store itself. */
#pragma once

#include <json-c/json.h>

#include "activator/ctl/client.h"
#include "claims/claims.h"

/* Runs request (the JSON a daemon would get; a fleet op,
 * ctrl_fleet_is_fleet_op) against options->store_url and makes *reply the
 * reply a daemon would give. Returns CTL_EXIT_OK with *reply set (a refusal
 * included), CTL_EXIT_UNREACHABLE with *reply set when the store failed, or
 * CTL_EXIT_USAGE after printing why (a request no daemon would take, a
 * store URL that is not one). */
int ctl_store_call(const ctl_options *options, json_object *request, json_object **reply);

/* Opens options->store_url with the --store-* options into *out. Returns
 * CTL_EXIT_OK, or CTL_EXIT_USAGE after printing why. */
int ctl_store_open(const ctl_options *options, claim_store **out);
