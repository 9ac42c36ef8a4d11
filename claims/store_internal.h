/* What a claim store backend implements, and the pieces store.c shares with
 * the backends. Not installed; only claims/ includes it. */
#pragma once

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "claims/claims.h"
#include "common/offload.h"

/* The calls on a box record besides listing (claims.h: box records). */
typedef enum claims_box_call {
    CLAIMS_BOX_PUT,
    CLAIMS_BOX_KEEPALIVE,
    CLAIMS_BOX_REMOVE,
    /* The drain mark (claims_box_drain): record names the box and, for
     * DRAIN, the stamp; nothing else of it is read or written. */
    CLAIMS_BOX_DRAIN,
    CLAIMS_BOX_UNDRAIN,
} claims_box_call;

/* What a box listing learns (claims.h: box records). Both say which boxes
 * are live; a backend where that takes one request per box for the rest
 * (etcd: a lease's renewal and expiry) makes those requests only for
 * CLAIMS_BOX_LIST_LEASES, which only the operator's display asks for. */
typedef enum claims_box_listing {
    CLAIMS_BOX_LIST_LIVENESS, /* the records and which are live: one store request */
    CLAIMS_BOX_LIST_LEASES,   /* and each lease's refreshed and expires time */
} claims_box_listing;

/* What a watch covers: every claim (neither set), the claims that name box
 * (its index), or host's claim alone. */
typedef struct claims_watch_scope {
    const char *box;
    const char *host;
} claims_watch_scope;

/* A backend provides either the synchronous calls (dir: local files, fast)
 * or the asynchronous ones (etcd: network), and store.c builds the other
 * flavour on top, so each backend implements each operation once. */
typedef struct claims_store_ops {
    const char *kind;
    void (*free)(claim_store *store);

    int (*read)(claim_store *store, const char *host, claim *out, act_error *err);
    /* dead_box (NULL: none): the write lands only while that box has no
     * live record, else CLAIMS_BOX_LIVE (claims_cas_unless_live). */
    int (*cas)(claim_store *store, const char *host, uint64_t expected, const claim *c,
               const char *dead_box, uint64_t *new_revision, claim *current, act_error *err);
    int (*del)(claim_store *store, const char *host, uint64_t expected, uint64_t *new_revision,
               claim *current, act_error *err);
    /* box NULL: every claim; else the box's own (claims_list_box_at). */
    int (*list)(claim_store *store, const char *box, claim **out, size_t *n_out, uint64_t *revision,
                claims_problem_fn problem, void *userdata, act_error *err);

    int (*read_async)(claim_store *store, sd_event *event, const char *host, claims_read_fn fn,
                      void *userdata, act_error *err);
    int (*cas_async)(claim_store *store, sd_event *event, const char *host, uint64_t expected,
                     const claim *c, const char *dead_box, claims_cas_fn fn, void *userdata,
                     act_error *err);
    int (*del_async)(claim_store *store, sd_event *event, const char *host, uint64_t expected,
                     claims_cas_fn fn, void *userdata, act_error *err);
    int (*list_async)(claim_store *store, sd_event *event, const char *box,
                      claims_problem_fn problem, void *problem_userdata, claims_list_fn fn,
                      void *userdata, act_error *err);

    /* Optional (claims_index_tidy): removes box's index entry of host if it
     * is still the one written at revision; fn gets 0, or CLAIMS_CHANGED
     * when the entry was written since. NULL: the backend keeps its index
     * a superset. */
    int (*tidy_async)(claim_store *store, sd_event *event, const char *box, const char *host,
                      uint64_t revision, claims_cas_fn fn, void *userdata, act_error *err);

    /* Optional: claims_store_traffic_get. */
    size_t (*traffic)(const claim_store *store, claims_store_traffic *out, size_t max);
    /* The layout marker (claims_store_check_layout), one flavour. */
    int (*check_layout)(claim_store *store, act_error *err);
    int (*check_layout_async)(claim_store *store, sd_event *event,
                              void (*done)(claim_store *store, int result, const act_error *err,
                                           void *userdata),
                              void *userdata, act_error *err);

    /* Box records, one flavour per backend as for claims. out is the record
     * as stored (put, keepalive); the list is malloc'd, sorted by box. */
    int (*box_call)(claim_store *store, claims_box_call call, const claims_box *record,
                    claims_box *out, act_error *err);
    int (*box_list)(claim_store *store, claims_box_listing what, claims_box **out, size_t *n_out,
                    act_error *err);
    int (*box_call_async)(claim_store *store, sd_event *event, claims_box_call call,
                          const claims_box *record, claims_box_fn fn, void *userdata,
                          act_error *err);
    int (*box_list_async)(claim_store *store, sd_event *event, claims_box_listing what,
                          claims_boxes_fn fn, void *userdata, act_error *err);

    /* Required: both backends watch on a loop (the attached or the private),
     * over what scope names. */
    int (*watch_start)(claim_store *store, sd_event *event, const claims_watch_scope *scope,
                       uint64_t from_revision, claims_watch_fn fn, void *userdata,
                       claims_watch **out, act_error *err);
} claims_store_ops;

