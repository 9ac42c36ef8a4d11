/* Garbage collection of staged builds (builds/gc.h). */
#include "activator/daemon/builds/gc.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/generation.h"
#include "activator/daemon/host/step_holds.h"
#include "activator/daemon/builds/swap.h"
#include "common/cleanup.h"
#include "common/json_fields.h"
#include "common/log.h"

/* The claim names at most three (pin, fallback, held), the host's
 * generations three, a swap one. */
#define IN_USE_MAX 8

typedef struct gc_job {
    ad_host *host; /* on the loop only */
    ctrl_reply *reply;
    rel_store *releases;
    char host_name[ACT_NAME_MAX + 1];
    unsigned keep;
    bool dry_run;
    char in_use[IN_USE_MAX][REL_NAME_SIZE];
    size_t n_in_use;
    int result;
    act_error err;
    rel_gc_removed removed;
} gc_job;

static void gc_job_free(gc_job *job)
{
    if (job)
        free(job->removed.versions);
    free(job);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(gc_job *, gc_job_free)

static void refuse(gc_job *job, const char *code, const char *message)
{
    if (job->reply)
        ctrl_reply_error(job->reply, code, "%s", message);
    else
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = job->host_name},
                       "host %s: gc after a change did not run: %s", job->host_name, message);
}

static void keep_version(gc_job *job, const char *version)
{
    if (!version || !version[0])
        return;
    for (size_t i = 0; i < job->n_in_use; i++)
        if (strcmp(job->in_use[i], version) == 0)
            return;
    if (job->n_in_use < IN_USE_MAX)
        snprintf(job->in_use[job->n_in_use++], REL_NAME_SIZE, "%s", version);
}

static void keep_generation(gc_job *job, const ad_generation *gen)
{
    if (gen)
        keep_version(job, gen->build.version);
}

static void run_gc(void *data)
{
    gc_job *job = data;
    ad_test_hold_release_work("gc", job->host_name);
    const char *keep[IN_USE_MAX];
    for (size_t i = 0; i < job->n_in_use; i++)
        keep[i] = job->in_use[i];
    rel_gc_options options = {
        .keep_versions = keep,
        .n_keep = job->n_in_use,
        .keep_newest = job->keep,
        .dry_run = job->dry_run,
    };
    job->result = rel_gc_versions(job->releases, job->host_name, &options, &job->removed,
                                  &job->err);
}

static json_object *names_array(const char (*names)[REL_NAME_SIZE], size_t n)
{
    json_object *array = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(array, json_object_new_string(names[i]));
    return array;
}

static void complete_gc(void *data)
{
    _cleanup_(gc_job_freep) gc_job *job = data;
    if (!job->reply) {
        for (size_t i = 0; i < job->removed.n; i++)
            act_log_fields(LOG_INFO, &(act_log_ctx){.host = job->host_name},
                           "host %s: gc removed version %s (ReleasesKeep=%u)", job->host_name,
                           job->removed.versions[i], job->keep);
        if (job->result < 0)
            refuse(job, "release_error", job->err.message);
        return;
    }
    if (job->result < 0) {
        ctrl_reply_error(job->reply, "release_error", "%s", job->err.message);
        return;
    }
    json_object *result = json_object_new_object();
    act_json_add_string(result, "host", job->host_name);
    act_json_add_u64(result, "keep", job->keep);
    json_object_object_add(result, "dry_run", json_object_new_boolean(job->dry_run));
    json_object_object_add(result, job->dry_run ? "would_remove" : "removed",
                           names_array((const char(*)[REL_NAME_SIZE])job->removed.versions,
                                       job->removed.n));
    json_object_object_add(result, "in_use",
                           names_array((const char(*)[REL_NAME_SIZE])job->in_use, job->n_in_use));
    ctrl_reply_ok(job->reply, result);
}

/* The daemon stopped before complete_gc: what was removed is removed; the
 * job goes (a request's reply is the control server's to end). */
static void drop_gc(void *data)
{
    gc_job_free(data);
}

static void on_claim(claim_store *store, int result, const claim *c, const act_error *err,
                     void *userdata)
{
    _cleanup_(gc_job_freep) gc_job *job = userdata;
    if (result < 0) {
        /* Without the claim the pinned and held versions are unknown:
         * removing anything could remove one of them. */
        char message[sizeof(err->message) + 256];
        snprintf(message, sizeof(message),
                 "host %s: gc needs the claim to know the pinned and held versions: %s; "
                 "nothing was removed",
                 job->host_name, err->message);
        refuse(job, "store_error", message);
        return;
    }
    if (result > 0) {
        if (c->has_pin) {
            keep_version(job, c->pin.version);
            keep_version(job, c->pin.fallback_version);
        }
        keep_version(job, c->held);
    }
    ad_host *host = job->host;
    keep_generation(job, host->serving);
    keep_generation(job, host->starting);
    keep_generation(job, host->replaced);
    keep_version(job, ad_swap_version(host->swap));
    act_error submit_err = {0};
    ad_daemon *daemon = host->daemon;
    if (act_offload_submit_droppable(daemon->release_work, act_offload_lane(job->host_name),
                                     run_gc, complete_gc, drop_gc, job, &submit_err) < 0) {
        refuse(job, "release_error", submit_err.message);
        return;
    }
    TAKE_PTR(job); /* complete_gc's now */
}

void ad_gc_start(ad_host *host, unsigned keep, bool dry_run, ctrl_reply *reply)
{
    assert(host);
    _cleanup_(gc_job_freep) gc_job *job = calloc(1, sizeof(*job));
    if (!job) {
        if (reply)
            ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    ad_daemon *daemon = host->daemon;
    job->host = host;
    job->reply = reply;
    job->releases = daemon->releases;
    job->keep = keep;
    job->dry_run = dry_run;
    snprintf(job->host_name, sizeof(job->host_name), "%s", host->name);
    act_error err = {0};
    if (claims_read_async(daemon->store, job->host_name, on_claim, job, &err) < 0) {
        refuse(job, "store_error", err.message);
        return;
    }
    TAKE_PTR(job); /* on_claim's now */
}

void ad_gc_after_change(ad_host *host)
{
    assert(host);
    ad_gc_start(host, ad_host_config(host)->releases_keep, false, NULL);
}
