/* A box record's fields and its JSON value, shared by both stores.
 *
 * Value layout (the box is the key):
 *   {"box":"b1","incarnation":"9f..","started_usec":1700000000000000,
 *    "version":"0.1.0","control_url":"tls+tcp://10.0.0.5:7000","events_url":"",
 *    "lease_ttl_usec":10000000}
 * and on the dir store also "refreshed_usec" and "expires_usec", which etcd
 * keeps in its lease instead. Unlike a claim, a record is read leniently:
 * an unknown field is skipped, because a record only informs (nothing is
 * fenced on it) and a newer daemon may say more than an older reader knows. */
#include "claims/store_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup_json.h"
#include "common/json_fields.h"
#include "common/names.h"

static bool url_is_clean(const char *url)
{
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e)
            return false;
    return true;
}

/* text as one JSON object, what (a record, a drain mark) of box; a value
 * that is not is refused saying remedy. */
static int parse_object(const char *box, const char *what, const char *remedy, const char *text,
                        size_t len, json_object **out, act_error *err)
{
    if (len > CLAIMS_BOX_JSON_MAX)
        return act_error_set(err, EFBIG, "box %s: %s is %zu bytes, over the %d byte limit; %s", box,
                             what, len, CLAIMS_BOX_JSON_MAX, remedy);
    _cleanup_(json_tokener_freep) json_tokener *tok = json_tokener_new();
    if (!tok)
        return act_error_set(err, ENOMEM, "box %s: out of memory", box);
    json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    if (!root || json_tokener_get_error(tok) != json_tokener_success ||
        !json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return act_error_set(err, EINVAL, "box %s: %s is not a JSON object; %s", box, what, remedy);
    }
    *out = root;
    return 0;
}

int claims_box_validate(const claims_box *record, act_error *err)
{
    assert(record);
    act_error why = {0};
    if (act_name_check("box", record->box, &why) < 0)
        return act_error_set(err, EINVAL, "box record: %s", why.message);
    const struct {
        const char *field, *value;
    } names[] = {{"incarnation", record->incarnation}, {"version", record->version}};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (names[i].value[0] && act_name_check(names[i].field, names[i].value, &why) < 0)
            return act_error_set(err, EINVAL, "box %s: record field %s: %s", record->box,
                                 names[i].field, why.message);
    if (!url_is_clean(record->control_url) || !url_is_clean(record->events_url))
        return act_error_set(err, EINVAL,
                             "box %s: record URL holds a space or a control character",
                             record->box);
    if (record->lease_ttl_usec < 1000 * 1000)
        return act_error_set(err, EINVAL, "box %s: lease of %llu us is under a second",
                             record->box, (unsigned long long)record->lease_ttl_usec);
    return 0;
}

const claims_box *claims_box_find(const claims_box *boxes, size_t n, const char *box)
{
    for (size_t i = 0; box && i < n; i++)
        if (strcmp(boxes[i].box, box) == 0)
            return &boxes[i];
    return NULL;
}

int claims_box_compare(const void *a, const void *b)
{
    return strcmp(((const claims_box *)a)->box, ((const claims_box *)b)->box);
}

char *claims_box_to_json(const claims_box *record, bool with_expiry)
{
    assert(record);
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    if (!root)
        return NULL;
    json_object_object_add(root, "box", json_object_new_string(record->box));
    json_object_object_add(root, "incarnation", json_object_new_string(record->incarnation));
    json_object_object_add(root, "started_usec", json_object_new_uint64(record->started_usec));
    json_object_object_add(root, "version", json_object_new_string(record->version));
    json_object_object_add(root, "control_url", json_object_new_string(record->control_url));
    json_object_object_add(root, "events_url", json_object_new_string(record->events_url));
    json_object_object_add(root, "lease_ttl_usec",
                           json_object_new_uint64(record->lease_ttl_usec));
    if (with_expiry) {
        json_object_object_add(root, "refreshed_usec",
                               json_object_new_uint64(record->refreshed_usec));
        json_object_object_add(root, "expires_usec", json_object_new_uint64(record->expires_usec));
    }
    const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE);
    return text ? strdup(text) : NULL;
}

