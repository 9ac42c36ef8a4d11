#include "activator/ctl/fleet_reply.h"

#include <stdio.h>

#include "activator/control/request.h"
#include "common/json_fields.h"

static json_object *inner(json_object *object, const char *a, const char *b)
{
    return b ? act_json_find(object, a, json_type_object) : object;
}

const char *ctl_json_str_at(json_object *object, const char *a, const char *b)
{
    return act_json_string_or(inner(object, a, b), b ? b : a, "");
}

uint64_t ctl_json_u64_at(json_object *object, const char *a, const char *b)
{
    return act_json_u64_or(inner(object, a, b), b ? b : a, 0);
}

json_object *ctl_fleet_request(const char *op, const char *host)
{
    json_object *request = json_object_new_object();
    json_object_object_add(request, "v", json_object_new_int(CTRL_PROTOCOL_VERSION));
    json_object_object_add(request, "op", json_object_new_string(op));
    if (host)
        json_object_object_add(request, "host", json_object_new_string(host));
    return request;
}

json_object *ctl_fleet_result(json_object *reply, const char *what, const char **code)
{
    json_object *result = NULL, *error = NULL;
    if (act_json_bool_or(reply, "ok", false) && json_object_object_get_ex(reply, "result", &result))
        return result;
    json_object_object_get_ex(reply, "error", &error);
    *code = ctl_json_str_at(error, "code", NULL);
    fprintf(stderr, "activatorctl: %s: %s [%s]\n", what, ctl_json_str_at(error, "message", NULL),
            *code);
    return NULL;
}
