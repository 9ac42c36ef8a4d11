/* The supervision of a serving generation, as systemd watches a service:
 * its watchdog (WatchdogSec=: a WATCHDOG=1 within each period, or
 * WATCHDOG=trigger), its repeated health checks (HealthCheck= every
 * HealthCheckIntervalSec=, HealthCheckFailures= of them failed in a row)
 * and its STOPPING=1; its replica's failure comes from replica.c. What it
 * notices goes to on_notice, whose owner decides (wake/supervise.c); it
 * retires nothing itself. It ends
 * (ad_generation_stop_supervision, internal.h) when the
 * generation exits, is frozen, retired or freed. */
#include "activator/daemon/generations/internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "common/log.h"

#define USEC_PER_MSEC UINT64_C(1000)
/* The watchdog is a deadline an app is judged by: a millisecond of slack. */
#define WATCHDOG_ACCURACY_USEC USEC_PER_MSEC

static int on_watchdog_missed(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    gen->watchdog_timer = sd_event_source_disable_unref(gen->watchdog_timer);
    char why[160];
    snprintf(
        why, sizeof(why),
        "host %s: generation %" PRIu64 " sent no WATCHDOG=1 within %" PRIu64 " ms (WatchdogSec=)",
        gen->host->name, gen->number, ad_host_config(gen->host)->watchdog_usec / USEC_PER_MSEC);
    ad_generation_tell(gen, AD_NOTICE_WATCHDOG, why);
    return 0;
}

/* A keep-alive: the deadline starts again. */
static void pet_watchdog(ad_generation *gen)
{
    if (!gen->watchdog_timer)
        return;
    uint64_t watchdog_usec = ad_host_config(gen->host)->watchdog_usec;
    if (sd_event_source_set_time_relative(gen->watchdog_timer, watchdog_usec) < 0 ||
        sd_event_source_set_enabled(gen->watchdog_timer, SD_EVENT_ONESHOT) < 0)
        act_log(LOG_ERR, "host %s: cannot re-arm the watchdog of generation %" PRIu64,
                gen->host->name, gen->number);
}

static int on_health_due(sd_event_source *source, uint64_t usec, void *userdata);

static void schedule_health_check(ad_generation *gen)
{
    const cfg_host *config = ad_host_config(gen->host);
    if (sd_event_add_time_relative(gen->host->daemon->loop, &gen->health_timer, CLOCK_MONOTONIC,
                                   config->health_check_interval_usec, 0, on_health_due, gen) < 0)
        act_log(LOG_ERR, "host %s: cannot schedule the next health check of generation %" PRIu64,
                gen->host->name, gen->number);
}

static void health_checked(ad_generation *gen, bool ok, const char *why)
{
    const cfg_host *config = ad_host_config(gen->host);
    gen->health_failures = ok ? 0 : gen->health_failures + 1;
    /* The next one first: what the notice leads to (a retirement) stops
     * it along with the rest. */
    schedule_health_check(gen);
    if (ok)
        return;
    act_log_fields(
        LOG_WARNING,
        &(act_log_ctx){.host = config->name, .generation = gen->number, .reason = "unhealthy"},
        "host %s: generation %" PRIu64 " failed a health check (%u of %u in a row): %s",
        config->name, gen->number, gen->health_failures, (unsigned)config->health_check_failures,
        why);
    if (gen->health_failures < config->health_check_failures)
        return;
    char message[512];
    snprintf(message, sizeof(message),
             "host %s: generation %" PRIu64 " failed %u health checks in a row "
             "(HealthCheckFailures=), the last: %s",
             config->name, gen->number, gen->health_failures, why);
    gen->health_failures = 0;
    ad_generation_tell(gen, AD_NOTICE_UNHEALTHY, message);
}

static void on_health_probed(probe_run *probe, bool ok, const char *why, void *userdata)
{
    ad_generation *gen = userdata;
    /* why is the probe's own text, and the probe goes before the next. */
    char failure[256];
    snprintf(failure, sizeof(failure), "%s", why ? why : "");
    probe_free(TAKE_PTR(gen->health_probe));
    health_checked(gen, ok, failure);
}

/* One try per check, bounded by the interval (or ReadyTimeoutSec=, when
 * shorter), so that checks never pile up and each failure counts once. */
static int on_health_due(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    gen->health_timer = sd_event_source_disable_unref(gen->health_timer);
    const cfg_host *config = ad_host_config(gen->host);
    uint64_t timeout = config->health_check_interval_usec < config->ready_timeout_usec
                           ? config->health_check_interval_usec
                           : config->ready_timeout_usec;
    act_error err = {0};
    probe_runner runner = ad_generation_probe_runner(gen);
    if (probe_start(gen->host->daemon->loop, config->health_check, &runner, timeout, timeout,
                    on_health_probed, gen, &gen->health_probe, &err) < 0)
        health_checked(gen, false, err.message);
    return 0;
}

void ad_generation_supervise(ad_generation *gen, ad_generation_notice_fn on_notice, void *userdata)
{
    assert(gen && on_notice);
    if (gen->on_notice || gen->retired || gen->exited)
        return;
    gen->on_notice = on_notice;
    gen->on_notice_userdata = userdata;
    const cfg_host *config = ad_host_config(gen->host);
    if (config->watchdog_usec &&
        sd_event_add_time_relative(gen->host->daemon->loop, &gen->watchdog_timer, CLOCK_MONOTONIC,
                                   config->watchdog_usec, WATCHDOG_ACCURACY_USEC,
                                   on_watchdog_missed, gen) < 0)
        act_log(LOG_ERR, "host %s: cannot arm the watchdog of generation %" PRIu64, config->name,
                gen->number);
    if (config->health_check && config->health_check_interval_usec)
        schedule_health_check(gen);
    ad_generation_replica_supervised(gen);
}

void ad_generation_supervision_heard(ad_generation *gen, const ntf_message *message)
{
    if (message->watchdog)
        pet_watchdog(gen);
    if (message->watchdog_trigger) {
        char why[160];
        snprintf(why, sizeof(why), "host %s: generation %" PRIu64 " sent WATCHDOG=trigger",
                 gen->host->name, gen->number);
        ad_generation_tell(gen, AD_NOTICE_WATCHDOG, why);
    } else if (message->stopping) {
        char why[160];
        snprintf(why, sizeof(why), "host %s: generation %" PRIu64 " sent STOPPING=1",
                 gen->host->name, gen->number);
        ad_generation_tell(gen, AD_NOTICE_STOPPING, why);
    }
}

/* ---- the notify socket ------------------------------------------------------ */

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

