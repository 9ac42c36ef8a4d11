/* Staging a build for a control request, off the loop.
 *
 * A stage copies the build, hashes it and fsyncs every file: for a large
 * build that is a long time, during which a loop doing it would wake no
 * host and answer no request. So it runs on a release worker
 * (daemon->release_work, not the workers of the wakes' record writes), in
 * the host's lane, from a copy of the request; the reply goes out from the
 * loop when it is done. */
#include "activator/daemon/step_holds.h"
#include "activator/daemon/stage.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"

typedef struct stage_job {
    rel_store *releases;
    ctrl_reply *reply;
    char host[ACT_NAME_MAX + 1];
    char version[ACT_NAME_MAX + 1];
    char path[CTRL_REQUEST_PATH_MAX + 1];
    char executable[4096]; /* a directory build's executable; "" for a single file */
    bool promote;
    int result;
    rel_identity identity;
    act_error err;
} stage_job;

static void run_stage(void *data)
{
    stage_job *job = data;
    ad_test_hold_release_work("stage", job->host);
    /* A directory build names its executable by the host's Exec= path; a
     * single file is the executable. */
    struct stat st;
    bool directory = stat(job->path, &st) == 0 && S_ISDIR(st.st_mode);
    job->result = rel_stage(job->releases, job->host, job->version, job->path,
                            directory ? job->executable : NULL, &job->identity, &job->err);
    if (job->result == 0 && job->promote)
        job->result = rel_promote(job->releases, job->host, job->version, &job->err);
}

void ad_reply_release_error(ctrl_reply *reply, int r, const act_error *err)
{
    assert(reply && err);
    const char *code = r == -ENOENT         ? "not_staged"
                       : r == -EEXIST       ? "version_exists"
                       : r == -EBADMSG      ? "digest_mismatch"
                       : r == -EKEYREJECTED ? "pin_mismatch"
                       : r == -EINVAL       ? CTRL_REQ_BAD_VALUE
                                            : "release_error";
    ctrl_reply_error(reply, code, "%s", err->message);
}

static void complete_stage(void *data)
{
    _cleanup_free_ stage_job *job = data;
    if (job->result < 0) {
        ad_reply_release_error(job->reply, job->result, &job->err);
    } else {
        json_object *result = json_object_new_object();
        json_object_object_add(result, "host", json_object_new_string(job->host));
        json_object_object_add(result, "version", json_object_new_string(job->identity.version));
        json_object_object_add(result, "digest",
                               json_object_new_string(job->identity.build_digest));
        json_object_object_add(result, "live", json_object_new_boolean(job->promote));
        ctrl_reply_ok(job->reply, result);
    }
}

void ad_stage_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply)
{
    assert(host && request && reply);
    _cleanup_free_ stage_job *job = calloc(1, sizeof(*job));
    act_error err = {0};
    if (!job) {
        ctrl_reply_error(reply, "release_error", "host %s: out of memory", request->host);
        return;
    }
    ad_daemon *daemon = ad_host_daemon(host);
    job->releases = daemon->releases;
    job->reply = reply;
    job->promote = request->promote;
    snprintf(job->host, sizeof(job->host), "%s", request->host);
    snprintf(job->version, sizeof(job->version), "%s", request->version);
    snprintf(job->path, sizeof(job->path), "%s", request->path);
    snprintf(job->executable, sizeof(job->executable), "%s", ad_host_config(host)->exec_argv[0]);
    if (act_offload_submit(daemon->release_work, act_offload_lane(job->host), run_stage,
                           complete_stage, job, &err) < 0) {
        ctrl_reply_error(reply, "release_error", "host %s: %s", request->host, err.message);
        return;
    }
    TAKE_PTR(job); /* complete_stage's now */
}
