/* The etcd store's per-box index and layout marker (store_etcd.h), and the
 * memo of which boxes a claim named, which a write needs so that its txn
 * updates the index entry of every box the claim named before it. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/etcd_wire.h"
#include "claims/store_etcd.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/json_fields.h"
#include "common/names.h"

/* ---- keys ---------------------------------------------------------------------- */

int etcd_index_range(const etcd_store *es, const char *box, char **key, char **end)
{
    *key = *end = NULL;
    if (asprintf(key, "%s%s/", es->index_key, box) < 0) {
        *key = NULL;
        return -ENOMEM;
    }
    if (asprintf(end, "%s%s0", es->index_key, box) < 0) {
        free(*key);
        *key = *end = NULL;
        return -ENOMEM;
    }
    return 0;
}

char **etcd_index_keys(const etcd_store *es, const claim_boxes *boxes, const char *host)
{
    char **keys = calloc(boxes->n ? boxes->n : 1, sizeof(*keys));
    for (size_t i = 0; keys && i < boxes->n; i++) {
        if (asprintf(&keys[i], "%s%s/%s", es->index_key, boxes->box[i], host) < 0) {
            keys[i] = NULL;
            etcd_index_keys_free(keys, i);
            return NULL;
        }
    }
    return keys;
}

void etcd_index_keys_free(char **keys, size_t n)
{
    for (size_t i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
}

/* ---- the memo -------------------------------------------------------------------- */

/* Direct-mapped by host: a daemon touches its own hosts again and again, so
 * a few hundred slots hold them; a miss costs one read before the write. */
#define MEMO_SLOTS 256

typedef struct memo_slot {
    char host[ACT_NAME_MAX + 1]; /* "" = empty */
    uint64_t revision;
    claim_boxes boxes;
} memo_slot;

struct etcd_named_memo {
    memo_slot slots[MEMO_SLOTS];
};

static size_t slot_of(const char *host)
{
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)host; *p; p++)
        hash = (hash ^ *p) * 16777619u;
    return hash % MEMO_SLOTS;
}

void etcd_memo_remember(etcd_store *es, const claim *c)
{
    assert(es && c);
    if (!c->revision || !c->host[0])
        return;
    if (!es->memo && !(es->memo = calloc(1, sizeof(*es->memo))))
        return; /* only a cache: a write then reads first */
    memo_slot *slot = &es->memo->slots[slot_of(c->host)];
    snprintf(slot->host, sizeof(slot->host), "%s", c->host);
    slot->revision = c->revision;
    claim_named_boxes(c, &slot->boxes);
}

void etcd_memo_forget(etcd_store *es, const char *host)
{
    if (!es->memo)
        return;
    memo_slot *slot = &es->memo->slots[slot_of(host)];
    if (strcmp(slot->host, host) == 0)
        slot->host[0] = '\0';
}

bool etcd_memo_recall(const etcd_store *es, const char *host, uint64_t revision, claim_boxes *out)
{
    if (!es->memo)
        return false;
    const memo_slot *slot = &es->memo->slots[slot_of(host)];
    if (strcmp(slot->host, host) != 0 || slot->revision != revision)
        return false;
    *out = slot->boxes;
    return true;
}

void etcd_memo_free(etcd_store *es)
{
    free(es->memo);
    es->memo = NULL;
}

/* ---- the layout marker ------------------------------------------------------------ */

typedef struct layout_check {
    etcd_store *es;
    void (*done)(claim_store *store, int result, const act_error *err, void *userdata);
    void *userdata;
} layout_check;

/* The marker's value, refused unless it says CLAIMS_LAYOUT. */
static int judge_marker(const etcd_store *es, json_object *kv, act_error *err)
{
    json_object *value = NULL;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int64_t layout = -1;
    if (json_object_object_get_ex(kv, "value", &value) &&
        etcd_b64_decode(json_object_get_string(value), &text, &len) == 0) {
        _cleanup_(json_object_putp) json_object *parsed = json_tokener_parse(text);
        json_object *field = NULL;
        if (parsed && json_object_object_get_ex(parsed, "layout", &field) &&
            json_object_is_type(field, json_type_int))
            layout = json_object_get_int64(field);
    }
    if (layout == CLAIMS_LAYOUT)
        return 0;
    char shown[64];
    if (layout < 0)
        snprintf(shown, sizeof(shown), "is not {\"layout\":N}");
    else
        snprintf(shown, sizeof(shown), "says layout %" PRId64, layout);
    return act_error_set(err, EPROTONOSUPPORT,
                         "the claim store's layout marker %s %s; this activator reads and "
                         "writes layout %d only: run the activator the store was laid out for, "
                         "or point Store= at another prefix",
                         es->layout_key, shown, CLAIMS_LAYOUT);
}

static void on_layout_txn(etcd_call *call, int result, json_object *response, const act_error *err,
                          void *userdata)
{
    _cleanup_free_ layout_check *check = userdata;
    claim_store *store = &check->es->base;
    if (result < 0) {
        check->done(store, result, err, check->userdata);
        return;
    }
    if (act_json_bool_or(response, "succeeded", false)) {
        check->done(store, 0, NULL, check->userdata); /* we wrote the marker */
        return;
    }
    /* The marker was there: the failure branch ranged it. */
    json_object *responses, *range = NULL, *kvs = NULL;
    if (json_object_object_get_ex(response, "responses", &responses) &&
        json_object_array_length(responses) > 0)
        json_object_object_get_ex(json_object_array_get_idx(responses, 0), "response_range",
                                  &range);
    act_error bad = {0};
    int r =
        range && json_object_object_get_ex(range, "kvs", &kvs) && json_object_array_length(kvs) > 0
            ? judge_marker(check->es, json_object_array_get_idx(kvs, 0), &bad)
            : act_error_set(&bad, EIO, "etcd: the layout marker %s vanished while read",
                            check->es->layout_key);
    check->done(store, r, r < 0 ? &bad : NULL, check->userdata);
}

int etcd_check_layout_async(claim_store *store, sd_event *event,
                            void (*done)(claim_store *store, int result, const act_error *err,
                                         void *userdata),
                            void *userdata, act_error *err)
{
    etcd_store *es = (etcd_store *)store;
    layout_check *check = calloc(1, sizeof(*check));
    if (!check)
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    *check = (layout_check){.es = es, .done = done, .userdata = userdata};
    char marker[32];
    snprintf(marker, sizeof(marker), "{\"layout\":%d}", CLAIMS_LAYOUT);
    /* Written only where there is none (CREATE == 0), read otherwise, in
     * one txn: two boxes starting on an empty store agree on one marker. */
    int r = etcd_store_call(es, event, "/v3/kv/txn",
                            etcd_txn_body(es->layout_key, 0, marker, NULL, 0, NULL, NULL),
                            on_layout_txn, check, err);
    if (r < 0)
        free(check);
    return r;
}
