/* The two ways every reply and status object adds a field. Header-only, so
 * that common/ itself does not link json-c; include it where json-c is. */
#pragma once

#include <stdint.h>

#include <json-c/json.h>

/* Adds key: value, leaving out a NULL or empty value. */
static inline void act_json_add_string(json_object *obj, const char *key, const char *value)
{
    if (value && value[0])
        json_object_object_add(obj, key, json_object_new_string(value));
}

static inline void act_json_add_u64(json_object *obj, const char *key, uint64_t value)
{
    json_object_object_add(obj, key, json_object_new_uint64(value));
}
