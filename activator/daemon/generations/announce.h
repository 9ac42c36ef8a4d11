/* The observers of host transitions (and of a replica's exits): the
 * journal, the NNG events and the Prometheus counters. They read the host
 * and its generations and never change what the daemon does next; what a
 * transition changes is decided by hosts/transitions.c, what follows a
 * replica's exit by generations/replica.c. */
#pragma once

#include "activator/daemon/generations/generation.h"

/* Logs one pipeline transition, counts it, and publishes the event it is
 * (if any). */
void ad_announce_transition(ad_host *host, const pl_wake_event *event);

/* Publishes one event about host (and gen, when given) to subscribers. */
void ad_publish(ad_host *host, ev_event_kind kind, const ad_generation *gen, const char *reason);

/* What follows an exit of a generation's replica (ExecReplicate=). */
typedef enum ad_replica_next {
    AD_REPLICA_RESTARTING, /* it starts again after a wait */
    AD_REPLICA_STOPPED,    /* ReplicateRestart= does not restart this exit */
    AD_REPLICA_EXHAUSTED,  /* it would, but its restarts in a row ran out */
    _AD_REPLICA_NEXT_MAX,
} ad_replica_next;

/* "restarting", "stopped", "exhausted": the outcome label of
 * activator_replica_exits_total and the first word of replica.exited's
 * reason. */
const char *ad_replica_next_name(ad_replica_next next);

/* gen's replica (pid; 0 when it could not start) ended as how says
 * ("exited with status 1"), and what_next says in words what follows:
 * logged, published as replica.exited and counted. */
void ad_announce_replica_exited(const ad_generation *gen, pid_t pid, ad_replica_next next,
                                const char *how, const char *what_next);

/* gen's replica runs again, its restart-th in a row: logged and published
 * as replica.restarted with its new pid. */
void ad_announce_replica_restarted(const ad_generation *gen, unsigned restart);

/* The sweep proved leaf_name stopped and removed it (and the record of
 * generation, when it is a generation's leaf; 0 otherwise): logged, counted
 * and, for a generation, published as retired. */
void ad_announce_swept(ad_host *host, const char *leaf_name, uint64_t generation);
