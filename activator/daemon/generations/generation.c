/* One generation of a host, created at `reserve` as a leaf with the host's
 * limits: its records, its counters, its notify socket, its adoption by a
 * daemon that restarted, and its free. Its life is in the files beside
 * this one: spawn.c starts its processes, supervise.c watches it while it
 * serves, freezer.c freezes and thaws it, and retire.c kills it with proof
 * of empty, whatever the reason it ends. */
#include "activator/daemon/generations/generation_internal.h"

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
    gen->helper.pidfd = -1;
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
    };
    snprintf(record->host, sizeof(record->host), "%s", host->name);
    snprintf(record->incarnation, sizeof(record->incarnation), "%s", host->daemon->incarnation);
}

int ad_generation_write_record(ad_generation *gen, rec_generation_phase phase, act_error *err)
{
    rec_generation_record record;
    ad_generation_fill_record(gen, phase, &record);
    int dirfd = ad_host_dir(gen->host, err);
    return dirfd < 0 ? dirfd : rec_write_generation(dirfd, &record, err);
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

/* ---- notify socket -------------------------------------------------------- */

bool ad_generation_wants_notify(const cfg_host *config)
{
    return config->ready.kind == PROBE_NOTIFY || config->watchdog_usec;
}

/* What a datagram says to the generation itself, then to whoever opened
 * the socket. Before the generation serves, only READY=1 counts (its
 * opener's): a keep-alive has no deadline yet, and a STOPPING=1 is followed
 * by the exit that decides. */
static void on_notify(ntf_socket *notify, const ntf_message *message, void *userdata)
{
    ad_generation *gen = userdata;
    if (message->status)
        act_log_fields(LOG_DEBUG,
                       &(act_log_ctx){.host = gen->host->name, .generation = gen->number},
                       "host %s: generation %" PRIu64 " status: %s", gen->host->name, gen->number,
                       message->status);
    ad_generation_supervision_heard(gen, message);
    if (gen->on_message)
        gen->on_message(notify, message, gen);
}

int ad_generation_open_notify(ad_generation *gen, ntf_handler on_message, act_error *err)
{
    assert(gen);
    const ad_daemon *daemon = gen->host->daemon;
    const char *name = gen->host->name;
    char directory[256], socket_name[32], cgroup[4096], label[128];
    /* One directory per host, its user's alone; one socket per generation
     * in it, so N and N+1 of a swap each hear only their own. */
    snprintf(directory, sizeof(directory), "%s/notify/%s", daemon->config.runtime_directory, name);
    snprintf(socket_name, sizeof(socket_name), "g-%" PRIu64, gen->number);
    snprintf(cgroup, sizeof(cgroup), "/%s", cg_leaf_relative_path(gen->leaf));
    snprintf(label, sizeof(label), "host %s: generation %" PRIu64, name, gen->number);
    ntf_options options = {
        .directory = directory,
        .name = socket_name,
        .cgroup_path = cgroup,
        .label = label,
    };
    ad_host_run_as(gen->host, &options.uid, &options.gid);
    /* Without the id, senders are checked through /proc (older kernels). */
    if (ntf_cgroup_id(cg_leaf_path(gen->leaf), &options.cgroup_id) < 0)
        options.cgroup_id = 0;
    gen->on_message = on_message;
    return ntf_open(daemon->loop, &options, on_notify, gen, &gen->notify, err);
}

int ad_generation_adopt(ad_host *host, const char *leaf_name, const rec_generation_record *record,
                        const claim *current, int main_pidfd, ad_generation_exit_fn on_exit,
                        ad_generation **out, act_error *err)
{
    assert(host && leaf_name && record && current && main_pidfd >= 0 && out);
    ad_generation *gen = calloc(1, sizeof(*gen));
    if (!gen)
        return act_error_set(err, ENOMEM, "out of memory");
    *gen = (ad_generation){
        .host = host,
        .number = record->generation,
        .announced = true,
        .session = record->session,
        .admission_revision = current->revision,
        .build = record->build,
        .process = {.pid = record->pid, .pidfd = main_pidfd},
        .helper = {.pidfd = -1},
        .helper_stdout_fd = -1,
        .on_exit = on_exit,
        .on_exit_userdata = host,
        .adopted = true,
        .ready = true,
        .exec_usec = act_now_usec(),
        .serving_usec = act_now_usec(),
    };
    const cfg_host *config = ad_host_config(host);
    int r = cg_leaf_open(host->daemon->cgroups, config->name, leaf_name, &gen->leaf, err);
    /* The app still holds the NOTIFY_SOCKET path it was started with. */
    if (r == 0 && ad_generation_wants_notify(config))
        r = ad_generation_open_notify(gen, NULL, err);
    /* Its output goes on where it went; the log is for its probes, and
     * keeps the file it may write to within its size. */
    char whose[80];
    snprintf(whose, sizeof(whose), "generation %" PRIu64 " resumed by a new daemon", gen->number);
    if (r == 0)
        r = ad_host_log_open(host, whose, &gen->log, err);
    if (r == 0)
        r = ad_generation_watch_exit(gen) < 0
                ? act_error_set(err, EIO, "cannot watch pid %d", (int)record->pid)
                : 0;
    if (r < 0) {
        gen->process.pidfd = -1; /* still the caller's */
        ad_generation_free(gen);
        return r;
    }
    *out = gen;
    return 0;
}

void ad_generation_free(ad_generation *gen)
{
    if (!gen)
        return;
    ad_generation_stop_supervision(gen);
    ad_generation_stop_settling(gen);
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    gen->empty_source = sd_event_source_disable_unref(gen->empty_source);
    gen->kill_timer = sd_event_source_disable_unref(gen->kill_timer);
    ad_generation_reap(gen);
    ad_generation_drop_held(gen);
    ntf_free(gen->notify);
    ad_host_log_free(gen->log);
    if (gen->process.pidfd >= 0)
        close(gen->process.pidfd);
    cg_leaf_free(gen->leaf);
    free(gen);
}
