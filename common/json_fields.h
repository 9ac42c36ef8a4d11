/* The fields of JSON objects: the ways every reply and status object adds
 * one, and the ways every parser reads one back. The writers are inline and
 * the readers live in json_fields.c, its own library (json_fields_dep), so
 * that common/ itself does not link json-c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/error.h"

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

/* ---- strict readers -------------------------------------------------------
 *
 * For a file or a value that must be exactly what was written: a field that
 * is missing (or null), of another type, negative where a count is wanted,
 * longer than its buffer or holding a NUL byte is an error that names it,
 * in the parser's words:
 *   <prefix>field <parent>.<key> must be a string, it is an integer[; <advice>]
 * e.g. "manifest /x/manifest.json: field files[2].size is negative" or
 * "host web1: claim field holder.box is missing; fix or rewrite the claim".
 * A reader is a value: a nested object is read with a copy that names its
 * parent. */
typedef struct act_json_reader {
    const char *prefix; /* before "field": "manifest /x/manifest.json: " */
    const char *parent; /* names the fields "parent.key": "holder", "files[2]"; NULL: none */
    const char *advice; /* after "; " at the end: "restage the version"; NULL: none */
    bool quote;         /* names the field in double quotes: field "session" */
    int errnum;         /* of every error: EINVAL, EBADMSG, ... */
    act_error *err;
} act_json_reader;

typedef enum act_json_need {
    ACT_JSON_OPTIONAL, /* absent (or null): 0, and the output is left as it was */
    ACT_JSON_REQUIRED, /* absent (or null): an error */
} act_json_need;

/* The member key of obj, of type; *out NULL when an optional one is absent. */
int act_json_get_member(const act_json_reader *rd, json_object *obj, const char *key,
                        json_type type, act_json_need need, json_object **out);
/* A string into buf, NUL-terminated; refused when it does not fit. */
int act_json_get_string(const act_json_reader *rd, json_object *obj, const char *key,
                        act_json_need need, char *buf, size_t size);
/* A whole number of 0 or more. */
int act_json_get_u64(const act_json_reader *rd, json_object *obj, const char *key,
                     act_json_need need, uint64_t *out);

/* A JSON type as a client would say it: "a string", "a number" (an integer
 * too), "null". */
const char *act_json_type_phrase(json_type type);

/* Fails naming key in the reader's words, for what the parser checks
 * itself: act_json_field_error(rd, "exec_path", "is not a valid path"). */
int act_json_field_error(const act_json_reader *rd, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- lenient readers ------------------------------------------------------
 *
 * For what only informs (a sidecar, a reply shown to a person): the value
 * when the member is there with the right type, fallback otherwise. */
/* The member key of obj (which may be NULL) when it has type, else NULL. */
json_object *act_json_find(json_object *obj, const char *key, json_type type);
const char *act_json_string_or(json_object *obj, const char *key, const char *fallback);
/* A whole number of 0 or more; fallback for a negative one too. */
uint64_t act_json_u64_or(json_object *obj, const char *key, uint64_t fallback);
bool act_json_bool_or(json_object *obj, const char *key, bool fallback);
