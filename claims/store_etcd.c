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
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/json_fields.h"
#include "common/log.h"
#include "common/names.h"
#include "common/text.h"

/* Changes received and not yet delivered, at most: past it the watch ends
 * with an error, and its owner lists the claims again, which costs less
 * than holding an unbounded backlog. */
#define WATCH_PENDING_MAX 1024

/* A list in pages (etcd_list_async) (claims_store_options.list_page_keys), every page at the
 * revision of the first: a claim written between pages is not in the list,
 * and the watch from the list's revision + 1 tells it. Each page is decoded
 * as it arrives and let go. */
typedef struct list_pages {
    char *range_end;
    uint64_t revision; /* the first page's, 0 before it */
    claim *claims;
    size_t n, cap;
    /* A box's list removes the delete marks it passes over (see
     * list_take_page) and answers once those removals are answered too:
     * how many are out, and the list's own end once it came. */
    unsigned tidies_out;
    bool ended;
    int result;
    act_error error;
} list_pages;

/* One read, compare-and-swap, delete or list in flight. The store keeps
 * every one in a list, because freeing the store cancels their calls
 * without callbacks (etcd_client_free), and a daemon frees its store with
 * calls in flight when it hands over or stops. */
typedef struct etcd_op {
    etcd_store *es;
    struct etcd_op *prev, *next;
    char host[ACT_NAME_MAX + 1];
    claims_read_fn read_fn;
    claims_cas_fn cas_fn;
    claims_list_fn list_fn;
    claims_problem_fn problem;
    void *problem_userdata;
    bool delete_expects_absent;
    void *userdata;
    /* A write: what to write (NULL: delete), at which expected revision,
     * on which loop, and the boxes the claim names after it. */
    char *value;
    uint64_t expected;
    sd_event *event;
    claim written; /* the claim a cas writes */
    char *dead_key; /* a takeover's: the record key of the box taken from, which must be absent */
    /* A list or watch of one box's index: the keys' prefix before the host
     * ("<prefix>/" for every claim). */
    char *key_prefix;
    bool index;
    list_pages *list_pages; /* a list's pages so far */
} etcd_op;

static char *key_for(etcd_store *es, const char *host)
{
    char *key;
    return asprintf(&key, "%s/%s", es->prefix, host) < 0 ? NULL : key;
}

/* The host kv's key names under the prefix. etcd keys are bytes, so
 * "<prefix>/web\0x" is a key of its own: a key whose rest after the prefix
 * is empty, too long, or holds a NUL or any other byte a host name cannot is
 * malformed, and never read as some host's (for problems, shown gets the
 * key as it can be shown). */
