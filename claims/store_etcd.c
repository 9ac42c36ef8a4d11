/* The etcd v3 claim store: a claim is the value of key "<prefix>/<host>", its
 * revision is the key's mod_revision, and compare-and-swap is one txn (see
 * etcd_wire.h). All calls are asynchronous on a curl_glue; store.c runs them
 * on a private loop for the synchronous API. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/etcd_wire.h"
#include "claims/store_etcd.h"
#include "common/log.h"
#include "common/names.h"


typedef struct etcd_op {
    etcd_store *es;
    char host[ACT_NAME_MAX + 1];
    claims_read_fn read_fn;
    claims_cas_fn cas_fn;
    claims_list_done_fn list_fn;
    claims_problem_fn problem;
    void *problem_userdata;
    bool delete_expects_absent;
    void *userdata;
} etcd_op;

static char *key_for(etcd_store *es, const char *host)
{
    char *key;
    return asprintf(&key, "%s/%s", es->prefix, host) < 0 ? NULL : key;
}

/* The first response of a txn or the range answer's kvs array. */
static json_object *first_response(json_object *txn, const char *kind)
{
    json_object *responses, *first, *inner;
    if (!json_object_object_get_ex(txn, "responses", &responses) ||
        json_object_array_length(responses) < 1)
        return NULL;
    first = json_object_array_get_idx(responses, 0);
    return json_object_object_get_ex(first, kind, &inner) ? inner : NULL;
}

static json_object *first_kv(json_object *range)
{
    json_object *kvs;
    if (!range || !json_object_object_get_ex(range, "kvs", &kvs) ||
        json_object_array_length(kvs) < 1)
        return NULL;
    return json_object_array_get_idx(kvs, 0);
}

static etcd_op *op_new(etcd_store *es, const char *host, void *userdata, act_error *err)
{
    etcd_op *op = calloc(1, sizeof(*op));
    if (!op) {
        act_error_set(err, ENOMEM, "etcd: out of memory");
        return NULL;
    }
    op->es = es;
    op->userdata = userdata;
    if (host)
        snprintf(op->host, sizeof(op->host), "%s", host);
    return op;
}

int etcd_store_call(etcd_store *es, sd_event *event, const char *path, char *body,
                    etcd_call_done_fn done, void *userdata, act_error *err)
{
    curl_glue *glue;
    int r = etcd_client_glue(es->client, event, &glue, err);
    if (r < 0) {
        free(body);
        return r;
    }
    return etcd_call_start(es->client, glue, path, body, done, NULL, userdata, NULL, err);
}

static int start(etcd_store *es, sd_event *event, const char *path, char *body,
                 etcd_call_done_fn done, etcd_op *op, act_error *err)
{
    int r = etcd_store_call(es, event, path, body, done, op, err);
    if (r < 0)
        free(op);
    return r;
}

/* ---- read ------------------------------------------------------------------ */

static void on_read_done(etcd_call *call, int result, json_object *response,
                         const act_error *err, void *userdata)
{
    etcd_op *op = userdata;
    claim current;
    act_error parse_err = {0};
    if (result < 0) {
        op->read_fn(&op->es->base, result, NULL, err, op->userdata);
    } else if (!first_kv(response)) {
        op->read_fn(&op->es->base, 0, NULL, NULL, op->userdata);
    } else {
        int r = etcd_kv_to_claim(op->host, first_kv(response), &current, &parse_err);
        op->read_fn(&op->es->base, r < 0 ? r : 1, r < 0 ? NULL : &current, &parse_err,
                    op->userdata);
    }
    free(op);
}

static int etcd_read_async(claim_store *store, sd_event *event, const char *host,
                           claims_read_fn fn, void *userdata, act_error *err)
{
    etcd_store *es = (etcd_store *)store;
    etcd_op *op = op_new(es, host, userdata, err);
    if (!op)
        return -ENOMEM;
    op->read_fn = fn;
    char *key = key_for(es, host);
    char *body = key ? etcd_range_body(key, NULL) : NULL;
    free(key);
    return start(es, event, "/v3/kv/range", body, on_read_done, op, err);
}

/* ---- cas and delete ---------------------------------------------------------- */

/* Shared by cas and delete: success gives the txn's revision, failure the
 * current claim from the failure branch's range. */
