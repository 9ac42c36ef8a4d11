/* Zero-downtime build swaps: `activatorctl swap HOST VERSION`. */
#pragma once

#include "activator/control/control.h"
#include "activator/daemon/host/host.h"

/* What an operator asked for. */
typedef struct ad_swap_order {
    const char *version;
    ctrl_swap_mode mode;
    bool no_wait; /* told as soon as the swap started, and again at its end */
} ad_swap_order;

/* What a swap tells whoever asked for it (box/dispatch.c answers the
 * operator with it, and collects old builds after a swap that made one
 * current). */
typedef struct ad_swap_news {
    bool started;        /* no_wait: the swap began; its end is told later */
    bool ended;          /* the swap is over; nothing is told after this */
    const char *code;    /* at the end: NULL when the pinned build serves, else why not */
    const char *message; /* with a code: what happened, for the operator */
    const char *version; /* the version swapped to */
    bool made_current;   /* the swap made the pinned build serve here */
} ad_swap_news;

/* Called once at the end, and with no_wait once before it; news and what
 * it points to are valid during the call. The host is still there. */
typedef void (*ad_swap_told_fn)(ad_host *host, const ad_swap_news *news, void *userdata);

/* Verifies the version, pins it on the claim, and starts N+1 beside N (or,
 * stop-first, after N; for a parked host, a wake of the pinned build). A
 * wake in flight is not refused: the pin waits until no wake has sent its
 * admission, and the swap then joins the wake in flight or swaps what it
 * made serve. told hears how it went (a refusal perhaps from inside this
 * call). */
void ad_swap_start(ad_host *host, const ad_swap_order *order, ad_swap_told_fn told, void *userdata);

/* A wake, swap or retirement of the host ended (whatever followed it): a
 * swap that waits for a wake's end now pins its version, and a stop-first
 * swap whose N was retired starts (or joins) the wake of its pin. */
void ad_swap_host_settled(ad_host *host);

/* Recovery found the claim naming this box's generation N serving under a
 * swap's admission whose N+1 was never published (the daemon died between
 * the swap's failure, or in the middle of it, and the write-back of "N
 * again"): records the swap's failure on the claim's pin, reason
 * "interrupted", with served (N's build) as its fallback, after the claim's
 * write-back of N lands, as a failed swap does. Nothing when the pin failed
 * already or names served. */
void ad_swap_record_interrupted(ad_host *host, const claim *current, const rec_build_ref *served);

/* The wake that ended (its outcome is delivered next) failed the pin:
 * failed names it with its reason and message, which the swap of that pin
 * answers with. NULL, or another pin: nothing. */
void ad_swap_note_pin_failure(ad_host *host, const claim_pin *failed);

/* The version swap (may be NULL) goes to, for gc to keep; NULL for none. */
const char *ad_swap_version(const ad_swap *swap);
