/* Staging a build for a control request, and listing the staged ones, off
 * the loop.
 *
 * A stage copies the build, hashes it and fsyncs every file: for a large
 * build that is a long time, during which a loop doing it would wake no
 * host and answer no request. So it runs on a release worker
 * (daemon->release_work, not the workers of the wakes' record writes), in
 * the host's lane, from a copy of the request; the reply goes out from the
 * loop when it is done.
 *
 * The source is a directory or file of this box, an OCI image layout
 * (oci:PATH[:TAG]) or an image in a registry (docker://REGISTRY/REPO:TAG or
 * @sha256:DIGEST, pulled with RegistryAuthFile= and RegistryInsecure=),
 * staged through fetch/image_stage.h. */
#include "activator/daemon/builds/stage.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "activator/daemon/builds/promote.h"
#include "activator/daemon/fetch/image_stage.h"
#include "activator/daemon/generations/announce.h"
#include "activator/daemon/host/step_holds.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/json_fields.h"
#include "common/log.h"
#include "common/strv.h"

typedef struct stage_job {
    ad_host *owner; /* on the loop only */
    rel_store *releases;
    ctrl_reply *reply;
    char host[ACT_NAME_MAX + 1];
    char version[ACT_NAME_MAX + 1];
    char path[CTRL_REQUEST_PATH_MAX + 1];
    char executable[4096]; /* a directory build's executable; "" for a single file */
    char work_dir[4096];   /* StateDirectory=: where an image's layers are applied */
    /* RegistryAuthFile= and RegistryInsecure= as the request found them: a
     * reload may change the daemon's while the job runs. */
    char registry_auth_file[4096];
    char **registry_insecure;
    bool promote;
    int result;
    rel_identity identity;
    act_error err;
    /* A pull's progress, published once a second from the loop while the
     * worker pulls (stage.progress). */
    img_progress progress;
    sd_event_source *progress_timer;
    uint64_t started_usec;
} stage_job;

static void run_stage(void *data)
{
    stage_job *job = data;
    ad_test_hold_release_work("stage", job->host);
    if (ad_image_is_source(job->path)) {
        ad_image_stage in = {
            .host = job->host,
            .version = job->version,
            .reference = job->path,
            .executable = job->executable,
            .work_dir = job->work_dir,
            .registry_auth_file = job->registry_auth_file,
            .registry_insecure = (const char *const *)job->registry_insecure,
            .progress = &job->progress,
        };
        job->result = ad_image_stage_run(job->releases, &in, &job->identity, &job->err);
    } else {
        /* A directory build names its executable by the host's Exec= path;
         * a single file is the executable. */
        struct stat st;
        bool directory = stat(job->path, &st) == 0 && S_ISDIR(st.st_mode);
        job->result = rel_stage(job->releases, job->host, job->version, job->path,
                                directory ? job->executable : NULL, &job->identity, &job->err);
    }
    if (job->result == 0 && job->promote)
        job->result = rel_promote(job->releases, job->host, job->version, &job->err);
}

static void stage_job_free(void *data)
{
    stage_job *job = data;
    if (job) {
        act_strv_free(job->registry_insecure);
        sd_event_source_disable_unref(job->progress_timer);
    }
    free(job);
}

#define PROGRESS_PERIOD_USEC (1000 * 1000)

/* Once a second while a pull runs: how far it is, as an event of the
 * host's, which activatorctl stage shows on a terminal. */
static int on_progress_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    stage_job *job = userdata;
    unsigned layers = atomic_load(&job->progress.layers);
    if (layers) {
        const double mib = 1024.0 * 1024.0;
        uint64_t bytes = atomic_load(&job->progress.bytes);
        uint64_t total = atomic_load(&job->progress.total);
        double seconds = (double)(act_now_usec() - job->started_usec) / 1e6;
        char why[160];
        snprintf(why, sizeof(why), "layer %u of %u: %.1f of %.1f MiB, %.1f MiB/s",
                 atomic_load(&job->progress.layer), layers, (double)bytes / mib,
                 (double)total / mib, seconds > 0 ? (double)bytes / mib / seconds : 0.0);
        ad_publish(job->owner, EV_EVENT_STAGE_PROGRESS, NULL, why);
    }
    sd_event_source_set_time(source, usec + PROGRESS_PERIOD_USEC);
    return 0;
}

static void stage_job_freep(stage_job **job)
{
    stage_job_free(*job);
}

static void complete_stage(void *data)
{
    __attribute__((cleanup(stage_job_freep))) stage_job *job = data;
    job->progress_timer = sd_event_source_disable_unref(job->progress_timer);
    if (job->result < 0) {
        ad_reply_release_error(job->reply, job->result, &job->err);
    } else {
        json_object *result = json_object_new_object();
        json_object_object_add(result, "host", json_object_new_string(job->host));
        json_object_object_add(result, "version", json_object_new_string(job->identity.version));
        json_object_object_add(result, "digest",
                               json_object_new_string(job->identity.build_digest));
        json_object_object_add(result, "source", json_object_new_string(job->identity.source));
        json_object_object_add(result, "live", json_object_new_boolean(job->promote));
        if (job->promote)
            ad_promote_settle(job->owner, job->identity.version, result, job->reply);
        else
            ctrl_reply_ok(job->reply, result);
    }
}

