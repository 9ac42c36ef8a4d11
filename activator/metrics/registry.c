/* The metrics registry of metrics.h and its Prometheus text rendering.
 * Written by hand: Debian 12 and 13 package no C Prometheus client (prometheus-cpp 1.0 is C++).
 * libprom 0.1.3 (prometheus-client-c), were Debian to package it, would replace this file. */
#include "activator/metrics/metrics.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

typedef struct series {
    struct series *hash_next;       /* chain in the family's hash table */
    struct series *prev, *next;     /* insertion order, for stable output */
    char *values[MET_METRIC_MAX_LABELS];
    double value;                   /* counter, gauge */
    double sum;                     /* histogram */
    uint64_t count;                 /* histogram */
    uint64_t buckets[MET_METRIC_MAX_BUCKETS]; /* per bucket, not cumulative */
} series;

struct met_metric {
    met_metric *next;
    met_metric_type type;
    char *name, *help;
    size_t n_labels;
    char *label_names[MET_METRIC_MAX_LABELS];
    size_t n_buckets;
    double bounds[MET_METRIC_MAX_BUCKETS];
    series **table; /* hash of label values; per-host families hold thousands */
    size_t table_size, n_series;
    series *first, *last;
};

struct met_registry {
    met_metric *first, *last;
};

met_registry *met_new(void)
{
    return calloc(1, sizeof(met_registry));
}

static void series_free(series *s, size_t n_labels)
{
    for (size_t i = 0; i < n_labels; i++)
        free(s->values[i]);
    free(s);
}

void met_free(met_registry *metrics)
{
    if (!metrics)
        return;
    met_metric *family = metrics->first;
    while (family) {
        met_metric *next = family->next;
        for (series *s = family->first; s;) {
            series *following = s->next;
            series_free(s, family->n_labels);
            s = following;
        }
        for (size_t i = 0; i < family->n_labels; i++)
            free(family->label_names[i]);
        free(family->table);
        free(family->name);
        free(family->help);
        free(family);
        family = next;
    }
    free(metrics);
}

static bool valid_metric_name(const char *name, bool is_label)
{
    if (!name || !*name)
        return false;
    if (is_label && name[0] == '_' && name[1] == '_')
        return false; /* reserved for Prometheus itself */
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (!is_label && c == ':') || (p != name && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

int met_add_family(met_registry *metrics, met_metric_type type, const char *name, const char *help,
                   const char *const *label_names, const double *buckets, size_t n_buckets,
                   met_metric **out, act_error *err)
{
    assert(metrics);
    assert((unsigned)type <= MET_METRIC_HISTOGRAM);
    if (!valid_metric_name(name, false))
        return act_error_set(err, EINVAL, "metric name \"%s\" is not [a-zA-Z_:][a-zA-Z0-9_:]*",
                             name ? name : "");
    for (met_metric *f = metrics->first; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return act_error_set(err, EEXIST, "metric %s is registered twice", name);
    if ((type == MET_METRIC_HISTOGRAM) != (buckets != NULL) || n_buckets > MET_METRIC_MAX_BUCKETS)
        return act_error_set(err, EINVAL,
                             "metric %s: a histogram needs 1 to %d buckets, other types none", name,
                             MET_METRIC_MAX_BUCKETS);
    for (size_t i = 1; i < n_buckets; i++)
        if (!(buckets[i] > buckets[i - 1]))
            return act_error_set(err, EINVAL, "metric %s: bucket bounds must ascend", name);

    _cleanup_free_ met_metric *family = calloc(1, sizeof(*family));
    if (!family)
        return act_error_set(err, ENOMEM, "out of memory for metric %s", name);
    for (size_t i = 0; label_names && label_names[i]; i++) {
        if (i >= MET_METRIC_MAX_LABELS || !valid_metric_name(label_names[i], true) ||
            (type == MET_METRIC_HISTOGRAM && strcmp(label_names[i], "le") == 0)) {
            for (size_t j = 0; j < family->n_labels; j++)
                free(family->label_names[j]);
            return act_error_set(err, EINVAL, "metric %s: label %zu is not a valid label name",
                                 name, i);
        }
        family->label_names[family->n_labels++] = strdup(label_names[i]);
    }
    family->type = type;
    family->name = strdup(name);
    family->help = strdup(help ? help : "");
    family->n_buckets = n_buckets;
    if (n_buckets)
        memcpy(family->bounds, buckets, n_buckets * sizeof(double));
    family->table_size = 16;
    family->table = calloc(family->table_size, sizeof(series *));
    bool oom = !family->name || !family->help || !family->table;
    for (size_t i = 0; i < family->n_labels; i++)
        oom = oom || !family->label_names[i];
    if (oom) {
        for (size_t i = 0; i < family->n_labels; i++)
            free(family->label_names[i]);
        free(family->name);
        free(family->help);
        free(family->table);
        return act_error_set(err, ENOMEM, "out of memory for metric %s", name);
    }

    met_metric *added = TAKE_PTR(family);
    if (metrics->last)
        metrics->last->next = added;
    else
        metrics->first = added;
    metrics->last = added;
    if (out)
        *out = added;
    return 0;
}

static int count_values(const met_metric *family, const char *const *values)
{
    size_t n = 0;
    while (values && values[n])
        n++;
    return n == family->n_labels ? 0 : -EINVAL;
}

static uint64_t hash_values(const met_metric *family, const char *const *values)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < family->n_labels; i++) {
        for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++)
            h = (h ^ *p) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull; /* separator: ("ab","c") != ("a","bc") */
    }
    return h;
}

