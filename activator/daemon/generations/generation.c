/* One generation of a host, created at `reserve` as a leaf with the host's
 * limits: its records and its counters. Its life is in the files beside
 * this one, which all stand on it: spawn.c starts its processes,
 * supervise.c watches it while it serves (and hears its notify socket),
 * freezer.c freezes and thaws it, retire.c kills it with proof of empty,
 * whatever the reason it ends, and frees it; adopt.c takes one over that
 * outlived the previous daemon. */
#include "activator/daemon/generations/internal.h"
#include "activator/daemon/generations/record_writes.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"

int ad_generation_new(ad_host *host, const char *kind, uint64_t number, ad_generation **out,
                      act_error *err)
{
    assert(host && kind && out);
    char leaf_name[32];
    snprintf(leaf_name, sizeof(leaf_name), "%s-%" PRIu64, kind, number);
    const cfg_host *config = ad_host_config(host);
    cg_limits limits;
    ad_limits_from_config(host->daemon->cgroups, &config->limits, !config->user, &limits);

    ad_generation *gen = calloc(1, sizeof(*gen));
    if (!gen)
        return act_error_set(err, ENOMEM, "out of memory");
    gen->host = host;
    gen->number = number;
    gen->announced = strcmp(kind, "g") == 0;
    gen->process.pidfd = -1;
    gen->replica.process.pidfd = -1;
    gen->helper_stdout_fd = -1;
    int r =
        cg_leaf_create(host->daemon->cgroups, config->name, leaf_name, &limits, &gen->leaf, err);
    if (r < 0) {
        free(gen);
        return r;
    }
    *out = gen;
    return 0;
}

int ad_generation_set_limits(ad_generation *gen, const cfg_limits *limits, act_error *err)
{
    assert(gen && limits);
    cg_limits values;
    ad_limits_from_config(gen->host->daemon->cgroups, limits, !ad_host_config(gen->host)->user,
                          &values);
    return cg_leaf_set_limits(gen->leaf, &values, err);
}

void ad_generation_fill_record(ad_generation *gen, rec_generation_phase phase,
                               rec_generation_record *record)
{
    assert(gen && record);
    ad_host *host = gen->host;
    *record = (rec_generation_record){
        .generation = gen->number,
        .session = gen->session,
        .admission_revision = gen->admission_revision,
        .build = gen->build,
        .phase = phase,
        .pid = gen->process.pid,
        .started_usec = act_wallclock_usec(),
        .replica_pid = gen->replica.process.pidfd >= 0 ? gen->replica.process.pid : 0,
    };
    snprintf(record->host, sizeof(record->host), "%s", host->name);
    snprintf(record->incarnation, sizeof(record->incarnation), "%s", host->daemon->incarnation);
}

static void on_record_written(ad_host *host, int result, const act_error *err)
{
    if (result < 0)
        act_log(LOG_WARNING, "host %s: %s", host->name, err->message);
}

void ad_generation_write_record(ad_generation *gen, rec_generation_phase phase)
{
    rec_generation_record record;
    ad_generation_fill_record(gen, phase, &record);
    act_error err = {0};
    if (ad_record_write_async(gen->host, &record, NULL, on_record_written, &err) < 0)
        act_log(LOG_WARNING, "host %s: %s", gen->host->name, err.message);
}

/* ---- counters --------------------------------------------------------------- */

/* Fresh enough for a person and for a scraper that polls every few seconds. */
#define STATS_MAX_AGE_USEC (1000 * 1000ull)

int ad_generation_stats(const ad_generation *gen, cg_stats *out)
{
    assert(gen && out);
    /* The cache is not the generation's state: refreshing it through a
     * const pointer changes nothing anyone decides by. */
    ad_generation *cache = (ad_generation *)gen;
    uint64_t now = act_now_usec();
    if (!cache->stats_usec || now - cache->stats_usec >= STATS_MAX_AGE_USEC) {
        cache->stats_result = cg_leaf_stats(cache->leaf, &cache->stats, NULL);
        cache->stats_usec = now;
    }
    *out = cache->stats;
    return cache->stats_result;
}

uint64_t ad_generation_notify_refused(const ad_generation *gen)
{
    return gen->notify ? ntf_refused_count(gen->notify) : 0;
}
