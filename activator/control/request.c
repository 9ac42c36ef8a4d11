#include "activator/control/request.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/json_fields.h"

const char *ctrl_swap_mode_name(ctrl_swap_mode mode)
{
    const ctrl_field_spec *field = ctrl_field_spec_of(CTRL_FIELD_MODE);
    return field->choices[mode == CTRL_SWAP_STOP_FIRST ? CTRL_SWAP_STOP_FIRST : CTRL_SWAP_OVERLAP];
}

static int refuse(ctrl_request_error *err, const char *code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int refuse(ctrl_request_error *err, const char *code, int errnum, const char *fmt, ...)
{
    char message[sizeof(err->error.message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    err->code = code;
    return act_error_set(&err->error, errnum, "%s", message);
}

/* Shows a client-chosen string inside an error sentence: printable ASCII as
 * is, everything else escaped, cut short, so the reply stays one line. */
static void quote(const char *s, size_t len, char *out, size_t out_size)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < out_size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isascii(c) && isprint(c) && c != '"' && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, out_size - o, "\\x%02x", c);
        if (o + 8 >= out_size && i + 1 < len) {
            o += (size_t)snprintf(out + o, out_size - o, "...");
            break;
        }
    }
    out[o] = '\0';
}

static int parse_json(const char *data, size_t len, json_object **out, ctrl_request_error *err)
{
    /* json-c would stop at a NUL and report success on the prefix; a NUL in a
     * text protocol is always a broken or hostile client. */
    const char *nul = memchr(data, '\0', len);
    if (nul)
        return refuse(err, CTRL_REQ_BAD_JSON, EINVAL,
                      "request is not JSON: it contains a NUL byte at offset %zu; send one UTF-8 "
                      "JSON object",
                      (size_t)(nul - data));

    /* Requests are flat objects; a small depth limit keeps hostile nesting cheap. */
    _cleanup_(json_tokener_freep) json_tokener *tok = json_tokener_new_ex(8);
    if (!tok)
        return refuse(err, CTRL_REQ_BAD_JSON, ENOMEM, "out of memory parsing the request");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);

    _cleanup_(json_object_putp) json_object *obj = json_tokener_parse_ex(tok, data, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);

    if (!obj) {
        if (jerr == json_tokener_continue || jerr == json_tokener_success)
            return refuse(err, CTRL_REQ_BAD_JSON, EINVAL,
                          "request is not JSON: it ends in the middle of a value (%zu bytes "
                          "read); send one complete JSON object",
                          len);
        return refuse(err, CTRL_REQ_BAD_JSON, EINVAL,
                      "request is not JSON: %s at offset %zu; send one JSON object such as "
                      "{\"v\":1,\"op\":\"status\"}",
                      json_tokener_error_desc(jerr), end);
    }
    for (size_t i = end; i < len; i++)
        if (!isspace((unsigned char)data[i]))
            return refuse(err, CTRL_REQ_BAD_JSON, EINVAL,
                          "request is not JSON: unexpected data after the object at offset %zu; "
                          "send exactly one JSON object",
                          i);
    if (!json_object_is_type(obj, json_type_object))
        return refuse(err, CTRL_REQ_BAD_TYPE, EINVAL,
                      "request is %s, not an object; send {\"v\":1,\"op\":\"...\"}",
                      act_json_type_phrase(json_object_get_type(obj)));
    *out = TAKE_PTR(obj);
    return 0;
}

/* Copies a string field that must be a name (host, version, box). */
static int take_name(const char *what, json_object *value, char *out, ctrl_request_error *err)
{
    const char *s = json_object_get_string(value);
    size_t len = (size_t)json_object_get_string_len(value);
    if (strlen(s) != len) {
        char shown[96];
        quote(s, len, shown, sizeof(shown));
        return refuse(err, CTRL_REQ_BAD_NAME, EINVAL,
                      "%s name \"%s\" contains a NUL character; names are 1 to %d characters of "
                      "A-Z a-z 0-9 . _ -",
                      what, shown, ACT_NAME_MAX);
    }
    act_error name_err = {0};
    if (act_name_check(what, s, &name_err) < 0)
        return refuse(err, CTRL_REQ_BAD_NAME, EINVAL, "field \"%s\": %s", what, name_err.message);
    memcpy(out, s, len + 1);
    return 0;
}