static int kv_host(const char *key_prefix, json_object *kv, char host[static ACT_NAME_MAX + 1],
                   char *shown, size_t shown_size, act_error *err)
{
    json_object *key_obj = NULL;
    _cleanup_free_ char *key = NULL;
    size_t key_len = 0, prefix_len = strlen(key_prefix);
    snprintf(shown, shown_size, "(undecodable key)");
    if (!json_object_object_get_ex(kv, "key", &key_obj) ||
        !json_object_is_type(key_obj, json_type_string) ||
        etcd_b64_decode(json_object_get_string(key_obj), &key, &key_len) < 0)
        return act_error_set(err, EINVAL, "an etcd key under %s is not base64; not a claim",
                             key_prefix);
    act_text_show_bytes(key, key_len, shown, shown_size);
    const char *name = key + prefix_len;
    size_t name_len = key_len > prefix_len ? key_len - prefix_len : 0;
    /* The decoded key ends in a NUL, so with none inside, name is a string. */
    if (key_len <= prefix_len || memcmp(key, key_prefix, prefix_len) != 0 ||
        name_len > ACT_NAME_MAX || memchr(name, '\0', name_len) || !act_name_is_valid(name))
        return act_error_set(err, EINVAL,
                             "etcd key \"%s\" is not a claim: what follows %s is not a host "
                             "name (it holds a NUL or a byte a host name cannot); delete the key",
                             shown, key_prefix);
    memcpy(host, name, name_len + 1);
    return 0;
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

/* A box's index entry for a claim that was deleted: an empty value, which
 * the gateway may leave out of the kv altogether. */
static bool kv_is_deleted_mark(json_object *kv)
{
    json_object *value;
    return !json_object_object_get_ex(kv, "value", &value) ||
           (json_object_is_type(value, json_type_string) && !json_object_get_string_len(value));
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
    op->next = es->ops;
    if (es->ops)
        es->ops->prev = op;
    es->ops = op;
    return op;
}

static void op_free(etcd_op *op)
{
    if (op->list_pages) {
        free(op->list_pages->claims);
        free(op->list_pages->range_end);
        free(op->list_pages);
    }
    free(op->value);
    free(op->dead_key);
    free(op->key_prefix);
    sd_event_unref(op->event);
    if (op->prev)
        op->prev->next = op->next;
    else
        op->es->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
    free(op);
}

void etcd_held_add(etcd_store *es, etcd_held *held, void (*discard)(etcd_held *held))
{
    *held = (etcd_held){.next = es->held, .discard = discard};
    if (es->held)
        es->held->prev = held;
    es->held = held;
}

void etcd_held_remove(etcd_store *es, etcd_held *held)
{
    if (held->prev)
        held->prev->next = held->next;
    else
        es->held = held->next;
    if (held->next)
        held->next->prev = held->prev;
    held->prev = held->next = NULL;
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
        op_free(op);
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
        if (r >= 0)
            etcd_memo_remember(op->es, &current);
        op->read_fn(&op->es->base, r < 0 ? r : 1, r < 0 ? NULL : &current, &parse_err,
                    op->userdata);
    }
    op_free(op);
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

/* ---- cas and delete ---------------------------------------------------------- *
 *
 * One txn writes the claim and, with it, the index entry of every box the
 * claim names before or after the write: a copy of the new claim, or an
 * empty value for a delete. The boxes it named before come from the memo
 * (the claim at the expected revision, as this store last saw it), or
 * else from a read just before the txn; the txn's compare on the expected
 * revision proves that read still describes the claim it replaces. */

static void answer_changed(etcd_op *op, const claim *current)
{
    claim now = current ? *current : (claim){0};
    snprintf(now.host, sizeof(now.host), "%s", op->host);
    op->cas_fn(&op->es->base, CLAIMS_CHANGED, 0, &now, NULL, op->userdata);
    op_free(op);
}

/* A takeover's txn failed: whether the box's record key is there (the
 * failure branch's second range). */
static bool dead_box_back(json_object *txn)
{
    json_object *responses = NULL, *range = NULL, *kvs = NULL;
    if (!json_object_object_get_ex(txn, "responses", &responses) ||
        json_object_array_length(responses) < 2 ||
        !json_object_object_get_ex(json_object_array_get_idx(responses, 1), "response_range",
                                   &range))
        return false;
    return json_object_object_get_ex(range, "kvs", &kvs) && json_object_array_length(kvs) > 0;
}

/* Shared by cas and delete: success gives the txn's revision, failure the
 * current claim from the failure branch's range. */
static void on_txn_done(etcd_call *call, int result, json_object *response, const act_error *err,
                        void *userdata)
{
    etcd_op *op = userdata;
    claim_store *store = &op->es->base;
    json_object *header = NULL;
    if (result < 0) {
        op->cas_fn(store, result, 0, NULL, err, op->userdata);
        op_free(op);
        return;
    }
    bool ok = act_json_bool_or(response, "succeeded", false);
    json_object_object_get_ex(response, "header", &header);
    uint64_t revision = etcd_json_u64(header, "revision");
    if (ok && op->delete_expects_absent) {
        /* A delete whose expected revision was 0: the compare "MOD == 0"
         * held, so the key is absent, which is a conflict for a delete. */
        answer_changed(op, NULL);
        return;
    }
    if (ok) {
        if (op->value) {
            op->written.revision = revision;
            etcd_memo_remember(op->es, &op->written);
        } else {
            etcd_memo_forget(op->es, op->host);
        }
        op->cas_fn(store, 0, revision, NULL, NULL, op->userdata);
        op_free(op);
        return;
    }
    if (op->dead_key && dead_box_back(response)) {
        act_error live = {0};
        act_error_set(&live, -CLAIMS_BOX_LIVE,
                      "host %s: the box it was to be taken from has a live record again; it "
                      "was not taken",
                      op->host);
        op->cas_fn(store, CLAIMS_BOX_LIVE, 0, NULL, &live, op->userdata);
        op_free(op);
        return;
    }
    claim current = {0};
    act_error parse_err = {0};
    json_object *kv = first_kv(first_response(response, "response_range"));
    int r = kv ? etcd_kv_to_claim(op->host, kv, &current, &parse_err) : 0;
    if (r < 0) {
        op->cas_fn(store, r, 0, NULL, &parse_err, op->userdata);
        op_free(op);
        return;
    }
    if (kv)
        etcd_memo_remember(op->es, &current);
    answer_changed(op, kv ? &current : NULL);
}

/* Starts the txn once the boxes the replaced claim named are known. On
 * failure op is still the caller's. */
static int txn_call(etcd_op *op, const claim_boxes *before, act_error *err)
{
    etcd_store *es = op->es;
    claim_boxes boxes = *before;
    if (op->value) {
        claim_boxes after;
        claim_named_boxes(&op->written, &after);
        claim_boxes_merge(&boxes, &after);
    }
    char *key = key_for(es, op->host);
    char **index_keys = etcd_index_keys(es, &boxes, op->host);
    char *body = key && index_keys
                     ? etcd_txn_body(key, op->expected, op->value, (const char *const *)index_keys,
                                     boxes.n, op->value ? op->value : "", op->dead_key)
                     : NULL;
    free(key);
    etcd_index_keys_free(index_keys, boxes.n);
    return etcd_store_call(es, op->event, "/v3/kv/txn", body, on_txn_done, op, err);
}

/* The claim to be replaced, read because the memo did not have it. */
static void on_replaced_read(etcd_call *call, int result, json_object *response,
                             const act_error *err, void *userdata)
{
    etcd_op *op = userdata;
    if (result < 0) {
        op->cas_fn(&op->es->base, result, 0, NULL, err, op->userdata);
        op_free(op);
        return;
    }
    json_object *kv = first_kv(response);
    if (!kv) {
        answer_changed(op, NULL);
        return;
    }
    claim current;
    act_error parse_err = {0};
    claim_boxes before = {0};
    bool parsed = etcd_kv_to_claim(op->host, kv, &current, &parse_err) >= 0;
    uint64_t revision = etcd_json_u64(kv, "mod_revision");
    if (parsed) {
        etcd_memo_remember(op->es, &current);
        claim_named_boxes(&current, &before);
    }
    /* A value that is not a claim may be replaced by the CAS that names
     * its revision (that is how it is repaired); it named no box an index
     * could hold. Otherwise it is the write's answer, as the txn's. */
    if (revision != op->expected && !parsed) {
        op->cas_fn(&op->es->base, -parse_err.errnum, 0, NULL, &parse_err, op->userdata);
        op_free(op);
        return;
    }
    if (revision != op->expected) {
        answer_changed(op, &current);
        return;
    }
    act_error call_err = {0};
    if (txn_call(op, &before, &call_err) < 0) {
        op->cas_fn(&op->es->base, -call_err.errnum, 0, NULL, &call_err, op->userdata);
        op_free(op);
    }
}

static int start_txn(etcd_store *es, sd_event *event, const char *host, uint64_t expected,
                     const claim *c, const char *dead_box, claims_cas_fn fn, void *userdata,
                     act_error *err)
{
    etcd_op *op = op_new(es, host, userdata, err);
    if (!op)
        return -ENOMEM;
    if (dead_box && asprintf(&op->dead_key, "%s%s", es->boxes_key, dead_box) < 0) {
        op->dead_key = NULL;
        op_free(op);
        return act_error_set(err, ENOMEM, "host %s: out of memory", host);
    }
    op->cas_fn = fn;
    op->expected = expected;
    op->event = sd_event_ref(event);
    if (c) {
        op->written = *c;
        snprintf(op->written.host, sizeof(op->written.host), "%s", host);
        op->value = claim_to_json(c);
        if (!op->value) {
            op_free(op);
            return act_error_set(err, ENOMEM, "host %s: out of memory", host);
        }
        if (strlen(op->value) > CLAIM_JSON_MAX) {
            op_free(op);
            return act_error_set(err, EFBIG, "host %s: claim is over the %d byte limit", host,
                                 CLAIM_JSON_MAX);
        }
    }
    /* A delete expecting "absent": the txn's "CREATE == 0" compare holds
     * only for a missing key, so success there means nothing to delete. */
    op->delete_expects_absent = !c && expected == 0;
    claim_boxes before = {0};
    if (expected == 0 || etcd_memo_recall(es, host, expected, &before)) {
        int r = txn_call(op, &before, err);
        if (r < 0)
            op_free(op);
        return r;
    }
    char *key = key_for(es, host);
    char *body = key ? etcd_range_body(key, NULL) : NULL;
    free(key);
    return start(es, event, "/v3/kv/range", body, on_replaced_read, op, err);
}

static int etcd_cas_async(claim_store *store, sd_event *event, const char *host, uint64_t expected,
                          const claim *c, const char *dead_box, claims_cas_fn fn, void *userdata,
                          act_error *err)
{
    return start_txn((etcd_store *)store, event, host, expected, c, dead_box, fn, userdata, err);
}

static int etcd_del_async(claim_store *store, sd_event *event, const char *host,
                          uint64_t expected, claims_cas_fn fn, void *userdata, act_error *err)
{
    return start_txn((etcd_store *)store, event, host, expected, NULL, NULL, fn, userdata, err);
}

/* ---- tidying a box's index ------------------------------------------------------ */

typedef struct tidy_op {
    etcd_held held; /* first: freed with the store while its call is out */
    etcd_store *es;
    claims_cas_fn fn;
    void *userdata;
} tidy_op;

static void discard_tidy(etcd_held *held)
{
    free(held); /* tidy_op begins with it and owns nothing else */
}

static void on_tidied(etcd_call *call, int result, json_object *response, const act_error *err,
                      void *userdata)
{
    tidy_op *op = userdata;
    claim_store *store = &op->es->base;
    etcd_held_remove(op->es, &op->held);
    if (!op->fn)
        ;
    else if (result < 0)
        op->fn(store, result, 0, NULL, err, op->userdata);
    else if (!act_json_bool_or(response, "succeeded", false))
        op->fn(store, CLAIMS_CHANGED, 0, NULL, NULL, op->userdata);
    else
        op->fn(store, 0, 0, NULL, NULL, op->userdata);
    free(op);
}

/* Deletes the index entry of host under key_prefix (a box's index) if its
 * revision is still revision. The entry's own revision is the claim's (one
 * txn wrote both), so the compare holds only while no write named the box
 * again. */
static int delete_entry_at(etcd_store *es, sd_event *event, const char *key_prefix,
                           const char *host, uint64_t revision, etcd_call_done_fn done,
                           void *userdata, act_error *err)
{
    char *key = NULL;
    if (asprintf(&key, "%s%s", key_prefix, host) < 0)
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    char *body = etcd_txn_body(key, revision, NULL, NULL, 0, NULL, NULL);
    free(key);
    return etcd_store_call(es, event, "/v3/kv/txn", body, done, userdata, err);
}

static int etcd_tidy_async(claim_store *store, sd_event *event, const char *box, const char *host,
                           uint64_t revision, claims_cas_fn fn, void *userdata, act_error *err)
{
    etcd_store *es = (etcd_store *)store;
    tidy_op *op = calloc(1, sizeof(*op));
    char *key_prefix = NULL;
    if (!op || asprintf(&key_prefix, "%s%s/", es->index_key, box) < 0) {
        free(op);
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    }
    *op = (tidy_op){.es = es, .fn = fn, .userdata = userdata};
    etcd_held_add(es, &op->held, discard_tidy);
    int r = delete_entry_at(es, event, key_prefix, host, revision, on_tidied, op, err);
    free(key_prefix);
    if (r < 0) {
        etcd_held_remove(es, &op->held);
        free(op);
    }
    return r;
}

/* ---- list ------------------------------------------------------------------ */

/* Answers the list (handing its claims over) and frees it. */
static void list_finish(etcd_op *op, list_pages *pages, int result, const act_error *err);

/* The list ended (read to its last page, or failed): it answers now, or
 * once the last of its tidies is answered. */
static void list_end(etcd_op *op, list_pages *pages, int result, const act_error *err)
{
    pages->ended = true;
    pages->result = result;
    if (err)
        pages->error = *err;
    if (!pages->tidies_out)
        list_finish(op, pages, result, err);
}

static void on_mark_tidied(etcd_call *call, int result, json_object *response, const act_error *err,
                           void *userdata)
{
    etcd_op *op = userdata;
    list_pages *pages = op->list_pages;
    /* Not removed (the store failed, or a write named the box again):
     * the mark stays for a later list; the list's answer is the same. */
    if (result < 0)
        act_log(LOG_DEBUG, "etcd list: a delete mark of the index stays: %s",
                err ? err->message : "no answer");
    pages->tidies_out--;
    if (pages->ended && !pages->tidies_out)
        list_finish(op, pages, pages->result, pages->result < 0 ? &pages->error : NULL);
}

/* A delete's mark in the box's index that a list passes over: the box has
 * heard the delete (its list has no claim of host), so the mark is removed
 * if it is still that mark, as the box's view removes one its watch told.
 * Without this, a mark written while the box was not watching would stay
 * for good. */
static void tidy_mark(etcd_op *op, list_pages *pages, const char *host, json_object *kv)
{
    act_error err = {0};
    if (delete_entry_at(op->es, op->event, op->key_prefix, host, etcd_json_u64(kv, "mod_revision"),
                        on_mark_tidied, op, &err) < 0) {
        act_log(LOG_DEBUG, "etcd list: cannot remove a delete mark of the index: %s", err.message);
        return;
    }
    pages->tidies_out++;
}

static void list_finish(etcd_op *op, list_pages *pages, int result, const act_error *err)
{
    claim_store *store = &op->es->base;
    if (result < 0) {
        op->list_fn(store, result, NULL, 0, 0, err, op->userdata);
    } else {
        claim *claims = TAKE_PTR(pages->claims);
        if (claims)
            qsort(claims, pages->n, sizeof(*claims), claims_compare_by_host);
        else
            claims = calloc(1, sizeof(*claims)); /* an array even when empty */
        op->list_fn(store, 0, claims, pages->n, pages->revision, NULL, op->userdata);
    }
    op_free(op);
}

/* Takes one page's kvs into pages; false when out of memory. */
static bool list_take_page(etcd_op *op, list_pages *pages, json_object *kvs)
{
    size_t n_kvs = kvs ? json_object_array_length(kvs) : 0;
    if (pages->n + n_kvs > pages->cap) {
        size_t cap = pages->n + n_kvs;
        claim *grown = realloc(pages->claims, (cap ? cap : 1) * sizeof(*grown));
        if (!grown)
            return false;
        pages->claims = grown;
        pages->cap = cap;
    }
    for (size_t i = 0; i < n_kvs; i++) {
        json_object *kv = json_object_array_get_idx(kvs, i);
        act_error bad = {0};
        char host[ACT_NAME_MAX + 1], shown[ACT_TEXT_SHOW_MAX];
        int r = kv_host(op->key_prefix, kv, host, shown, sizeof(shown), &bad);
        /* A malformed key is named as it can be shown: it names no host. */
        const char *named = r < 0 ? shown : host;
        if (r >= 0 && op->index && kv_is_deleted_mark(kv)) {
            tidy_mark(op, pages, host, kv);
            continue;
        }
        if (r >= 0)
            r = etcd_kv_to_claim(host, kv, &pages->claims[pages->n], &bad);
        if (r >= 0)
            etcd_memo_remember(op->es, &pages->claims[pages->n++]);
        else if (op->problem)
            op->problem(named, &bad, op->problem_userdata);
        else
            act_log(LOG_WARNING, "claim list skipped: %s", bad.message);
    }
    return true;
}

static void on_list_page(etcd_call *call, int result, json_object *response, const act_error *err,
                         void *userdata);

/* Asks for the page after key (its raw bytes; NULL: the first page). */
static int list_ask(etcd_op *op, list_pages *pages, const char *after, size_t after_len,
                    act_error *err)
{
    _cleanup_free_ char *from = NULL;
    size_t from_len = 0;
    if (after) {
        /* The smallest key above the last one read: it with a NUL added. */
        if (!(from = malloc(after_len + 1)))
            return act_error_set(err, ENOMEM, "etcd list: out of memory");
        memcpy(from, after, after_len);
        from[after_len] = '\0';
        from_len = after_len + 1;
    }
    char *body = etcd_range_page_body(after ? from : op->key_prefix,
                                      after ? from_len : strlen(op->key_prefix), pages->range_end,
                                      (uint64_t)op->es->base.list_page_keys, pages->revision);
    return etcd_store_call(op->es, op->event, "/v3/kv/range", body, on_list_page, op, err);
}

static void on_list_page(etcd_call *call, int result, json_object *response, const act_error *err,
                         void *userdata)
{
    etcd_op *op = userdata;
    list_pages *pages = op->list_pages;
    if (result < 0) {
        list_end(op, pages, result, err);
        return;
    }
    json_object *header = NULL, *kvs = NULL;
    json_object_object_get_ex(response, "header", &header);
    if (!pages->revision)
        pages->revision = etcd_json_u64(header, "revision");
    if (json_object_object_get_ex(response, "kvs", &kvs) &&
        !json_object_is_type(kvs, json_type_array))
        kvs = NULL;
    act_error fail = {0};
    if (!list_take_page(op, pages, kvs)) {
        act_error_set(&fail, ENOMEM, "etcd list: out of memory");
        list_end(op, pages, -ENOMEM, &fail);
        return;
    }
    size_t n_kvs = kvs ? json_object_array_length(kvs) : 0;
    if (!act_json_bool_or(response, "more", false) || n_kvs == 0) {
        list_end(op, pages, 0, NULL);
        return;
    }
    json_object *last = NULL;
    json_object_object_get_ex(json_object_array_get_idx(kvs, n_kvs - 1), "key", &last);
    _cleanup_free_ char *key = NULL;
    size_t key_len = 0;
    if (!last || etcd_b64_decode(json_object_get_string(last), &key, &key_len) < 0) {
        act_error_set(&fail, EPROTO, "etcd list: a page's last key is not base64");
        list_end(op, pages, -EPROTO, &fail);
        return;
    }
    if (op->es->base.between_pages)
        op->es->base.between_pages(op->es->base.between_pages_userdata);
    if (list_ask(op, pages, key, key_len, &fail) < 0)
        list_end(op, pages, -fail.errnum, &fail);
}

static int etcd_list_async(claim_store *store, sd_event *event, const char *box,
                           claims_problem_fn problem, void *problem_userdata, claims_list_fn fn,
                           void *userdata, act_error *err)
{
    etcd_store *es = (etcd_store *)store;
    etcd_op *op = op_new(es, NULL, userdata, err);
    if (!op)
        return -ENOMEM;
    op->list_fn = fn;
    op->problem = problem;
    op->problem_userdata = problem_userdata;
    op->index = box != NULL;
    op->event = sd_event_ref(event);
    list_pages *pages = calloc(1, sizeof(*pages));
    op->list_pages = pages;
    int r = !pages ? -ENOMEM
            : box  ? etcd_index_range(es, box, &op->key_prefix, &pages->range_end)
                   : ((op->key_prefix = strdup(es->list_key)) &&
                             (pages->range_end = strdup(es->list_end))
                          ? 0
                          : -ENOMEM);
    if (r < 0) {
        op_free(op);
        return act_error_set(err, ENOMEM, "etcd list: out of memory");
    }
    r = list_ask(op, pages, NULL, 0, err);
    if (r < 0)
        op_free(op);
    return r;
}

/* ---- watch ------------------------------------------------------------------ */

/* Changes received and not yet delivered, oldest first: a ring that grows
 * by doubling up to WATCH_PENDING_MAX, so taking one is O(1). */
typedef struct change_ring {
    claim_change *items;
    size_t cap, head, n;
} change_ring;

static bool ring_push(change_ring *ring, const claim_change *change)
{
    if (ring->n == ring->cap) {
        if (ring->cap >= WATCH_PENDING_MAX)
            return false;
        size_t cap = ring->cap ? ring->cap * 2 : 16;
        claim_change *items = malloc(cap * sizeof(*items));
        if (!items)
            return false;
        for (size_t i = 0; i < ring->n; i++)
            items[i] = ring->items[(ring->head + i) % ring->cap];
        free(ring->items);
        *ring = (change_ring){.items = items, .cap = cap, .n = ring->n};
    }
    ring->items[(ring->head + ring->n) % ring->cap] = *change;
    ring->n++;
    return true;
}

static void ring_pop(change_ring *ring, claim_change *out)
{
    *out = ring->items[ring->head];
    ring->head = (ring->head + 1) % ring->cap;
    ring->n--;
}

typedef struct etcd_watch {
    claims_watch base;
    etcd_store *es;
    struct etcd_watch *prev, *next; /* the store's watches */
    sd_event *event;
    etcd_call *call;
    sd_event_source *deliver; /* changes are delivered from here, never from curl's callback */
    change_ring pending;
    int error; /* set once the stream ended; delivered after the pending changes */
    act_error error_detail;
    bool error_delivered;
    /* Telling a quiet stream from a dead one: the stream's last message,
     * the revision up to which it has told us everything, and the probe
     * asked once it was silent for the store's watch timeout. */
    sd_event_source *silence;
    uint64_t heard_usec;
    uint64_t known_revision;
    bool from_now; /* started from "now": the created answer says where that is */
    etcd_call *probe;
    uint64_t probe_sent_usec;
    /* The last probe found a write the stream had not told: it may only be
     * on its way (written just before the probe), so the watch looks again
     * after a grace before it takes the stream for dead. */
    bool looking_again;
    /* What it watches: range_key up to range_end ("<prefix>/" for every
     * claim, or a box's index), or range_key alone (a host's claim: no
     * range_end); key_prefix is what precedes a host name in its keys. */
    char *key_prefix;
    char *range_key;
    char *range_end;
    bool index;
} etcd_watch;

static void watch_set_error(etcd_watch *w, int error, const act_error *err)
{
    if (w->error)
        return;
    w->error = error;
    w->error_detail = *err;
    sd_event_source_set_enabled(w->silence, SD_EVENT_OFF);
    sd_event_source_set_enabled(w->deliver, SD_EVENT_ONESHOT);
}

/* False when the queue is full: the watch then ends with an error. */
static bool watch_queue(etcd_watch *w, const claim_change *change)
{
    if (!ring_push(&w->pending, change)) {
        act_error err = {0};
        act_error_set(&err, ENOBUFS,
                      "etcd endpoint %s: more than %d claim changes arrived faster than they "
                      "were handled; the watch ends so the claims are listed again",
                      w->call ? etcd_call_endpoint(w->call) : "?", WATCH_PENDING_MAX);
        watch_set_error(w, -ENOBUFS, &err);
        return false;
    }
    if (change->revision > w->known_revision)
        w->known_revision = change->revision;
    sd_event_source_set_enabled(w->deliver, SD_EVENT_ONESHOT);
    return true;
}

/* False for an event that is no change to tell: in a box's index, only a
 * put is news (a claim's delete puts an empty entry); an entry's removal
 * is the index tidying what no longer concerns the box. */
static bool event_to_change(etcd_watch *w, json_object *event, claim_change *change)
{
    json_object *kv = NULL, *type = NULL;
    memset(change, 0, sizeof(*change));
    json_object_object_get_ex(event, "kv", &kv);
    change->revision = etcd_json_u64(kv, "mod_revision");
    char shown[ACT_TEXT_SHOW_MAX];
    /* Checked first, for a delete too: a malformed key is nobody's change. */
    if (kv_host(w->key_prefix, kv, change->claim.host, shown, sizeof(shown), &change->problem) <
        0) {
        change->claim.host[0] = '\0';
        change->kind = CLAIM_CHANGE_MALFORMED;
        return true;
    }
    bool removed = json_object_object_get_ex(event, "type", &type) &&
                   strcmp(json_object_get_string(type), "DELETE") == 0;
    if (removed && w->index)
        return false;
    if (removed || (w->index && kv_is_deleted_mark(kv))) {
        change->kind = CLAIM_CHANGE_DELETE;
        etcd_memo_forget(w->es, change->claim.host);
        return true;
    }
    claim parsed;
    if (etcd_kv_to_claim(change->claim.host, kv, &parsed, &change->problem) < 0) {
        change->kind = CLAIM_CHANGE_MALFORMED;
    } else {
        change->kind = CLAIM_CHANGE_PUT;
        change->claim = parsed;
        etcd_memo_remember(w->es, &parsed);
    }
    return true;
}

/* A message without events, not the answer to the create and not an end:
 * a progress notification, which etcd sends only for a watch that has been
 * told every change up to the header's revision. */
static void note_progress(etcd_watch *w, json_object *result)
{
    json_object *header = NULL;
    json_object_object_get_ex(result, "header", &header);
    uint64_t revision = etcd_json_u64(header, "revision");
    bool is_created = act_json_bool_or(result, "created", false);
    /* From "now", the created answer names now; from a revision, it does
     * not say what was told (the changes since may still be on their way). */
    if ((!is_created || w->from_now) && revision > w->known_revision)
        w->known_revision = revision;
}

static bool on_watch_message(etcd_call *call, json_object *message, void *userdata)
{
    etcd_watch *w = userdata;
    json_object *result, *events, *error;
    act_error err = {0};
    /* The watch already ended (a silent stream, a full queue): nothing
     * after that is delivered. */
    if (w->error)
        return false;
    w->heard_usec = act_loop_now_usec(w->event);
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
                      "; re-read the claims and watch from the revision of that read + 1",
                      etcd_call_endpoint(call), compacted);
        watch_set_error(w, -ENODATA, &err);
        return false;
    }
    if (act_json_bool_or(result, "canceled", false)) {
        act_error_set(&err, ECANCELED, "etcd endpoint %s: the server canceled the watch",
                      etcd_call_endpoint(call));
        watch_set_error(w, -ECANCELED, &err);
        return false;
    }
    if (!json_object_object_get_ex(result, "events", &events) ||
        json_object_array_length(events) == 0) {
        note_progress(w, result);
        return true;
    }
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        claim_change change;
        if (!event_to_change(w, json_object_array_get_idx(events, i), &change)) {
            if (change.revision > w->known_revision)
                w->known_revision = change.revision;
            continue;
        }
        if (!watch_queue(w, &change))
            return false;
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
    while (w->pending.n) {
        claim_change change;
        ring_pop(&w->pending, &change);
        if (!claims_watch_deliver(&w->base, &change, 0, NULL))
            return 0;
    }
    if (w->error && !w->error_delivered) {
        w->error_delivered = true;
        claims_watch_deliver(&w->base, NULL, w->error, &w->error_detail);
    }
    return 0;
}