static bool same_values(const met_metric *family, const series *s, const char *const *values)
{
    for (size_t i = 0; i < family->n_labels; i++)
        if (strcmp(s->values[i], values[i]) != 0)
            return false;
    return true;
}

static series *find(const met_metric *family, const char *const *values, series ***slot_out)
{
    series **slot = &family->table[hash_values(family, values) % family->table_size];
    for (; *slot; slot = &(*slot)->hash_next)
        if (same_values(family, *slot, values))
            break;
    if (slot_out)
        *slot_out = slot;
    return *slot;
}

static int grow(met_metric *family)
{
    size_t size = family->table_size * 2;
    series **table = calloc(size, sizeof(series *));
    if (!table)
        return -ENOMEM;
    for (series *s = family->first; s; s = s->next) {
        size_t index = hash_values(family, (const char *const *)s->values) % size;
        s->hash_next = table[index];
        table[index] = s;
    }
    free(family->table);
    family->table = table;
    family->table_size = size;
    return 0;
}

static series *find_or_create(met_metric *family, const char *const *values)
{
    series **slot;
    series *s = find(family, values, &slot);
    if (s)
        return s;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    for (size_t i = 0; i < family->n_labels; i++) {
        s->values[i] = strdup(values[i]);
        if (!s->values[i]) {
            series_free(s, i);
            return NULL;
        }
    }
    *slot = s;
    s->prev = family->last;
    if (family->last)
        family->last->next = s;
    else
        family->first = s;
    family->last = s;
    family->n_series++;
    /* A failed grow only makes chains longer; the series is already in. */
    if (family->n_series > family->table_size * 2)
        (void)grow(family);
    return s;
}

int met_metric_add(met_metric *family, const char *const *values, double delta)
{
    assert(family);
    if (count_values(family, values) < 0 || family->type == MET_METRIC_HISTOGRAM ||
        (family->type == MET_METRIC_COUNTER && !(delta >= 0)))
        return -EINVAL;
    series *s = find_or_create(family, values);
    if (!s)
        return -ENOMEM;
    s->value += delta;
    return 0;
}

int met_metric_set(met_metric *family, const char *const *values, double value)
{
    assert(family);
    if (count_values(family, values) < 0 || family->type == MET_METRIC_HISTOGRAM)
        return -EINVAL;
    series *s = find_or_create(family, values);
    if (!s)
        return -ENOMEM;
    if (family->type == MET_METRIC_COUNTER && !(value >= s->value))
        return -EINVAL;
    s->value = value;
    return 0;
}

int met_metric_observe(met_metric *family, const char *const *values, double value)
{
    assert(family);
    if (count_values(family, values) < 0 || family->type != MET_METRIC_HISTOGRAM || isnan(value))
        return -EINVAL;
    series *s = find_or_create(family, values);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < family->n_buckets; i++) {
        if (value <= family->bounds[i]) {
            s->buckets[i]++;
            break;
        }
    }
    s->count++;
    s->sum += value;
    return 0;
}

