/* Checkpoints of a host's state directory (moves/checkpoints.h).
 *
 * The built-in transport archives on a worker of daemon->offload, in the
 * host's lane: a large state directory takes seconds to compress and sync,
 * and the loop must go on waking other hosts meanwhile. The worker gets a
 * copy of everything it needs and touches nothing of the daemon; the loop
 * gets the result in done. CheckpointTimeoutSec= bounds it: the timer asks
 * the worker to stop, which removes its half-written archive. The claim is
 * read first, so the pruning after the write spares the checkpoint it
 * names. */
#include "activator/daemon/moves/checkpoints.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "activator/daemon/moves/checkpoint_exec.h"
#include "activator/records/records.h"
#include "checkpoint/checkpoint.h"
#include "common/cleanup.h"
#include "common/log.h"

struct ad_checkpoint {
    ad_host *host; /* NULL once cancelled: done is not called */
    ad_checkpoint_done_fn done;
    void *userdata;
    sd_event_source *timer;   /* CheckpointTimeoutSec= */
    sd_event_source *defer;   /* a State=none host's "nothing to carry" */
    ad_checkpoint_exec *exec; /* ExecCheckpoint= in flight */
    bool timed_out;

    /* The worker's inputs and outputs (the built-in transport). */
    atomic_bool stop;
    int state_dirfd;
    ckpt_place place;
    char *state_dir;
    char name[ACT_NAME_MAX + 1];
    char box[ACT_NAME_MAX + 1];
    uint64_t generation;
    unsigned keep;
    bool claim_read; /* claim_named says what the claim names */
    char claim_named[sizeof(((claim_state *)0)->checkpoint)];
    uint64_t timeout_usec;
    int result;
    act_error err;
    ckpt_info info;
};

static void checkpoint_free(ad_checkpoint *ckpt)
{
    if (!ckpt)
        return;
    sd_event_source_disable_unref(ckpt->timer);
    sd_event_source_disable_unref(ckpt->defer);
    ckpt_place_clear(&ckpt->place);
    free(ckpt->state_dir);
    free(ckpt);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ad_checkpoint *, checkpoint_free)

bool ad_checkpoint_stateless(const ad_host *host)
{
    return ad_host_config(host)->stateless;
}

/* The build that last ran against the state (build-state.json), named with
 * the checkpoint so that a restore on any box knows what wrote it. A host
 * that never ran, or a file that cannot be read, names none. */
static void name_the_build(ad_host *host, claim_state *written)
{
    act_error err = {0};
    rec_build_state build;
    int dirfd = ad_host_dir(host, &err);
    if (dirfd < 0 || rec_read_build_state(dirfd, host->name, &build, &err) < 0)
        return;
    snprintf(written->build_version, sizeof(written->build_version), "%s", build.build.version);
    snprintf(written->build_digest, sizeof(written->build_digest), "%s", build.build.build_digest);
}

/* Ends the checkpoint on the loop: the host's slot is cleared before done
 * runs, so done may start the next one. */
static void finish(ad_checkpoint *ckpt, int result, const claim_state *written,
                   const act_error *err)
{
    ad_host *host = ckpt->host;
    claim_state named;
    if (host && result == 0 && written && written->checkpoint[0]) {
        named = *written;
        name_the_build(host, &named);
        written = &named;
    }
    if (host && host->checkpoint == ckpt)
        host->checkpoint = NULL;
    /* Its start opened the host's directory (the state directory is made
     * there): a checkpoint of a parked host (a move's, an operator's)
     * leaves no fd behind it. What done starts opens it again. */
    if (host)
        ad_host_dir_close_unless_used(host);
    if (host && ckpt->done)
        ckpt->done(host, result, written, err, ckpt->userdata);
    checkpoint_free(ckpt);
}

/* ---- the built-in transport, on a worker --------------------------------- */

static void run_write(void *data)
{
    ad_checkpoint *ckpt = data;
    ckpt->result = ckpt_place_write(&ckpt->place, ckpt->name, ckpt->state_dir, ckpt->generation,
                                    ckpt->box, &ckpt->stop, &ckpt->info, &ckpt->err);
    if (ckpt->result < 0)
        return;
    /* The record names the new checkpoint, so a rollback to this box, or a
     * wake after an operator's checkpoint, restores nothing. The one it
     * named before is spared by the pruning (a claim may still name it). */
    char previous[CKPT_ID_SIZE] = "";
    _cleanup_close_ int host_dirfd = rec_open_host(ckpt->state_dirfd, ckpt->name, &ckpt->err);
    if (host_dirfd < 0) {
        ckpt->result = host_dirfd;
        return;
    }
    act_error ignored = {0};
    (void)rec_read_checkpoint(host_dirfd, ckpt->name, previous, sizeof(previous), &ignored);
    if ((ckpt->result = rec_write_checkpoint(host_dirfd, ckpt->info.id, &ckpt->err)) < 0)
        return;
    /* Without the claim, nothing is pruned: it may name any of them. */
    if (!ckpt->claim_read)
        return;
    const char *protected[] = {ckpt->info.id, previous, ckpt->claim_named};
    act_error prune_err = {0};
    if (ckpt_place_prune(&ckpt->place, ckpt->name, ckpt->keep, protected, 3, &prune_err) < 0)
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = ckpt->name},
                       "host %s: checkpoint %s written, but the old ones were not pruned: %s",
                       ckpt->name, ckpt->info.id, prune_err.message);
}

