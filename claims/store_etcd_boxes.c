/* Box records on etcd: the value of "<prefix>.boxes/<box>", put bound to an
 * etcd lease of the record's TTL. etcd deletes the key when the lease
 * expires or is revoked, so a record there is a live box; a keepalive
 * renews the lease. A listing for liveness is therefore one range, however
 * many boxes there are (a txn of two ranges: the records and the drain
 * marks under "<prefix>.drain/", which no lease holds); only the full
 * listing (an operator's display) then asks each record's lease how long
 * it has left (/v3/lease/timetolive), one request per box, for when it was
 * renewed and when it runs out. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/etcd_wire.h"
#include "claims/store_etcd.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/names.h"

#define USEC_PER_SEC 1000000ull

typedef struct box_op {
    etcd_held held; /* first: freed with the store while its call is out */
    etcd_store *es;
    sd_event *event;
    claims_box_call call;
    claims_box record; /* what to write, then what was stored */
    claims_box_fn fn;
    void *userdata;
} box_op;

static claim_store *store_of(const box_op *op)
{
    return &op->es->base;
}

/* The lease's TTL in whole seconds, as etcd counts it: never below one. */
static uint64_t ttl_seconds(const claims_box *record)
{
    uint64_t seconds = (record->lease_ttl_usec + USEC_PER_SEC - 1) / USEC_PER_SEC;
    return seconds ? seconds : 1;
}

/* Answers the call and frees it. err may be the etcd call's: the callback
 * runs while that is still valid. */
static void finish(box_op *op, int result, const act_error *err)
{
    etcd_held_remove(op->es, &op->held);
    _cleanup_free_ box_op *done = op;
    done->fn(store_of(done), result, result >= 0 ? &done->record : NULL, err, done->userdata);
}

/* The lease has ttl seconds left as of now. */
static void set_renewed(claims_box *record, int64_t ttl)
{
    record->live = true;
    record->refreshed_usec = act_wallclock_usec();
    record->expires_usec = record->refreshed_usec + (uint64_t)ttl * USEC_PER_SEC;
}

static void discard_held(etcd_held *held)
{
    free(held); /* box_op and list_op begin with it, and own nothing else */
}

static int call(box_op *op, const char *path, char *body, etcd_call_done_fn done,
                act_error *err)
{
    return etcd_store_call(op->es, op->event, path, body, done, op, err);
}

/* ---- put: grant a lease, then put the record bound to it ------------------ */

static void on_put(etcd_call *c, int result, json_object *response, const act_error *err,
                   void *userdata)
{
    box_op *op = userdata;
    if (result >= 0)
        set_renewed(&op->record, (int64_t)ttl_seconds(&op->record));
    finish(op, result, err);
}

static void on_granted(etcd_call *c, int result, json_object *response, const act_error *err,
                       void *userdata)
{
    box_op *op = userdata;
    act_error why = {0};
    if (result < 0) {
        why = *err;
        act_error_prefix(&why, "box %s: cannot grant its lease", op->record.box);
        finish(op, result, &why);
        return;
    }
    op->record.lease_id = etcd_json_u64(response, "ID");
    if (!op->record.lease_id) {
        act_error_set(&why, EPROTO, "box %s: etcd granted a lease without an ID",
                      op->record.box);
        finish(op, -EPROTO, &why);
        return;
    }
    _cleanup_free_ char *key = NULL, *value = claims_box_to_json(&op->record, false);
    if (asprintf(&key, "%s%s", op->es->boxes_key, op->record.box) < 0)
        key = NULL;
    int r = key && value ? call(op, "/v3/kv/put",
                                etcd_put_body(key, value, op->record.lease_id), on_put, &why)
                         : act_error_set(&why, ENOMEM, "box %s: out of memory", op->record.box);
    if (r < 0)
        finish(op, r, &why);
}

/* ---- keepalive ------------------------------------------------------------- */

