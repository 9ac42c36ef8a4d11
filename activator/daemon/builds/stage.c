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
 * @sha256:DIGEST, pulled with RegistryAuthFile= and RegistryInsecure=
 * first into a layout in the work directory): the image's layers are
 * applied into a work directory beside the releases (image/), staged from
 * there with the image, resolved to its manifest's digest, as the build's
 * source, and the work directory removed. */
#include "activator/daemon/builds/stage.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "activator/daemon/builds/promote.h"
#include "activator/daemon/host/step_holds.h"
#include "common/cleanup.h"
#include "common/json_fields.h"
#include "common/log.h"
#include "common/strv.h"
#include "image/image.h"

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
} stage_job;

#define IMAGE_WORK_PREFIX ".image-"

/* The work directories a stage of host left behind when the daemon died
 * under it. Stages of one host run one at a time (its lane), so none of
 * them is in use. */
static void sweep_image_work(const stage_job *job)
{
    DIR *dir = opendir(job->work_dir);
    if (!dir)
        return;
    char prefix[ACT_NAME_MAX + 16];
    snprintf(prefix, sizeof(prefix), IMAGE_WORK_PREFIX "%s-", job->host);
    struct dirent *de;
    /* The prefix and mkdtemp's six characters, nothing more: host "web"
     * must not take ".image-web-2-ABCDEF", host web-2's, maybe in use. */
    size_t name_len = strlen(prefix) + 6;
    while ((de = readdir(dir))) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 || strlen(de->d_name) != name_len)
            continue;
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", job->work_dir, de->d_name);
        (void)img_remove_tree(path);
    }
    closedir(dir);
}

/* A registry's image pulled into the layout <work>/layout; the reference
 * to open it by, and the source it came from into source. */
static int pull_image(stage_job *job, const char *work, char *local, size_t local_size,
                      char *source, size_t source_size)
{
    char layout[8300];
    snprintf(layout, sizeof(layout), "%s/layout", work);
    img_registry_options options = {
        .auth_file = job->registry_auth_file,
        .insecure = (const char *const *)job->registry_insecure,
        .n_insecure = act_strv_length(job->registry_insecure),
    };
    int r = img_pull(job->path, &options, layout, source, source_size, &job->err);
    if (r == 0)
        snprintf(local, local_size, "oci:%s:" IMG_PULLED_TAG, layout);
    return r;
}

/* An image: pulled if it is a registry's, its layers applied into a work
 * directory, the tree staged with the image as its source, the work
 * directory removed whatever happened. */
static int stage_image(stage_job *job)
{
    sweep_image_work(job);
    char work[8192];
    snprintf(work, sizeof(work), "%s/" IMAGE_WORK_PREFIX "%s-XXXXXX", job->work_dir, job->host);
    if (!mkdtemp(work))
        return act_error_set(&job->err, errno,
                             "host %s: version %s: cannot make a work directory in %s for the "
                             "image: %s; nothing was staged",
                             job->host, job->version, job->work_dir, strerror(errno));
    char local[8400], source[1024] = "", tree[8300];
    snprintf(local, sizeof(local), "%s", job->path);
    snprintf(tree, sizeof(tree), "%s/tree", work);
    int r = img_is_registry_reference(job->path)
                ? pull_image(job, work, local, sizeof(local), source, sizeof(source))
                : 0;
    _cleanup_(img_image_clear) img_image image = {0};
    if (r == 0)
        r = img_open(local, &image, &job->err);
    if (r == 0 && !source[0])
        img_source(&image, source, sizeof(source));
    if (r == 0 && mkdir(tree, 0700) < 0)
        r = act_error_set(&job->err, errno, "cannot make %s: %s", tree, strerror(errno));
    if (r == 0)
        r = img_flatten(&image, tree, &job->err);
    if (r < 0)
        act_error_prefix(&job->err, "host %s: version %s: nothing was staged", job->host,
                         job->version);
    else
        r = rel_stage_as(job->releases, job->host, job->version, tree, job->executable, source,
                         &job->identity, &job->err);
    int removed = img_remove_tree(work);
    if (removed < 0)
        act_log(LOG_WARNING,
                "host %s: cannot remove the image work directory %s: %s; the next "
                "stage of the host removes it",
                job->host, work, strerror(-removed));
    return r;
}

static void run_stage(void *data)
{
    stage_job *job = data;
    ad_test_hold_release_work("stage", job->host);
    if (img_is_reference(job->path) || img_is_registry_reference(job->path)) {
        job->result = stage_image(job);
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
    if (job)
        act_strv_free(job->registry_insecure);
    free(job);
}

static void stage_job_freep(stage_job **job)
{
    stage_job_free(*job);
}

static void complete_stage(void *data)
{
    __attribute__((cleanup(stage_job_freep))) stage_job *job = data;
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
