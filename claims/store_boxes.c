/* The box record calls' front (claims.h: box records): checks at the edge,
 * and the bridges that give each backend's one flavour the other face, the
 * way store.c does for claims. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/store_internal.h"
#include "common/cleanup.h"
#include "common/names.h"

/* ---- synchronous calls over an asynchronous backend ---------------------- */

typedef struct box_wait {
    bool done;
    int result;
    claims_box record;
    claims_box *boxes;
    size_t n_boxes;
    act_error *err;
} box_wait;

static void wait_done(box_wait *wait, int result, const act_error *err)
{
    wait->done = true;
    wait->result = result;
    if (result < 0 && wait->err && err)
        *wait->err = *err;
}

static void on_sync_box(claim_store *store, int result, const claims_box *record,
                        const act_error *err, void *userdata)
{
    box_wait *wait = userdata;
    if (result >= 0 && record)
        wait->record = *record;
    wait_done(wait, result, err);
}

static void on_sync_boxes(claim_store *store, int result, const claims_box *boxes, size_t n,
                          const act_error *err, void *userdata)
{
    box_wait *wait = userdata;
    if (result >= 0 && n) {
        wait->boxes = malloc(n * sizeof(*boxes));
        if (!wait->boxes) {
            act_error oom = {0};
            act_error_set(&oom, ENOMEM, "box list: out of memory");
            wait_done(wait, -ENOMEM, &oom);
            return;
        }
        memcpy(wait->boxes, boxes, n * sizeof(*boxes));
        wait->n_boxes = n;
    }
    wait_done(wait, result, err);
}

/* A drain call reads only the box's name (and the stamp); the rest is the
 * record's. */
static bool is_drain_call(claims_box_call call)
{
    return call == CLAIMS_BOX_DRAIN || call == CLAIMS_BOX_UNDRAIN;
}

static int check_record(claims_box_call call, const claims_box *record, act_error *err)
{
    assert(record);
    /* A drain call's record is made by drain_record, which checked it. */
    return is_drain_call(call) ? 0 : claims_box_validate(record, err);
}

/* The record a drain call carries: the box, checked as a name, and the
 * stamp. */
static int drain_record(const char *box, uint64_t stamp_usec, claims_box *out, act_error *err)
{
    act_error why = {0};
    if (act_name_check("box", box, &why) < 0)
        return act_error_set(err, EINVAL, "drain: %s", why.message);
    *out = (claims_box){.drained_usec = stamp_usec};
    snprintf(out->box, sizeof(out->box), "%s", box);
    return 0;
}

static int box_call(claim_store *store, claims_box_call call, const claims_box *record,
                    claims_box *out, act_error *err)
{
    assert(store);
    int r = check_record(call, record, err);
    if (r < 0)
        return r;
    claims_box ignored;
    if (!out)
        out = &ignored;
    if (store->ops->box_call)
        return store->ops->box_call(store, call, record, out, err);
    sd_event *loop = NULL;
    if ((r = claims_private_loop(store, &loop, err)) < 0)
        return r;
    box_wait wait = {.err = err};
    r = store->ops->box_call_async(store, loop, call, record, on_sync_box, &wait, err);
    if (r < 0 || (r = claims_run_until(store, &wait.done, err)) < 0)
        return r;
    if (wait.result >= 0)
        *out = wait.record;
    return wait.result;
}

int claims_box_put(claim_store *store, const claims_box *record, claims_box *out, act_error *err)
{
    return box_call(store, CLAIMS_BOX_PUT, record, out, err);
}

int claims_box_keepalive(claim_store *store, const claims_box *record, claims_box *out,
                         act_error *err)
{
    return box_call(store, CLAIMS_BOX_KEEPALIVE, record, out, err);
}

int claims_box_remove(claim_store *store, const claims_box *record, act_error *err)
{
    return box_call(store, CLAIMS_BOX_REMOVE, record, NULL, err);
}

int claims_box_drain(claim_store *store, const char *box, uint64_t stamp_usec,
                     uint64_t *drained_usec, act_error *err)
{
    claims_box record, stored = {0};
    int r = drain_record(box, stamp_usec ? stamp_usec : 1, &record, err);
    if (r >= 0)
        r = box_call(store, CLAIMS_BOX_DRAIN, &record, &stored, err);
    if (r >= 0 && drained_usec)
        *drained_usec = stored.drained_usec;
    return r;
}

int claims_box_undrain(claim_store *store, const char *box, act_error *err)
{
    claims_box record;
    int r = drain_record(box, 0, &record, err);
    return r < 0 ? r : box_call(store, CLAIMS_BOX_UNDRAIN, &record, NULL, err);
}

static int box_list(claim_store *store, claims_box_listing what, claims_box **out, size_t *n_out,
                    act_error *err)
{
    assert(store);
    assert(out);
    assert(n_out);
    *out = NULL;
    *n_out = 0;
    if (store->ops->box_list)
        return store->ops->box_list(store, what, out, n_out, err);
    sd_event *loop = NULL;
    int r = claims_private_loop(store, &loop, err);
    if (r < 0)
        return r;
    box_wait wait = {.err = err};
    r = store->ops->box_list_async(store, loop, what, on_sync_boxes, &wait, err);
    if (r < 0 || (r = claims_run_until(store, &wait.done, err)) < 0)
        return r;
    if (wait.result < 0) {
        free(wait.boxes);
        return wait.result;
    }
    *out = wait.boxes;
    *n_out = wait.n_boxes;
    return 0;
}

