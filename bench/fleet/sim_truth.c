/* The simulated fleet's truth, kept from the writers (sim.h). One lock:
 * writes and runs come at a few hundred a second, from every thread. */
#include "bench/fleet/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMED_MAX CLAIM_BOXES_MAX

typedef struct write_entry {
    bool known;
    uint8_t n;
    uint16_t box[NAMED_MAX];
} write_entry;

typedef struct host_runs {
    int32_t box; /* the box running it, -1 for none */
    uint32_t generations;
} host_runs;

struct sim_truth {
    pthread_mutex_t lock;
    unsigned n_boxes, n_hosts;
    write_entry *writes; /* by revision */
    size_t n_writes;
    uint64_t *owed;  /* by box */
    host_runs *runs; /* by host */
    uint64_t violations, runs_started;
};

sim_truth *sim_truth_new(unsigned n_boxes, unsigned n_hosts)
{
    sim_truth *truth = calloc(1, sizeof(*truth));
    if (!truth)
        return NULL;
    pthread_mutex_init(&truth->lock, NULL);
    truth->n_boxes = n_boxes;
    truth->n_hosts = n_hosts;
    truth->owed = calloc(n_boxes, sizeof(*truth->owed));
    truth->runs = calloc(n_hosts, sizeof(*truth->runs));
    if (!truth->owed || !truth->runs) {
        sim_truth_free(truth);
        return NULL;
    }
    for (unsigned i = 0; i < n_hosts; i++)
        truth->runs[i].box = -1;
    return truth;
}

void sim_truth_free(sim_truth *truth)
{
    if (!truth)
        return;
    pthread_mutex_destroy(&truth->lock);
    free(truth->writes);
    free(truth->owed);
    free(truth->runs);
    free(truth);
}

/* "b0042" is box 42; anything else is no box of the simulation. */
static int box_number(const char *name, unsigned n_boxes)
{
    char *end;
    if (name[0] != 'b')
        return -1;
    unsigned long number = strtoul(name + 1, &end, 10);
    return *end == '\0' && number < n_boxes ? (int)number : -1;
}

void sim_truth_wrote(sim_truth *truth, uint64_t revision, const claim *before, const claim *after)
{
    claim_boxes named = {0}, more;
    if (before && before->revision)
        claim_named_boxes(before, &named);
    claim_named_boxes(after, &more);
    claim_boxes_merge(&named, &more);
    pthread_mutex_lock(&truth->lock);
    if (revision >= truth->n_writes) {
        size_t n = truth->n_writes ? truth->n_writes : 4096;
        while (n <= revision)
            n *= 2;
        write_entry *grown = realloc(truth->writes, n * sizeof(*grown));
        if (!grown) {
            pthread_mutex_unlock(&truth->lock);
            return;
        }
        memset(grown + truth->n_writes, 0, (n - truth->n_writes) * sizeof(*grown));
        truth->writes = grown;
        truth->n_writes = n;
    }
    write_entry *entry = &truth->writes[revision];
    entry->known = true;
    entry->n = 0;
    for (size_t i = 0; i < named.n && entry->n < NAMED_MAX; i++) {
        int box = box_number(named.box[i], truth->n_boxes);
        if (box < 0)
            continue;
        entry->box[entry->n++] = (uint16_t)box;
        truth->owed[box]++;
    }
    pthread_mutex_unlock(&truth->lock);
}

int sim_truth_names(sim_truth *truth, uint64_t revision, unsigned box)
{
    int answer = -1;
    pthread_mutex_lock(&truth->lock);
    if (revision < truth->n_writes && truth->writes[revision].known) {
        answer = 0;
        for (unsigned i = 0; i < truth->writes[revision].n; i++)
            if (truth->writes[revision].box[i] == box)
                answer = 1;
    }
    pthread_mutex_unlock(&truth->lock);
    return answer;
}

uint64_t sim_truth_owed(sim_truth *truth, unsigned box)
{
    pthread_mutex_lock(&truth->lock);
    uint64_t owed = box < truth->n_boxes ? truth->owed[box] : 0;
    pthread_mutex_unlock(&truth->lock);
    return owed;
}

void sim_truth_runs(sim_truth *truth, unsigned host, unsigned box)
{
    pthread_mutex_lock(&truth->lock);
    host_runs *runs = &truth->runs[host];
    truth->runs_started++;
    if (runs->box >= 0 && (unsigned)runs->box != box) {
        truth->violations++;
        fprintf(stderr,
                "bench-fleet: FENCING VIOLATION: host h%06u starts on box b%04u while box "
                "b%04u runs %u generation(s) of it\n",
                host, box, (unsigned)runs->box, runs->generations);
    } else {
        runs->box = (int32_t)box;
        runs->generations++;
    }
    pthread_mutex_unlock(&truth->lock);
}

void sim_truth_stops(sim_truth *truth, unsigned host, unsigned box)
{
    pthread_mutex_lock(&truth->lock);
    host_runs *runs = &truth->runs[host];
    if (runs->box >= 0 && (unsigned)runs->box == box && runs->generations > 0 &&
        --runs->generations == 0)
        runs->box = -1;
    pthread_mutex_unlock(&truth->lock);
}

uint64_t sim_truth_violations(sim_truth *truth)
{
    pthread_mutex_lock(&truth->lock);
    uint64_t n = truth->violations;
    pthread_mutex_unlock(&truth->lock);
    return n;
}

uint64_t sim_truth_runs_started(sim_truth *truth)
{
    pthread_mutex_lock(&truth->lock);
    uint64_t n = truth->runs_started;
    pthread_mutex_unlock(&truth->lock);
    return n;
}

void sim_samples_add(sim_samples *samples, double value)
{
    pthread_mutex_lock(&samples->lock);
    if (samples->n == samples->cap) {
        size_t cap = samples->cap ? samples->cap * 2 : 1024;
        double *grown = realloc(samples->values, cap * sizeof(*grown));
        if (grown) {
            samples->values = grown;
            samples->cap = cap;
        }
    }
    if (samples->n < samples->cap)
        samples->values[samples->n++] = value;
    pthread_mutex_unlock(&samples->lock);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sim_samples_quantile(sim_samples *samples, double q)
{
    if (!samples->n)
        return 0;
    qsort(samples->values, samples->n, sizeof(double), compare_doubles);
    size_t i = (size_t)(q * (double)(samples->n - 1) + 0.5);
    return samples->values[i < samples->n ? i : samples->n - 1];
}
