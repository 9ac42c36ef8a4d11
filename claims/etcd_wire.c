/* See etcd_wire.h. */
#include "claims/etcd_wire.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *etcd_b64_encode(const void *data, size_t len)
{
    assert(data || len == 0);
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

int etcd_b64_decode(const char *text, char **out, size_t *out_len)
{
    assert(text);
    assert(out);
    assert(out_len);
    size_t len = strlen(text);
    if (len % 4 != 0)
        return -EINVAL;
    char *decoded = malloc(3 * (len / 4) + 1);
    if (!decoded)
        return -ENOMEM;
    int n = len ? EVP_DecodeBlock((unsigned char *)decoded, (const unsigned char *)text, (int)len)
                : 0;
    if (n < 0) {
        free(decoded);
        return -EINVAL;
    }
    /* EVP_DecodeBlock counts the bytes the '=' padding stands for. */
    for (size_t i = len; i > 0 && text[i - 1] == '='; i--)
        n--;
    decoded[n] = '\0';
    *out = decoded;
    *out_len = (size_t)n;
    return 0;
}

static char *render(json_object *obj)
{
    const char *text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
    char *copy = text ? strdup(text) : NULL;
    json_object_put(obj);
    return copy;
}

static void add_b64(json_object *obj, const char *name, const char *value)
{
    char *encoded = etcd_b64_encode(value, strlen(value));
    json_object_object_add(obj, name, json_object_new_string(encoded ? encoded : ""));
    free(encoded);
}

static void add_u64_string(json_object *obj, const char *name, uint64_t value)
{
    char number[32];
    snprintf(number, sizeof(number), "%" PRIu64, value);
    json_object_object_add(obj, name, json_object_new_string(number));
}

char *etcd_range_body(const char *key, const char *range_end)
{
    assert(key);
    json_object *body = json_object_new_object();
    add_b64(body, "key", key);
    if (range_end)
        add_b64(body, "range_end", range_end);
    return render(body);
}

char *etcd_range_page_body(const char *key, size_t key_len, const char *range_end, uint64_t limit,
                           uint64_t revision)
{
    assert(key);
    assert(range_end);
    json_object *body = json_object_new_object();
    char *encoded = etcd_b64_encode(key, key_len);
    json_object_object_add(body, "key", json_object_new_string(encoded ? encoded : ""));
    free(encoded);
    add_b64(body, "range_end", range_end);
    add_u64_string(body, "limit", limit);
    if (revision)
        add_u64_string(body, "revision", revision);
    return render(body);
}

char *etcd_count_body(const char *key, const char *range_end)
{
    assert(key);
    assert(range_end);
    json_object *body = json_object_new_object();
    add_b64(body, "key", key);
    add_b64(body, "range_end", range_end);
    json_object_object_add(body, "count_only", json_object_new_boolean(1));
    return render(body);
}

char *etcd_written_since_body(const char *key, const char *range_end, uint64_t min_mod_revision)
{
    assert(key);
    assert(min_mod_revision > 0);
    json_object *body = json_object_new_object();
    add_b64(body, "key", key);
    if (range_end)
        add_b64(body, "range_end", range_end);
    json_object_object_add(body, "keys_only", json_object_new_boolean(1));
    add_u64_string(body, "limit", 1);
    add_u64_string(body, "min_mod_revision", min_mod_revision);
    return render(body);
}

static json_object *put_action(const char *key, const char *value)
{
    json_object *action = json_object_new_object();
    json_object *request = json_object_new_object();
    add_b64(request, "key", key);
    add_b64(request, "value", value);
    json_object_object_add(action, "request_put", request);
    return action;
}

char *etcd_txn_body(const char *key, uint64_t expected, const char *value,
                    const char *const *also_keys, size_t n_also, const char *also_value,
                    const char *absent_key)
{
    assert(key);
    assert(n_also == 0 || (also_keys && also_value));
    json_object *body = json_object_new_object();
    json_object *compare = json_object_new_object();
    add_b64(compare, "key", key);
    if (expected == 0) {
        json_object_object_add(compare, "target", json_object_new_string("CREATE"));
        add_u64_string(compare, "create_revision", 0);
    } else {
        json_object_object_add(compare, "target", json_object_new_string("MOD"));
        add_u64_string(compare, "mod_revision", expected);
    }
    json_object_object_add(compare, "result", json_object_new_string("EQUAL"));
    json_object *compares = json_object_new_array();
    json_object_array_add(compares, compare);
    if (absent_key) {
        json_object *absent = json_object_new_object();
        add_b64(absent, "key", absent_key);
        json_object_object_add(absent, "target", json_object_new_string("CREATE"));
        add_u64_string(absent, "create_revision", 0);
        json_object_object_add(absent, "result", json_object_new_string("EQUAL"));
        json_object_array_add(compares, absent);
    }
    json_object_object_add(body, "compare", compares);

    json_object *success = json_object_new_array();
    if (value) {
        json_object_array_add(success, put_action(key, value));
    } else {
        json_object *action = json_object_new_object();
        json_object *request = json_object_new_object();
        add_b64(request, "key", key);
        json_object_object_add(action, "request_delete_range", request);
        json_object_array_add(success, action);
    }
    for (size_t i = 0; i < n_also; i++)
        json_object_array_add(success, put_action(also_keys[i], also_value));
    json_object_object_add(body, "success", success);

    json_object *range = json_object_new_object();
    add_b64(range, "key", key);
    json_object *failure_action = json_object_new_object();
    json_object_object_add(failure_action, "request_range", range);
    json_object *failure = json_object_new_array();
    json_object_array_add(failure, failure_action);
    if (absent_key) {
        json_object *absent_range = json_object_new_object();
        add_b64(absent_range, "key", absent_key);
        json_object *absent_action = json_object_new_object();
        json_object_object_add(absent_action, "request_range", absent_range);
        json_object_array_add(failure, absent_action);
    }
    json_object_object_add(body, "failure", failure);
    return render(body);
}

char *etcd_two_ranges_body(const char *key1, const char *end1, const char *key2, const char *end2)
{
    json_object *body = json_object_new_object();
    json_object *success = json_object_new_array();
    const char *ranges[2][2] = {{key1, end1}, {key2, end2}};
    for (size_t i = 0; i < 2; i++) {
        json_object *range = json_object_new_object();
        add_b64(range, "key", ranges[i][0]);
        add_b64(range, "range_end", ranges[i][1]);
        json_object *action = json_object_new_object();
        json_object_object_add(action, "request_range", range);
        json_object_array_add(success, action);
    }
    json_object_object_add(body, "success", success);
    return render(body);
}

char *etcd_watch_body(const char *key, const char *range_end, uint64_t start_revision)
{
    assert(key);
    json_object *create = json_object_new_object();
    add_b64(create, "key", key);
    if (range_end)
        add_b64(create, "range_end", range_end);
    if (start_revision)
        add_u64_string(create, "start_revision", start_revision);
    /* The server then says now and then that the stream is alive and
     * up to date, which tells a quiet stream from a dead one. */
    json_object_object_add(create, "progress_notify", json_object_new_boolean(1));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "create_request", create);
    return render(body);
}