static void on_txn_done(etcd_call *call, int result, json_object *response, const act_error *err,
                        void *userdata)
{
    etcd_op *op = userdata;
    claim_store *store = &op->es->base;
    json_object *succeeded = NULL, *header = NULL;
    if (result < 0) {
        op->cas_fn(store, result, 0, NULL, err, op->userdata);
        free(op);
        return;
    }
    bool ok = json_object_object_get_ex(response, "succeeded", &succeeded) &&
              json_object_get_boolean(succeeded);
    json_object_object_get_ex(response, "header", &header);
    uint64_t revision = etcd_json_u64(header, "revision");
    if (ok && op->delete_expects_absent) {
        /* A delete whose expected revision was 0: the compare "MOD == 0"
         * held, so the key is absent, which is a conflict for a delete. */
        claim absent = {0};
        op->cas_fn(store, CLAIMS_CHANGED, 0, &absent, NULL, op->userdata);
    } else if (ok) {
        op->cas_fn(store, 0, revision, NULL, NULL, op->userdata);
    } else {
        claim current = {0};
        act_error parse_err = {0};
        json_object *kv = first_kv(first_response(response, "response_range"));
        int r = kv ? etcd_kv_to_claim(op->host, kv, &current, &parse_err) : 0;
        if (r < 0) {
            op->cas_fn(store, r, 0, NULL, &parse_err, op->userdata);
        } else {
            snprintf(current.host, sizeof(current.host), "%s", op->host);
            op->cas_fn(store, CLAIMS_CHANGED, 0, &current, NULL, op->userdata);
        }
    }
    free(op);
}

static int start_txn(etcd_store *es, sd_event *event, const char *host, uint64_t expected,
                     const char *value, claims_cas_fn fn, void *userdata, act_error *err)
{
    etcd_op *op = op_new(es, host, userdata, err);
    if (!op)
        return -ENOMEM;
    op->cas_fn = fn;
    char *key = key_for(es, host);
    char *body = NULL;
    if (key && !value && expected == 0) {
        /* A delete expecting "absent": the txn's "CREATE == 0" compare holds
         * only for a missing key, so success there means nothing to delete. */
        op->delete_expects_absent = true;
    }
    if (key)
        body = etcd_txn_body(key, expected, value);
    free(key);
    return start(es, event, "/v3/kv/txn", body, on_txn_done, op, err);
}

static int etcd_cas_async(claim_store *store, sd_event *event, const char *host,
                          uint64_t expected, const claim *c, claims_cas_fn fn, void *userdata,
                          act_error *err)
{
    char *value = claim_to_json(c);
    if (!value)
        return act_error_set(err, ENOMEM, "host %s: out of memory", host);
    if (strlen(value) > CLAIM_JSON_MAX) {
        free(value);
        return act_error_set(err, EFBIG, "host %s: claim is over the %d byte limit", host,
                             CLAIM_JSON_MAX);
    }
    int r = start_txn((etcd_store *)store, event, host, expected, value, fn, userdata, err);
    free(value);
    return r;
}

static int etcd_del_async(claim_store *store, sd_event *event, const char *host,
                          uint64_t expected, claims_cas_fn fn, void *userdata, act_error *err)
{
    return start_txn((etcd_store *)store, event, host, expected, NULL, fn, userdata, err);
}

/* ---- list ------------------------------------------------------------------ */

static void on_list_done(etcd_call *call, int result, json_object *response,
                         const act_error *err, void *userdata)
{
    etcd_op *op = userdata;
    claim_store *store = &op->es->base;
    json_object *kvs = NULL;
    if (result < 0) {
        op->list_fn(store, result, NULL, 0, err, op->userdata);
        free(op);
        return;
    }
    size_t n_kvs = json_object_object_get_ex(response, "kvs", &kvs)
                       ? json_object_array_length(kvs)
                       : 0;
    claim *claims = calloc(n_kvs ? n_kvs : 1, sizeof(*claims));
    size_t n = 0;
    size_t prefix_len = strlen(op->es->list_key);
    for (size_t i = 0; claims && i < n_kvs; i++) {
        json_object *kv = json_object_array_get_idx(kvs, i), *key_obj;
        char *key = NULL;
        size_t key_len = 0;
        act_error bad = {0};
        char host[ACT_NAME_MAX + 1] = "(undecodable key)";
        int r = json_object_object_get_ex(kv, "key", &key_obj)
                    ? etcd_b64_decode(json_object_get_string(key_obj), &key, &key_len)
                    : -EINVAL;
        if (r == 0 && key_len > prefix_len && key_len - prefix_len <= ACT_NAME_MAX)
            snprintf(host, sizeof(host), "%s", key + prefix_len);
        free(key);
        if (r < 0 || !act_name_is_valid(host))
            r = act_error_set(&bad, EINVAL, "etcd key under %s does not end in a valid host "
                                            "name (%s); delete it", op->es->list_key, host);
        else
            r = etcd_kv_to_claim(host, kv, &claims[n], &bad);
        if (r >= 0)
            n++;
        else if (op->problem)
            op->problem(host, &bad, op->problem_userdata);
        else
            act_log(LOG_WARNING, "claim list skipped: %s", bad.message);
    }
    if (!claims) {
        act_error oom = {0};
        act_error_set(&oom, ENOMEM, "etcd list: out of memory");
        op->list_fn(store, -ENOMEM, NULL, 0, &oom, op->userdata);
    } else {
        qsort(claims, n, sizeof(*claims), claims_compare_by_host);
        op->list_fn(store, 0, claims, n, NULL, op->userdata);
    }
    free(op);
}