/* An asynchronous call of a synchronous backend: run by a worker thread of
 * the store's offload (the backend's file I/O and fsyncs must not block the
 * caller's loop), completed on the loop. A call is malloc'd with this first;
 * a store freed before a call completed discards it without completing it. */
typedef struct claims_deferred claims_deferred;
struct claims_deferred {
    claims_deferred *next;
    claim_store *store;
    /* On a worker: only the call's own memory and the backend, whose
     * synchronous operations are safe to run from several threads. */
    void (*run)(claims_deferred *call);
    /* On the loop, once the call is no longer the store's: frees it. */
    void (*complete)(claims_deferred *call);
    /* Optional, for a call whose run may leave memory of its own (a list):
     * frees it and the call when the store is freed first. NULL: free(). */
    void (*discard)(claims_deferred *call);
};

/* Hands call to the store's workers; calls of one lane run in the order
 * made. On failure the call stays the caller's. */
int claims_defer(claim_store *store, const char *lane, claims_deferred *call, act_error *err);
/* EBADFD unless the store is attached to a loop. */
int claims_check_attached(claim_store *store, act_error *err);

/* For a synchronous call of an asynchronous backend: the store's private
 * loop (made on first use), and running it until *done. */
int claims_private_loop(claim_store *store, sd_event **out, act_error *err);
int claims_run_until(claim_store *store, const bool *done, act_error *err);

struct claim_store {
    const claims_store_ops *ops;
    int timeout_ms;
    int watch_timeout_ms;
    int list_page_keys;
    void (*between_pages)(void *userdata);
    void *between_pages_userdata;
    void (*before_silence_probe)(void *userdata);
    void *before_silence_probe_userdata;
    sd_event *attached;        /* the caller's loop, for the async API */
    sd_event *private_loop;    /* created on first synchronous call of an async backend */
    claims_deferred *deferred; /* async calls of a sync backend not yet completed */
    act_offload *offload;      /* the workers that run them */
    claims_observe_fn observe; /* claims_store_set_observer */
    void *observe_userdata;
    struct claims_timed *timed; /* observed calls not yet completed */
};

struct claims_watch {
    claim_store *store;
    claims_watch_fn fn;
    void *userdata;
    void (*free)(claims_watch *watch);
    /* A callback may free its own watch; the free then waits until the
     * delivery that called it has returned. */
    bool delivering;
    bool free_requested;
};

/* Calls the watch's callback; returns false when the callback freed the
 * watch, which the caller must then no longer touch. */
bool claims_watch_deliver(claims_watch *watch, const claim_change *change, int error,
                          const act_error *err);

/* Parses a claim body already parsed as JSON (the dir store's envelope and
 * journal hold the body as an object). Same rules as claim_from_json. */
int claim_from_json_object(const char *host, json_object *body, claim *out, act_error *err);
/* The body as a json-c object, for embedding in an envelope; NULL on ENOMEM. */
json_object *claim_to_json_object(const claim *c);

/* Backend constructors, given what claims_parse_url accepted: the dir
 * store's absolute path, the etcd store's endpoints and prefix. */
int claims_dir_open(const char *path, const claims_store_options *options, claim_store **out,
                    act_error *err);
int claims_etcd_open(const claims_url *url, const claims_store_options *options,
                     claim_store **out, act_error *err);

/* Compare for qsort by host. */
int claims_compare_by_host(const void *a, const void *b);

/* A box record's value is refused above this size. */
#define CLAIMS_BOX_JSON_MAX 4096
/* The record as stored (box_record.c): with_expiry adds refreshed_usec and
 * expires_usec, which the dir store keeps in the value and etcd in its
 * lease. NULL only when out of memory. */
char *claims_box_to_json(const claims_box *record, bool with_expiry);
/* Parses the value stored under box; the store sets the lease fields. */
int claims_box_from_json(const char *box, const char *text, size_t len, claims_box *out,
                         act_error *err);
/* A drain mark's value, and its reading: 0 with *drained_usec, or an error
 * naming the box. */
char *claims_drain_to_json(const char *box, uint64_t drained_usec);
int claims_drain_from_json(const char *box, const char *text, size_t len, uint64_t *drained_usec,
                           act_error *err);
/* Notes box's drain mark in a listing: on its record when listed, else as
 * a record of its own (not live, only box and drained_usec). *boxes is
 * malloc'd and may move; *cap is its room. */
int claims_box_list_add_drain(claims_box **boxes, size_t *n, size_t *cap, const char *box,
                              uint64_t drained_usec, act_error *err);
