/* The store front: argument checks at the edge, and the bridges that give
 * every backend both a synchronous and an asynchronous face (store_open.c
 * picks the backend). */
#include <assert.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "claims/store_internal.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/names.h"
#include "common/offload.h"

/* Worker threads for a synchronous backend's asynchronous calls: enough for
 * the daemon's default MaxConcurrentStarts on small boxes; calls of
 * different hosts run side by side, so their fsyncs commit together. */
#define DEFERRED_WORKERS 4

int claims_compare_by_host(const void *a, const void *b)
{
    assert(a);
    assert(b);
    return strcmp(((const claim *)a)->host, ((const claim *)b)->host);
}

/* A malformed claim a worker's list came across, told to the caller on
 * the loop. */
typedef struct list_problem {
    char host[ACT_NAME_MAX + 1];
    act_error problem;
} list_problem;

/* An asynchronous claim call of a synchronous backend (claims_defer). */
typedef struct deferred_call {
    claims_deferred base;
    enum { DEFERRED_READ, DEFERRED_CAS, DEFERRED_DELETE } op;
    char host[ACT_NAME_MAX + 1];
    uint64_t expected;
    claim value;
    char dead_box[ACT_NAME_MAX + 1]; /* a takeover's: "" for a plain CAS */
    claims_read_fn read_fn;
    claims_cas_fn cas_fn;
    void *userdata;
    /* The result, written by the worker. */
    int result;
    claim current;
    uint64_t new_revision;
    act_error err;
} deferred_call;

static void deferred_unlink(claims_deferred *call)
{
    for (claims_deferred **p = &call->store->deferred; *p; p = &(*p)->next) {
        if (*p == call) {
            *p = call->next;
            break;
        }
    }
}

/* An observed call: the caller's callback, wrapped so that the observer
 * hears of it first. Linked in the store until it completes, so that a store
 * freed with calls in flight (which then never call back) frees these too. */
typedef struct claims_timed {
    struct claims_timed *next, **prev;
    claim_store *store;
    const char *operation;
    uint64_t started_usec;
    union {
        claims_read_fn read;
        claims_cas_fn cas;
        claims_list_fn list;
    } fn;
    void *userdata;
} claims_timed;

void claims_store_set_observer(claim_store *store, claims_observe_fn fn, void *userdata)
{
    assert(store);
    store->observe = fn;
    store->observe_userdata = userdata;
}

/* NULL when nothing observes: the call then goes straight to its callback. */
static claims_timed *timed_new(claim_store *store, const char *operation, void *userdata)
{
    if (!store->observe)
        return NULL;
    claims_timed *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL; /* unobserved rather than failed */
    *t = (claims_timed){.store = store,
                        .operation = operation,
                        .started_usec = act_now_usec(),
                        .userdata = userdata};
    t->next = store->timed;
    if (t->next)
        t->next->prev = &t->next;
    t->prev = &store->timed;
    store->timed = t;
    return t;
}

static void timed_unlink(claims_timed *t)
{
    *t->prev = t->next;
    if (t->next)
        t->next->prev = t->prev;
}

/* Unlinks and tells the observer; the caller calls back, then frees t. */
static void timed_complete(claims_timed *t, int result)
{
    timed_unlink(t);
    uint64_t now = act_now_usec();
    if (t->store->observe)
        t->store->observe(t->operation, now > t->started_usec ? now - t->started_usec : 0, result,
                          t->store->observe_userdata);
}

/* A call that could not start never calls back. */
static int timed_started(claims_timed *t, int r)
{
    if (t && r < 0) {
        timed_unlink(t);
        free(t);
    }
    return r;
}

static void timed_on_read(claim_store *store, int result, const claim *c, const act_error *err,
                          void *userdata)
{
    claims_timed *t = userdata;
    timed_complete(t, result);
    claims_read_fn fn = t->fn.read;
    void *caller = t->userdata;
    free(t);
    fn(store, result, c, err, caller);
}

static void timed_on_cas(claim_store *store, int result, uint64_t new_revision,
                         const claim *current, const act_error *err, void *userdata)
{
    claims_timed *t = userdata;
    timed_complete(t, result);
    claims_cas_fn fn = t->fn.cas;
    void *caller = t->userdata;
    free(t);
    fn(store, result, new_revision, current, err, caller);
}

