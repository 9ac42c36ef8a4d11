/* The etcd v3 JSON gateway's wire format: base64 keys and values, request
 * bodies, and key-value decoding. Shared by the store and by the benchmark's
 * bare-libcurl baseline, which must post byte-for-byte the same txn. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "claims/claims.h"

/* Base64 with OpenSSL's EVP block coder; malloc'd, NUL-terminated. */
char *etcd_b64_encode(const void *data, size_t len);
/* Returns 0, or -EINVAL for text that is not base64. */
int etcd_b64_decode(const char *text, char **out, size_t *out_len);

/* {"key":..., "range_end":...}; range_end NULL reads one key. */
char *etcd_range_body(const char *key, const char *range_end);
/* One page of a range: at most limit keys from key (key_len bytes, which
 * may end in a NUL: "the key after the last one read"), at revision (0 =
 * now). The answer's "more" says whether keys are left. */
char *etcd_range_page_body(const char *key, size_t key_len, const char *range_end, uint64_t limit,
                           uint64_t revision);
/* A range that only counts the keys: its answer's header revision is the
 * store's revision now, at the cost of no values. */
char *etcd_count_body(const char *key, const char *range_end);
/* The first key (name only) written at min_mod_revision or later, if any
 * (a key deleted since is not there): its answer's kvs say whether there is
 * one. Not a count: etcd applies min_mod_revision to the keys it returns,
 * never to its "count", which counts every key of the range. range_end
 * NULL: key alone. */
char *etcd_written_since_body(const char *key, const char *range_end, uint64_t min_mod_revision);
/* A compare-and-swap as one txn: compare MOD == expected (or CREATE == 0 when
 * expected is 0), put value (or delete the key when value is NULL) on
 * success, and with it put also_value under each of the n_also also_keys
 * (the boxes' index entries: the same txn, so the same revision); range the
 * key on failure so the caller learns what is there. absent_key (NULL:
 * none) must also be absent (CREATE == 0; a takeover's "the box's record is
 * gone"), and is ranged on failure too. */
char *etcd_txn_body(const char *key, uint64_t expected, const char *value,
                    const char *const *also_keys, size_t n_also, const char *also_value,
                    const char *absent_key);
/* A txn with no compare whose success ranges key1..end1 and key2..end2:
 * two ranges at one revision in one request. */
char *etcd_two_ranges_body(const char *key1, const char *end1, const char *key2, const char *end2);
/* {"create_request":{key, range_end, start_revision, progress_notify}};
 * start 0 = from now; range_end NULL = key alone. */
char *etcd_watch_body(const char *key, const char *range_end, uint64_t start_revision);

/* A put of key bound to lease (0: none), the box records' write. */
char *etcd_put_body(const char *key, const char *value, uint64_t lease);
/* {"TTL":ttl_sec}: a lease grant. */
char *etcd_lease_grant_body(uint64_t ttl_sec);
/* {"ID":lease}: a lease keepalive, revoke or timetolive. */
char *etcd_lease_body(uint64_t lease);

/* Reads an integer that the gateway may send as a JSON string ("12") or a
 * number; 0 when absent. */
uint64_t etcd_json_u64(json_object *obj, const char *key);
/* The same for a signed one (a lease's TTL is -1 when it is gone), which
 * etcd_json_u64 would read as a huge count. */
int64_t etcd_json_i64(json_object *obj, const char *key);
/* Decodes one kv ({key, value, mod_revision}) as host's claim; revision set. */
int etcd_kv_to_claim(const char *host, json_object *kv, claim *out, act_error *err);