int claims_box_list(claim_store *store, claims_box **out, size_t *n_out, act_error *err)
{
    return box_list(store, CLAIMS_BOX_LIST_LEASES, out, n_out, err);
}

int claims_box_list_live(claim_store *store, claims_box **out, size_t *n_out, act_error *err)
{
    return box_list(store, CLAIMS_BOX_LIST_LIVENESS, out, n_out, err);
}

/* ---- asynchronous calls over a synchronous backend ------------------------ */

typedef struct deferred_box {
    claims_deferred base;
    bool list;
    claims_box_listing listing; /* list: what it learns */
    claims_box_call call;
    claims_box record;
    claims_box_fn fn;
    claims_boxes_fn list_fn;
    void *userdata;
    /* The result, written by the worker. */
    int result;
    claims_box stored;
    claims_box *boxes;
    size_t n_boxes;
    act_error err;
} deferred_box;

static void run_deferred_box(claims_deferred *base)
{
    deferred_box *d = (deferred_box *)base;
    claim_store *store = base->store;
    if (d->list)
        d->result = store->ops->box_list(store, d->listing, &d->boxes, &d->n_boxes, &d->err);
    else
        d->result = store->ops->box_call(store, d->call, &d->record, &d->stored, &d->err);
}

static void complete_deferred_box(claims_deferred *base)
{
    _cleanup_free_ deferred_box *d = (deferred_box *)base;
    _cleanup_free_ claims_box *boxes = d->boxes;
    if (d->list)
        d->list_fn(base->store, d->result, boxes, d->n_boxes, &d->err, d->userdata);
    else
        d->fn(base->store, d->result, d->result >= 0 ? &d->stored : NULL, &d->err, d->userdata);
}

/* The store was freed before the call completed. */
static void discard_deferred_box(claims_deferred *base)
{
    deferred_box *d = (deferred_box *)base;
    free(d->boxes);
    free(d);
}

/* The lane of a box's calls: they run in the order made, apart from the
 * hosts' (a host is never named ".boxes"). */
#define BOX_LANE ".boxes"

static int defer_box(claim_store *store, const deferred_box *template, act_error *err)
{
    deferred_box *d = malloc(sizeof(*d));
    if (!d)
        return act_error_set(err, ENOMEM, "claim store: out of memory");
    *d = *template;
    d->base.run = run_deferred_box;
    d->base.complete = complete_deferred_box;
    d->base.discard = discard_deferred_box;
    int r = claims_defer(store, BOX_LANE, &d->base, err);
    if (r < 0)
        free(d);
    return r;
}

static int box_call_async(claim_store *store, claims_box_call call, const claims_box *record,
                          claims_box_fn fn, void *userdata, act_error *err)
{
    assert(store);
    assert(fn);
    int r = claims_check_attached(store, err);
    if (r < 0 || (r = check_record(call, record, err)) < 0)
        return r;
    if (store->ops->box_call_async)
        return store->ops->box_call_async(store, store->attached, call, record, fn, userdata,
                                          err);
    return defer_box(store,
                     &(deferred_box){.call = call, .record = *record, .fn = fn,
                                     .userdata = userdata},
                     err);
}

int claims_box_put_async(claim_store *store, const claims_box *record, claims_box_fn fn,
                         void *userdata, act_error *err)
{
    return box_call_async(store, CLAIMS_BOX_PUT, record, fn, userdata, err);
}

int claims_box_keepalive_async(claim_store *store, const claims_box *record, claims_box_fn fn,
                               void *userdata, act_error *err)
{
    return box_call_async(store, CLAIMS_BOX_KEEPALIVE, record, fn, userdata, err);
}

int claims_box_remove_async(claim_store *store, const claims_box *record, claims_box_fn fn,
                            void *userdata, act_error *err)
{
    return box_call_async(store, CLAIMS_BOX_REMOVE, record, fn, userdata, err);
}

int claims_box_drain_async(claim_store *store, const char *box, uint64_t stamp_usec,
                           claims_box_fn fn, void *userdata, act_error *err)
{
    claims_box record;
    int r = drain_record(box, stamp_usec ? stamp_usec : 1, &record, err);
    return r < 0 ? r : box_call_async(store, CLAIMS_BOX_DRAIN, &record, fn, userdata, err);
}

int claims_box_undrain_async(claim_store *store, const char *box, claims_box_fn fn, void *userdata,
                             act_error *err)
{
    claims_box record;
    int r = drain_record(box, 0, &record, err);
    return r < 0 ? r : box_call_async(store, CLAIMS_BOX_UNDRAIN, &record, fn, userdata, err);
}

static int box_list_async(claim_store *store, claims_box_listing what, claims_boxes_fn fn,
                          void *userdata, act_error *err)
{
    assert(store);
    assert(fn);
    int r = claims_check_attached(store, err);
    if (r < 0)
        return r;
    if (store->ops->box_list_async)
        return store->ops->box_list_async(store, store->attached, what, fn, userdata, err);
    return defer_box(
        store, &(deferred_box){.list = true, .listing = what, .list_fn = fn, .userdata = userdata},
        err);
}

int claims_box_list_async(claim_store *store, claims_boxes_fn fn, void *userdata, act_error *err)
{
    return box_list_async(store, CLAIMS_BOX_LIST_LEASES, fn, userdata, err);
}

int claims_box_list_live_async(claim_store *store, claims_boxes_fn fn, void *userdata,
                               act_error *err)
{
    return box_list_async(store, CLAIMS_BOX_LIST_LIVENESS, fn, userdata, err);
}