static void timed_on_list(claim_store *store, int result, claim *claims, size_t n,
                          uint64_t revision, const act_error *err, void *userdata)
{
    claims_timed *t = userdata;
    timed_complete(t, result);
    claims_list_fn fn = t->fn.list;
    void *caller = t->userdata;
    free(t);
    fn(store, result, claims, n, revision, err, caller);
}

void claims_store_free(claim_store *store)
{
    if (!store)
        return;
    /* First the workers: the calls made run to their end, and none
     * completes (calls back) after this. */
    act_offload_free(store->offload);
    while (store->timed) {
        claims_timed *t = store->timed;
        timed_unlink(t);
        free(t);
    }
    while (store->deferred) {
        claims_deferred *call = store->deferred;
        deferred_unlink(call);
        if (call->discard)
            call->discard(call);
        else
            free(call);
    }
    sd_event *attached = store->attached, *private_loop = store->private_loop;
    store->ops->free(store);
    sd_event_unref(attached);
    sd_event_unref(private_loop);
}

size_t claims_store_traffic_get(const claim_store *store, claims_store_traffic *out, size_t max)
{
    assert(store);
    return store->ops->traffic ? store->ops->traffic(store, out, max) : 0;
}

const char *claims_store_kind(const claim_store *store)
{
    assert(store);
    return store->ops->kind;
}

bool claims_watch_deliver(claims_watch *watch, const claim_change *change, int error,
                          const act_error *err)
{
    assert(watch);
    watch->delivering = true;
    watch->fn(watch, change, error, err, watch->userdata);
    watch->delivering = false;
    if (watch->free_requested) {
        watch->free(watch);
        return false;
    }
    return true;
}

void claims_watch_free(claims_watch *watch)
{
    if (!watch)
        return;
    if (watch->delivering) {
        watch->free_requested = true;
        return;
    }
    watch->free(watch);
}

static int check_host(const char *host, act_error *err)
{
    act_error why = {0};
    if (act_name_check("host", host, &why) < 0)
        return act_error_set(err, EINVAL, "claim store: %s", why.message);
    return 0;
}

/* A claim written under host is validated as that host's, whatever its own
 * host field says, so the key and the body can never disagree. */
static int check_box(const char *box, act_error *err)
{
    if (!box || !act_name_is_valid(box))
        return act_error_set(err, EINVAL, "box \"%s\" is not a valid box name",
                             box ? box : "(null)");
    return 0;
}

static int check_claim_for(const char *host, const claim *c, claim *checked, act_error *err)
{
    *checked = *c;
    snprintf(checked->host, sizeof(checked->host), "%s", host);
    return claim_validate(checked, err);
}

/* ---- synchronous calls over an asynchronous backend ---------------------- */

typedef struct sync_wait {
    bool done;
    int result;
    uint64_t new_revision; /* a list's: the revision it was taken at */
    claim *claim_out;
    claim *claims;
    size_t n_claims;
    act_error *err;
} sync_wait;

int claims_private_loop(claim_store *store, sd_event **out, act_error *err)
{
    if (!store->private_loop) {
        int r = sd_event_new(&store->private_loop);
        if (r < 0)
            return act_error_set(err, -r, "claim store: cannot create its event loop");
    }
    *out = store->private_loop;
    return 0;
}

int claims_run_until(claim_store *store, const bool *done, act_error *err)
{
    while (!*done) {
        int r = sd_event_run(store->private_loop, UINT64_MAX);
        if (r < 0)
            return act_error_set(err, -r, "claim store: event loop failed");
    }
    return 0;
}

static int run_until_done(claim_store *store, sync_wait *wait)
{
    int r = claims_run_until(store, &wait->done, wait->err);
    return r < 0 ? r : wait->result;
}

static void copy_error(sync_wait *wait, int result, const act_error *err)
{
    wait->done = true;
    wait->result = result;
    if (result < 0 && result != CLAIMS_CHANGED && wait->err && err)
        *wait->err = *err;
}

static void on_sync_read(claim_store *store, int result, const claim *c, const act_error *err,
                         void *userdata)
{
    sync_wait *wait = userdata;
    if (result > 0 && c && wait->claim_out)
        *wait->claim_out = *c;
    copy_error(wait, result, err);
}