static void on_keepalive(etcd_call *c, int result, json_object *response, const act_error *err,
                         void *userdata)
{
    box_op *op = userdata;
    act_error why = {0};
    if (result < 0) {
        finish(op, result, err);
        return;
    }
    json_object *answer = NULL;
    json_object_object_get_ex(response, "result", &answer);
    int64_t ttl = etcd_json_i64(answer, "TTL");
    if (ttl <= 0) {
        act_error_set(&why, -CLAIMS_LEASE_LOST,
                      "box %s: etcd no longer has its lease %" PRIu64
                      " (it expired, was revoked, or etcd lost it); put the record again",
                      op->record.box, op->record.lease_id);
        finish(op, CLAIMS_LEASE_LOST, &why);
        return;
    }
    set_renewed(&op->record, ttl);
    finish(op, 0, NULL);
}

/* ---- remove: revoking the lease deletes the key ---------------------------- */

static void on_revoked(etcd_call *c, int result, json_object *response, const act_error *err,
                       void *userdata)
{
    box_op *op = userdata;
    /* A lease already gone took the record with it. */
    if (result < 0 && !strstr(err->message, "lease not found")) {
        finish(op, result, err);
        return;
    }
    op->record.live = false;
    finish(op, 0, NULL);
}

/* ---- drain marks: a put only where none is, or a delete ------------------ */

/* The mark's key, malloc'd; NULL when out of memory. */
static char *drain_key(const box_op *op)
{
    char *key = NULL;
    return asprintf(&key, "%s%s", op->es->drain_key, op->record.box) < 0 ? NULL : key;
}

static void on_drain_put(etcd_call *c, int result, json_object *response, const act_error *err,
                         void *userdata)
{
    box_op *op = userdata;
    if (result < 0) {
        finish(op, result, err);
        return;
    }
    /* Not put: a mark was there; its first stamp stands. */
    if (!json_object_get_boolean(json_object_object_get(response, "succeeded"))) {
        json_object *responses = json_object_object_get(response, "responses");
        json_object *range =
            json_object_object_get(json_object_array_get_idx(responses, 0), "response_range");
        json_object *kvs = json_object_object_get(range, "kvs");
        json_object *value_obj = json_object_object_get(json_object_array_get_idx(kvs, 0), "value");
        _cleanup_free_ char *value = NULL;
        size_t len = 0;
        uint64_t since = 0;
        act_error bad = {0};
        if (value_obj && etcd_b64_decode(json_object_get_string(value_obj), &value, &len) == 0 &&
            claims_drain_from_json(op->record.box, value, len, &since, &bad) == 0)
            op->record.drained_usec = since;
    }
    finish(op, 0, NULL);
}

static void on_undrained(etcd_call *c, int result, json_object *response, const act_error *err,
                         void *userdata)
{
    box_op *op = userdata;
    if (result >= 0)
        op->record.drained_usec = 0;
    finish(op, result, err);
}

static int drain_call(box_op *op, act_error *err)
{
    _cleanup_free_ char *key = drain_key(op), *value = NULL;
    if (!key)
        return act_error_set(err, ENOMEM, "box %s: out of memory", op->record.box);
    if (op->call == CLAIMS_BOX_UNDRAIN)
        return call(op, "/v3/kv/deleterange", etcd_range_body(key, NULL), on_undrained, err);
    value = claims_drain_to_json(op->record.box, op->record.drained_usec);
    if (!value)
        return act_error_set(err, ENOMEM, "box %s: out of memory", op->record.box);
    return call(op, "/v3/kv/txn", etcd_txn_body(key, 0, value, NULL, 0, NULL, NULL), on_drain_put,
                err);
}

