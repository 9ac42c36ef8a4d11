/* The observers of host transitions: the journal, the NNG events and the
 * Prometheus counters. They read the host and its generations and never
 * change what the daemon does next; what a transition changes is decided by
 * hosts.c. */
#pragma once

#include "activator/daemon/generation.h"

/* Logs one pipeline transition, counts it, and publishes the event it is
 * (if any). */
void act_announce_transition(act_daemon_host *host, const act_wake_event *event);

/* Publishes one event about host (and gen, when given) to subscribers. */
void act_publish(act_daemon_host *host, act_event_kind kind, const act_generation *gen,
                 const char *reason);