static void on_sync_cas(claim_store *store, int result, uint64_t new_revision,
                        const claim *current, const act_error *err, void *userdata)
{
    sync_wait *wait = userdata;
    wait->new_revision = new_revision;
    if (result == CLAIMS_CHANGED && wait->claim_out)
        *wait->claim_out = current ? *current : (claim){0};
    copy_error(wait, result, err);
}

static void on_sync_list(claim_store *store, int result, claim *claims, size_t n,
                         uint64_t revision, const act_error *err, void *userdata)
{
    sync_wait *wait = userdata;
    wait->claims = claims;
    wait->n_claims = n;
    wait->new_revision = revision;
    copy_error(wait, result, err);
}

int claims_read(claim_store *store, const char *host, claim *out, act_error *err)
{
    assert(store);
    assert(out);
    int r = check_host(host, err);
    if (r < 0)
        return r;
    if (store->ops->read)
        return store->ops->read(store, host, out, err);
    sd_event *loop = NULL;
    if ((r = claims_private_loop(store, &loop, err)) < 0)
        return r;
    sync_wait wait = {.claim_out = out, .err = err};
    if ((r = store->ops->read_async(store, loop, host, on_sync_read, &wait, err)) < 0)
        return r;
    return run_until_done(store, &wait);
}

static int cas_sync(claim_store *store, const char *host, uint64_t expected_revision,
                    const claim *c, const char *dead_box, uint64_t *new_revision,
                    claim *current_on_conflict, act_error *err)
{
    assert(store);
    assert(c);
    claim checked;
    int r = check_host(host, err);
    if (r < 0 || (r = check_claim_for(host, c, &checked, err)) < 0 ||
        (dead_box && (r = check_box(dead_box, err)) < 0))
        return r;
    if (store->ops->cas)
        return store->ops->cas(store, host, expected_revision, &checked, dead_box, new_revision,
                               current_on_conflict, err);
    sd_event *loop = NULL;
    if ((r = claims_private_loop(store, &loop, err)) < 0)
        return r;
    sync_wait wait = {.claim_out = current_on_conflict, .err = err};
    r = store->ops->cas_async(store, loop, host, expected_revision, &checked, dead_box, on_sync_cas,
                              &wait, err);
    if (r < 0)
        return r;
    r = run_until_done(store, &wait);
    if (r == 0 && new_revision)
        *new_revision = wait.new_revision;
    return r;
}

int claims_cas(claim_store *store, const char *host, uint64_t expected_revision, const claim *c,
               uint64_t *new_revision, claim *current_on_conflict, act_error *err)
{
    return cas_sync(store, host, expected_revision, c, NULL, new_revision, current_on_conflict,
                    err);
}

int claims_cas_unless_live(claim_store *store, const char *host, uint64_t expected_revision,
                           const claim *c, const char *dead_box, uint64_t *new_revision,
                           claim *current_on_conflict, act_error *err)
{
    assert(dead_box);
    return cas_sync(store, host, expected_revision, c, dead_box, new_revision, current_on_conflict,
                    err);
}

int claims_delete(claim_store *store, const char *host, uint64_t expected_revision,
                  claim *current_on_conflict, act_error *err)
{
    assert(store);
    int r = check_host(host, err);
    if (r < 0)
        return r;
    uint64_t ignored;
    if (store->ops->del)
        return store->ops->del(store, host, expected_revision, &ignored, current_on_conflict,
                               err);
    sd_event *loop = NULL;
    if ((r = claims_private_loop(store, &loop, err)) < 0)
        return r;
    sync_wait wait = {.claim_out = current_on_conflict, .err = err};
    r = store->ops->del_async(store, loop, host, expected_revision, on_sync_cas, &wait, err);
    if (r < 0)
        return r;
    return run_until_done(store, &wait);
}

int claims_list(claim_store *store, claim **out, size_t *n_out, claims_problem_fn problem,
                void *userdata, act_error *err)
{
    uint64_t revision;
    return claims_list_at(store, out, n_out, &revision, problem, userdata, err);
}