int etcd_box_call_async(claim_store *store, sd_event *event, claims_box_call call_kind,
                        const claims_box *record, claims_box_fn fn, void *userdata,
                        act_error *err)
{
    bool drain = call_kind == CLAIMS_BOX_DRAIN || call_kind == CLAIMS_BOX_UNDRAIN;
    if (call_kind != CLAIMS_BOX_PUT && !drain && !record->lease_id)
        return act_error_set(err, EINVAL, "box %s: the record has no lease; it was never put",
                             record->box);
    box_op *op = calloc(1, sizeof(*op));
    if (!op)
        return act_error_set(err, ENOMEM, "box %s: out of memory", record->box);
    *op = (box_op){.es = (etcd_store *)store, .event = event, .call = call_kind,
                   .record = *record, .fn = fn, .userdata = userdata};
    etcd_held_add(op->es, &op->held, discard_held);
    int r;
    switch (call_kind) {
    case CLAIMS_BOX_PUT:
        r = call(op, "/v3/lease/grant", etcd_lease_grant_body(ttl_seconds(record)), on_granted,
                 err);
        break;
    case CLAIMS_BOX_KEEPALIVE:
        r = call(op, "/v3/lease/keepalive", etcd_lease_body(record->lease_id), on_keepalive, err);
        break;
    case CLAIMS_BOX_DRAIN:
    case CLAIMS_BOX_UNDRAIN:
        r = drain_call(op, err);
        break;
    case CLAIMS_BOX_REMOVE:
    default:
        r = call(op, "/v3/lease/revoke", etcd_lease_body(record->lease_id), on_revoked, err);
        break;
    }
    if (r < 0) {
        etcd_held_remove(op->es, &op->held);
        free(op);
    }
    return r;
}

/* ---- list: one range, then (for the display) each record's lease --------- */

typedef struct list_op {
    etcd_held held; /* first: freed with the store while its calls are out */
    etcd_store *es;
    sd_event *event;
    claims_box_listing what;
    claims_boxes_fn fn;
    void *userdata;
    claims_box *boxes;
    size_t n;
    size_t cap;
    size_t pending; /* timetolive calls not answered yet */
    struct lease_ask *asks; /* one per record, the timetolive calls' userdata */
} list_op;

typedef struct lease_ask {
    list_op *list;
    size_t index;
} lease_ask;

static void list_free(list_op *list)
{
    free(list->boxes);
    free(list->asks);
    free(list);
}

static void discard_list(etcd_held *held)
{
    list_free((list_op *)held);
}

static void list_finish(list_op *list, int result, const act_error *err)
{
    if (result >= 0 && list->n > 1)
        qsort(list->boxes, list->n, sizeof(*list->boxes), claims_box_compare);
    list->fn(&list->es->base, result, list->boxes, result >= 0 ? list->n : 0, err,
             list->userdata);
    etcd_held_remove(list->es, &list->held);
    list_free(list);
}

static void on_time_to_live(etcd_call *c, int result, json_object *response,
                            const act_error *err, void *userdata)
{
    lease_ask *ask = userdata;
    list_op *list = ask->list;
    claims_box *record = &list->boxes[ask->index];
    /* The key was there, so its lease was alive when ranged; without an
     * answer only its age is unknown. etcd counts whole seconds left,
     * rounded down, so 0 is a lease in its last second and only -1 one that
     * is gone. */
    if (result >= 0) {
        int64_t ttl = etcd_json_i64(response, "TTL");
        int64_t granted = etcd_json_i64(response, "grantedTTL");
        if (ttl < 0) {
            record->live = false;
        } else {
            set_renewed(record, ttl);
            if (granted > ttl)
                record->refreshed_usec -= (uint64_t)(granted - ttl) * USEC_PER_SEC;
        }
    }
    if (--list->pending == 0)
        list_finish(list, 0, NULL);
}

/* Decodes one kv of the range into list->boxes[list->n]; false (logged)
 * for one that is not a record. */