void ad_stage_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply)
{
    assert(host && request && reply);
    __attribute__((cleanup(stage_job_freep))) stage_job *job = calloc(1, sizeof(*job));
    act_error err = {0};
    if (!job) {
        ctrl_reply_error(reply, "release_error", "host %s: out of memory", request->host);
        return;
    }
    ad_daemon *daemon = host->daemon;
    job->owner = host;
    job->releases = daemon->releases;
    job->reply = reply;
    job->promote = request->promote;
    snprintf(job->host, sizeof(job->host), "%s", request->host);
    snprintf(job->version, sizeof(job->version), "%s", request->version);
    snprintf(job->path, sizeof(job->path), "%s", request->path);
    snprintf(job->executable, sizeof(job->executable), "%s", ad_host_config(host)->exec_argv[0]);
    snprintf(job->work_dir, sizeof(job->work_dir), "%s", daemon->config.state_directory);
    snprintf(job->registry_auth_file, sizeof(job->registry_auth_file), "%s",
             daemon->config.registry_auth_file ? daemon->config.registry_auth_file : "");
    job->registry_insecure = act_strv_copy(daemon->config.registry_insecure);
    if (daemon->config.registry_insecure && !job->registry_insecure) {
        ctrl_reply_error(reply, "release_error", "host %s: out of memory", request->host);
        return;
    }
    job->started_usec = act_now_usec();
    if (img_is_registry_reference(job->path) &&
        sd_event_add_time_relative(daemon->loop, &job->progress_timer, CLOCK_MONOTONIC,
                                   PROGRESS_PERIOD_USEC, 0, on_progress_timer, job) >= 0)
        sd_event_source_set_enabled(job->progress_timer, SD_EVENT_ON);
    /* A job the stop leaves undelivered holds nothing but itself. */
    if (act_offload_submit_droppable(daemon->release_work, act_offload_lane(job->host), run_stage,
                                     complete_stage, stage_job_free, job, &err) < 0) {
        ctrl_reply_error(reply, "release_error", "host %s: %s", request->host, err.message);
        return;
    }
    TAKE_PTR(job); /* complete_stage's now */
}

/* ---- the list ------------------------------------------------------------ */

/* rel_list reads every manifest of the host: file work, so a worker's. It
 * runs on the wakes' workers (daemon->offload), not behind a long stage of
 * the host on the release workers. */
typedef struct list_job {
    ctrl_reply *reply;
    rel_store *releases;
    char host[ACT_NAME_MAX + 1];
    rel_entry *entries;
    size_t n;
    int result;
    act_error err;
} list_job;

static void run_list(void *data)
{
    list_job *job = data;
    job->result = rel_list(job->releases, job->host, &job->entries, &job->n, &job->err);
}

/* The daemon stopped before complete_list (the reply is the control
 * server's to end). */
static void drop_list(void *data)
{
    list_job *job = data;
    free(job->entries);
    free(job);
}

static void complete_list(void *data)
{
    _cleanup_free_ list_job *job = data;
    _cleanup_free_ rel_entry *entries = job->entries;
    if (job->result < 0) {
        ad_reply_release_error(job->reply, job->result, &job->err);
        return;
    }
    json_object *result = json_object_new_object();
    act_json_add_string(result, "host", job->host);
    json_object *list = json_object_new_array();
    for (size_t i = 0; i < job->n; i++) {
        json_object *entry = json_object_new_object();
        act_json_add_string(entry, "version", entries[i].identity.version);
        act_json_add_string(entry, "digest", entries[i].identity.build_digest);
        act_json_add_u64(entry, "size", entries[i].identity.size);
        act_json_add_u64(entry, "staged_usec", entries[i].identity.staged_at);
        if (!entries[i].manifest_ok)
            act_json_add_string(entry, "problem", entries[i].problem);
        if (entries[i].is_live)
            act_json_add_string(result, "live", entries[i].identity.version);
        json_object_array_add(list, entry);
    }
    json_object_object_add(result, "releases", list);
    ctrl_reply_ok(job->reply, result);
}

void ad_releases_start(ad_host *host, ctrl_reply *reply)
{
    assert(host && reply);
    _cleanup_free_ list_job *job = calloc(1, sizeof(*job));
    act_error err = {0};
    if (!job) {
        ctrl_reply_error(reply, "release_error", "host %s: out of memory", host->name);
        return;
    }
    ad_daemon *daemon = host->daemon;
    job->reply = reply;
    job->releases = daemon->releases;
    snprintf(job->host, sizeof(job->host), "%s", host->name);
    if (act_offload_submit_droppable(daemon->offload, act_offload_lane(job->host), run_list,
                                     complete_list, drop_list, job, &err) < 0) {
        ctrl_reply_error(reply, "release_error", "host %s: %s", job->host, err.message);
        return;
    }
    TAKE_PTR(job); /* complete_list's now */
}