/* box NULL: every claim. */
static int list_at(claim_store *store, const char *box, claim **out, size_t *n_out,
                   uint64_t *revision, claims_problem_fn problem, void *userdata, act_error *err)
{
    assert(store);
    assert(out);
    assert(n_out);
    assert(revision);
    *out = NULL;
    *n_out = 0;
    *revision = 0;
    if (store->ops->list)
        return store->ops->list(store, box, out, n_out, revision, problem, userdata, err);
    sd_event *loop = NULL;
    int r = claims_private_loop(store, &loop, err);
    if (r < 0)
        return r;
    sync_wait wait = {.err = err};
    r = store->ops->list_async(store, loop, box, problem, userdata, on_sync_list, &wait, err);
    if (r < 0)
        return r;
    r = run_until_done(store, &wait);
    if (r < 0) {
        free(wait.claims);
        return r;
    }
    *out = wait.claims;
    *n_out = wait.n_claims;
    *revision = wait.new_revision;
    return 0;
}

int claims_list_at(claim_store *store, claim **out, size_t *n_out, uint64_t *revision,
                   claims_problem_fn problem, void *userdata, act_error *err)
{
    return list_at(store, NULL, out, n_out, revision, problem, userdata, err);
}

int claims_list_box_at(claim_store *store, const char *box, claim **out, size_t *n_out,
                       uint64_t *revision, claims_problem_fn problem, void *userdata,
                       act_error *err)
{
    int r = check_box(box, err);
    if (r < 0)
        return r;
    return list_at(store, box, out, n_out, revision, problem, userdata, err);
}

/* ---- the layout marker ------------------------------------------------------ */

static void on_sync_layout(claim_store *store, int result, const act_error *err, void *userdata)
{
    copy_error(userdata, result, err);
}

int claims_store_check_layout(claim_store *store, act_error *err)
{
    assert(store);
    if (store->ops->check_layout)
        return store->ops->check_layout(store, err);
    sd_event *loop = NULL;
    int r = claims_private_loop(store, &loop, err);
    if (r < 0)
        return r;
    sync_wait wait = {.err = err};
    r = store->ops->check_layout_async(store, loop, on_sync_layout, &wait, err);
    if (r < 0)
        return r;
    return run_until_done(store, &wait);
}

/* ---- watch collection on the private loop --------------------------------- */

typedef struct collect_state {
    claim_change *changes;
    size_t n, want;
    int error;
    act_error *err;
    bool timed_out;
} collect_state;

static void on_collect(claims_watch *watch, const claim_change *change, int error,
                       const act_error *err, void *userdata)
{
    collect_state *state = userdata;
    if (error < 0) {
        state->error = error;
        if (state->err && err)
            *state->err = *err;
        return;
    }
    claim_change *grown = realloc(state->changes, (state->n + 1) * sizeof(*grown));
    if (!grown) {
        state->error = act_error_set(state->err, ENOMEM, "claim watch: out of memory");
        return;
    }
    state->changes = grown;
    state->changes[state->n++] = *change;
}

static int on_collect_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    ((collect_state *)userdata)->timed_out = true;
    return 0;
}

/* Watches into state until it has what it wants, fails or times out. The
 * watch and its timer are gone on return, so nothing touches state after. */
