/* The field readers of json_fields.h, on json-c. */
#include "common/json_fields.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *act_json_type_phrase(json_type type)
{
    switch (type) {
    case json_type_null:
        return "null";
    case json_type_boolean:
        return "a boolean";
    case json_type_double:
    case json_type_int:
        return "a number";
    case json_type_object:
        return "an object";
    case json_type_array:
        return "an array";
    case json_type_string:
        return "a string";
    }
    return "an unknown type";
}

__attribute__((format(printf, 3, 0))) static int
field_verror(const act_json_reader *rd, const char *key, const char *fmt, va_list ap)
{
    char what[256];
    vsnprintf(what, sizeof(what), fmt, ap);
    bool nested = rd->parent && rd->parent[0];
    const char *quote = rd->quote ? "\"" : "";
    return act_error_set(rd->err, rd->errnum > 0 ? rd->errnum : EINVAL, "%sfield %s%s%s%s%s %s%s%s",
                         rd->prefix ? rd->prefix : "", quote, nested ? rd->parent : "",
                         nested ? "." : "", key, quote, what, rd->advice ? "; " : "",
                         rd->advice ? rd->advice : "");
}

int act_json_field_error(const act_json_reader *rd, const char *key, const char *fmt, ...)
{
    assert(rd && key && fmt);
    va_list ap;
    va_start(ap, fmt);
    int r = field_verror(rd, key, fmt, ap);
    va_end(ap);
    return r;
}

int act_json_get_member(const act_json_reader *rd, json_object *obj, const char *key,
                        json_type type, act_json_need need, json_object **out)
{
    assert(rd && obj && key && out);
    *out = NULL;
    json_object *member = NULL;
    if (!json_object_object_get_ex(obj, key, &member) || !member)
        return need == ACT_JSON_REQUIRED ? act_json_field_error(rd, key, "is missing") : 0;
    if (!json_object_is_type(member, type))
        /* A count is wanted whole, though JSON calls any number a number. */
        return act_json_field_error(rd, key, "must be %s, it is %s",
                                    type == json_type_int ? "an integer"
                                                          : act_json_type_phrase(type),
                                    act_json_type_phrase(json_object_get_type(member)));
    *out = member;
    return 0;
}

int act_json_get_string(const act_json_reader *rd, json_object *obj, const char *key,
                        act_json_need need, char *buf, size_t size)
{
    assert(buf && size > 0);
    json_object *member;
    int r = act_json_get_member(rd, obj, key, json_type_string, need, &member);
    if (r < 0 || !member)
        return r;
    const char *s = json_object_get_string(member);
    size_t len = (size_t)json_object_get_string_len(member);
    if (len >= size)
        return act_json_field_error(rd, key, "is longer than %zu bytes", size - 1);
    if (memchr(s, '\0', len))
        return act_json_field_error(rd, key, "holds a NUL byte");
    memcpy(buf, s, len + 1);
    return 0;
}

int act_json_get_u64(const act_json_reader *rd, json_object *obj, const char *key,
                     act_json_need need, uint64_t *out)
{
    assert(out);
    json_object *member;
    int r = act_json_get_member(rd, obj, key, json_type_int, need, &member);
    if (r < 0 || !member)
        return r;
    /* json-c keeps values above INT64_MAX as unsigned, where get_int64
     * clamps to INT64_MAX; only a really negative number reads below zero. */
    if (json_object_get_int64(member) < 0)
        return act_json_field_error(rd, key, "is negative");
    *out = json_object_get_uint64(member);
    return 0;
}

json_object *act_json_find(json_object *obj, const char *key, json_type type)
{
    json_object *member = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &member) || !json_object_is_type(member, type))
        return NULL;
    return member;
}

const char *act_json_string_or(json_object *obj, const char *key, const char *fallback)
{
    json_object *member = act_json_find(obj, key, json_type_string);
    return member ? json_object_get_string(member) : fallback;
}

uint64_t act_json_u64_or(json_object *obj, const char *key, uint64_t fallback)
{
    json_object *member = act_json_find(obj, key, json_type_int);
    return member && json_object_get_int64(member) >= 0 ? json_object_get_uint64(member) : fallback;
}

bool act_json_bool_or(json_object *obj, const char *key, bool fallback)
{
    json_object *member = act_json_find(obj, key, json_type_boolean);
    return member ? json_object_get_boolean(member) : fallback;
}