char *etcd_put_body(const char *key, const char *value, uint64_t lease)
{
    assert(key);
    assert(value);
    json_object *body = json_object_new_object();
    add_b64(body, "key", key);
    add_b64(body, "value", value);
    if (lease)
        add_u64_string(body, "lease", lease);
    return render(body);
}

char *etcd_lease_grant_body(uint64_t ttl_sec)
{
    json_object *body = json_object_new_object();
    add_u64_string(body, "TTL", ttl_sec);
    return render(body);
}

char *etcd_lease_body(uint64_t lease)
{
    json_object *body = json_object_new_object();
    add_u64_string(body, "ID", lease);
    return render(body);
}

uint64_t etcd_json_u64(json_object *obj, const char *key)
{
    assert(key);
    json_object *member;
    if (!obj || !json_object_object_get_ex(obj, key, &member))
        return 0;
    if (json_object_is_type(member, json_type_string))
        return strtoull(json_object_get_string(member), NULL, 10);
    return json_object_get_uint64(member);
}

int64_t etcd_json_i64(json_object *obj, const char *key)
{
    assert(key);
    json_object *member;
    if (!obj || !json_object_object_get_ex(obj, key, &member))
        return 0;
    if (json_object_is_type(member, json_type_string))
        return strtoll(json_object_get_string(member), NULL, 10);
    return json_object_get_int64(member);
}

int etcd_kv_to_claim(const char *host, json_object *kv, claim *out, act_error *err)
{
    assert(out);
    json_object *value;
    memset(out, 0, sizeof(*out));
    if (!json_object_object_get_ex(kv, "value", &value) ||
        !json_object_is_type(value, json_type_string))
        return act_error_set(err, EINVAL, "host %s: etcd value is empty; not a claim, delete "
                                          "the key", host);
    const char *encoded = json_object_get_string(value);
    /* Checked before decoding so a huge value is refused without copying it. */
    if (strlen(encoded) / 4 * 3 > (size_t)CLAIM_JSON_MAX + 3)
        return act_error_set(err, EFBIG,
                             "host %s: claim body is over the %d byte limit; the stored value is "
                             "not a claim, rewrite or delete it", host, CLAIM_JSON_MAX);
    char *text = NULL;
    size_t len = 0;
    if (etcd_b64_decode(encoded, &text, &len) < 0)
        return act_error_set(err, EINVAL, "host %s: etcd value is not base64", host);
    int r = claim_from_json(host, text, len, out, err);
    free(text);
    if (r < 0)
        return r;
    out->revision = etcd_json_u64(kv, "mod_revision");
    return 0;
}