static int collect_on(claim_store *store, sd_event *loop, const claims_watch_scope *scope,
                      uint64_t from_revision, int timeout_ms, collect_state *state, act_error *err)
{
    _cleanup_(claims_watch_freep) claims_watch *watch = NULL;
    int r =
        store->ops->watch_start(store, loop, scope, from_revision, on_collect, state, &watch, err);
    if (r < 0)
        return r;
    _cleanup_(sd_event_source_disable_unrefp) sd_event_source *timer = NULL;
    r = sd_event_add_time_relative(loop, &timer, CLOCK_MONOTONIC,
                                   (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000, 0,
                                   on_collect_timeout, state);
    if (r < 0)
        return act_error_set(err, -r, "claim watch: cannot arm its timeout");
    while (state->n < state->want && state->error == 0 && !state->timed_out) {
        r = sd_event_run(loop, UINT64_MAX);
        if (r < 0)
            return act_error_set(err, -r, "claim watch: event loop failed");
    }
    return state->error;
}

int claims_watch_collect(claim_store *store, uint64_t from_revision, size_t want, int timeout_ms,
                         claim_change **out, size_t *n_out, act_error *err)
{
    assert(store);
    assert(out);
    assert(n_out);
    *out = NULL;
    *n_out = 0;
    sd_event *loop = NULL;
    int r = claims_private_loop(store, &loop, err);
    if (r < 0)
        return r;
    collect_state state = {.want = want, .err = err};
    r = collect_on(store, loop, NULL, from_revision, timeout_ms, &state, err);
    if (r < 0) {
        free(state.changes);
        return r;
    }
    *out = state.changes;
    *n_out = state.n;
    return 0;
}

int claims_watch_host_next(claim_store *store, const char *host, uint64_t from_revision,
                           int timeout_ms, claim_change *out, act_error *err)
{
    assert(store);
    assert(out);
    int r = check_host(host, err);
    if (r < 0)
        return r;
    sd_event *loop = NULL;
    if ((r = claims_private_loop(store, &loop, err)) < 0)
        return r;
    collect_state state = {.want = 1, .err = err};
    claims_watch_scope scope = {.host = host};
    r = collect_on(store, loop, &scope, from_revision, timeout_ms, &state, err);
    if (r >= 0 && state.n)
        *out = state.changes[0];
    free(state.changes);
    return r < 0 ? r : state.n ? 1 : 0;
}

/* ---- asynchronous calls over a synchronous backend ------------------------ */

/* On a worker thread: only the call's own memory and the backend, whose
 * synchronous operations are safe to run from several threads. */
static void run_deferred(claims_deferred *base)
{
    deferred_call *call = (deferred_call *)base;
    claim_store *store = base->store;
    switch (call->op) {
    case DEFERRED_READ:
        call->result = store->ops->read(store, call->host, &call->current, &call->err);
        break;
    case DEFERRED_CAS:
        call->result = store->ops->cas(store, call->host, call->expected, &call->value,
                                       call->dead_box[0] ? call->dead_box : NULL,
                                       &call->new_revision, &call->current, &call->err);
        break;
    case DEFERRED_DELETE:
        call->result = store->ops->del(store, call->host, call->expected, &call->new_revision,
                                       &call->current, &call->err);
        break;
    }
}

/* On the loop, unlinked already. */
static void complete_deferred(claims_deferred *base)
{
    deferred_call *call = (deferred_call *)base;
    claim_store *store = base->store;
    /* Freed before the callback, so a callback that frees the store never
     * meets this one. */
    deferred_call copy = *call;
    free(call);
    int r = copy.result;
    if (copy.op == DEFERRED_READ)
        copy.read_fn(store, r, r > 0 ? &copy.current : NULL, &copy.err, copy.userdata);
    else
        copy.cas_fn(store, r, copy.new_revision, r == CLAIMS_CHANGED ? &copy.current : NULL,
                    &copy.err, copy.userdata);
}

static void on_deferred_run(void *data)
{
    claims_deferred *call = data;
    call->run(call);
}

static void on_deferred_complete(void *data)
{
    claims_deferred *call = data;
    /* Unlinked before its completion so a callback that starts another
     * call or frees the store never sees this one. */
    deferred_unlink(call);
    call->complete(call);
}

int claims_defer(claim_store *store, const char *lane, claims_deferred *call, act_error *err)
{
    assert(store && store->offload);
    assert(call && call->run && call->complete);
    call->store = store;
    int r = act_offload_submit(store->offload, act_offload_lane(lane), on_deferred_run,
                               on_deferred_complete, call, err);
    if (r < 0)
        return r;
    call->next = store->deferred;
    store->deferred = call;
    return 0;
}

static int defer_call(claim_store *store, deferred_call *template, act_error *err)
{
    deferred_call *call = malloc(sizeof(*call));
    if (!call)
        return act_error_set(err, ENOMEM, "claim store: out of memory");
    *call = *template;
    call->base.run = run_deferred;
    call->base.complete = complete_deferred;
    /* One lane per host: a host's calls run in the order they were made. */
    int r = claims_defer(store, call->host, &call->base, err);
    if (r < 0)
        free(call);
    return r;
}

int claims_check_attached(claim_store *store, act_error *err)
{
    if (!store->attached)
        return act_error_set(err, EBADFD, "claim store: asynchronous call before "
                                          "claims_store_attach_event; attach the loop first");
    return 0;
}

int claims_store_attach_event(claim_store *store, sd_event *event, act_error *err)
{
    assert(store);
    assert(event);
    if (store->attached)
        return act_error_set(err, EBUSY, "claim store: already attached to an event loop");
    /* A synchronous backend gets workers for its asynchronous face. */
    if (!store->ops->cas_async) {
        int r = act_offload_new(event, DEFERRED_WORKERS, &store->offload, err);
        if (r < 0)
            return act_error_prefix(err, "claim store");
    }
    store->attached = sd_event_ref(event);
    return 0;
}

static int claims_read_async_untimed(claim_store *store, const char *host, claims_read_fn fn,
                                     void *userdata, act_error *err)
{
    assert(store);
    assert(fn);
    int r = claims_check_attached(store, err);
    if (r < 0 || (r = check_host(host, err)) < 0)
        return r;
    if (store->ops->read_async)
        return store->ops->read_async(store, store->attached, host, fn, userdata, err);
    deferred_call call = {.op = DEFERRED_READ, .read_fn = fn, .userdata = userdata};
    snprintf(call.host, sizeof(call.host), "%s", host);
    return defer_call(store, &call, err);
}

static int claims_cas_async_untimed(claim_store *store, const char *host,
                                    uint64_t expected_revision, const claim *c,
                                    const char *dead_box, claims_cas_fn fn, void *userdata,
                                    act_error *err)
{
    assert(store);
    assert(c);
    assert(fn);
    claim checked;
    int r = claims_check_attached(store, err);
    if (r < 0 || (r = check_host(host, err)) < 0 ||
        (r = check_claim_for(host, c, &checked, err)) < 0 ||
        (dead_box && (r = check_box(dead_box, err)) < 0))
        return r;
    if (store->ops->cas_async)
        return store->ops->cas_async(store, store->attached, host, expected_revision, &checked,
                                     dead_box, fn, userdata, err);
    deferred_call call = {.op = DEFERRED_CAS, .expected = expected_revision, .value = checked,
                          .cas_fn = fn, .userdata = userdata};
    snprintf(call.host, sizeof(call.host), "%s", host);
    snprintf(call.dead_box, sizeof(call.dead_box), "%s", dead_box ? dead_box : "");
    return defer_call(store, &call, err);
}

static int claims_delete_async_untimed(claim_store *store, const char *host,
                                       uint64_t expected_revision, claims_cas_fn fn, void *userdata,
                                       act_error *err)
{
    assert(store);
    assert(fn);
    int r = claims_check_attached(store, err);
    if (r < 0 || (r = check_host(host, err)) < 0)
        return r;
    if (store->ops->del_async)
        return store->ops->del_async(store, store->attached, host, expected_revision, fn,
                                     userdata, err);
    deferred_call call = {.op = DEFERRED_DELETE, .expected = expected_revision, .cas_fn = fn,
                          .userdata = userdata};
    snprintf(call.host, sizeof(call.host), "%s", host);
    return defer_call(store, &call, err);
}

/* A list of a synchronous backend's, on a worker. */
typedef struct list_call {
    claims_deferred base;
    char box[ACT_NAME_MAX + 1]; /* "" = every claim */
    claims_problem_fn problem_fn;
    void *problem_userdata;
    claims_list_fn fn;
    void *userdata;
    /* The result, written by the worker. */
    int result;
    claim *claims;
    size_t n;
    uint64_t revision; /* the revision the list was taken at */
    list_problem *problems;
    size_t n_problems;
    act_error err;
} list_call;

/* On a worker thread: keeps a list's problem for the loop. The dir store
 * calls it under its lock, so the caller's problem function, which may do
 * anything but call the store, runs on the loop instead. */
static void collect_problem(const char *host, const act_error *problem, void *userdata)
{
    list_call *call = userdata;
    list_problem *grown =
        realloc(call->problems, (call->n_problems + 1) * sizeof(*call->problems));
    if (!grown) {
        act_log(LOG_WARNING, "claim list skipped: %s", problem->message);
        return;
    }
    call->problems = grown;
    list_problem *kept = &call->problems[call->n_problems++];
    snprintf(kept->host, sizeof(kept->host), "%s", host);
    kept->problem = *problem;
}

static void run_list(claims_deferred *base)
{
    list_call *call = (list_call *)base;
    call->result =
        base->store->ops->list(base->store, call->box[0] ? call->box : NULL, &call->claims,
                               &call->n, &call->revision, collect_problem, call, &call->err);
}

static void discard_list(claims_deferred *base)
{
    list_call *call = (list_call *)base;
    free(call->claims);
    free(call->problems);
    free(call);
}

/* On the loop, unlinked already: the problems first, then the list. */
static void complete_list(claims_deferred *base)
{
    claim_store *store = base->store;
    list_call copy = *(list_call *)base;
    /* Freed before the callbacks, so one that frees the store never meets
     * this call; the claims and problems are the copy's now. */
    free(base);
    _cleanup_free_ list_problem *problems = copy.problems;
    for (size_t i = 0; i < copy.n_problems; i++) {
        if (copy.problem_fn)
            copy.problem_fn(problems[i].host, &problems[i].problem, copy.problem_userdata);
        else
            act_log(LOG_WARNING, "claim list skipped: %s", problems[i].problem.message);
    }
    int r = copy.result;
    claim *claims = NULL;
    if (r < 0)
        free(copy.claims);
    else {
        /* The caller gets an array even for an empty list, as from etcd. */
        claims = copy.claims ? copy.claims : calloc(1, sizeof(claim));
        if (!claims)
            r = act_error_set(&copy.err, ENOMEM, "claim store: out of memory");
    }
    copy.fn(store, r, claims, r < 0 ? 0 : copy.n, r < 0 ? 0 : copy.revision, &copy.err,
            copy.userdata);
}

/* Every list shares one lane, apart from the hosts' (a host is never named
 * ".list"): a list does not overtake another. */
#define LIST_LANE ".list"

static int claims_list_async_untimed(claim_store *store, const char *box, claims_problem_fn problem,
                                     void *problem_userdata, claims_list_fn fn, void *userdata,
                                     act_error *err)
{
    assert(store);
    assert(fn);
    int r = claims_check_attached(store, err);
    if (r < 0)
        return r;
    if (store->ops->list_async)
        return store->ops->list_async(store, store->attached, box, problem, problem_userdata, fn,
                                      userdata, err);
    list_call *call = malloc(sizeof(*call));
    if (!call)
        return act_error_set(err, ENOMEM, "claim store: out of memory");
    *call = (list_call){
        .base = {.run = run_list, .complete = complete_list, .discard = discard_list},
        .problem_fn = problem,
        .problem_userdata = problem_userdata,
        .fn = fn,
        .userdata = userdata,
    };
    if (box)
        snprintf(call->box, sizeof(call->box), "%s", box);
    r = claims_defer(store, LIST_LANE, &call->base, err);
    if (r < 0)
        free(call);
    return r;
}

int claims_watch_start(claim_store *store, uint64_t from_revision, claims_watch_fn fn,
                       void *userdata, claims_watch **out, act_error *err)
{
    assert(store);
    assert(fn);
    assert(out);
    int r = claims_check_attached(store, err);
    if (r < 0)
        return r;
    return store->ops->watch_start(store, store->attached, NULL, from_revision, fn, userdata, out,
                                   err);
}

int claims_watch_host_start(claim_store *store, const char *host, uint64_t from_revision,
                            claims_watch_fn fn, void *userdata, claims_watch **out, act_error *err)
{
    assert(store);
    assert(fn);
    assert(out);
    int r = check_host(host, err);
    if (r >= 0)
        r = claims_check_attached(store, err);
    if (r < 0)
        return r;
    claims_watch_scope scope = {.host = host};
    return store->ops->watch_start(store, store->attached, &scope, from_revision, fn, userdata, out,
                                   err);
}

int claims_watch_box_start(claim_store *store, const char *box, uint64_t from_revision,
                           claims_watch_fn fn, void *userdata, claims_watch **out, act_error *err)
{
    assert(store);
    assert(fn);
    assert(out);
    int r = check_box(box, err);
    if (r >= 0)
        r = claims_check_attached(store, err);
    if (r < 0)
        return r;
    claims_watch_scope scope = {.box = box};
    return store->ops->watch_start(store, store->attached, &scope, from_revision, fn, userdata, out,
                                   err);
}

int claims_read_async(claim_store *store, const char *host, claims_read_fn fn, void *userdata,
                      act_error *err)
{
    assert(store);
    assert(fn);
    claims_timed *t = timed_new(store, "read", userdata);
    if (!t)
        return claims_read_async_untimed(store, host, fn, userdata, err);
    t->fn.read = fn;
    return timed_started(t, claims_read_async_untimed(store, host, timed_on_read, t, err));
}

static int cas_async(claim_store *store, const char *host, uint64_t expected_revision,
                     const claim *c, const char *dead_box, claims_cas_fn fn, void *userdata,
                     act_error *err)
{
    assert(store);
    assert(fn);
    claims_timed *t = timed_new(store, "cas", userdata);
    if (!t)
        return claims_cas_async_untimed(store, host, expected_revision, c, dead_box, fn, userdata,
                                        err);
    t->fn.cas = fn;
    return timed_started(t, claims_cas_async_untimed(store, host, expected_revision, c, dead_box,
                                                     timed_on_cas, t, err));
}

int claims_cas_async(claim_store *store, const char *host, uint64_t expected_revision,
                     const claim *c, claims_cas_fn fn, void *userdata, act_error *err)
{
    return cas_async(store, host, expected_revision, c, NULL, fn, userdata, err);
}

int claims_cas_unless_live_async(claim_store *store, const char *host, uint64_t expected_revision,
                                 const claim *c, const char *dead_box, claims_cas_fn fn,
                                 void *userdata, act_error *err)
{
    assert(dead_box);
    return cas_async(store, host, expected_revision, c, dead_box, fn, userdata, err);
}

int claims_delete_async(claim_store *store, const char *host, uint64_t expected_revision,
                        claims_cas_fn fn, void *userdata, act_error *err)
{
    assert(store);
    assert(fn);
    claims_timed *t = timed_new(store, "delete", userdata);
    if (!t)
        return claims_delete_async_untimed(store, host, expected_revision, fn, userdata, err);
    t->fn.cas = fn;
    return timed_started(
        t, claims_delete_async_untimed(store, host, expected_revision, timed_on_cas, t, err));
}

static int list_async(claim_store *store, const char *box, claims_problem_fn problem,
                      void *problem_userdata, claims_list_fn fn, void *userdata, act_error *err)
{
    assert(store);
    assert(fn);
    claims_timed *t = timed_new(store, "list", userdata);
    if (!t)
        return claims_list_async_untimed(store, box, problem, problem_userdata, fn, userdata, err);
    t->fn.list = fn;
    return timed_started(
        t, claims_list_async_untimed(store, box, problem, problem_userdata, timed_on_list, t, err));
}

int claims_list_async(claim_store *store, claims_problem_fn problem, void *problem_userdata,
                      claims_list_fn fn, void *userdata, act_error *err)
{
    return list_async(store, NULL, problem, problem_userdata, fn, userdata, err);
}

int claims_list_box_async(claim_store *store, const char *box, claims_problem_fn problem,
                          void *problem_userdata, claims_list_fn fn, void *userdata, act_error *err)
{
    int r = check_box(box, err);
    if (r < 0)
        return r;
    return list_async(store, box, problem, problem_userdata, fn, userdata, err);
}

int claims_index_tidy_async(claim_store *store, const char *box, const char *host,
                            uint64_t revision, claims_cas_fn fn, void *userdata, act_error *err)
{
    int r = check_box(box, err);
    if (r < 0 || (r = check_host(host, err)) < 0 || (r = claims_check_attached(store, err)) < 0)
        return r;
    if (!store->ops->tidy_async)
        return 0;
    return store->ops->tidy_async(store, store->attached, box, host, revision, fn, userdata, err);
}

int claims_index_tidy(claim_store *store, const char *box, const char *host, uint64_t revision,
                      act_error *err)
{
    int r = check_box(box, err);
    if (r < 0 || (r = check_host(host, err)) < 0)
        return r;
    if (!store->ops->tidy_async)
        return 0;
    sd_event *loop = NULL;
    if ((r = claims_private_loop(store, &loop, err)) < 0)
        return r;
    sync_wait wait = {.err = err};
    r = store->ops->tidy_async(store, loop, box, host, revision, on_sync_cas, &wait, err);
    if (r < 0)
        return r;
    return run_until_done(store, &wait);
}