static int take_path(json_object *value, char *out, ctrl_request_error *err)
{
    const char *s = json_object_get_string(value);
    size_t len = (size_t)json_object_get_string_len(value);
    char shown[128];
    quote(s, len, shown, sizeof(shown));
    /* A path of this box, an OCI image layout on it (oci:/PATH[:TAG]), or
     * an image in a registry (docker://..., checked where it is pulled). */
    bool image = len > 4 && strncmp(s, "oci:", 4) == 0;
    bool registry = len > 9 && strncmp(s, "docker://", 9) == 0;
    if (len == 0 || (!registry && (image ? s[4] != '/' : s[0] != '/')))
        return refuse(err, CTRL_REQ_BAD_VALUE, EINVAL,
                      "field \"path\": \"%s\" is not an absolute path; name the build on this box "
                      "as /absolute/path, an image layout as oci:/absolute/path[:tag], or an "
                      "image in a registry as docker://registry/repository:tag",
                      shown);
    if (len > CTRL_REQUEST_PATH_MAX)
        return refuse(err, CTRL_REQ_BAD_VALUE, EINVAL,
                      "field \"path\" is %zu bytes long, more than %d; use a shorter path", len,
                      CTRL_REQUEST_PATH_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return refuse(err, CTRL_REQ_BAD_VALUE, EINVAL,
                          "field \"path\": \"%s\" contains a control character at offset %zu; "
                          "rename the file",
                          shown, i);
    }
    memcpy(out, s, len + 1);
    return 0;
}

/* Takes a choice field's value as the index of its choice. */
static int take_choice(const ctrl_field_spec *field, json_object *value, int *out,
                       ctrl_request_error *err)
{
    const char *s = json_object_get_string(value);
    size_t len = (size_t)json_object_get_string_len(value);
    int index = strlen(s) == len ? ctrl_field_choice(field, s) : -1;
    if (index < 0) {
        char shown[64], choices[128];
        quote(s, len, shown, sizeof(shown));
        ctrl_field_choices_list(field, "\" or \"", choices, sizeof(choices));
        return refuse(err, CTRL_REQ_BAD_VALUE, EINVAL,
                      "field \"%s\": \"%s\" is not one of its values; use \"%s\"", field->name,
                      shown, choices);
    }
    *out = index;
    return 0;
}

static int take_field(const ctrl_field_spec *field, json_object *value, ctrl_request *req,
                      ctrl_request_error *err)
{
    switch (field->bit) {
    case CTRL_FIELD_HOST:
        return take_name(field->name, value, req->host, err);
    case CTRL_FIELD_VERSION:
        return take_name(field->name, value, req->version, err);
    case CTRL_FIELD_BOX:
        return take_name(field->name, value, req->box, err);
    case CTRL_FIELD_PATH:
        return take_path(value, req->path, err);
    case CTRL_FIELD_MODE: {
        int mode = 0;
        int r = take_choice(field, value, &mode, err);
        req->mode = (ctrl_swap_mode)mode;
        return r;
    }
    case CTRL_FIELD_NO_WAIT:
        req->no_wait = json_object_get_boolean(value);
        return 0;
    case CTRL_FIELD_PROMOTE:
        req->promote = json_object_get_boolean(value);
        return 0;
    case CTRL_FIELD_FORCE:
        req->force = json_object_get_boolean(value);
        return 0;
    case CTRL_FIELD_KEEP: {
        int64_t keep = json_object_get_int64(value);
        if (keep < 0 || keep > CTRL_FIELD_COUNT_MAX)
            return refuse(err, CTRL_REQ_BAD_VALUE, EINVAL,
                          "field \"keep\" is %lld; keep 0 to %d versions", (long long)keep,
                          CTRL_FIELD_COUNT_MAX);
        req->has_keep = true;
        req->keep = (unsigned)keep;
        return 0;
    }
    case CTRL_FIELD_DRY_RUN:
        req->dry_run = json_object_get_boolean(value);
        return 0;
    case CTRL_FIELD_REVISION: {
        int64_t revision = json_object_get_int64(value);
        /* json-c saturates what does not fit an int64 at INT64_MAX. */
        if (revision < 0 || revision == INT64_MAX)
            return refuse(err, CTRL_REQ_BAD_VALUE, EINVAL,
                          "field \"revision\" is %s; send a claim's revision, 0 or more",
                          json_object_to_json_string(value));
        req->revision = (uint64_t)revision;
        return 0;
    }
    case CTRL_FIELD_WAIT: {
        int64_t wait = json_object_get_int64(value);
        if (wait < 1 || wait > CTRL_CLAIM_WAIT_MAX_SEC)
            return refuse(err, CTRL_REQ_BAD_VALUE, EINVAL,
                          "field \"wait\" is %lld; wait 1 to %d seconds", (long long)wait,
                          CTRL_CLAIM_WAIT_MAX_SEC);
        req->wait_sec = (unsigned)wait;
        return 0;
    }
    }
    return refuse(err, CTRL_REQ_UNKNOWN_FIELD, EINVAL, "internal: field without a parser");
}

static json_type json_type_of(ctrl_field_kind kind)
{
    if (kind == CTRL_FIELD_KIND_FLAG)
        return json_type_boolean;
    if (kind == CTRL_FIELD_KIND_COUNT || kind == CTRL_FIELD_KIND_REVISION)
        return json_type_int;
    return json_type_string;
}