static bool take_record(list_op *list, json_object *kv)
{
    json_object *key_obj = NULL, *value_obj = NULL;
    _cleanup_free_ char *key = NULL, *value = NULL;
    size_t key_len = 0, value_len = 0, prefix_len = strlen(list->es->boxes_key);
    char box[ACT_NAME_MAX + 1] = "(undecodable key)";
    if (json_object_object_get_ex(kv, "key", &key_obj) &&
        etcd_b64_decode(json_object_get_string(key_obj), &key, &key_len) == 0 &&
        key_len > prefix_len && key_len - prefix_len <= ACT_NAME_MAX &&
        strlen(key) == key_len)
        snprintf(box, sizeof(box), "%s", key + prefix_len);
    act_error bad = {0};
    claims_box *record = &list->boxes[list->n];
    if (!act_name_is_valid(box))
        act_error_set(&bad, EINVAL, "etcd key under %s does not end in a valid box name (%s)",
                      list->es->boxes_key, box);
    else if (!json_object_object_get_ex(kv, "value", &value_obj) ||
             etcd_b64_decode(json_object_get_string(value_obj), &value, &value_len) < 0)
        act_error_set(&bad, EINVAL, "box %s: etcd value is not base64", box);
    else if (claims_box_from_json(box, value, value_len, record, &bad) >= 0) {
        /* etcd keeps the renewal and expiry in the lease, never in the
         * value: one a value says is not believed. */
        record->refreshed_usec = record->expires_usec = 0;
        record->lease_id = etcd_json_u64(kv, "lease");
        /* Liveness is the key's presence, which only a lease makes mean
         * anything: a record put without one is no daemon's, and nothing
         * would ever remove it. */
        record->live = record->lease_id != 0;
        if (!record->live)
            act_log(LOG_WARNING,
                    "box list: box %s: etcd key %s%s has no lease, so no daemon keeps it; "
                    "it is listed as not live; delete the key",
                    box, list->es->boxes_key, box);
        list->n++;
        return true;
    }
    act_log(LOG_WARNING, "box list skipped: %s; delete the key", bad.message);
    return false;
}

/* Notes one kv of the drain range on the listing; one that cannot be read
 * still marks its box drained (the side that hands it no host), logged. */
static int take_drain(list_op *list, json_object *kv, act_error *err)
{
    json_object *key_obj = NULL, *value_obj = NULL;
    _cleanup_free_ char *key = NULL, *value = NULL;
    size_t key_len = 0, value_len = 0, prefix_len = strlen(list->es->drain_key);
    if (!json_object_object_get_ex(kv, "key", &key_obj) ||
        etcd_b64_decode(json_object_get_string(key_obj), &key, &key_len) < 0 ||
        key_len <= prefix_len || strlen(key) != key_len || !act_name_is_valid(key + prefix_len)) {
        act_log(LOG_WARNING,
                "box list skipped: an etcd key under %s does not end in a valid "
                "box name; delete it",
                list->es->drain_key);
        return 0;
    }
    const char *box = key + prefix_len;
    uint64_t since = 0;
    act_error bad = {0};
    if (!json_object_object_get_ex(kv, "value", &value_obj) ||
        etcd_b64_decode(json_object_get_string(value_obj), &value, &value_len) < 0)
        act_error_set(&bad, EINVAL, "box %s: drain mark is not base64", box);
    else
        claims_drain_from_json(box, value, value_len, &since, &bad);
    if (!since)
        act_log(LOG_WARNING, "box list: %s; the box is listed as drained", bad.message);
    return claims_box_list_add_drain(&list->boxes, &list->n, &list->cap, box, since ? since : 1,
                                     err);
}

/* The range's kvs: every key under what (boxes_key, drain_key), or an
 * error saying what etcd answered instead. A range without a limit answers
 * all of them; an answer with fewer than it counts (a proxy that limits
 * ranges) would hide live boxes, so it is refused rather than taken as the
 * fleet. */
static int range_kvs(list_op *list, const char *what, json_object *response, json_object **kvs,
                     act_error *err)
{
    *kvs = NULL;
    json_object *found = NULL;
    if (!json_object_object_get_ex(response, "kvs", &found))
        return 0; /* etcd leaves out an empty list */
    if (!json_object_is_type(found, json_type_array))
        return act_error_set(err, EPROTO,
                             "box list: etcd's range of %s answered \"kvs\" that is not an "
                             "array; check that the store's endpoints are etcd v3's JSON gateway",
                             what);
    size_t n_kvs = json_object_array_length(found);
    int64_t count = etcd_json_i64(response, "count");
    if (count > 0 && (uint64_t)count > n_kvs)
        return act_error_set(err, EPROTO,
                             "box list: etcd's range of %s answered %zu of the %" PRId64
                             " records it counts, so live boxes would be missed; check that "
                             "nothing between activator and etcd limits ranges",
                             what, n_kvs, count);
    *kvs = found;
    return 0;
}

