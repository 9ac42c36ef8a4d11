/* The operator's checkpoint ops (moves/checkpoint_request.h).
 *
 * `checkpoint`: the claim is read first (this box must execute the host,
 * or the checkpoint would be of a state that is not the host's), the host
 * parked unless ExecCheckpoint= snapshots it live, the checkpoint written
 * (moves/checkpoints.c), and the claim's state set to it
 * (moves/checkpoint_naming.c), again only while this box executes the host. From the
 * request to the end, wakes of the host are refused (wake/admit.c), so the
 * archive is of a state nothing writes. */
#include "activator/daemon/moves/checkpoint_request.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/moves/checkpoint_naming.h"
#include "activator/daemon/moves/checkpoints.h"
#include "checkpoint/checkpoint.h"
#include "common/cleanup.h"
#include "common/json_fields.h"
#include "common/log.h"

struct ad_checkpoint_request {
    ad_host *host;
    ctrl_reply *reply;
    bool parked;         /* this request parked the host */
    bool waiting;        /* for the park to end */
    uint64_t generation; /* the claim's, the one whose state it holds */
    claim_state written;
};

static void request_free(ad_checkpoint_request *req)
{
    if (req->host->checkpoint_request == req)
        req->host->checkpoint_request = NULL;
    free(req);
}

static void fail(ad_checkpoint_request *req, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(ad_checkpoint_request *req, const char *code, const char *fmt, ...)
{
    char message[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    act_log_fields(LOG_WARNING, &(act_log_ctx){.host = req->host->name}, "%s", message);
    ctrl_reply_error(req->reply, code, "%s", message);
    request_free(req);
}

static json_object *state_json(const claim_state *state)
{
    json_object *object = json_object_new_object();
    act_json_add_string(object, "checkpoint", state->checkpoint);
    act_json_add_string(object, "sha256", state->sha256);
    act_json_add_u64(object, "size", state->size);
    act_json_add_u64(object, "generation", state->generation);
    act_json_add_string(object, "box", state->box);
    act_json_add_u64(object, "stamp_usec", state->stamp_usec);
    return object;
}

/* ---- naming it on the claim ---------------------------------------------- */

static void on_named(ad_host *host, int result, uint64_t new_revision, const char *code,
                     const act_error *err, void *userdata)
{
    ad_checkpoint_request *req = userdata;
    if (result < 0) {
        fail(req, code, "%s", err->message);
        return;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = req->host->name},
                   "host %s: the claim names checkpoint %s (revision %" PRIu64 ")", req->host->name,
                   req->written.checkpoint, new_revision);
    json_object *result_json = state_json(&req->written);
    act_json_add_string(result_json, "host", req->host->name);
    act_json_add_u64(result_json, "revision", new_revision);
    json_object_object_add(result_json, "parked", json_object_new_boolean(req->parked));
    ctrl_reply_ok(req->reply, result_json);
    request_free(req);
}

static void on_written(ad_host *host, int result, const claim_state *written, const act_error *err,
                       void *userdata)
{
    ad_checkpoint_request *req = userdata;
    if (result < 0) {
        fail(req, "checkpoint_failed", "%s", err->message);
        return;
    }
    req->written = *written;
    act_error name_err = {0};
    if (ad_checkpoint_name(host, written, 0, on_named, req, &name_err) < 0)
        fail(req, "store_error", "host %s: checkpoint %s was written but not named: %s",
             req->host->name, written->checkpoint, name_err.message);
}

/* ---- writing it ------------------------------------------------------------ */

static void start_writing(ad_checkpoint_request *req)
{
    req->waiting = false;
    act_error err = {0};
    int r = ad_checkpoint_start(req->host, req->generation, on_written, req, &err);
    if (r < 0)
        fail(req,
             r == -EBUSY     ? "busy"
             : r == -ENOTSUP ? "no_transport"
                             : "checkpoint_failed",
             "%s", err.message);
}

void ad_checkpoint_request_host_parked(ad_host *host)
{
    ad_checkpoint_request *req = host->checkpoint_request;
    if (!req || !req->waiting)
        return;
    if (host->daemon->stopping) {
        fail(req, "stopping", "host %s: box %s is stopping; no checkpoint was written",
             req->host->name, req->host->daemon->config.box);
        return;
    }
    if (pl_host_is_unproven(host->pipeline)) {
        fail(req, "unproven_stop",
             "host %s: its generation is not proven stopped, so its state may still change; "
             "no checkpoint was written",
             req->host->name);
        return;
    }
    if (!ad_host_at_rest(host))
        return; /* a later transition brings it to rest */
    start_writing(req);
}

static void on_read_first(claim_store *store, int result, const claim *c, const act_error *err,
                          void *userdata)
{
    ad_checkpoint_request *req = userdata;
    ad_host *host = req->host;
    if (result < 0) {
        fail(req, "store_error", "host %s: cannot read its claim: %s; no checkpoint was written",
             req->host->name, err->message);
        return;
    }
    if (result == 0 || !claim_owned_by(c, req->host->daemon->config.box)) {
        const char *executor = result > 0 ? claim_executor(c) : "";
        fail(req, "not_owner",
             "host %s: %s, this box is %s; run activatorctl checkpoint on the box that runs it "
             "(no checkpoint was written)",
             req->host->name,
             result == 0   ? "has no claim yet"
             : executor[0] ? "the claim names another box as the one that runs it"
                           : "the claim is released",
             req->host->daemon->config.box);
        if (result > 0 && executor[0])
            act_log_fields(LOG_INFO, &(act_log_ctx){.host = req->host->name},
                           "host %s: checkpoint refused: box %s runs it", req->host->name,
                           executor);
        return;
    }
    req->generation = claim_admitted_generation(c);
    const cfg_host *config = ad_host_config(host);
    bool live = config->exec_checkpoint && config->checkpoint_live;
    if (live || ad_host_at_rest(host)) {
        start_writing(req);
        return;
    }
    /* Parked first: the archive must be of a state no generation writes.
     * From here wakes are refused until the request ends (wake/admit.c). */
    req->parked = true;
    req->waiting = true;
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = req->host->name},
                   "host %s: parking it to write a checkpoint of its state", req->host->name);
    pl_host_park(host->pipeline, PL_PARK_REQUEST);
    ad_checkpoint_request_host_parked(host); /* a host that was parked already */
}

