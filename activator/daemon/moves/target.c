/* A move's target (op.to, exec from move/moving): a probe wake, the only
 * wake the phase admits and only under the op's id; its admission makes
 * the op probe/probing; restore, exec, ready, HealthCheck=, publication as
 * serving/serving ends the move. It must serve within ProbeTimeoutSec= of
 * its first exec, a deadline journalled in probe.json so that a restarted
 * daemon keeps it; anything else rolls the move back to the source with
 * the reason (moves/fence.c). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/moves/internal.h"
#include "activator/records/records.h"
#include "common/clock.h"
#include "common/text.h"

/* ---- the probe's deadline, journalled ------------------------------------ */

void ad_move_forget_probe_record(ad_move *m)
{
    act_error err = {0};
    int dirfd = ad_host_dir(m->host, &err);
    if (dirfd < 0 || rec_remove_probe(dirfd, &err) < 0)
        ad_move_log(m, LOG_WARNING, "cannot remove its probe record: %s", err.message);
    /* A probe that rolled back leaves the host parked here for good. */
    ad_host_dir_close_unless_used(m->host);
}

static int on_deadline(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_move *m = userdata;
    m->deadline_timer = sd_event_source_disable_unref(m->deadline_timer);
    m->timed_out = true;
    uint64_t probe_sec = ad_host_config(m->host)->probe_timeout_usec / 1000000;
    snprintf(m->failure_reason, sizeof(m->failure_reason), "probe_timeout");
    snprintf(m->failure_message, sizeof(m->failure_message),
             "host %s: the probe on box %s did not serve within ProbeTimeoutSec=%" PRIu64
             " s of its first exec",
             m->host->name, m->host->daemon->config.box, probe_sec);
    ad_move_log(m, LOG_WARNING, "%s; rolling back", m->failure_message);
    /* A wake in flight is cancelled first: its end rolls the move back. */
    if (pl_host_get_state(m->host->pipeline) == PL_HOST_WAKING)
        pl_host_cancel(m->host->pipeline, PL_REASON_READY_TIMEOUT, "%s", m->failure_message);
    else
        ad_move_schedule(m);
    return 0;
}

static void arm_deadline(ad_move *m)
{
    uint64_t now = act_wallclock_usec();
    uint64_t left = m->deadline_usec > now ? m->deadline_usec - now : 0;
    m->deadline_timer = sd_event_source_disable_unref(m->deadline_timer);
    if (sd_event_add_time_relative(m->host->daemon->loop, &m->deadline_timer, CLOCK_MONOTONIC, left,
                                   0, on_deadline, m) < 0)
        ad_move_log(m, LOG_ERR, "cannot arm the probe's deadline; only --timeout bounds it");
}

/* The first exec of the probe starts its window; a restarted daemon finds
 * the deadline in probe.json and keeps it. */
static void start_deadline(ad_move *m)
{
    if (m->deadline_usec)
        return;
    m->deadline_usec = act_wallclock_usec() + ad_host_config(m->host)->probe_timeout_usec;
    rec_probe record = {.deadline_usec = m->deadline_usec};
    act_copy_string(record.op_id, sizeof(record.op_id), m->op_id);
    act_error err = {0};
    int dirfd = ad_host_dir(m->host, &err);
    if (dirfd < 0 || rec_write_probe(dirfd, &record, &err) < 0)
        ad_move_log(m, LOG_WARNING,
                    "cannot journal the probe's deadline (%s); a restart here "
                    "would start a new window",
                    err.message);
    arm_deadline(m);
}

