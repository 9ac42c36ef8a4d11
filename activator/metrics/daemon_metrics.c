#include "activator/metrics/daemon_metrics.h"

#include <assert.h>

#include "common/cleanup.h"

/* Wakes take from a few milliseconds (a warm exec) to MaxStarts ready windows
 * with backoff (minutes); the bounds cover both ends. */
static const double wake_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,  5,     10,   30,  60,   180};

/* Claim store calls: a dir store's fsync'd write takes milliseconds, an etcd
 * round trip within a data centre about as long, one across regions or to a
 * struggling cluster up to the store's 5 s timeout. */
static const double store_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                       0.1,    0.25,  0.5,    1,     2.5,  5,     10};

/* A heal lists this box's claims: one request for a box of a few hundred
 * hosts, a few pages for more, waiting out an etcd member that restarts. */
static const double heal_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25,  0.5,    1,     2.5,  5,     10,   30};

/* A thaw is tens of microseconds with ThawCheck=cached and one store
 * round trip with ThawCheck=claim (well under a millisecond on the dir
 * store, a network round trip on etcd). */
static const double thaw_buckets[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                      0.005,   0.01,   0.025,   0.05,   0.1,   0.5};

/* A periodic checkpoint freezes the app while its state is archived: a
 * few milliseconds for a small state, seconds for gigabytes. */
static const double pause_buckets[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                       0.2,    0.5,   1,     2,     5,    10,   60};