void ad_checkpoint_request_start(ad_host *host, ctrl_reply *reply)
{
    assert(host && reply);
    ad_daemon *daemon = host->daemon;
    const cfg_host *config = ad_host_config(host);
    const char *name = host->name;
    if (daemon->stopping) {
        ctrl_reply_error(reply, "stopping", "box %s is stopping; checkpoint refused",
                         daemon->config.box);
        return;
    }
    if (config->stateless) {
        ctrl_reply_error(reply, "stateless",
                         "host %s has State=none: it has no state to checkpoint (set State=dir "
                         "in its file if its state directory matters)",
                         name);
        return;
    }
    if (!config->exec_checkpoint && !daemon->config.checkpoints) {
        ctrl_reply_error(reply, "no_transport",
                         "host %s: no checkpoint transport on box %s (set Checkpoints=dir:///PATH "
                         "or docker://REGISTRY/NAMESPACE "
                         "in [Activator] of %s, or ExecCheckpoint= in the host's file)",
                         name, daemon->config.box, daemon->config_path);
        return;
    }
    if (host->checkpoint_request || host->checkpoint) {
        ctrl_reply_error(reply, "busy",
                         "host %s: a checkpoint is being written already (wait for it)", name);
        return;
    }
    ad_checkpoint_request *req = calloc(1, sizeof(*req));
    if (!req) {
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    *req = (ad_checkpoint_request){.host = host, .reply = reply};
    host->checkpoint_request = req;
    act_error err = {0};
    if (claims_read_async(daemon->store, name, on_read_first, req, &err) < 0)
        fail(req, "store_error", "host %s: cannot read its claim: %s", name, err.message);
}

/* ---- listing --------------------------------------------------------------- */

typedef struct list_job {
    ctrl_reply *reply;
    ckpt_place place;
    char host[ACT_NAME_MAX + 1];
    char named[sizeof(((claim_state *)0)->checkpoint)];
    ckpt_info *items;
    size_t n;
    int result;
    act_error err;
} list_job;

static void list_job_free(list_job *job)
{
    ckpt_place_clear(&job->place);
    free(job->items);
    free(job);
}

/* The daemon stopped before complete_list (the reply is the control
 * server's to end). */
static void drop_list(void *data)
{
    list_job_free(data);
}

static void run_list(void *data)
{
    list_job *job = data;
    job->result = ckpt_place_list(&job->place, job->host, &job->items, &job->n, &job->err);
}

static void complete_list(void *data)
{
    list_job *job = data;
    if (job->result < 0) {
        ctrl_reply_error(job->reply, "checkpoint_error", "host %s: %s", job->host,
                         job->err.message);
        list_job_free(job);
        return;
    }
    json_object *result = json_object_new_object();
    act_json_add_string(result, "host", job->host);
    if (job->named[0])
        act_json_add_string(result, "named", job->named);
    json_object *list = json_object_new_array();
    for (size_t i = 0; i < job->n; i++) {
        const ckpt_info *info = &job->items[i];
        json_object *entry = json_object_new_object();
        act_json_add_string(entry, "checkpoint", info->id);
        act_json_add_string(entry, "sha256", info->sha256);
        act_json_add_u64(entry, "size", info->size);
        act_json_add_u64(entry, "generation", info->generation);
        act_json_add_string(entry, "box", info->box);
        act_json_add_u64(entry, "stamp_usec", info->stamp_usec);
        json_object_array_add(list, entry);
    }
    json_object_object_add(result, "checkpoints", list);
    ctrl_reply_ok(job->reply, result);
    list_job_free(job);
}

typedef struct list_request {
    ad_host *host;
    ctrl_reply *reply;
} list_request;

static void on_read_to_list(claim_store *store, int result, const claim *c, const act_error *err,
                            void *userdata)
{
    _cleanup_free_ list_request *req = userdata;
    ad_daemon *daemon = req->host->daemon;
    list_job *job = calloc(1, sizeof(*job));
    if (!job) {
        ctrl_reply_error(req->reply, "internal", "out of memory");
        return;
    }
    job->reply = req->reply;
    snprintf(job->host, sizeof(job->host), "%s", req->host->name);
    /* The list is useful without the claim: an unreadable store only
     * leaves out which one it names. */
    if (result > 0)
        snprintf(job->named, sizeof(job->named), "%s", c->state.checkpoint);
    act_error submit_err = {0};
    if (ad_checkpoint_place(daemon, &job->place, &submit_err) < 0 ||
        act_offload_submit_droppable(daemon->offload, act_offload_lane(job->host), run_list,
                                     complete_list, drop_list, job, &submit_err) < 0) {
        ctrl_reply_error(req->reply, "checkpoint_error", "host %s: %s", job->host,
                         submit_err.message);
        list_job_free(job);
    }
}

void ad_checkpoints_list(ad_host *host, ctrl_reply *reply)
{
    assert(host && reply);
    ad_daemon *daemon = host->daemon;
    if (!daemon->config.checkpoints) {
        ctrl_reply_error(
            reply, "no_transport",
            "host %s: box %s has no Checkpoints= to list (set "
            "Checkpoints=dir:///PATH or docker://REGISTRY/NAMESPACE in [Activator] of %s; "
            "checkpoints an "
            "ExecCheckpoint= writes are listed by its own tools)",
            host->name, daemon->config.box, daemon->config_path);
        return;
    }
    list_request *req = calloc(1, sizeof(*req));
    if (!req) {
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    *req = (list_request){.host = host, .reply = reply};
    act_error err = {0};
    if (claims_read_async(daemon->store, host->name, on_read_to_list, req, &err) < 0)
        on_read_to_list(daemon->store, -EIO, NULL, &err, req);
}
