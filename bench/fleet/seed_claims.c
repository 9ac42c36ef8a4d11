/* Claims planted by raw txns (seed_claims.h). */
#include "bench/fleet/seed_claims.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/etcd_wire.h"

/* etcd's default --max-txn-ops: a claim is 1 put and 1 per box it names. */
#define TXN_OPS_MAX 128

typedef struct txn_body {
    char *text;
    size_t len, cap;
} txn_body;

/* One put of key = value, after a comma unless it is the first. */
static int put(txn_body *body, bool first, const char *key, const char *value)
{
    char *k = etcd_b64_encode(key, strlen(key)), *v = etcd_b64_encode(value, strlen(value));
    if (!k || !v) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    size_t need = strlen(k) + strlen(v) + 64;
    if (body->len + need >= body->cap) {
        size_t cap = (body->cap + need) * 2;
        char *grown = realloc(body->text, cap);
        if (!grown) {
            free(k);
            free(v);
            return -ENOMEM;
        }
        body->text = grown;
        body->cap = cap;
    }
    body->len += (size_t)snprintf(body->text + body->len, body->cap - body->len,
                                  "%s{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}",
                                  first ? "" : ",", k, v);
    free(k);
    free(v);
    return 0;
}

/* The puts of as many of claims [0, n) as one txn takes; *written says
 * how many. */
static int write_txn(const etcd_harness *etcd, const char *prefix, const claim *claims, size_t n,
                     size_t *written, act_error *err)
{
    txn_body body = {.text = strdup("{\"success\":["), .len = 12, .cap = 13};
    int r = body.text ? 0 : -ENOMEM;
    size_t ops = 0, i = 0;
    for (; i < n && r == 0; i++) {
        claim_boxes boxes;
        claim_named_boxes(&claims[i], &boxes);
        if (ops + 1 + boxes.n > TXN_OPS_MAX)
            break;
        ops += 1 + boxes.n;
        char *value = claim_to_json(&claims[i]);
        if (!value) {
            r = -ENOMEM;
            break;
        }
        char key[CLAIMS_URL_PREFIX_SIZE + 80];
        snprintf(key, sizeof(key), "%s/%s", prefix, claims[i].host);
        r = put(&body, i == 0, key, value);
        for (size_t b = 0; b < boxes.n && r == 0; b++) {
            snprintf(key, sizeof(key), "%s.by-box/%s/%s", prefix, boxes.box[b], claims[i].host);
            r = put(&body, false, key, value);
        }
        free(value);
    }
    if (r == 0 && body.len + 3 > body.cap) {
        char *grown = realloc(body.text, body.cap = body.len + 3);
        r = grown ? 0 : -ENOMEM;
        if (grown)
            body.text = grown;
    }
    if (r == 0)
        body.len += (size_t)snprintf(body.text + body.len, body.cap - body.len, "]}");
    if (r < 0) {
        free(body.text);
        return act_error_set(err, -r, "seeding claims: out of memory");
    }
    *written = i;
    long status = etcd_harness_post(etcd, "/v3/kv/txn", body.text, NULL, NULL);
    free(body.text);
    if (status != 200)
        return act_error_set(err, EIO, "seeding claims under %s: etcd answered HTTP %ld", prefix,
                             status);
    return 0;
}

int seed_claims_write(const etcd_harness *etcd, const char *prefix, const claim *claims, size_t n,
                      act_error *err)
{
    for (size_t done = 0; done < n;) {
        size_t written = 0;
        int r = write_txn(etcd, prefix, claims + done, n - done, &written, err);
        if (r < 0)
            return r;
        done += written;
    }
    return 0;
}
