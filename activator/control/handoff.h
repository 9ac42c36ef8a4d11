/* Hands work from NNG's threads to the sd-event loop that owns daemon state.
 *
 * NNG completes its operations on its own threads. Those callbacks must never
 * touch daemon state, so they only push an item here; the loop thread is woken
 * through an eventfd and calls the consumer for each item in push order. The
 * queue is intrusive (the node lives inside the item), so a push never
 * allocates and cannot fail. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "common/error.h"

typedef struct ctrl_handoff_node {
    struct ctrl_handoff_node *next;
} ctrl_handoff_node;

typedef struct ctrl_handoff ctrl_handoff;

/* Called on the loop thread for each pushed node, in push order. */
typedef void (*ctrl_handoff_fn)(ctrl_handoff_node *node, void *userdata);

int ctrl_handoff_new(sd_event *event, ctrl_handoff_fn consume, void *userdata, ctrl_handoff **out,
                     act_error *err);

/* Any thread. The node must stay valid until consumed or removed. */
void ctrl_handoff_push(ctrl_handoff *handoff, ctrl_handoff_node *node);

/* Any thread: takes node back out if it is still queued, for a cancellation
 * racing the loop. True when it was removed (and so will not be consumed). */
bool ctrl_handoff_remove(ctrl_handoff *handoff, ctrl_handoff_node *node);

/* Loop thread: consumes everything queued now, as the eventfd would. */
void ctrl_handoff_drain(ctrl_handoff *handoff);

/* Loop thread: takes everything queued now and passes it to fn instead of the
 * consumer, for shutting down (answering what is queued with an error). */
void ctrl_handoff_drain_with(ctrl_handoff *handoff, ctrl_handoff_fn fn, void *userdata);

/* Loop thread. Nodes still queued are dropped unconsumed; the caller owns
 * them and must have stopped every producer first. */
void ctrl_handoff_free(ctrl_handoff *handoff);