/* A watch of a narrow range (a box's index, a host's claim) asks whether a
 * key of its own was written since: the rest of the fleet moves the
 * store's revision without a word to its stream. */
static bool probes_by_key(const etcd_watch *w)
{
    return w->index || !w->range_end;
}

static void arm_silence(etcd_watch *w)
{
    uint64_t timeout = (uint64_t)w->es->base.watch_timeout_ms * 1000;
    w->looking_again = false;
    sd_event_source_set_time(w->silence, w->heard_usec + timeout);
    sd_event_source_set_enabled(w->silence, SD_EVENT_ONESHOT);
}

/* How long a write the probe found has to reach a live stream: what etcd
 * wrote before it answered the probe is already on the stream's way. */
static uint64_t second_look_grace_usec(const etcd_watch *w)
{
    uint64_t timeout = (uint64_t)w->es->base.watch_timeout_ms * 1000;
    return timeout < 2000000 ? timeout : 2000000;
}

static void look_again(etcd_watch *w)
{
    w->looking_again = true;
    sd_event_source_set_time(w->silence, act_loop_now_usec(w->event) + second_look_grace_usec(w));
    sd_event_source_set_enabled(w->silence, SD_EVENT_ONESHOT);
}

/* The probe found a write after what the stream told: a dead stream, or a
 * write that landed just before the probe and is still on its way. The
 * first time, the watch looks again after the grace; the second, the stream
 * had that long to tell it. */