/* The field named key among the bits of allowed, or NULL. */
static const ctrl_field_spec *find_field(unsigned allowed, const char *key)
{
    size_t n;
    const ctrl_field_spec *fields = ctrl_fields(&n);
    for (size_t i = 0; i < n; i++)
        if ((allowed & fields[i].bit) && strcmp(fields[i].name, key) == 0)
            return &fields[i];
    return NULL;
}

static int check_version_and_op(json_object *obj, ctrl_request *req, ctrl_request_error *err)
{
    json_object *v = NULL, *op = NULL;
    if (!json_object_object_get_ex(obj, "v", &v))
        return refuse(err, CTRL_REQ_MISSING_FIELD, EINVAL,
                      "request has no \"v\" field; send \"v\":%d (the protocol version)",
                      CTRL_PROTOCOL_VERSION);
    if (!json_object_is_type(v, json_type_int))
        return refuse(err, CTRL_REQ_BAD_TYPE, EINVAL,
                      "field \"v\" is %s, not an integer; send \"v\":%d",
                      act_json_type_phrase(json_object_get_type(v)), CTRL_PROTOCOL_VERSION);
    int64_t version = json_object_get_int64(v);
    if (version != CTRL_PROTOCOL_VERSION)
        return refuse(err, CTRL_REQ_BAD_VERSION, EINVAL,
                      "protocol version %lld is not spoken here; this daemon speaks \"v\":%d",
                      (long long)version, CTRL_PROTOCOL_VERSION);

    if (!json_object_object_get_ex(obj, "op", &op))
        return refuse(err, CTRL_REQ_MISSING_FIELD, EINVAL,
                      "request has no \"op\" field; send an op such as \"status\"");
    if (!json_object_is_type(op, json_type_string))
        return refuse(err, CTRL_REQ_BAD_TYPE, EINVAL, "field \"op\" is %s, not a string",
                      act_json_type_phrase(json_object_get_type(op)));
    const char *name = json_object_get_string(op);
    int index = ctrl_op_from_name(name);
    if (index < 0 || strlen(name) != (size_t)json_object_get_string_len(op)) {
        char shown[96], names[256];
        quote(name, (size_t)json_object_get_string_len(op), shown, sizeof(shown));
        ctrl_ops_list(names, sizeof(names));
        return refuse(err, CTRL_REQ_UNKNOWN_OP, EINVAL, "unknown op \"%s\"; ops are %s", shown,
                      names);
    }
    req->op = (ctrl_op)index;
    return 0;
}

int ctrl_request_parse(const void *data, size_t len, ctrl_request *req, ctrl_request_error *err)
{
    assert(data || len == 0);
    assert(req);
    assert(err);
    memset(req, 0, sizeof(*req));
    err->code = NULL;
    act_error_clear(&err->error);

    if (len > CTRL_REQUEST_MAX_BYTES)
        return refuse(err, CTRL_REQ_TOO_LARGE, EMSGSIZE,
                      "request is %zu bytes, more than the %d-byte limit; send a smaller request",
                      len, CTRL_REQUEST_MAX_BYTES);
    if (len == 0)
        return refuse(err, CTRL_REQ_BAD_JSON, EINVAL,
                      "request is empty; send one JSON object such as {\"v\":1,\"op\":\"status\"}");

    _cleanup_(json_object_putp) json_object *obj = NULL;
    int r = parse_json(data, len, &obj, err);
    if (r < 0)
        return r;

    r = check_version_and_op(obj, req, err);
    if (r < 0)
        return r;

    const ctrl_op_spec *spec = ctrl_op_spec_of(req->op);
    unsigned allowed = spec->required | spec->optional, seen = 0;
    json_object_object_foreach(obj, key, value)
    {
        if (strcmp(key, "v") == 0 || strcmp(key, "op") == 0)
            continue;
        const ctrl_field_spec *field = find_field(allowed, key);
        if (!field) {
            char shown[96], allowed_list[128];
            quote(key, strlen(key), shown, sizeof(shown));
            ctrl_fields_list(allowed, allowed_list, sizeof(allowed_list));
            return refuse(err, CTRL_REQ_UNKNOWN_FIELD, EINVAL,
                          "field \"%s\" is not part of op \"%s\"; its fields are: %s", shown,
                          spec->name, allowed_list);
        }
        if (!json_object_is_type(value, json_type_of(field->kind)))
            return refuse(err, CTRL_REQ_BAD_TYPE, EINVAL, "op \"%s\": field \"%s\" is %s, not %s",
                          spec->name, field->name,
                          act_json_type_phrase(json_object_get_type(value)),
                          act_json_type_phrase(json_type_of(field->kind)));
        r = take_field(field, value, req, err);
        if (r < 0)
            return r;
        seen |= field->bit;
    }

    unsigned missing = spec->required & ~seen;
    if (missing) {
        char missing_list[128];
        ctrl_fields_list(missing, missing_list, sizeof(missing_list));
        return refuse(err, CTRL_REQ_MISSING_FIELD, EINVAL, "op \"%s\" needs field(s): %s",
                      spec->name, missing_list);
    }
    return 0;
}