int met_daemon_metrics_register(met_registry *m, met_daemon_metrics *out, act_error *err)
{
    assert(m);
    assert(out);
    int r;
    if ((r = met_add_family(m, MET_METRIC_GAUGE, "activator_hosts",
                            "Configured hosts by pipeline state.", MET_LABELS("state"), NULL, 0,
                            &out->hosts, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_wakes_total",
                            "Wakes by outcome and reason code.", MET_LABELS("outcome", "reason"),
                            NULL, 0, &out->wakes, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_HISTOGRAM, "activator_wake_duration_seconds",
                            "Time from a wake's trigger to serving.", NULL, wake_buckets,
                            ARRAY_SIZE(wake_buckets), &out->wake_duration, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_generations_started_total",
                            "Generations exec'd.", NULL, NULL, 0, &out->generations_started, err)) <
            0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_generations_retired_total",
                            "Generations retired with proof of empty.", NULL, NULL, 0,
                            &out->generations_retired, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_GAUGE, "activator_host_memory_current_bytes",
                            "memory.current of the host's serving generation.", MET_LABELS("host"),
                            NULL, 0, &out->host_memory_current, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_GAUGE, "activator_host_pids_current",
                            "pids.current of the host's serving generation.", MET_LABELS("host"),
                            NULL, 0, &out->host_pids_current, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_store_errors_total",
                            "Claim store operations that failed.", MET_LABELS("operation"), NULL, 0,
                            &out->store_errors, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_events_published_total",
                            "Events published on the events socket.", NULL, NULL, 0,
                            &out->events_published, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_control_requests_total",
                            "Control requests by op and outcome.", MET_LABELS("op", "outcome"),
                            NULL, 0, &out->control_requests, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_metrics_connections_refused_total",
                            "Metrics connections refused over the server's limits (in all, or from "
                            "one address).",
                            NULL, NULL, 0, &out->metrics_refused, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_GAUGE, "activator_box_info",
                            "Always 1: this daemon's box id and version.",
                            MET_LABELS("box", "version"), NULL, 0, &out->box_info, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_swaps_total",
                            "Swaps that ended, by outcome (done, failed) and reason code.",
                            MET_LABELS("outcome", "reason"), NULL, 0, &out->swaps, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_failure_parks_total",
                            "Failure parks: a wake that gave up, or a serving generation that "
                            "failed, by reason code.",
                            MET_LABELS("reason"), NULL, 0, &out->failure_parks, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_failure_backoff_deferrals_total",
                            "Wakes that waited out the failure-park backoff first.", NULL, NULL, 0,
                            &out->failure_backoff_deferrals, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_budget_deferrals_total",
                            "Starts held by a budget: the host's start rate (rate) or the box's "
                            "MaxConcurrentStarts= (slot).",
                            MET_LABELS("budget"), NULL, 0, &out->budget_deferrals, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_HISTOGRAM, "activator_store_operation_duration_seconds",
                            "Claim store calls by operation (read, cas, delete, list) and outcome "
                            "(ok, error): time from the call to its answer.",
                            MET_LABELS("operation", "outcome"), store_buckets,
                            ARRAY_SIZE(store_buckets), &out->store_duration, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_GAUGE, "activator_frozen_hosts",
                            "Hosts whose generation is frozen (ParkMode=freeze).", NULL, NULL, 0,
                            &out->frozen_hosts, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_thaws_total",
                            "Thaws of frozen generations by outcome (served, retired).",
                            MET_LABELS("outcome"), NULL, 0, &out->thaws, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_HISTOGRAM, "activator_thaw_duration_seconds",
                            "Time from the connection that thawed a frozen generation to its "
                            "thaw (the claim read of ThawCheck=claim included).",
                            NULL, thaw_buckets, ARRAY_SIZE(thaw_buckets), &out->thaw_duration,
                            err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_periodic_checkpoints_total",
                            "Checkpoints CheckpointEverySec= took, by outcome (named: written "
                            "and named on the claim; discarded: written, but what it archived "
                            "may have changed, so not named; failed; skipped: the host was "
                            "busy or frozen).",
                            MET_LABELS("outcome"), NULL, 0, &out->checkpoints, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_HISTOGRAM, "activator_checkpoint_pause_seconds",
                            "How long a periodic checkpoint held a serving generation frozen "
                            "while its state directory was archived.",
                            NULL, pause_buckets, ARRAY_SIZE(pause_buckets), &out->checkpoint_pause,
                            err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_takeovers_total",
                            "Failover hosts of boxes whose lease expired that this box tried to "
                            "take, by outcome (taken; lost: another box or an operator wrote "
                            "the claim first; failed: the store did not answer).",
                            MET_LABELS("outcome"), NULL, 0, &out->takeovers, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_pressure_retirements_total",
                            "Frozen generations retired because the box's memory was under "
                            "pressure (FreezeMemoryPressure=).",
                            NULL, NULL, 0, &out->pressure_retirements, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_store_requests_total",
                            "Requests to the claim store on the wire by operation (etcd: the "
                            "gateway path, e.g. kv/range, kv/txn, watch), every attempt counted.",
                            MET_LABELS("operation"), NULL, 0, &out->store_requests, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_store_bytes_total",
                            "Bytes of the claim store's requests (sent) and answers (received) "
                            "by operation, a watch's stream included.",
                            MET_LABELS("operation", "direction"), NULL, 0, &out->store_bytes,
                            err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_claim_changes_total",
                            "Claim changes this box's watch told, by whether they were about a "
                            "host configured here (concerning yes) or not.",
                            MET_LABELS("concerning"), NULL, 0, &out->claim_changes, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_claim_heals_total",
                            "Times the claim watch ended and this box's claims were listed "
                            "again, by outcome (ok, error).",
                            MET_LABELS("outcome"), NULL, 0, &out->claim_heals, err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_HISTOGRAM, "activator_claim_heal_duration_seconds",
                            "Time from a heal's list request to its answer, for the heals "
                            "that listed.",
                            NULL, heal_buckets, ARRAY_SIZE(heal_buckets), &out->claim_heal_duration,
                            err)) < 0 ||
        (r = met_add_family(m, MET_METRIC_COUNTER, "activator_claim_heal_claims_total",
                            "Claims the heals' lists brought: with the index, this box's own.",
                            NULL, NULL, 0, &out->claim_heal_claims, err)) < 0 ||
        (r = met_add_family(
             m, MET_METRIC_COUNTER, "activator_replica_exits_total",
             "Exits of a generation's replica (ExecReplicate=) before its retirement, "
             "by host and by what followed (restarting; stopped: not restarted; "
             "exhausted: restarts in a row ran out).",
             MET_LABELS("host", "outcome"), NULL, 0, &out->replica_exits, err)) < 0)
        return r;
    return 0;
}
