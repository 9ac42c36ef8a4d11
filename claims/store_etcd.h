/* The etcd store's state, shared by its claim side (store_etcd.c) and its
 * box records (store_etcd_boxes.c). Not installed; only claims/ includes it. */
#pragma once

#include "claims/etcd_client.h"
#include "claims/store_internal.h"

/* Box records live under "<prefix>.boxes/": '.' sorts before '/', so the
 * range "<prefix>.boxes/".."<prefix>.boxes0" and the claims' range
 * "<prefix>/".."<prefix>0" never share a key. */
#define ETCD_BOXES_SUFFIX ".boxes"
/* An operator's drain mark of a box, "<prefix>.drain/<box>", under no
 * lease; outside the claims' range for the same reason. */
#define ETCD_DRAIN_SUFFIX ".drain"
/* Each box's index of the claims that concern it (claims.h: a box's own
 * claims): "<prefix>.by-box/<box>/<host>", its value a copy of the claim
 * written in the claim's own txn (so its mod_revision is the claim's
 * revision), or empty once the claim was deleted. Outside the claims'
 * range for the same reason as the records. */
#define ETCD_INDEX_SUFFIX ".by-box"
/* The layout marker, {"layout":2}. */
#define ETCD_LAYOUT_SUFFIX ".layout"

/* Work of the store's own that a call in flight holds (a box record call, a
 * box list): freeing the store cancels the calls without their callbacks,
 * so it discards these instead. Embedded first in what it tracks. */
typedef struct etcd_store etcd_store;
typedef struct etcd_held etcd_held;
struct etcd_held {
    etcd_held *prev, *next;
    void (*discard)(etcd_held *held);
};
void etcd_held_add(etcd_store *es, etcd_held *held, void (*discard)(etcd_held *held));
void etcd_held_remove(etcd_store *es, etcd_held *held);

struct etcd_store {
    claim_store base;
    etcd_client *client;
    char *prefix;    /* "/activator": claims are "<prefix>/<host>" */
    char *list_key;  /* "<prefix>/" */
    char *list_end;  /* "<prefix>0": the range end that covers every key under "<prefix>/" */
    char *boxes_key; /* "<prefix>.boxes/": box records are "<prefix>.boxes/<box>" */
    char *boxes_end; /* "<prefix>.boxes0" */
    char *drain_key; /* "<prefix>.drain/": drain marks are "<prefix>.drain/<box>" */
    char *drain_end; /* "<prefix>.drain0" */
    char *index_key; /* "<prefix>.by-box/": box B's index is "<prefix>.by-box/B/" */
    char *layout_key; /* "<prefix>.layout" */
    /* The boxes each recently seen claim named, by host and revision
     * (store_etcd_index.c). */
    struct etcd_named_memo *memo;
    struct etcd_op *ops; /* the claim calls in flight (store_etcd.c) */
    etcd_held *held;     /* the box calls in flight (store_etcd_boxes.c) */
    struct etcd_watch *watches; /* the watches running (store_etcd.c) */
};

/* Posts body (taken over) to path on event's loop; done gets userdata. */
int etcd_store_call(etcd_store *es, sd_event *event, const char *path, char *body,
                    etcd_call_done_fn done, void *userdata, act_error *err);

/* Box records (store_etcd_boxes.c). */
int etcd_box_call_async(claim_store *store, sd_event *event, claims_box_call call,
                        const claims_box *record, claims_box_fn fn, void *userdata,
                        act_error *err);
int etcd_box_list_async(claim_store *store, sd_event *event, claims_box_listing what,
                        claims_boxes_fn fn, void *userdata, act_error *err);

/* ---- the boxes' index (store_etcd_index.c) ---- */

/* "<prefix>.by-box/<box>/" and its range end "<prefix>.by-box/<box>0";
 * malloc'd, 0 or -ENOMEM. */
int etcd_index_range(const etcd_store *es, const char *box, char **key, char **end);
/* The index keys of host under each of boxes, malloc'd, for etcd_txn_body;
 * free with etcd_index_keys_free. NULL only when out of memory. */
char **etcd_index_keys(const etcd_store *es, const claim_boxes *boxes, const char *host);
void etcd_index_keys_free(char **keys, size_t n);

/* What a write needs to know of the claim it replaces: the boxes it named.
 * Remembered for every claim this store read, wrote or was told of, by
 * host, for one revision each, in a table of fixed size (a host that
 * another pushed out is read again). */
void etcd_memo_remember(etcd_store *es, const claim *c);
void etcd_memo_forget(etcd_store *es, const char *host);
/* True, with the boxes, when host's claim at revision is remembered. */
bool etcd_memo_recall(const etcd_store *es, const char *host, uint64_t revision, claim_boxes *out);
void etcd_memo_free(etcd_store *es);

int etcd_check_layout_async(claim_store *store, sd_event *event,
                            void (*done)(claim_store *store, int result, const act_error *err,
                                         void *userdata),
                            void *userdata, act_error *err);
