#include "activator/daemon/restore.h"

#include <assert.h>
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

struct ad_restore {
    ad_host *host;
    pl_wake *wake;      /* NULL once abandoned */
    ad_restore **slot;  /* the owner's pointer to this restore */
    ad_generation *gen; /* the restore-<N> leaf and its process */
    sd_event_source *timer;
    char checkpoint[160];
    pl_reason reason; /* the outcome, once the program ended */
    char message[1200];
};

static const char *name_of(const ad_restore *restore)
{
    return ad_host_name(restore->host);
}

static void restore_free(ad_restore *restore)
{
    if (restore->slot && *restore->slot == restore)
        *restore->slot = NULL;
    sd_event_source_disable_unref(restore->timer);
    ad_generation_free(restore->gen);
    free(restore);
}

/* The leaf is proven empty (or not): only now does the wake go on, so no
 * restore process ever runs beside the generation it prepared. */
static void on_leaf_retired(ad_generation *gen, bool proven, const char *why, void *userdata)
{
    ad_restore *restore = userdata;
    pl_wake *wake = restore->wake;
    if (!wake) {
        if (!proven)
            act_log(LOG_ERR, "host %s: abandoned restore not proven stopped: %s",
                    name_of(restore), why);
    } else if (!proven) {
        pl_wake_complete(wake, PL_REASON_RESTORE_FAILED,
                         "host %s: the restore's cgroup is not proven empty: %s", name_of(restore),
                         why);
    } else if (restore->reason != PL_REASON_NONE) {
        pl_wake_complete(wake, restore->reason, "%s", restore->message);
    } else {
        pl_wake_ok(wake);
    }
    restore_free(restore);
}

static void finish(ad_restore *restore, pl_reason reason, const char *message)
{
    restore->timer = sd_event_source_disable_unref(restore->timer);
    restore->reason = reason;
    snprintf(restore->message, sizeof(restore->message), "%s", message ? message : "");
    if (restore->slot && *restore->slot == restore)
        *restore->slot = NULL;
    restore->slot = NULL;
    restore->gen->on_exit = NULL;
    ad_generation_retire(restore->gen, false, on_leaf_retired, restore);
}

static void on_restore_exit(ad_generation *gen, void *userdata)
{
    ad_restore *restore = userdata;
    const cfg_host *config = ad_host_config(restore->host);
    char message[1200];
    if (gen->exit_status != 0) {
        snprintf(message, sizeof(message), "host %s: ExecRestore= %s exited with status %d",
                 name_of(restore), config->exec_restore[0], gen->exit_status);
        finish(restore, PL_REASON_RESTORE_FAILED, message);
        return;
    }
    act_error err = {0};
    int dirfd = ad_host_dir(restore->host, &err);
    if (dirfd < 0 || rec_write_checkpoint(dirfd, restore->checkpoint, &err) < 0) {
        snprintf(message, sizeof(message), "host %s: restored, but %s", name_of(restore),
                 err.message);
        finish(restore, PL_REASON_RESTORE_FAILED, message);
        return;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = name_of(restore)},
                   "host %s: state restored to checkpoint %s", name_of(restore),
                   restore->checkpoint);
    finish(restore, PL_REASON_NONE, NULL);
}

static int on_restore_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_restore *restore = userdata;
    char message[1200];
    snprintf(message, sizeof(message), "host %s: ExecRestore= did not finish within %llu s",
             name_of(restore), RESTORE_TIMEOUT_USEC / 1000000ull);
    finish(restore, PL_REASON_RESTORE_FAILED, message);
    return 0;
}

/* The checkpoint the state directory holds now ("" for none); -errno. */
static int local_checkpoint(ad_host *host, char *out, size_t size, act_error *err)
{
    int dirfd = ad_host_dir(host, err);
    if (dirfd < 0)
        return dirfd;
    return rec_read_checkpoint(dirfd, ad_host_name(host), out, size, err);
}

void ad_restore_start(ad_host *host, pl_wake *wake, const char *checkpoint, uint64_t generation,
                      ad_restore **slot)
{
    assert(host && wake && checkpoint && slot);
    const cfg_host *config = ad_host_config(host);
    const char *name = ad_host_name(host);
    if (!config->exec_restore || !checkpoint[0]) {
        pl_wake_ok(wake);
        return;
    }
    char local[160];
    act_error err = {0};
    if (local_checkpoint(host, local, sizeof(local), &err) < 0) {
        pl_wake_complete(wake, PL_REASON_RESTORE_FAILED, "%s", err.message);
        return;
    }
    if (strcmp(local, checkpoint) == 0) {
        pl_wake_ok(wake); /* already restored: a retry never restores twice */
        return;
    }

    ad_restore *restore = calloc(1, sizeof(*restore));
    if (!restore) {
        pl_wake_complete(wake, PL_REASON_RESTORE_FAILED, "host %s: out of memory", name);
        return;
    }
    *restore = (ad_restore){.host = host, .wake = wake, .slot = slot};
    snprintf(restore->checkpoint, sizeof(restore->checkpoint), "%s", checkpoint);
    if (ad_host_state_directory(host, &err) < 0 ||
        ad_generation_new(host, "restore", generation, &restore->gen, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_RESTORE_FAILED, "host %s: %s", name, err.message);
        restore_free(restore);
        return;
    }
    restore->gen->on_exit = on_restore_exit;
    restore->gen->on_exit_userdata = restore;
    *slot = restore;
    char env[256];
    snprintf(env, sizeof(env), "ACTIVATOR_CHECKPOINT=%s", checkpoint);
    if (ad_generation_spawn_helper(restore->gen, config->exec_restore, env, true, &err) < 0 ||
        sd_event_add_time_relative(ad_host_daemon(host)->loop, &restore->timer, CLOCK_MONOTONIC,
                                   RESTORE_TIMEOUT_USEC, 0, on_restore_timeout, restore) < 0) {
        char message[1200];
        snprintf(message, sizeof(message), "host %s: cannot start ExecRestore=: %s", name,
                 err.message);
        finish(restore, PL_REASON_RESTORE_FAILED, message);
        return;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = name},
                   "host %s: restoring state to checkpoint %s (local: %s)", name, checkpoint,
                   local[0] ? local : "none");
}

void ad_restore_abandon(ad_restore *restore)
{
    if (!restore)
        return;
    restore->wake = NULL;
    finish(restore, PL_REASON_CANCELLED, NULL);
}

int ad_replicate_start(ad_generation *gen, act_error *err)
{
    assert(gen);
    char **exec_replicate = ad_host_config(gen->host)->exec_replicate;
    if (!exec_replicate)
        return 0;
    return ad_generation_spawn_helper(gen, exec_replicate, NULL, false, err);
}