static int etcd_list_async(claim_store *store, sd_event *event, claims_problem_fn problem,
                           void *problem_userdata, claims_list_done_fn fn, void *userdata,
                           act_error *err)
{
    etcd_store *es = (etcd_store *)store;
    etcd_op *op = op_new(es, NULL, userdata, err);
    if (!op)
        return -ENOMEM;
    op->list_fn = fn;
    op->problem = problem;
    op->problem_userdata = problem_userdata;
    return start(es, event, "/v3/kv/range", etcd_range_body(es->list_key, es->list_end),
                 on_list_done, op, err);
}

/* ---- watch ------------------------------------------------------------------ */

typedef struct etcd_watch {
    claims_watch base;
    etcd_store *es;
    etcd_call *call;
    sd_event_source *deliver; /* changes are delivered from here, never from curl's callback */
    claim_change *pending;
    size_t n_pending;
    int error; /* set once the stream ended; delivered after the pending changes */
    act_error error_detail;
    bool error_delivered;
} etcd_watch;

static void watch_queue(etcd_watch *w, const claim_change *change)
{
    claim_change *grown = realloc(w->pending, (w->n_pending + 1) * sizeof(*grown));
    if (!grown)
        return;
    w->pending = grown;
    w->pending[w->n_pending++] = *change;
    sd_event_source_set_enabled(w->deliver, SD_EVENT_ONESHOT);
}

static void watch_set_error(etcd_watch *w, int error, const act_error *err)
{
    if (w->error)
        return;
    w->error = error;
    w->error_detail = *err;
    sd_event_source_set_enabled(w->deliver, SD_EVENT_ONESHOT);
}

static void event_to_change(etcd_watch *w, json_object *event, claim_change *change)
{
    json_object *kv = NULL, *type = NULL, *key_obj = NULL;
    memset(change, 0, sizeof(*change));
    json_object_object_get_ex(event, "kv", &kv);
    change->revision = etcd_json_u64(kv, "mod_revision");
    char *key = NULL;
    size_t key_len = 0, prefix_len = strlen(w->es->list_key);
    if (json_object_object_get_ex(kv, "key", &key_obj) &&
        etcd_b64_decode(json_object_get_string(key_obj), &key, &key_len) == 0 &&
        key_len > prefix_len && key_len - prefix_len <= ACT_NAME_MAX)
        snprintf(change->claim.host, sizeof(change->claim.host), "%s", key + prefix_len);
    free(key);
    if (json_object_object_get_ex(event, "type", &type) &&
        strcmp(json_object_get_string(type), "DELETE") == 0) {
        change->kind = CLAIM_CHANGE_DELETE;
        return;
    }
    claim parsed;
    if (!act_name_is_valid(change->claim.host)) {
        change->kind = CLAIM_CHANGE_MALFORMED;
        act_error_set(&change->problem, EINVAL, "etcd key under %s is not a valid host name",
                      w->es->list_key);
    } else if (etcd_kv_to_claim(change->claim.host, kv, &parsed, &change->problem) < 0) {
        change->kind = CLAIM_CHANGE_MALFORMED;
    } else {
        change->kind = CLAIM_CHANGE_PUT;
        change->claim = parsed;
    }
}

static bool on_watch_message(etcd_call *call, json_object *message, void *userdata)
{
    etcd_watch *w = userdata;
    json_object *result, *events, *canceled, *error;
    act_error err = {0};
    if (json_object_object_get_ex(message, "error", &error)) {
        act_error_set(&err, EIO, "etcd endpoint %s: watch failed: %.300s",
                      etcd_call_endpoint(call), json_object_to_json_string(error));
        watch_set_error(w, -EIO, &err);
        return false;
    }
    if (!json_object_object_get_ex(message, "result", &result))
        return true;
    uint64_t compacted = etcd_json_u64(result, "compact_revision");
    if (compacted) {
        act_error_set(&err, ENODATA,
                      "etcd endpoint %s: watch history is compacted up to revision %" PRIu64
                      "; re-read the claims and watch from revision %" PRIu64,
                      etcd_call_endpoint(call), compacted, compacted + 1);
        watch_set_error(w, -ENODATA, &err);
        return false;
    }
    if (json_object_object_get_ex(result, "canceled", &canceled) &&
        json_object_get_boolean(canceled)) {
        act_error_set(&err, ECANCELED, "etcd endpoint %s: the server canceled the watch",
                      etcd_call_endpoint(call));
        watch_set_error(w, -ECANCELED, &err);
        return false;
    }
    if (!json_object_object_get_ex(result, "events", &events))
        return true;
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        claim_change change;
        event_to_change(w, json_object_array_get_idx(events, i), &change);
        watch_queue(w, &change);
    }
    return true;
}