static void missed_write(etcd_watch *w, const char *what)
{
    if (!w->looking_again) {
        look_again(w);
        return;
    }
    act_error dead = {0};
    act_error_set(&dead, ETIMEDOUT,
                  "etcd: the watch stream was silent for %d ms while %s, and still %" PRIu64
                  " ms later; the stream is taken for dead",
                  w->es->base.watch_timeout_ms, what, second_look_grace_usec(w) / 1000);
    watch_set_error(w, -ETIMEDOUT, &dead);
}

static void on_probe_done(etcd_call *call, int result, json_object *response,
                          const act_error *err, void *userdata)
{
    etcd_watch *w = userdata;
    w->probe = NULL;
    act_error dead = {0};
    int silent_ms = w->es->base.watch_timeout_ms;
    if (result < 0) {
        act_error_set(&dead, err ? err->errnum : EIO,
                      "etcd: the watch stream was silent for %d ms and the store does not "
                      "answer: %s",
                      silent_ms, err ? err->message : "no answer");
        watch_set_error(w, result, &dead);
        return;
    }
    /* The stream spoke while the probe was out: it is alive, whatever the
     * probe found (what it found is what the stream was telling). */
    if (w->heard_usec > w->probe_sent_usec) {
        arm_silence(w);
        return;
    }
    json_object *header = NULL;
    json_object_object_get_ex(response, "header", &header);
    uint64_t revision = etcd_json_u64(header, "revision");
    json_object *kv = first_kv(response);
    char what[200];
    if (probes_by_key(w) && kv) {
        /* The other boxes' writes move the store's revision without a
         * word to this stream; only an entry of its own index written
         * after what it was told says the stream missed something. */
        snprintf(what, sizeof(what),
                 "an entry of its index was written at revision %" PRIu64
                 ", after revision %" PRIu64 ", the last it told",
                 etcd_json_u64(kv, "mod_revision"), w->known_revision);
        missed_write(w, what);
        return;
    }
    if (!probes_by_key(w) && revision > w->known_revision) {
        /* Something was written that the stream did not tell (a change of
         * ours, or a key outside the prefix: a count cannot say which). */
        snprintf(what, sizeof(what), "the store moved from revision %" PRIu64 " to %" PRIu64,
                 w->known_revision, revision);
        missed_write(w, what);
        return;
    }
    /* The member the stream is on is not the one that answers calls now
     * (a call left it since): the watch moves there, as a heal. */
    if (w->call && etcd_call_endpoint_index(w->call) != etcd_client_answering(w->es->client)) {
        act_error_set(&dead, EHOSTUNREACH,
                      "etcd: the watch stream on %s was silent for %d ms while calls are "
                      "answered elsewhere; the watch moves",
                      etcd_call_endpoint(w->call), silent_ms);
        watch_set_error(w, -EHOSTUNREACH, &dead);
        return;
    }
    /* Nothing was written anywhere since the stream last spoke: it is only
     * quiet. */
    w->heard_usec = act_loop_now_usec(w->event);
    arm_silence(w);
}