void ad_move_resume_deadline(ad_move *m)
{
    act_error err = {0};
    rec_probe record = {0};
    int dirfd = ad_host_dir(m->host, &err);
    int r = dirfd < 0 ? dirfd : rec_read_probe(dirfd, m->host->name, &record, &err);
    /* The probe's wake opens it again when it needs it. */
    ad_host_dir_close_unless_used(m->host);
    if (r < 0) {
        ad_move_log(m, LOG_WARNING, "cannot read its probe record: %s", err.message);
        return;
    }
    if (r == 0 || strcmp(record.op_id, m->op_id) != 0)
        return;
    m->deadline_usec = record.deadline_usec;
    ad_move_log(m, LOG_NOTICE,
                "the probe's deadline is kept from before the restart (%" PRIu64 " ms left)",
                record.deadline_usec > act_wallclock_usec()
                    ? (record.deadline_usec - act_wallclock_usec()) / 1000
                    : 0);
    arm_deadline(m);
}

/* ---- the probe ------------------------------------------------------------- */

/* Wakes the probe when nothing runs here; its end says what is next. */
void ad_move_probe(ad_move *m)
{
    pl_host *pipeline = m->host->pipeline;
    if (m->writing != WRITE_NONE)
        return;
    if (m->timed_out) {
        ad_move_roll_back(m, m->failure_reason, m->failure_message);
        return;
    }
    if (m->failure_reason[0]) {
        ad_move_roll_back(m, m->failure_reason, m->failure_message);
        return;
    }
    if (pl_host_get_state(pipeline) != PL_HOST_PARKED || m->host->daemon->stopping)
        return;
    pl_host_wake(pipeline, PL_TRIGGER_CLAIM_CHANGE, NULL, NULL);
}

/* The probe ended without serving. Waiting is right when the claim or the
 * box is not ready yet, since what it waits for brings the probe again: a
 * claim (another writer's, the source's release, the store's heal) or a
 * proof (PROVEN). Anything else is the probe's failure (a busy box's start
 * budget included: it waited StartBudgetWaitSec= already), and the move
 * rolls back. */
static void probe_ended(ad_move *m, pl_reason reason)
{
    if (m->timed_out) {
        ad_move_schedule(m);
        return;
    }
    switch (reason) {
    case PL_REASON_NONE:
    case PL_REASON_NOT_OWNER:
    case PL_REASON_RELEASE_PENDING:
    case PL_REASON_UNPROVEN_STOP:
    case PL_REASON_STORE_UNAVAILABLE:
    case PL_REASON_CLAIM_CHANGED:
        return;
    default:
        break;
    }
    act_copy_string(m->failure_reason, sizeof(m->failure_reason), pl_reason_to_string(reason));
    if (!m->failure_message[0])
        snprintf(m->failure_message, sizeof(m->failure_message),
                 "host %s: the probe on box %s ended with %s", m->host->name,
                 m->host->daemon->config.box, pl_reason_to_string(reason));
    ad_move_schedule(m);
}

bool ad_move_target_on_transition(ad_move *m, const pl_wake_event *event)
{
    ad_host *host = m->host;
    switch (event->type) {
    case PL_WAKE_EVENT_EXECUTED:
        start_deadline(m);
        break;
    case PL_WAKE_EVENT_ADMITTED:
        ad_publish(host, EV_EVENT_MOVE_PROBING, NULL, m->from);
        break;
    case PL_WAKE_EVENT_GAVE_UP:
    case PL_WAKE_EVENT_REFUSED:
    case PL_WAKE_EVENT_CANCELLED:
    case PL_WAKE_EVENT_FAULTED:
        /* The sentence, for the rollback: ENDED carries only the reason. */
        if (event->message)
            act_copy_string(m->failure_message, sizeof(m->failure_message), event->message);
        break;
    case PL_WAKE_EVENT_ENDED:
        if (pl_host_get_state(host->pipeline) == PL_HOST_SERVING) {
            /* Published and healthy: the claim says serving here. */
            ad_move_log(m, LOG_NOTICE, "done: it serves here");
            ad_publish(host, EV_EVENT_MOVE_DONE, host->serving, m->from);
            return true;
        }
        if (pl_host_get_state(host->pipeline) == PL_HOST_PARKED)
            probe_ended(m, event->reason);
        break;
    case PL_WAKE_EVENT_PROVEN:
        ad_move_schedule(m);
        break;
    default:
        break;
    }
    return false;
}
