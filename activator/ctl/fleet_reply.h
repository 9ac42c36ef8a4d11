/* What activatorctl's multi-step fleet commands (move, drain) share: the
 * requests they make of a daemon or the store, and the reading of the
 * claims and results they answer with. */
#pragma once

#include <stdint.h>

#include <json-c/json.h>

/* What object holds at a, or at a.b when b is not NULL: "" or 0 when it
 * is not there. */
const char *ctl_json_str_at(json_object *object, const char *a, const char *b);
uint64_t ctl_json_u64_at(json_object *object, const char *a, const char *b);

/* A request of op, for host when host is not NULL. */
json_object *ctl_fleet_request(const char *op, const char *host);

/* The result of a successful reply, or NULL after printing the refusal
 * ("activatorctl: WHAT: MESSAGE [CODE]") with *code set to its code. */
json_object *ctl_fleet_result(json_object *reply, const char *what, const char **code);