static int on_silence(sd_event_source *source, uint64_t usec, void *userdata)
{
    etcd_watch *w = userdata;
    uint64_t timeout = (uint64_t)w->es->base.watch_timeout_ms * 1000;
    if (w->error || w->probe)
        return 0;
    /* Silent again since the last look, or only for the grace of a second. */
    bool spoke =
        w->looking_again ? w->heard_usec > w->probe_sent_usec : usec < w->heard_usec + timeout;
    if (spoke) {
        arm_silence(w);
        return 0;
    }
    if (w->es->base.before_silence_probe)
        w->es->base.before_silence_probe(w->es->base.before_silence_probe_userdata);
    curl_glue *glue;
    act_error err = {0};
    w->probe_sent_usec = act_loop_now_usec(w->event);
    int r = etcd_client_glue(w->es->client, w->event, &glue, &err);
    if (r >= 0)
        r = etcd_call_start(w->es->client, glue, "/v3/kv/range",
                            probes_by_key(w) ? etcd_written_since_body(w->range_key, w->range_end,
                                                                       w->known_revision + 1)
                                             : etcd_count_body(w->range_key, w->range_end),
                            on_probe_done, NULL, w, &w->probe, &err);
    if (r < 0)
        watch_set_error(w, r, &err);
    return 0;
}

