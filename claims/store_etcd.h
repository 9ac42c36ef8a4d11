/* The etcd store's state, shared by its claim side (store_etcd.c) and its
 * box records (store_etcd_boxes.c). Not installed; only claims/ includes it. */
#pragma once

#include "claims/etcd_client.h"
#include "claims/store_internal.h"

/* Box records live under "<prefix>.boxes/": '.' sorts before '/', so the
 * range "<prefix>.boxes/".."<prefix>.boxes0" and the claims' range
 * "<prefix>/".."<prefix>0" never share a key. */
#define ETCD_BOXES_SUFFIX ".boxes"

typedef struct etcd_store {
    claim_store base;
    etcd_client *client;
    char *prefix;    /* "/activator": claims are "<prefix>/<host>" */
    char *list_key;  /* "<prefix>/" */
    char *list_end;  /* "<prefix>0": the range end that covers every key under "<prefix>/" */
    char *boxes_key; /* "<prefix>.boxes/": box records are "<prefix>.boxes/<box>" */
    char *boxes_end; /* "<prefix>.boxes0" */
    struct etcd_op *ops; /* the claim calls in flight (store_etcd.c) */
} etcd_store;

/* Posts body (taken over) to path on event's loop; done gets userdata. */
int etcd_store_call(etcd_store *es, sd_event *event, const char *path, char *body,
                    etcd_call_done_fn done, void *userdata, act_error *err);

/* Box records (store_etcd_boxes.c). */
int etcd_box_call_async(claim_store *store, sd_event *event, claims_box_call call,
                        const claims_box *record, claims_box_fn fn, void *userdata,
                        act_error *err);
int etcd_box_list_async(claim_store *store, sd_event *event, claims_box_listing what,
                        claims_boxes_fn fn, void *userdata, act_error *err);
