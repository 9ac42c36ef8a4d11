/* A box's view of its own claims: its index (claims.h: a box's own claims)
 * listed at one revision and watched from there, and listed again whenever
 * the watch ends.
 *
 * Whatever ends a watch (a compaction of the store's history, the server
 * closing the stream, a silent stream, a lost connection), the view lists
 * the box's index again at one revision, hands the list to its owner to
 * reconcile (every host it keeps, as if its claim had changed), and only
 * then watches again, from that revision + 1. Nothing a watch would have
 * told is lost that way: what changed meanwhile is in the list.
 *
 * An entry that says its claim no longer names the box (holder, executor,
 * a move's from or to) is removed by the view once its owner was told
 * (claims_index_tidy_async): the box's listings hold its own hosts, not
 * every host that ever left it.
 *
 * The daemon (fleet/claim_watch.c) and the fleet simulator (bench/fleet)
 * are its owners: what a change means for a host is theirs, when to list
 * again and how to back off is the view's. Everything runs on the store's
 * sd-event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "claims/claims.h"

typedef struct claims_box_view claims_box_view;

typedef struct claims_box_view_ops {
    /* One change the watch told (a malformed record included). Returns
     * whether it was about a host the owner keeps. */
    bool (*changed)(claims_box_view *view, const claim_change *change, void *userdata);
    /* A heal's list of the box's index at revision, sorted by host, for
     * the owner to reconcile; claims_box_view_is_malformed says which
     * hosts' records did not parse (leave those as they are). */
    void (*listed)(claims_box_view *view, const claim *claims, size_t n, uint64_t revision,
                   void *userdata);
    /* A list or a new watch failed (err), or a heal succeeded (err NULL).
     * Called at every failure and every success. */
    void (*store_health)(claims_box_view *view, const act_error *err, void *userdata);
    /* Optional: the watch ended (err says why); a heal follows. */
    void (*watch_ended)(claims_box_view *view, const act_error *err, void *userdata);
    /* Optional: a heal's list ended, with its result, the claims it had and
     * how long it took since its request. */
    void (*heal_ended)(claims_box_view *view, int result, size_t n, uint64_t duration_usec,
                       void *userdata);
} claims_box_view_ops;

/* A view of box's index in store, on the store's loop. watch_timeout_usec
 * is StoreWatchTimeoutSec=: a heal after a watch that lived long waits a
 * random part of a tenth of it. Nothing is listed or watched yet. */
int claims_box_view_new(claim_store *store, sd_event *loop, const char *box,
                        uint64_t watch_timeout_usec, const claims_box_view_ops *ops, void *userdata,
                        claims_box_view **out, act_error *err);
/* Watches from revision + 1, after the owner's own list at revision. */
int claims_box_view_watch_from(claims_box_view *view, uint64_t revision, act_error *err);
/* Lists now (asynchronously), then watches: a start that does not wait. */
void claims_box_view_heal(claims_box_view *view);
/* No more lists from here on: a watch that ends stays ended. */
void claims_box_view_hold(claims_box_view *view);
/* Whether the list being reconciled could not parse host's record. */
bool claims_box_view_is_malformed(const claims_box_view *view, const char *host);
/* The revision the next watch starts at. */
uint64_t claims_box_view_revision(const claims_box_view *view);
/* Frees it. A list in flight still holds the view: free the view only
 * where the loop will not run again before the store is freed (which drops
 * its calls unanswered), or while no list is in flight. */
void claims_box_view_free(claims_box_view *view);