static void etcd_watch_free(claims_watch *watch)
{
    etcd_watch *w = (etcd_watch *)watch;
    if (w->prev)
        w->prev->next = w->next;
    else if (w->es->watches == w)
        w->es->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    etcd_call_cancel(w->call);
    etcd_call_cancel(w->probe);
    sd_event_source_disable_unref(w->deliver);
    sd_event_source_disable_unref(w->silence);
    sd_event_unref(w->event);
    free(w->pending.items);
    free(w->key_prefix);
    free(w->range_key);
    free(w->range_end);
    free(w);
}

/* The keys a watch of scope covers (see etcd_watch). */
static int watch_range(etcd_store *es, const claims_watch_scope *scope, etcd_watch *w)
{
    int r = 0;
    if (scope && scope->box) {
        r = etcd_index_range(es, scope->box, &w->key_prefix, &w->range_end);
        w->range_key = r < 0 ? NULL : strdup(w->key_prefix);
    } else if (scope && scope->host) {
        w->key_prefix = strdup(es->list_key);
        w->range_key = key_for(es, scope->host);
    } else {
        w->key_prefix = strdup(es->list_key);
        w->range_key = strdup(es->list_key);
        w->range_end = strdup(es->list_end);
        r = w->range_end ? 0 : -ENOMEM;
    }
    return r < 0 || !w->key_prefix || !w->range_key ? -ENOMEM : 0;
}