static void written_of(const ckpt_info *info, claim_state *out)
{
    *out = (claim_state){
        .size = info->size, .generation = info->generation, .stamp_usec = info->stamp_usec};
    snprintf(out->checkpoint, sizeof(out->checkpoint), "%s", info->id);
    snprintf(out->sha256, sizeof(out->sha256), "%s", info->sha256);
    snprintf(out->box, sizeof(out->box), "%s", info->box);
}

static void complete_write(void *data)
{
    ad_checkpoint *ckpt = data;
    ckpt->timer = sd_event_source_disable_unref(ckpt->timer);
    if (!ckpt->host) {
        checkpoint_free(ckpt); /* cancelled: the worker removed its temporary file */
        return;
    }
    if (ckpt->result < 0) {
        act_error err = {0};
        if (ckpt->timed_out)
            act_error_set(
                &err, ETIMEDOUT,
                "host %s: the checkpoint did not finish within CheckpointTimeoutSec=%" PRIu64
                "s; its archive was removed",
                ckpt->name, ckpt->timeout_usec / 1000000u);
        else
            act_error_set(&err, -ckpt->result, "host %s: checkpoint: %s", ckpt->name,
                          ckpt->err.message);
        finish(ckpt, ckpt->timed_out ? -ETIMEDOUT : ckpt->result, NULL, &err);
        return;
    }
    act_log_fields(
        LOG_INFO, &(act_log_ctx){.host = ckpt->name},
        "host %s: checkpoint %s written (%" PRIu64 " bytes, sha256 %s, generation %" PRIu64 ")",
        ckpt->name, ckpt->info.id, ckpt->info.size, ckpt->info.sha256, ckpt->info.generation);
    claim_state written;
    written_of(&ckpt->info, &written);
    finish(ckpt, 0, &written, NULL);
}

/* The worker is asked to stop; complete_write reports the timeout. */
static int on_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_checkpoint *ckpt = userdata;
    ckpt->timed_out = true;
    atomic_store(&ckpt->stop, true);
    return 0;
}

/* The claim is read first only to learn which checkpoint it names, which
 * the pruning after the write must spare. */
static void on_claim_read(claim_store *store, int result, const claim *c, const act_error *err,
                          void *userdata)
{
    ad_checkpoint *ckpt = userdata;
    if (!ckpt->host) {
        checkpoint_free(ckpt); /* cancelled before the write began */
        return;
    }
    if (result >= 0) {
        ckpt->claim_read = true;
        if (result > 0)
            snprintf(ckpt->claim_named, sizeof(ckpt->claim_named), "%s", c->state.checkpoint);
    } else {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = ckpt->name},
                       "host %s: cannot read its claim, so no old checkpoint is pruned this "
                       "time: %s",
                       ckpt->name, err->message);
    }
    act_error submit_err = {0};
    ad_daemon *daemon = ckpt->host->daemon;
    if (act_offload_submit(daemon->offload, act_offload_lane(ckpt->name), run_write, complete_write,
                           ckpt, &submit_err) < 0) {
        ckpt->result = act_error_set(&ckpt->err, submit_err.errnum, "%s", submit_err.message);
        complete_write(ckpt);
    }
}

static int start_builtin(ad_checkpoint *ckpt, act_error *err)
{
    ad_host *host = ckpt->host;
    ad_daemon *daemon = host->daemon;
    int r = ad_checkpoint_place(daemon, &ckpt->place, err);
    if (r < 0)
        return r;
    /* A host that never ran has an empty state: made here, so the archive
     * of it is an empty one rather than an error. */
    if ((r = ad_host_state_directory(host, err)) < 0)
        return r;
    if (asprintf(&ckpt->state_dir, "%s/hosts/%s/state", daemon->config.state_directory,
                 ckpt->name) < 0) {
        ckpt->state_dir = NULL; /* asprintf leaves it undefined */
        return act_error_set(err, ENOMEM, "out of memory");
    }
    ckpt->state_dirfd = daemon->state_dirfd;
    ckpt->keep = daemon->config.checkpoints_keep;
    ckpt->timeout_usec = ad_host_config(host)->checkpoint_timeout_usec;
    if ((r = sd_event_add_time_relative(daemon->loop, &ckpt->timer, CLOCK_MONOTONIC,
                                        ckpt->timeout_usec, 0, on_timeout, ckpt)) < 0)
        return act_error_set(err, -r, "cannot arm the checkpoint timer: %s", strerror(-r));
    return claims_read_async(daemon->store, ckpt->name, on_claim_read, ckpt, err);
}

