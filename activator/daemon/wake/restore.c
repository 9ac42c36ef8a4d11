#include "activator/daemon/wake/restore.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/helper_leaf.h"
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
    ad_helper *helper; /* ExecRestore=: the restore-<N> leaf and its process */
    char checkpoint[160];
    pl_reason reason; /* the outcome, once the program ended */
    char message[1200];

    /* The built-in transport: what its worker reads and what it says. */
    bool builtin;
    int state_dirfd;
    ckpt_place place;
    char *state_dir;
    char name[ACT_NAME_MAX + 1];
    char sha256[CKPT_DIGEST_SIZE];
    uid_t uid;
    gid_t gid;
    int result;
    act_error err;
};

static void restore_free(ad_restore *restore)
{
    if (restore->slot && *restore->slot == restore)
        *restore->slot = NULL;
    ckpt_place_clear(&restore->place);
    free(restore->state_dir);
    free(restore);
}

/* The leaf is proven empty (or not): only now does the wake go on, so no
 * restore process ever runs beside the generation it prepared. */
static void on_leaf_retired(bool proven, const char *why, void *userdata)
{
    ad_restore *restore = userdata;
    pl_wake *wake = restore->wake;
    if (!wake) {
        if (!proven)
            act_log(LOG_ERR, "host %s: abandoned restore not proven stopped: %s",
                    restore->host->name, why);
    } else if (!proven) {
        pl_wake_complete(wake, PL_REASON_RESTORE_FAILED,
                         "host %s: the restore's cgroup is not proven empty: %s",
                         restore->host->name, why);
    } else if (restore->reason != PL_REASON_NONE) {
        pl_wake_complete(wake, restore->reason, "%s", restore->message);
    } else {
        pl_wake_ok(wake);
    }
    restore_free(restore);
}

/* The outcome, kept for on_leaf_retired; the owner's slot is cleared, as
 * the leaf is retired from here on. */
static void settle(ad_restore *restore, pl_reason reason, const char *message)
{
    restore->reason = reason;
    snprintf(restore->message, sizeof(restore->message), "%s", message ? message : "");
    if (restore->slot && *restore->slot == restore)
        *restore->slot = NULL;
    restore->slot = NULL;
}

static void finish(ad_restore *restore, pl_reason reason, const char *message)
{
    settle(restore, reason, message);
    ad_helper_end(restore->helper);
}

/* The helper ends (its leaf retired) once these return. */
static void on_restore_exit(int status, void *userdata)
{
    ad_restore *restore = userdata;
    const cfg_host *config = ad_host_config(restore->host);
    char message[1200];
    if (status != 0) {
        snprintf(message, sizeof(message), "host %s: ExecRestore= %s exited with status %d",
                 restore->host->name, config->exec_restore[0], status);
        settle(restore, PL_REASON_RESTORE_FAILED, message);
        return;
    }
    act_error err = {0};
    int dirfd = ad_host_dir(restore->host, &err);
    if (dirfd < 0 || rec_write_checkpoint(dirfd, restore->checkpoint, &err) < 0) {
        snprintf(message, sizeof(message), "host %s: restored, but %s", restore->host->name,
                 err.message);
        settle(restore, PL_REASON_RESTORE_FAILED, message);
        return;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = restore->host->name},
                   "host %s: state restored to checkpoint %s", restore->host->name,
                   restore->checkpoint);
    settle(restore, PL_REASON_NONE, NULL);
}

static void on_restore_timeout(void *userdata)
{
    ad_restore *restore = userdata;
    char message[1200];
    snprintf(message, sizeof(message), "host %s: ExecRestore= did not finish within %llu s",
             restore->host->name, RESTORE_TIMEOUT_USEC / 1000000ull);
    settle(restore, PL_REASON_RESTORE_FAILED, message);
}

/* The checkpoint the state directory holds now ("" for none); -errno. */
static int local_checkpoint(ad_host *host, char *out, size_t size, act_error *err)
{
    int dirfd = ad_host_dir(host, err);
    if (dirfd < 0)
        return dirfd;
    return rec_read_checkpoint(dirfd, host->name, out, size, err);
}

/* ---- the built-in transport (Checkpoints=), on a worker ----------------- */

static void run_builtin(void *data)
{
    ad_restore *restore = data;
    restore->result =
        ckpt_place_restore(&restore->place, restore->name, restore->checkpoint, restore->sha256,
                           restore->state_dir, restore->uid, restore->gid, &restore->err);
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
    ad_daemon *daemon = host->daemon;
    act_error err = {0};
    restore->builtin = true;
    restore->state_dirfd = daemon->state_dirfd;
    snprintf(restore->name, sizeof(restore->name), "%s", host->name);
    snprintf(restore->sha256, sizeof(restore->sha256), "%s", state->sha256);
    ad_host_run_as(host, &restore->uid, &restore->gid);
    int r = ad_checkpoint_place(daemon, &restore->place, &err);
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

bool ad_restore_would_run(ad_host *host, const claim_state *state)
{
    const cfg_host *config = ad_host_config(host);
    bool builtin = !config->exec_restore && host->daemon->config.checkpoints;
    if (config->stateless || (!config->exec_restore && !builtin) || !state->checkpoint[0])
        return false;
    char local[160];
    act_error err = {0};
    /* Unreadable: the restore step says why; here it counts as work. */
    return local_checkpoint(host, local, sizeof(local), &err) < 0 ||
           strcmp(local, state->checkpoint) != 0;
}

void ad_restore_start(ad_host *host, pl_wake *wake, const claim_state *state, uint64_t generation,
                      ad_restore **slot)
{
    assert(host && wake && state && slot);
    const cfg_host *config = ad_host_config(host);
    const char *name = host->name;
    const char *checkpoint = state->checkpoint;
    bool builtin = !config->exec_restore && host->daemon->config.checkpoints;
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
    char env[256];
    snprintf(env, sizeof(env), "ACTIVATOR_CHECKPOINT=%s", checkpoint);
    ad_helper_spec spec = {
        .kind = "restore",
        .number = generation,
        .argv = config->exec_restore,
        .extra_env = env,
        .stdout_fd = -1,
        .timeout_usec = RESTORE_TIMEOUT_USEC,
        .exited = on_restore_exit,
        .timed_out = on_restore_timeout,
        .retired = on_leaf_retired,
        .userdata = restore,
    };
    int r = ad_helper_start(host, &spec, &restore->helper, &err);
    if (r < 0 && !restore->helper) {
        pl_wake_complete(wake, PL_REASON_RESTORE_FAILED, "host %s: %s", name, err.message);
        restore_free(restore);
        return;
    }
    *slot = restore;
    if (r < 0) {
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