static int etcd_watch_start(claim_store *store, sd_event *event, const claims_watch_scope *scope,
                            uint64_t from_revision, claims_watch_fn fn, void *userdata,
                            claims_watch **out, act_error *err)
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
    w->next = es->watches;
    if (es->watches)
        es->watches->prev = w;
    es->watches = w;
    w->event = sd_event_ref(event);
    w->from_now = from_revision == 0;
    w->known_revision = from_revision ? from_revision - 1 : 0;
    w->index = scope && scope->box;
    /* From here a failed start frees the watch the way any watch is freed. */
    _cleanup_(claims_watch_freep) claims_watch *watch = &w->base;
    r = watch_range(es, scope, w);
    if (r < 0)
        return act_error_set(err, ENOMEM, "etcd watch: out of memory");
    w->heard_usec = act_loop_now_usec(event);
    r = sd_event_add_defer(event, &w->deliver, on_watch_deliver, w);
    if (r >= 0)
        r = sd_event_add_time(event, &w->silence, CLOCK_MONOTONIC, UINT64_MAX, 0, on_silence, w);
    if (r < 0)
        return act_error_set(err, -r, "etcd watch: cannot add to the event loop");
    sd_event_source_set_enabled(w->deliver, SD_EVENT_OFF);
    arm_silence(w);
    r = etcd_call_start(es->client, glue, "/v3/watch",
                        etcd_watch_body(w->range_key, w->range_end, from_revision), on_watch_done,
                        on_watch_message, w, &w->call, err);
    if (r < 0)
        return r;
    *out = TAKE_PTR(watch);
    return 0;
}