/* ---- a host with nothing to carry ---------------------------------------- */

static int on_stateless(sd_event_source *source, void *userdata)
{
    ad_checkpoint *ckpt = userdata;
    claim_state nothing = {0};
    finish(ckpt, 0, &nothing, NULL);
    return 0;
}

/* ---- ExecCheckpoint= ------------------------------------------------------ */

static void on_exec_done(ad_host *host, int result, const claim_state *written,
                         const act_error *err, void *userdata)
{
    ad_checkpoint *ckpt = userdata;
    ckpt->exec = NULL;
    if (result == 0) {
        act_error record_err = {0};
        int dirfd = ad_host_dir(host, &record_err);
        int written_r =
            dirfd < 0 ? dirfd : rec_write_checkpoint(dirfd, written->checkpoint, &record_err);
        if (written_r < 0) {
            act_error failed = {0};
            act_error_set(&failed, EIO, "host %s: checkpoint %s written, but %s", host->name,
                          written->checkpoint, record_err.message);
            finish(ckpt, -EIO, NULL, &failed);
            return;
        }
    }
    finish(ckpt, result, written, err);
}

/* ---- the interface --------------------------------------------------------- */

int ad_checkpoint_start(ad_host *host, uint64_t generation, ad_checkpoint_done_fn done,
                        void *userdata, act_error *err)
{
    assert(host && done);
    const char *name = host->name;
    ad_daemon *daemon = host->daemon;
    const cfg_host *config = ad_host_config(host);
    if (host->checkpoint)
        return act_error_set(err, EBUSY,
                             "host %s: a checkpoint is being written already (wait for it)", name);
    if (!config->stateless && !config->exec_checkpoint && !daemon->config.checkpoints)
        return act_error_set(err, ENOTSUP,
                             "host %s: no checkpoint transport (set Checkpoints=dir:///PATH or "
                             "docker://REGISTRY/NAMESPACE in "
                             "[Activator] of activatord.conf, or ExecCheckpoint= in the host's "
                             "file, or State=none when the host has no state to carry)",
                             name);
    _cleanup_(checkpoint_freep) ad_checkpoint *ckpt = calloc(1, sizeof(*ckpt));
    if (!ckpt)
        return act_error_set(err, ENOMEM, "host %s: out of memory", name);
    *ckpt = (ad_checkpoint){.host = host,
                            .done = done,
                            .userdata = userdata,
                            .generation = generation,
                            .state_dirfd = -1};
    atomic_init(&ckpt->stop, false);
    snprintf(ckpt->name, sizeof(ckpt->name), "%s", name);
    snprintf(ckpt->box, sizeof(ckpt->box), "%s", daemon->config.box);

    int r;
    if (config->stateless)
        r = sd_event_add_defer(daemon->loop, &ckpt->defer, on_stateless, ckpt) < 0
                ? act_error_set(err, ENOMEM, "host %s: cannot queue the checkpoint", name)
                : 0;
    else if (config->exec_checkpoint)
        r = ad_checkpoint_exec_start(host, generation, on_exec_done, ckpt, &ckpt->exec, err);
    else
        r = start_builtin(ckpt, err);
    if (r < 0) {
        act_error_prefix(err, "host %s", name);
        return r;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = name},
                   "host %s: writing a checkpoint of generation %" PRIu64 " (%s)", name, generation,
                   config->stateless         ? "State=none: nothing to carry"
                   : config->exec_checkpoint ? "ExecCheckpoint="
                                             : daemon->config.checkpoints);
    host->checkpoint = TAKE_PTR(ckpt);
    return 0;
}

void ad_checkpoint_cancel(ad_host *host)
{
    ad_checkpoint *ckpt = host->checkpoint;
    if (!ckpt)
        return;
    host->checkpoint = NULL;
    if (ckpt->exec) {
        ad_checkpoint_exec_abandon(TAKE_PTR(ckpt->exec));
        checkpoint_free(ckpt);
        return;
    }
    if (ckpt->defer) {
        checkpoint_free(ckpt);
        return;
    }
    /* The claim read or the worker has it: the worker stops at its next
     * block and removes its temporary file; on_claim_read or
     * complete_write frees it without calling done. */
    ckpt->host = NULL;
    atomic_store(&ckpt->stop, true);
    ckpt->timer = sd_event_source_disable_unref(ckpt->timer);
}