int claims_box_from_json(const char *box, const char *text, size_t len, claims_box *out,
                         act_error *err)
{
    assert(box);
    assert(text || len == 0);
    assert(out);
    memset(out, 0, sizeof(*out));
    _cleanup_(json_object_putp) json_object *root = NULL;
    int r = parse_object(box, "record", "delete it", text, len, &root, err);
    if (r < 0)
        return r;
    /* Absent fields stay "" and 0; anything but a string that fits or a
     * whole number is refused. */
    char prefix[ACT_NAME_MAX + 16];
    snprintf(prefix, sizeof(prefix), "box %s: record ", box);
    act_json_reader rd = {.prefix = prefix, .errnum = EINVAL, .err = err};
    char named[65] = "";
    r = act_json_get_string(&rd, root, "box", ACT_JSON_OPTIONAL, named, sizeof(named));
    if (r >= 0 && strcmp(named, box) != 0)
        r = act_error_set(err, EINVAL, "box %s: record names box \"%.64s\"; delete it", box,
                          named);
    const struct {
        const char *key;
        char *dst;
        size_t size;
    } strings[] = {
        {"incarnation", out->incarnation, sizeof(out->incarnation)},
        {"version", out->version, sizeof(out->version)},
        {"control_url", out->control_url, sizeof(out->control_url)},
        {"events_url", out->events_url, sizeof(out->events_url)},
    };
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(strings); i++)
        r = act_json_get_string(&rd, root, strings[i].key, ACT_JSON_OPTIONAL, strings[i].dst,
                                strings[i].size);
    const struct {
        const char *key;
        uint64_t *dst;
    } numbers[] = {
        {"started_usec", &out->started_usec},
        {"lease_ttl_usec", &out->lease_ttl_usec},
        {"refreshed_usec", &out->refreshed_usec},
        {"expires_usec", &out->expires_usec},
    };
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(numbers); i++)
        r = act_json_get_u64(&rd, root, numbers[i].key, ACT_JSON_OPTIONAL, numbers[i].dst);
    snprintf(out->box, sizeof(out->box), "%s", box);
    if (r >= 0)
        r = claims_box_validate(out, err);
    if (r < 0)
        memset(out, 0, sizeof(*out));
    return r;
}

char *claims_drain_to_json(const char *box, uint64_t drained_usec)
{
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    if (!root)
        return NULL;
    json_object_object_add(root, "box", json_object_new_string(box));
    json_object_object_add(root, "drained_usec", json_object_new_uint64(drained_usec));
    const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    return text ? strdup(text) : NULL;
}

int claims_drain_from_json(const char *box, const char *text, size_t len, uint64_t *drained_usec,
                           act_error *err)
{
    *drained_usec = 0;
    _cleanup_(json_object_putp) json_object *root = NULL;
    int r = parse_object(box, "drain mark", "undrain the box and drain it again", text, len, &root,
                         err);
    if (r < 0)
        return r;
    char prefix[ACT_NAME_MAX + 24];
    snprintf(prefix, sizeof(prefix), "box %s: drain mark ", box);
    act_json_reader rd = {.prefix = prefix, .errnum = EINVAL, .err = err};
    char named[65] = "";
    uint64_t stamp = 0;
    r = act_json_get_string(&rd, root, "box", ACT_JSON_REQUIRED, named, sizeof(named));
    if (r >= 0 && strcmp(named, box) != 0)
        r = act_error_set(err, EINVAL,
                          "box %s: drain mark names box \"%.64s\"; undrain the "
                          "box and drain it again",
                          box, named);
    if (r >= 0)
        r = act_json_get_u64(&rd, root, "drained_usec", ACT_JSON_REQUIRED, &stamp);
    if (r >= 0 && stamp == 0)
        r = act_error_set(err, EINVAL,
                          "box %s: drain mark says drained_usec 0; undrain the box "
                          "and drain it again",
                          box);
    if (r >= 0)
        *drained_usec = stamp;
    return r;
}

int claims_box_list_add_drain(claims_box **boxes, size_t *n, size_t *cap, const char *box,
                              uint64_t drained_usec, act_error *err)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*boxes)[i].box, box) == 0) {
            (*boxes)[i].drained_usec = drained_usec;
            return 0;
        }
    if (*n == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 8;
        claims_box *grown = realloc(*boxes, grown_cap * sizeof(**boxes));
        if (!grown)
            return act_error_set(err, ENOMEM, "box list: out of memory");
        *boxes = grown;
        *cap = grown_cap;
    }
    claims_box *added = &(*boxes)[(*n)++];
    memset(added, 0, sizeof(*added));
    snprintf(added->box, sizeof(added->box), "%s", box);
    added->drained_usec = drained_usec;
    return 0;
}