/* ---- open ------------------------------------------------------------------- */

/* A call that began on endpoint from was answered by endpoint to: from
 * stopped answering, and a watch on it would only go silent. Each ends now,
 * and its owner's heal starts the next one where calls are answered. */
static void on_member_left(size_t from, size_t to, void *userdata)
{
    etcd_store *es = userdata;
    for (etcd_watch *w = es->watches; w; w = w->next) {
        if (!w->call || etcd_call_endpoint_index(w->call) != from)
            continue;
        act_error err = {0};
        act_error_set(&err, EHOSTUNREACH,
                      "etcd endpoint %s stopped answering calls (the last one went to the "
                      "next endpoint); the watch on it ends and moves",
                      etcd_call_endpoint(w->call));
        watch_set_error(w, -EHOSTUNREACH, &err);
    }
}

static void etcd_free(claim_store *store)
{
    etcd_store *es = (etcd_store *)store;
    /* Cancels every call in flight without its callback: the ops they
     * would have freed are freed here. */
    etcd_client_free(es->client);
    while (es->ops)
        op_free(es->ops);
    while (es->held) {
        etcd_held *held = es->held;
        etcd_held_remove(es, held);
        held->discard(held);
    }
    free(es->prefix);
    free(es->list_key);
    free(es->list_end);
    free(es->boxes_key);
    free(es->boxes_end);
    free(es->drain_key);
    free(es->drain_end);
    free(es->index_key);
    free(es->layout_key);
    etcd_memo_free(es);
    free(es);
}

static size_t etcd_traffic(const claim_store *store, claims_store_traffic *out, size_t max)
{
    return etcd_client_traffic(((const etcd_store *)store)->client, out, max);
}

static const claims_store_ops etcd_ops = {
    .kind = "etcd",
    .free = etcd_free,
    .read_async = etcd_read_async,
    .cas_async = etcd_cas_async,
    .del_async = etcd_del_async,
    .list_async = etcd_list_async,
    .tidy_async = etcd_tidy_async,
    .box_call_async = etcd_box_call_async,
    .box_list_async = etcd_box_list_async,
    .watch_start = etcd_watch_start,
    .check_layout_async = etcd_check_layout_async,
    .traffic = etcd_traffic,
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
        asprintf(&es->boxes_end, "%s" ETCD_BOXES_SUFFIX "0", es->prefix) < 0 ||
        asprintf(&es->drain_key, "%s" ETCD_DRAIN_SUFFIX "/", es->prefix) < 0 ||
        asprintf(&es->drain_end, "%s" ETCD_DRAIN_SUFFIX "0", es->prefix) < 0 ||
        asprintf(&es->index_key, "%s" ETCD_INDEX_SUFFIX "/", es->prefix) < 0 ||
        asprintf(&es->layout_key, "%s" ETCD_LAYOUT_SUFFIX, es->prefix) < 0)
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    int r = etcd_client_new(url, options, &es->client, err);
    if (r < 0)
        return r;
    etcd_client_on_moved(es->client, on_member_left, es);
    *out = TAKE_PTR(store);
    return 0;
}