static void on_watch_done(etcd_call *call, int result, json_object *response,
                          const act_error *err, void *userdata)
{
    etcd_watch *w = userdata;
    w->call = NULL; /* the client frees the call after this returns */
    act_error fallback = {0};
    if (!err)
        act_error_set(&fallback, ECONNRESET, "etcd watch ended");
    watch_set_error(w, result < 0 ? result : -ECONNRESET, err ? err : &fallback);
}

static int on_watch_deliver(sd_event_source *source, void *userdata)
{
    etcd_watch *w = userdata;
    while (w->n_pending) {
        claim_change change = w->pending[0];
        memmove(w->pending, w->pending + 1, (w->n_pending - 1) * sizeof(*w->pending));
        w->n_pending--;
        if (!claims_watch_deliver(&w->base, &change, 0, NULL))
            return 0;
    }
    if (w->error && !w->error_delivered) {
        w->error_delivered = true;
        claims_watch_deliver(&w->base, NULL, w->error, &w->error_detail);
    }
    return 0;
}

static void etcd_watch_free(claims_watch *watch)
{
    etcd_watch *w = (etcd_watch *)watch;
    etcd_call_cancel(w->call);
    sd_event_source_disable_unref(w->deliver);
    free(w->pending);
    free(w);
}

static int etcd_watch_start(claim_store *store, sd_event *event, uint64_t from_revision,
                            claims_watch_fn fn, void *userdata, claims_watch **out,
                            act_error *err)
{
    etcd_store *es = (etcd_store *)store;
    curl_glue *glue;
    int r = etcd_client_glue(es->client, event, &glue, err);
    if (r < 0)
        return r;
    etcd_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return act_error_set(err, ENOMEM, "etcd watch: out of memory");
    w->base = (claims_watch){.store = store, .fn = fn, .userdata = userdata,
                             .free = etcd_watch_free};
    w->es = es;
    r = sd_event_add_defer(event, &w->deliver, on_watch_deliver, w);
    if (r < 0) {
        free(w);
        return act_error_set(err, -r, "etcd watch: cannot add to the event loop");
    }
    sd_event_source_set_enabled(w->deliver, SD_EVENT_OFF);
    r = etcd_call_start(es->client, glue, "/v3/watch",
                        etcd_watch_body(es->list_key, es->list_end, from_revision), on_watch_done,
                        on_watch_message, w, &w->call, err);
    if (r < 0) {
        sd_event_source_disable_unref(w->deliver);
        free(w);
        return r;
    }
    *out = &w->base;
    return 0;
}

/* ---- open ------------------------------------------------------------------- */

static void etcd_free(claim_store *store)
{
    etcd_store *es = (etcd_store *)store;
    etcd_client_free(es->client);
    free(es->prefix);
    free(es->list_key);
    free(es->list_end);
    free(es->boxes_key);
    free(es->boxes_end);
    free(es);
}

static const claims_store_ops etcd_ops = {
    .kind = "etcd",
    .free = etcd_free,
    .read_async = etcd_read_async,
    .cas_async = etcd_cas_async,
    .del_async = etcd_del_async,
    .list_async = etcd_list_async,
    .box_call_async = etcd_box_call_async,
    .box_list_async = etcd_box_list_async,
    .watch_start = etcd_watch_start,
};

int claims_etcd_open(const claims_url *url, const claims_store_options *options,
                     claim_store **out, act_error *err)
{
    assert(url && url->kind == CLAIMS_URL_ETCD);
    assert(options);
    assert(out);
    etcd_store *es = calloc(1, sizeof(*es));
    if (!es)
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    es->base.ops = &etcd_ops;
    /* From here a failed open frees the store the way any store is freed. */
    _cleanup_(claims_store_freep) claim_store *store = &es->base;
    es->prefix = strdup(url->prefix);
    if (!es->prefix || asprintf(&es->list_key, "%s/", es->prefix) < 0 ||
        asprintf(&es->list_end, "%s0", es->prefix) < 0 ||
        asprintf(&es->boxes_key, "%s" ETCD_BOXES_SUFFIX "/", es->prefix) < 0 ||
        asprintf(&es->boxes_end, "%s" ETCD_BOXES_SUFFIX "0", es->prefix) < 0)
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    int r = etcd_client_new(url, options, &es->client, err);
    if (r < 0)
        return r;
    *out = TAKE_PTR(store);
    return 0;
}
