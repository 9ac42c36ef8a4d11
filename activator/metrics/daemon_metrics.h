/* The daemon's metric families, registered in one place so their
 * names and labels are fixed and documented here:
 *
 *   activator_hosts{state}                        gauge: hosts per pipeline state
 *   activator_wakes_total{outcome,reason}         counter: outcome serving|refused|failed,
 *                                                 reason a reason code or "none"
 *   activator_wake_duration_seconds               histogram: trigger to serving
 *   activator_generations_started_total           counter
 *   activator_generations_retired_total           counter
 *   activator_host_memory_current_bytes{host}     gauge: the generation's memory.current
 *   activator_host_pids_current{host}             gauge: the generation's pids.current
 *   activator_store_errors_total{operation}       counter: claim store failures
 *   activator_events_published_total              counter
 *   activator_control_requests_total{op,outcome}  counter: outcome "ok" or the error code
 *   activator_metrics_connections_refused_total   counter: connections refused over the
 *                                                 metrics server's limits (server.h)
 *   activator_box_info{box,version}               gauge: 1 (join on instance for the box id)
 *   activator_swaps_total{outcome,reason}         counter: outcome done|failed
 *   activator_failure_parks_total{reason}         counter: wakes that gave up, serving
 *                                                 generations that failed ("exited": a
 *                                                 non-zero exit)
 *   activator_failure_backoff_deferrals_total     counter: wakes that waited out the backoff
 *   activator_budget_deferrals_total{budget}      counter: budget rate|slot
 *   activator_store_operation_duration_seconds{operation,outcome}
 *                                                 histogram: claim store calls, operation
 *                                                 read|cas|delete|list, outcome ok|error
 *   activator_store_requests_total{operation}      counter: requests on the wire (etcd
 *                                                 gateway path: kv/range, kv/txn, watch, ...)
 *   activator_store_bytes_total{operation,direction}
 *                                                 counter: direction sent|received
 *   activator_claim_changes_total{concerning}      counter: changes the claim watch told,
 *                                                 concerning yes (a host of this box) | no
 *   activator_claim_heals_total{outcome}           counter: heals by outcome ok|error
 *   activator_claim_heal_duration_seconds          histogram: a heal's list, request to answer
 *   activator_claim_heal_claims_total              counter: claims the heals listed
 *   activator_replica_exits_total{host,outcome}    counter: exits of a generation's replica
 *                                                 (ExecReplicate=) by what follows: outcome
 *                                                 restarting|stopped|exhausted
 *
 * contrib/grafana-dashboard.json queries these; a test checks each of its
 * queries names one. */
#pragma once

#include "activator/metrics/metrics.h"

typedef struct met_daemon_metrics {
    met_metric *hosts;
    met_metric *wakes;
    met_metric *wake_duration;
    met_metric *generations_started;
    met_metric *generations_retired;
    met_metric *host_memory_current;
    met_metric *host_pids_current;
    met_metric *store_errors;
    met_metric *events_published;
    met_metric *control_requests;
    met_metric *metrics_refused;
    met_metric *box_info;
    met_metric *swaps;
    met_metric *failure_parks;
    met_metric *failure_backoff_deferrals;
    met_metric *budget_deferrals;
    met_metric *store_duration;
    met_metric *frozen_hosts;         /* gauge: hosts whose generation is frozen */
    met_metric *thaws;                /* counter by outcome: served, retired */
    met_metric *thaw_duration;        /* histogram: readable socket to the app running */
    met_metric *checkpoints;          /* counter by outcome: CheckpointEverySec='s checkpoints */
    met_metric *checkpoint_pause;     /* histogram: a periodic checkpoint's freeze to its thaw */
    met_metric *takeovers;            /* counter by outcome: failover hosts of dead boxes */
    met_metric *pressure_retirements; /* counter: frozen generations retired on pressure */
    met_metric *store_requests;       /* counter by operation: requests on the wire */
    met_metric *store_bytes;          /* counter by operation, direction */
    met_metric *claim_changes;        /* counter by concerning: yes, no */
    met_metric *claim_heals;          /* counter by outcome: ok, error */
    met_metric *claim_heal_duration;  /* histogram: a heal's list */
    met_metric *claim_heal_claims;    /* counter: claims the heals listed */
    met_metric *replica_exits;        /* counter by host, outcome: restarting, stopped,
                                         exhausted */
} met_daemon_metrics;

int met_daemon_metrics_register(met_registry *metrics, met_daemon_metrics *out, act_error *err);
