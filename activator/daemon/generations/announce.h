/* The observers of host transitions: the journal, the NNG events and the
 * Prometheus counters. They read the host and its generations and never
 * change what the daemon does next; what a transition changes is decided by
 * hosts/transitions.c. */
#pragma once

#include "activator/daemon/generations/generation.h"

/* Logs one pipeline transition, counts it, and publishes the event it is
 * (if any). */
void ad_announce_transition(ad_host *host, const pl_wake_event *event);

/* Publishes one event about host (and gen, when given) to subscribers. */
void ad_publish(ad_host *host, ev_event_kind kind, const ad_generation *gen, const char *reason);

/* The sweep proved leaf_name stopped and removed it (and the record of
 * generation, when it is a generation's leaf; 0 otherwise): logged, counted
 * and, for a generation, published as retired. */
void ad_announce_swept(ad_host *host, const char *leaf_name, uint64_t generation);
