#include "activator/daemon/restore.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "common/cleanup.h"
#include "common/log.h"

/* A restore copies a whole state directory, which may be large; this bounds
 * a hung one rather than any normal one. */
#define RESTORE_TIMEOUT_USEC (10 * 60 * 1000 * 1000ull)

struct ad_restore {
    ad_host *host;
    pl_wake *wake;      /* NULL once abandoned */
    ad_restore **slot;  /* the owner's pointer to this restore */
    ad_generation *gen; /* ExecRestore=: the restore-<N> leaf and its process */
    sd_event_source *timer;
    char checkpoint[160];
    pl_reason reason; /* the outcome, once the program ended */
    char message[1200];

    /* The built-in transport: what its worker reads and what it says. */
    bool builtin;
    int state_dirfd;
    char *dir;
    char *state_dir;
    char name[ACT_NAME_MAX + 1];
    char sha256[CKPT_DIGEST_SIZE];
    uid_t uid;
    gid_t gid;
    int result;
    act_error err;
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
    free(restore->dir);
    free(restore->state_dir);
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

/* ---- the built-in transport (Checkpoints=), on a worker ----------------- */

static void run_builtin(void *data)
{
    ad_restore *restore = data;
    restore->result = ckpt_restore(restore->dir, restore->name, restore->checkpoint,
                                   restore->sha256, restore->state_dir, restore->uid, restore->gid,
                                   &restore->err);
    if (restore->result < 0)
        return;
    _cleanup_close_ int host_dirfd =
        rec_open_host(restore->state_dirfd, restore->name, &restore->err);
    if (host_dirfd < 0) {
        restore->result = host_dirfd;
        return;
    }
    restore->result = rec_write_checkpoint(host_dirfd, restore->checkpoint, &restore->err);
    if (restore->result < 0)
        act_error_prefix(&restore->err, "restored checkpoint %s, but", restore->checkpoint);
}

static void complete_builtin(void *data)
{
    ad_restore *restore = data;
    pl_wake *wake = restore->wake;
    if (restore->slot && *restore->slot == restore)
        *restore->slot = NULL;
    if (!wake) {
        /* Abandoned: the work ran to its end regardless (the state is the
         * old tree or the new one, never a mix). */
    } else if (restore->result < 0) {
        pl_wake_complete(wake, PL_REASON_RESTORE_FAILED, "host %s: %s", restore->name,
                         restore->err.message);
    } else {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = restore->name},
                       "host %s: state restored to checkpoint %s", restore->name,
                       restore->checkpoint);
        pl_wake_ok(wake);
    }
    restore_free(restore);
}

static void start_builtin(ad_restore *restore, const claim_state *state)
{
    ad_host *host = restore->host;
    ad_daemon *daemon = ad_host_daemon(host);
    act_error err = {0};
    restore->builtin = true;
    restore->state_dirfd = daemon->state_dirfd;
    snprintf(restore->name, sizeof(restore->name), "%s", ad_host_name(host));
    snprintf(restore->sha256, sizeof(restore->sha256), "%s", state->sha256);
    ad_host_run_as(host, &restore->uid, &restore->gid);
    int r = ckpt_parse_url(daemon->config.checkpoints, &restore->dir, &err);
    /* Made when missing: the exchange swaps it with the restored tree. */
    if (r == 0)
        r = ad_host_state_directory(host, &err);
    if (r == 0 && asprintf(&restore->state_dir, "%s/hosts/%s/state",
                           daemon->config.state_directory, restore->name) < 0) {
        restore->state_dir = NULL;
        r = act_error_set(&err, ENOMEM, "out of memory");
    }
    if (r == 0)
        r = act_offload_submit(daemon->offload, act_offload_lane(restore->name), run_builtin,
                               complete_builtin, restore, &err);
    if (r < 0) {
        pl_wake_complete(restore->wake, PL_REASON_RESTORE_FAILED, "host %s: cannot restore: %s",
                         restore->name, err.message);
        restore_free(restore);
        return;
    }
    *restore->slot = restore;
}

void ad_restore_start(ad_host *host, pl_wake *wake, const claim_state *state, uint64_t generation,
                      ad_restore **slot)
{
    assert(host && wake && state && slot);
    const cfg_host *config = ad_host_config(host);
    const char *name = ad_host_name(host);
    const char *checkpoint = state->checkpoint;
    bool builtin = !config->exec_restore && ad_host_daemon(host)->config.checkpoints;
    if (config->stateless || (!config->exec_restore && !builtin) || !checkpoint[0]) {
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
    if (builtin) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = name},
                       "host %s: restoring state to checkpoint %s (local: %s)", name, checkpoint,
                       local[0] ? local : "none");
        start_builtin(restore, state);
        return;
    }
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
    if (restore->builtin) {
        /* The worker cannot be stopped halfway through an exchange; it
         * finishes and complete_builtin frees it. */
        if (restore->slot && *restore->slot == restore)
            *restore->slot = NULL;
        restore->slot = NULL;
        return;
    }
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
