/* A small metrics registry rendered in the Prometheus text format (0.0.4).
 *
 * Families are counters, gauges or histograms, each with up to
 * MET_METRIC_MAX_LABELS label names; a series is one combination of label
 * values. The registry belongs to the event loop thread: every call here is
 * made there, and the HTTP server (activator/metrics/server.h) renders on
 * the loop too, so no lock is needed and no other thread reads live state. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/cleanup.h"
#include "common/error.h"

#define MET_METRIC_MAX_LABELS 4
#define MET_METRIC_MAX_BUCKETS 32

typedef enum met_metric_type {
    MET_METRIC_COUNTER,
    MET_METRIC_GAUGE,
    MET_METRIC_HISTOGRAM,
} met_metric_type;

typedef struct met_registry met_registry;
typedef struct met_metric met_metric; /* one family */

/* Label values (or names) as a NULL-terminated array literal:
 *   met_metric_add(wakes, MET_LABELS("serving", "none"), 1); */
#define MET_LABELS(...) ((const char *const[]){__VA_ARGS__, NULL})

met_registry *met_new(void);
void met_free(met_registry *metrics);
DEFINE_TRIVIAL_CLEANUP_FUNC(met_registry *, met_free)

/* Adds a family. name follows Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*),
 * label_names is NULL or MET_LABELS(...); buckets are the ascending upper
 * bounds of a histogram (+Inf is implied) and NULL otherwise. The family
 * lives as long as the registry. */
int met_add_family(met_registry *metrics, met_metric_type type, const char *name, const char *help,
                   const char *const *label_names, const double *buckets, size_t n_buckets,
                   met_metric **out, act_error *err);

/* values is NULL for a family without labels, else exactly one value per
 * label name. -EINVAL for a wrong count, a negative counter step, or the
 * wrong kind of call for the family's type; -ENOMEM. */
int met_metric_add(met_metric *family, const char *const *values, double delta);
/* Gauges; counters too when value does not go down (copying a count kept
 * elsewhere, such as the events sequence number). */
int met_metric_set(met_metric *family, const char *const *values, double value);
int met_metric_observe(met_metric *family, const char *const *values, double value);
/* Drops one series (a host that was removed). 0 also when it did not exist. */
int met_metric_remove(met_metric *family, const char *const *values);

/* The value of a counter or gauge series, or the count of a histogram
 * series; 0 when it does not exist. */
double met_metric_get(const met_metric *family, const char *const *values);

/* Renders every family into a malloc'd NUL-terminated text. */
int met_render(const met_registry *metrics, char **out, size_t *len);
