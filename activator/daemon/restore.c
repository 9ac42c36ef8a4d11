#include "activator/daemon/restore.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"

/* A restore copies a whole state directory, which may be large; this bounds
 * a hung one rather than any normal one. */
#define RESTORE_TIMEOUT_USEC (10 * 60 * 1000 * 1000ull)

static const char *name_of(const act_daemon_host *host)
{
    return host->config->name;
}

typedef struct restore_outcome {
    act_wake *wake;
    act_reason reason;
    char message[1200];
} restore_outcome;

/* The leaf is proven empty (or not): only now does the wake go on, so no
 * restore process ever runs beside the generation it prepared. */
static void on_restore_leaf_retired(act_generation *gen, bool proven, const char *why,
                                    void *userdata)
{
    restore_outcome *outcome = userdata;
    act_daemon_host *host = gen->host;
    host->w->restoring = NULL;
    act_generation_free(gen);
    act_wake *wake = outcome->wake;
    if (!proven)
        act_wake_complete(wake, ACT_REASON_RESTORE_FAILED,
                          "host %s: the restore's cgroup is not proven empty: %s", name_of(host),
                          why);
    else if (outcome->reason != ACT_REASON_NONE)
        act_wake_complete(wake, outcome->reason, "%s", outcome->message);
    else
        act_wake_ok(wake);
    free(outcome);
}

static void finish_restore(act_daemon_host *host, act_reason reason, const char *message)
{
    host->w->restore_timer = sd_event_source_disable_unref(host->w->restore_timer);
    act_generation *gen = host->w->restoring;
    restore_outcome *outcome = calloc(1, sizeof(*outcome));
    if (!outcome) {
        act_wake_complete(TAKE_PTR(host->w->waiting_wake), ACT_REASON_RESTORE_FAILED,
                          "host %s: out of memory", name_of(host));
        return;
    }
    outcome->wake = TAKE_PTR(host->w->waiting_wake);
    outcome->reason = reason;
    snprintf(outcome->message, sizeof(outcome->message), "%s", message ? message : "");
    act_generation_retire(gen, false, on_restore_leaf_retired, outcome);
}

static void on_restore_exit(act_generation *gen, void *userdata)
{
    act_daemon_host *host = gen->host;
    const char *checkpoint = host->w->admitted.state.checkpoint;
    char message[1200];
    if (gen->exit_status != 0) {
        snprintf(message, sizeof(message), "host %s: ExecRestore= %s exited with status %d",
                 name_of(host), host->config->exec_restore[0], gen->exit_status);
        finish_restore(host, ACT_REASON_RESTORE_FAILED, message);
        return;
    }
    act_error err = {0};
    int dirfd = act_host_dir(host, &err);
    if (dirfd < 0 || act_records_write_checkpoint(dirfd, checkpoint, &err) < 0) {
        snprintf(message, sizeof(message), "host %s: restored, but %s", name_of(host),
                 err.message);
        finish_restore(host, ACT_REASON_RESTORE_FAILED, message);
        return;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = name_of(host)},
                   "host %s: state restored to checkpoint %s", name_of(host), checkpoint);
    finish_restore(host, ACT_REASON_NONE, NULL);
}

static int on_restore_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    act_daemon_host *host = userdata;
    char message[1200];
    snprintf(message, sizeof(message), "host %s: ExecRestore= did not finish within %llu s",
             name_of(host), RESTORE_TIMEOUT_USEC / 1000000ull);
    finish_restore(host, ACT_REASON_RESTORE_FAILED, message);
    return 0;
}

void act_restore_start(act_daemon_host *host, act_wake *wake)
{
    const char *wanted = host->w->admitted.state.checkpoint;
    if (!host->config->exec_restore || !wanted[0]) {
        act_wake_ok(wake);
        return;
    }
    char local[160];
    act_error err = {0};
    int dirfd = act_host_dir(host, &err);
    if (dirfd < 0 ||
        act_records_read_checkpoint(dirfd, name_of(host), local, sizeof(local), &err) < 0) {
        act_wake_complete(wake, ACT_REASON_RESTORE_FAILED, "%s", err.message);
        return;
    }
    if (strcmp(local, wanted) == 0) {
        act_wake_ok(wake); /* already restored: a retry never restores twice */
        return;
    }

    act_generation *gen = NULL;
    if (act_host_state_directory(host, &err) < 0 ||
        act_generation_new(host, "restore", host->w->admitted.holder.generation, &gen, &err) < 0) {
        act_wake_complete(wake, ACT_REASON_RESTORE_FAILED, "host %s: %s", name_of(host),
                          err.message);
        return;
    }
    gen->on_exit = on_restore_exit;
    host->w->restoring = gen;
    host->w->waiting_wake = wake;
    char env[256];
    snprintf(env, sizeof(env), "ACTIVATOR_CHECKPOINT=%s", wanted);
    if (act_generation_spawn_helper(gen, host->config->exec_restore, env, true, &err) < 0 ||
        sd_event_add_time_relative(host->daemon->loop, &host->w->restore_timer, CLOCK_MONOTONIC,
                                   RESTORE_TIMEOUT_USEC, 0, on_restore_timeout, host) < 0) {
        char message[1200];
        snprintf(message, sizeof(message), "host %s: cannot start ExecRestore=: %s", name_of(host),
                 err.message);
        finish_restore(host, ACT_REASON_RESTORE_FAILED, message);
        return;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = name_of(host)},
                   "host %s: restoring state to checkpoint %s (local: %s)", name_of(host), wanted,
                   local[0] ? local : "none");
}

static void on_abandoned_restore_retired(act_generation *gen, bool proven, const char *why,
                                         void *userdata)
{
    if (!proven)
        act_log(LOG_ERR, "host %s: abandoned restore not proven stopped: %s",
                gen->host->config->name, why);
    act_generation_free(gen);
}

void act_restore_abandon(act_daemon_host *host)
{
    if (!host->w || !host->w->restoring)
        return;
    host->w->restore_timer = sd_event_source_disable_unref(host->w->restore_timer);
    act_generation *gen = TAKE_PTR(host->w->restoring);
    gen->on_exit = NULL;
    act_generation_retire(gen, false, on_abandoned_restore_retired, NULL);
}

int act_replicate_start(act_daemon_host *host, act_generation *gen, act_error *err)
{
    if (!host->config->exec_replicate)
        return 0;
    return act_generation_spawn_helper(gen, host->config->exec_replicate, NULL, false, err);
}