int met_metric_remove(met_metric *family, const char *const *values)
{
    assert(family);
    if (count_values(family, values) < 0)
        return -EINVAL;
    series **slot;
    series *s = find(family, values, &slot);
    if (!s)
        return 0;
    *slot = s->hash_next;
    if (s->prev)
        s->prev->next = s->next;
    else
        family->first = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        family->last = s->prev;
    family->n_series--;
    series_free(s, family->n_labels);
    return 0;
}

double met_metric_get(const met_metric *family, const char *const *values)
{
    assert(family);
    if (count_values(family, values) < 0)
        return 0;
    const series *s = find(family, values, NULL);
    if (!s)
        return 0;
    return family->type == MET_METRIC_HISTOGRAM ? (double)s->count : s->value;
}

/* Prometheus text escaping: HELP escapes backslash and newline, label values
 * also the double quote. */
static void put_escaped(FILE *f, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else if (quote && *s == '"')
            fputs("\\\"", f);
        else
            fputc(*s, f);
    }
}

static void put_number(FILE *f, double value)
{
    if (isnan(value))
        fputs("NaN", f);
    else if (isinf(value))
        fputs(value > 0 ? "+Inf" : "-Inf", f);
    else
        fprintf(f, "%.17g", value);
}

/* name{a="x",b="y"[,le="0.5"]} */
static void put_sample_name(FILE *f, const met_metric *family, const char *suffix, const series *s,
                            const char *le)
{
    fputs(family->name, f);
    fputs(suffix, f);
    if (family->n_labels == 0 && !le)
        return;
    fputc('{', f);
    for (size_t i = 0; i < family->n_labels; i++) {
        fprintf(f, "%s%s=\"", i ? "," : "", family->label_names[i]);
        put_escaped(f, s ? s->values[i] : "", true);
        fputc('"', f);
    }
    if (le)
        fprintf(f, "%sle=\"%s\"", family->n_labels ? "," : "", le);
    fputc('}', f);
}

static void render_series(FILE *f, const met_metric *family, const series *s)
{
    if (family->type != MET_METRIC_HISTOGRAM) {
        put_sample_name(f, family, "", s, NULL);
        fputc(' ', f);
        put_number(f, s ? s->value : 0);
        fputc('\n', f);
        return;
    }
    uint64_t cumulative = 0;
    for (size_t i = 0; i < family->n_buckets; i++) {
        char le[32];
        snprintf(le, sizeof(le), "%.17g", family->bounds[i]);
        cumulative += s ? s->buckets[i] : 0;
        put_sample_name(f, family, "_bucket", s, le);
        fprintf(f, " %llu\n", (unsigned long long)cumulative);
    }
    put_sample_name(f, family, "_bucket", s, "+Inf");
    fprintf(f, " %llu\n", (unsigned long long)(s ? s->count : 0));
    put_sample_name(f, family, "_sum", s, NULL);
    fputc(' ', f);
    put_number(f, s ? s->sum : 0);
    fputc('\n', f);
    put_sample_name(f, family, "_count", s, NULL);
    fprintf(f, " %llu\n", (unsigned long long)(s ? s->count : 0));
}

int met_render(const met_registry *metrics, char **out, size_t *len)
{
    assert(metrics);
    assert(out);
    assert(len);
    _cleanup_free_ char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return -errno;
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    static_assert(ARRAY_SIZE(type_names) == MET_METRIC_HISTOGRAM + 1,
                  "a metric type without a name");
    for (const met_metric *family = metrics->first; family; family = family->next) {
        fprintf(f, "# HELP %s ", family->name);
        put_escaped(f, family->help, false);
        fprintf(f, "\n# TYPE %s %s\n", family->name, type_names[family->type]);
        /* A family without labels always shows a sample, so a scraper sees
         * a zero counter before its first event rather than no series. */
        if (!family->first && family->n_labels == 0)
            render_series(f, family, NULL);
        for (const series *s = family->first; s; s = s->next)
            render_series(f, family, s);
    }
    /* fclose writes buf and size; they are the caller's only after it. */
    if (fclose(f) != 0)
        return -ENOMEM;
    *out = TAKE_PTR(buf);
    *len = size;
    return 0;
}