/* Asks each leased record's lease how long it has left; the list finishes
 * when the last answer came. */
static void ask_leases(list_op *list)
{
    /* One more than the asks, released below, so no answer finishes the
     * list while asks are still being made. */
    list->pending = 1;
    list->asks = calloc(list->n ? list->n : 1, sizeof(*list->asks));
    for (size_t i = 0; list->asks && i < list->n; i++) {
        if (!list->boxes[i].lease_id)
            continue;
        lease_ask *ask = &list->asks[i];
        act_error why = {0};
        *ask = (lease_ask){list, i};
        list->pending++;
        if (etcd_store_call(list->es, list->event, "/v3/lease/timetolive",
                            etcd_lease_body(list->boxes[i].lease_id), on_time_to_live, ask,
                            &why) < 0)
            list->pending--;
    }
    if (--list->pending == 0)
        list_finish(list, 0, NULL);
}

static void on_boxes_ranged(etcd_call *c, int result, json_object *response, const act_error *err,
                            void *userdata)
{
    list_op *list = userdata;
    if (result < 0) {
        list_finish(list, result, err);
        return;
    }
    /* One txn ranged the records and the drain marks, at one revision. */
    json_object *responses = json_object_object_get(response, "responses");
    json_object *ranges[2] = {NULL, NULL};
    for (size_t i = 0; i < 2; i++)
        ranges[i] =
            json_object_object_get(json_object_array_get_idx(responses, i), "response_range");
    json_object *kvs = NULL, *drains = NULL;
    act_error why = {0};
    int r = range_kvs(list, list->es->boxes_key, ranges[0], &kvs, &why);
    if (r >= 0)
        r = range_kvs(list, list->es->drain_key, ranges[1], &drains, &why);
    if (r < 0) {
        list_finish(list, r, &why);
        return;
    }
    size_t n_kvs = kvs ? json_object_array_length(kvs) : 0;
    size_t n_drains = drains ? json_object_array_length(drains) : 0;
    list->cap = n_kvs + n_drains ? n_kvs + n_drains : 1;
    list->boxes = calloc(list->cap, sizeof(*list->boxes));
    if (!list->boxes) {
        act_error_set(&why, ENOMEM, "box list: out of memory");
        list_finish(list, -ENOMEM, &why);
        return;
    }
    for (size_t i = 0; i < n_kvs; i++)
        take_record(list, json_object_array_get_idx(kvs, i));
    for (size_t i = 0; i < n_drains && r >= 0; i++)
        r = take_drain(list, json_object_array_get_idx(drains, i), &why);
    if (r < 0) {
        list_finish(list, r, &why);
        return;
    }
    /* The range alone says which boxes are live: what a decision needs. */
    if (list->what == CLAIMS_BOX_LIST_LIVENESS)
        list_finish(list, 0, NULL);
    else
        ask_leases(list);
}

int etcd_box_list_async(claim_store *store, sd_event *event, claims_box_listing what,
                        claims_boxes_fn fn, void *userdata, act_error *err)
{
    etcd_store *es = (etcd_store *)store;
    list_op *list = calloc(1, sizeof(*list));
    if (!list)
        return act_error_set(err, ENOMEM, "box list: out of memory");
    *list = (list_op){.es = es, .event = event, .what = what, .fn = fn, .userdata = userdata};
    etcd_held_add(es, &list->held, discard_list);
    int r = etcd_store_call(
        es, event, "/v3/kv/txn",
        etcd_two_ranges_body(es->boxes_key, es->boxes_end, es->drain_key, es->drain_end),
        on_boxes_ranged, list, err);
    if (r < 0) {
        etcd_held_remove(es, &list->held);
        list_free(list);
    }
    return r;
}
