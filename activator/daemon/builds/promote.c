/* Promotes off the loop, then lifts a pin that names another version
 * (builds/promote.h).
 *
 * rel_promote re-hashes the whole build under the host's lock: seconds for
 * a large build, and the lock may wait for a stage or a gc of the host. So
 * it runs on a release worker in the host's lane. The pin is then cleared
 * by compare-and-swap, only while this box is the claim's executor: a pin is
 * fleet-wide, but this promote moved only this box's live link. A
 * compare-and-swap that lost to a write that left that pin as it was (the
 * daemon's own write-back of a park or a publication) is planned and made
 * again, as activatorctl unpin's is (ctrl_fleet_same_decision). */
#include "activator/daemon/builds/promote.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/control/fleet.h"
#include "activator/daemon/builds/gc.h"
#include "activator/daemon/host/step_holds.h"
#include "common/cleanup.h"
#include "common/json_fields.h"
#include "common/log.h"

typedef struct promote_job {
    ad_host *host; /* on the loop only */
    ctrl_reply *reply;
    json_object *answer; /* the reply's result, once the build is live */
    rel_store *releases;
    char host_name[ACT_NAME_MAX + 1];
    char version[REL_NAME_SIZE];
    int result;
    act_error err;
    claim read;      /* the claim its unpin was planned on */
    unsigned writes; /* the unpin's compare-and-swaps so far */
    char unpinned[REL_NAME_SIZE]; /* the pin cleared, if one was */
    char pin_note[1200];          /* why a pin was kept, if one was */
} promote_job;

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

static void run_promote(void *data)
{
    promote_job *job = data;
    ad_test_hold_release_work("promote", job->host_name);
    job->result = rel_promote(job->releases, job->host_name, job->version, &job->err);
}

static void answer(promote_job *job)
{
    json_object *result = job->answer;
    if (job->unpinned[0])
        act_json_add_string(result, "unpinned", job->unpinned);
    if (job->pin_note[0])
        act_json_add_string(result, "pin", job->pin_note);
    ctrl_reply_ok(job->reply, result);
    ad_gc_after_change(job->host);
    free(job);
}

static void on_claim(claim_store *store, int result, const claim *c, const act_error *err,
                     void *userdata);

static void on_unpinned(claim_store *store, int result, uint64_t new_revision,
                        const claim *current, const act_error *err, void *userdata)
{
    promote_job *job = userdata;
    if (result == CLAIMS_CHANGED) {
        job->unpinned[0] = '\0';
        claim now = current ? *current : (claim){0};
        ctrl_request unpin = {.op = CTRL_OP_UNPIN};
        snprintf(unpin.host, sizeof(unpin.host), "%s", job->host_name);
        char why[512];
        if (!ctrl_fleet_same_decision(&unpin, &job->read, &now, why, sizeof(why))) {
            snprintf(job->pin_note, sizeof(job->pin_note),
                     "kept: the claim changed after it was read, and with it the pin: %s; "
                     "unpin it if it should go (activatorctl unpin %s)",
                     why, job->host_name);
            act_log_fields(LOG_WARNING, &(act_log_ctx){.host = job->host_name},
                           "host %s: promoted %s but left the pin: %s", job->host_name,
                           job->version, job->pin_note);
            answer(job);
            return;
        }
        if (job->writes < CTRL_FLEET_WRITES_MAX) {
            on_claim(store, now.revision ? 1 : 0, &now, NULL, job);
            return;
        }
    }
    if (result < 0) {
        job->unpinned[0] = '\0';
        char kept_changing[64];
        snprintf(kept_changing, sizeof(kept_changing), "it changed %u times in a row",
                 job->writes);
        snprintf(job->pin_note, sizeof(job->pin_note), "kept: the claim could not be written (%s)",
                 result == CLAIMS_CHANGED ? kept_changing : err->message);
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = job->host_name},
                       "host %s: promoted %s but could not clear the pin: %s", job->host_name,
                       job->version, job->pin_note);
    }
    answer(job);
}

static void on_claim(claim_store *store, int result, const claim *c, const act_error *err,
                     void *userdata)
{
    promote_job *job = userdata;
    if (result < 0) {
        snprintf(job->pin_note, sizeof(job->pin_note), "unknown: the claim could not be read (%s)",
                 err->message);
        answer(job);
        return;
    }
    if (result == 0 || !c->has_pin || strcmp(c->pin.version, job->version) == 0) {
        answer(job);
        return;
    }
    const char *box = job->host->daemon->config.box;
    if (!claim_owned_by(c, box)) {
        snprintf(job->pin_note, sizeof(job->pin_note),
                 "kept on %s: box %s runs the host, not this box %s; unpin it there "
                 "(activatorctl unpin %s)",
                 c->pin.version, claim_executor(c), box, job->host_name);
        answer(job);
        return;
    }
    claim next = *c;
    next.has_pin = false;
    next.pin = (claim_pin){0};
    snprintf(job->unpinned, sizeof(job->unpinned), "%s", c->pin.version);
    job->read = *c;
    job->writes++;
    act_error call_err = {0};
    if (claims_cas_async(store, job->host_name, c->revision, &next, on_unpinned, job,
                         &call_err) < 0) {
        job->unpinned[0] = '\0';
        snprintf(job->pin_note, sizeof(job->pin_note), "kept: %s", call_err.message);
        answer(job);
    }
}

/* The build is live: the pin next, then the answer. */
static void settle(promote_job *job)
{
    act_error err = {0};
    if (claims_read_async(job->host->daemon->store, job->host_name, on_claim, job, &err) < 0) {
        snprintf(job->pin_note, sizeof(job->pin_note), "unknown: %s", err.message);
        answer(job);
    }
}

static void complete_promote(void *data)
{
    promote_job *job = data;
    if (job->result < 0) {
        ad_reply_release_error(job->reply, job->result, &job->err);
        free(job);
        return;
    }
    job->answer = json_object_new_object();
    act_json_add_string(job->answer, "host", job->host_name);
    act_json_add_string(job->answer, "version", job->version);
    json_object_object_add(job->answer, "live", json_object_new_boolean(true));
    settle(job);
}

void ad_promote_settle(ad_host *host, const char *version, json_object *result,
                       ctrl_reply *reply)
{
    assert(host && version && result && reply);
    promote_job *job = calloc(1, sizeof(*job));
    if (!job) {
        json_object_put(result);
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    job->host = host;
    job->reply = reply;
    job->answer = result;
    snprintf(job->host_name, sizeof(job->host_name), "%s", host->name);
    snprintf(job->version, sizeof(job->version), "%s", version);
    settle(job);
}

void ad_promote_start(ad_host *host, const ctrl_request *request, ctrl_reply *reply)
{
    assert(host && request && reply);
    _cleanup_free_ promote_job *job = calloc(1, sizeof(*job));
    if (!job) {
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    ad_daemon *daemon = host->daemon;
    job->host = host;
    job->reply = reply;
    job->releases = daemon->releases;
    snprintf(job->host_name, sizeof(job->host_name), "%s", host->name);
    snprintf(job->version, sizeof(job->version), "%s", request->version);
    act_error err = {0};
    /* A job the stop leaves undelivered holds nothing but itself. */
    if (act_offload_submit_droppable(daemon->release_work, act_offload_lane(job->host_name),
                                     run_promote, complete_promote, free, job, &err) < 0) {
        ctrl_reply_error(reply, "release_error", "host %s: %s", job->host_name, err.message);
        return;
    }
    TAKE_PTR(job); /* complete_promote's now */
}
