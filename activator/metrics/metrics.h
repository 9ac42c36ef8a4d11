/* A small metrics registry rendered in the Prometheus text format (0.0.4).
 *
 * Families are counters, gauges or histograms, each with up to
 * ACT_METRIC_MAX_LABELS label names; a series is one combination of label
 * values. The registry belongs to the event loop thread: every call here is
 * made there, and the HTTP server (activator/metrics/server.h) renders on
 * the loop too, so no lock is needed and NNG never reads live state. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/cleanup.h"
#include "common/error.h"

#define ACT_METRIC_MAX_LABELS 4
#define ACT_METRIC_MAX_BUCKETS 32

typedef enum act_metric_type {
    ACT_METRIC_COUNTER,
    ACT_METRIC_GAUGE,
    ACT_METRIC_HISTOGRAM,
} act_metric_type;

typedef struct act_metrics act_metrics;
typedef struct act_metric act_metric; /* one family */

/* Label values (or names) as a NULL-terminated array literal:
 *   act_metric_add(wakes, ACT_LABELS("serving", "none"), 1); */
#define ACT_LABELS(...) ((const char *const[]){__VA_ARGS__, NULL})

act_metrics *act_metrics_new(void);
void act_metrics_free(act_metrics *metrics);
DEFINE_TRIVIAL_CLEANUP_FUNC(act_metrics *, act_metrics_free)

/* Adds a family. name follows Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*),
 * label_names is NULL or ACT_LABELS(...); buckets are the ascending upper
 * bounds of a histogram (+Inf is implied) and NULL otherwise. The family
 * lives as long as the registry. */
int act_metrics_add_family(act_metrics *metrics, act_metric_type type, const char *name,
                           const char *help, const char *const *label_names,
                           const double *buckets, size_t n_buckets, act_metric **out,
                           act_error *err);

/* values is NULL for a family without labels, else exactly one value per
 * label name. -EINVAL for a wrong count, a negative counter step, or the
 * wrong kind of call for the family's type; -ENOMEM. */
int act_metric_add(act_metric *family, const char *const *values, double delta);
/* Gauges; counters too when value does not go down (copying a count kept
 * elsewhere, such as the events sequence number). */
int act_metric_set(act_metric *family, const char *const *values, double value);
int act_metric_observe(act_metric *family, const char *const *values, double value);
/* Drops one series (a host that was removed). 0 also when it did not exist. */
int act_metric_remove(act_metric *family, const char *const *values);

/* The value of a counter or gauge series, or the count of a histogram
 * series; 0 when it does not exist. */
double act_metric_get(const act_metric *family, const char *const *values);

/* Renders every family into a malloc'd NUL-terminated text. */
int act_metrics_render(const act_metrics *metrics, char **out, size_t *len);
