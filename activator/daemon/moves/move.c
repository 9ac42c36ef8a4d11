#include "activator/daemon/moves/move.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/moves/checkpoints.h"
#ifdef ACTIVATOR_TEST_HOOKS
#include "activator/daemon/host/step_holds.h"
#endif
#include "activator/records/records.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

/* A CAS that lost to an unrelated write (a hold, a pin) is tried again on
 * the claim as it is now, this many times. */
#define WRITE_RETRIES 5

/* A write the store did not answer is tried again after 100 ms doubling to
 * 5 s: a store that times out once while its watch goes on brings no claim
 * that would make the step again, and the move would wait for good. */
#define STORE_RETRY_FIRST_USEC (100 * 1000ull)
#define STORE_RETRY_MAX_USEC (5 * 1000 * 1000ull)

typedef enum move_role {
    MOVE_SOURCE,
    MOVE_TARGET,
} move_role;

typedef enum move_write {
    WRITE_NONE,
    WRITE_MOVING,   /* source: draining -> moving */
    WRITE_ROLLBACK, /* either box: back to the source */
} move_write;

struct ad_move {
    ad_host *host;
    move_role role;
    char op_id[sizeof(((claim_op *)0)->id)];
    char from[sizeof(((claim_op *)0)->from)];
    char to[sizeof(((claim_op *)0)->to)];
    uint64_t generation;     /* source: the generation whose state is carried */
    sd_event_source *step;   /* the next step, run from the loop */
    /* source */
    bool checkpointing;
    bool checkpointed;
    bool held;               /* test builds: waiting at a hold point */
    claim_state written;
    /* target */
    uint64_t deadline_usec;  /* wall clock; 0 until the probe's first exec */
    sd_event_source *deadline_timer;
    bool timed_out;
    char failure_reason[32];
    char failure_message[256];
    /* the CAS in flight; a move that ended meanwhile is detached from the
     * host and freed when its answer comes */
    move_write writing;
    bool detached;
    unsigned retries;
    sd_event_source *store_retry_timer; /* the step again, after a store error */
    uint64_t store_backoff_usec;        /* 0 while the store answers */
    char rollback_reason[32];
    char rollback_message[256];
};

static void log_move(const ad_move *m, int priority, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void log_move(const ad_move *m, int priority, const char *fmt, ...)
{
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    act_log_fields(priority, &(act_log_ctx){.host = m->host->name}, "host %s: move %s: %s",
                   m->host->name, m->op_id, text);
}

/* ---- the probe's deadline, journalled ------------------------------------ */

static void forget_probe_record(ad_move *m)
{
    act_error err = {0};
    int dirfd = ad_host_dir(m->host, &err);
    if (dirfd < 0 || rec_remove_probe(dirfd, &err) < 0)
        log_move(m, LOG_WARNING, "cannot remove its probe record: %s", err.message);
    /* A probe that rolled back leaves the host parked here for good. */
    ad_host_dir_close_unless_used(m->host);
}

static void schedule(ad_move *m);

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
    log_move(m, LOG_WARNING, "%s; rolling back", m->failure_message);
    /* A wake in flight is cancelled first: its end rolls the move back. */
    if (pl_host_get_state(m->host->pipeline) == PL_HOST_WAKING)
        pl_host_cancel(m->host->pipeline, PL_REASON_READY_TIMEOUT, "%s", m->failure_message);
    else
        schedule(m);
    return 0;
}

static void arm_deadline(ad_move *m)
{
    uint64_t now = act_wallclock_usec();
    uint64_t left = m->deadline_usec > now ? m->deadline_usec - now : 0;
    m->deadline_timer = sd_event_source_disable_unref(m->deadline_timer);
    if (sd_event_add_time_relative(m->host->daemon->loop, &m->deadline_timer, CLOCK_MONOTONIC, left,
                                   0, on_deadline, m) < 0)
        log_move(m, LOG_ERR, "cannot arm the probe's deadline; only --timeout bounds it");
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
        log_move(m, LOG_WARNING, "cannot journal the probe's deadline (%s); a restart here "
                                 "would start a new window", err.message);
    arm_deadline(m);
}

static void resume_deadline(ad_move *m)
{
    act_error err = {0};
    rec_probe record = {0};
    int dirfd = ad_host_dir(m->host, &err);
    int r = dirfd < 0 ? dirfd : rec_read_probe(dirfd, m->host->name, &record, &err);
    /* The probe's wake opens it again when it needs it. */
    ad_host_dir_close_unless_used(m->host);
    if (r < 0) {
        log_move(m, LOG_WARNING, "cannot read its probe record: %s", err.message);
        return;
    }
    if (r == 0 || strcmp(record.op_id, m->op_id) != 0)
        return;
    m->deadline_usec = record.deadline_usec;
    log_move(m, LOG_NOTICE, "the probe's deadline is kept from before the restart (%" PRIu64
                            " ms left)",
             record.deadline_usec > act_wallclock_usec()
                 ? (record.deadline_usec - act_wallclock_usec()) / 1000
                 : 0);
    arm_deadline(m);
}

/* ---- the move's state ------------------------------------------------------ */

static void move_free(ad_move *m)
{
    if (!m)
        return;
    if (m->checkpointing)
        ad_checkpoint_cancel(m->host);
    m->checkpointing = false;
    m->step = sd_event_source_disable_unref(m->step);
    m->deadline_timer = sd_event_source_disable_unref(m->deadline_timer);
    m->store_retry_timer = sd_event_source_disable_unref(m->store_retry_timer);
    if (!m->detached) {
        if (m->host->move == m)
            m->host->move = NULL;
        if (m->role == MOVE_TARGET)
            ad_host_set_probe_op(m->host, NULL);
        m->detached = true;
    }
    /* The store's answer to the call in flight frees it. */
    if (m->writing == WRITE_NONE)
        free(m);
}

void ad_move_free(ad_host *host)
{
    move_free(host->move);
}

/* The move left this box's hands (done, rolled back, handed over, or
 * replaced by another op): nothing more to do for it here. */
static void end_move(ad_move *m)
{
    if (m->role == MOVE_TARGET)
        forget_probe_record(m);
    move_free(m);
}

static int on_step(sd_event_source *source, void *userdata);

/* The next step runs from the loop, never from inside the claim watch or a
 * transition, so it may park, wake or cancel the host. */
static void schedule(ad_move *m)
{
    if (!m->step && sd_event_add_defer(m->host->daemon->loop, &m->step, on_step, m) < 0)
        log_move(m, LOG_ERR, "cannot schedule its next step");
    else if (m->step)
        sd_event_source_set_enabled(m->step, SD_EVENT_ONESHOT);
}

/* ---- writes on the claim ------------------------------------------------- */

static void write_claim(ad_move *m);

static int on_store_retry(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_move *m = userdata;
    m->store_retry_timer = sd_event_source_disable_unref(m->store_retry_timer);
    schedule(m);
    return 0;
}

/* The step that made the write runs again after the next delay, and makes
 * it again if it is still due (the source's moving, either box's rollback). */
static void retry_after_store_error(ad_move *m)
{
    if (m->detached || m->store_retry_timer)
        return;
    m->store_backoff_usec =
        m->store_backoff_usec ? m->store_backoff_usec * 2 : STORE_RETRY_FIRST_USEC;
    if (m->store_backoff_usec > STORE_RETRY_MAX_USEC)
        m->store_backoff_usec = STORE_RETRY_MAX_USEC;
    if (sd_event_add_time_relative(m->host->daemon->loop, &m->store_retry_timer, CLOCK_MONOTONIC,
                                   m->store_backoff_usec, 0, on_store_retry, m) < 0)
        log_move(m, LOG_ERR, "cannot arm the retry of its claim write; the next claim brings it");
    else
        log_move(m, LOG_INFO, "trying the claim write again in %" PRIu64 " ms",
                 m->store_backoff_usec / 1000);
}

static void on_written(claim_store *store, int result, uint64_t new_revision,
                       const claim *current, const act_error *err, void *userdata)
{
    ad_move *m = userdata;
    move_write what = m->writing;
    if (result == CLAIMS_CHANGED && !m->detached && m->retries++ < WRITE_RETRIES) {
        write_claim(m);
        return;
    }
    m->writing = WRITE_NONE;
    if (result < 0) {
        log_move(m, LOG_WARNING, "cannot write %s to the claim: %s",
                 what == WRITE_MOVING ? "moving" : "the rollback",
                 result == CLAIMS_CHANGED ? "it kept changing" : err->message);
        /* A claim that kept changing comes back through the watch, which
         * makes the step again; a store that failed is tried again. */
        if (m->detached)
            free(m);
        else if (result != CLAIMS_CHANGED)
            retry_after_store_error(m);
        return;
    }
    m->store_backoff_usec = 0;
    if (what == WRITE_MOVING) {
        log_move(m, LOG_NOTICE, "drained: box %s may restore and probe it (revision %" PRIu64 ")",
                 m->to, new_revision);
        ad_publish(m->host, EV_EVENT_MOVE_MOVING, NULL, m->to);
    } else {
        log_move(m, LOG_NOTICE, "rolled back to box %s: %s (revision %" PRIu64 ")", m->from,
                 m->rollback_reason, new_revision);
        ad_publish(m->host, EV_EVENT_MOVE_ROLLED_BACK, NULL, m->rollback_reason);
    }
    /* The watch brings the claim just written, which ends this box's part
     * (unless it came first, and the move is detached already). */
    if (m->detached)
        free(m);
}

/* What the rollback makes of current; false when current is past this
 * move already. A target whose probe published and then failed its
 * health check holds a serving claim of the move's op: it is rolled back
 * as from probing. */
static bool rollback_of(ad_move *m, const claim *current, claim *next)
{
    if (strcmp(current->op.id, m->op_id) != 0)
        return false;
    claim from = *current;
    if (!claim_move_phase(&from)) {
        if (m->role != MOVE_TARGET || strcmp(current->holder.box, m->host->daemon->config.box) != 0)
            return false;
        from.op.kind = CLAIM_OP_PROBE;
        snprintf(from.op.phase, sizeof(from.op.phase), "probing");
        act_copy_string(from.op.from, sizeof(from.op.from), m->from);
        act_copy_string(from.op.to, sizeof(from.op.to), m->to);
    }
    return claim_move_rollback(&from, m->rollback_reason, m->rollback_message,
                               m->host->daemon->config.box, act_wallclock_usec(), next, NULL) == 0;
}

static void on_read_for_write(claim_store *store, int result, const claim *c,
                              const act_error *err, void *userdata)
{
    ad_move *m = userdata;
    if (m->detached) {
        free(m);
        return;
    }
    if (result <= 0) {
        log_move(m, LOG_WARNING, "cannot read the claim to write it: %s",
                 result < 0 ? err->message : "it was deleted");
        m->writing = WRITE_NONE;
        if (result < 0)
            retry_after_store_error(m);
        return;
    }
    claim next;
    bool write = false;
    if (m->writing == WRITE_MOVING) {
        /* Only over the draining this box was asked for: an abort or
         * another op since then wins. */
        write = c->op.kind == CLAIM_OP_MOVE && strcmp(c->op.phase, "draining") == 0 &&
                strcmp(c->op.id, m->op_id) == 0 &&
                strcmp(c->op.exec, m->host->daemon->config.box) == 0;
        if (write)
            claim_move_next_moving(c, &m->written, act_wallclock_usec(), &next);
    } else {
        write = rollback_of(m, c, &next);
    }
    if (!write) {
        log_move(m, LOG_INFO, "the claim went on without it (op %s, %s/%s); nothing written",
                 c->op.id, claim_op_kind_to_string(c->op.kind), c->op.phase);
        m->writing = WRITE_NONE;
        return;
    }
    act_error call_err = {0};
    if (claims_cas_async(store, m->host->name, c->revision, &next, on_written, m, &call_err) < 0) {
        log_move(m, LOG_WARNING, "cannot write the claim: %s", call_err.message);
        m->writing = WRITE_NONE;
        retry_after_store_error(m);
    }
}

static void write_claim(ad_move *m)
{
    act_error err = {0};
    if (claims_read_async(m->host->daemon->store, m->host->name, on_read_for_write, m, &err) < 0) {
        log_move(m, LOG_WARNING, "cannot read the claim: %s", err.message);
        m->writing = WRITE_NONE;
        retry_after_store_error(m);
    }
}

static void start_write(ad_move *m, move_write what)
{
    if (m->writing != WRITE_NONE)
        return;
    m->writing = what;
    m->retries = 0;
    write_claim(m);
}

static void roll_back(ad_move *m, const char *reason, const char *message)
{
    if (m->writing != WRITE_NONE)
        return;
    act_copy_string(m->rollback_reason, sizeof(m->rollback_reason), reason);
    act_copy_string(m->rollback_message, sizeof(m->rollback_message), message ? message : "");
    log_move(m, LOG_WARNING, "failed on this box (%s: %s); rolling back to box %s", reason,
             m->rollback_message, m->from);
    start_write(m, WRITE_ROLLBACK);
}

/* ---- the source ------------------------------------------------------------ */

static void on_checkpointed(ad_host *host, int result, const claim_state *written,
                            const act_error *err, void *userdata);

static void hand_over(ad_host *host)
{
    ad_move *m = host->move;
    if (!m || m->role != MOVE_SOURCE || !m->checkpointed)
        return;
    m->held = false;
    start_write(m, WRITE_MOVING);
}

/* The state is written (or there is none): the claim may hand over. */
static void checkpoint_done(ad_move *m)
{
#ifdef ACTIVATOR_TEST_HOOKS
    m->held = true;
    ad_step_holds_point(m->host, "checkpointed", hand_over);
#else
    hand_over(m->host);
#endif
}

static void checkpoint(ad_host *host)
{
    ad_move *m = host->move;
    if (!m || m->role != MOVE_SOURCE || m->checkpointing || m->checkpointed)
        return;
    m->held = false;
    if (ad_checkpoint_stateless(host)) {
        m->checkpointed = true;
        m->written = (claim_state){0};
        log_move(m, LOG_INFO, "drained; stateless, so no checkpoint to carry");
        checkpoint_done(m);
        return;
    }
    act_error err = {0};
    if (ad_checkpoint_start(host, m->generation, on_checkpointed, m, &err) < 0) {
        roll_back(m, "checkpoint_failed", err.message);
        return;
    }
    m->checkpointing = true;
}

static void on_checkpointed(ad_host *host, int result, const claim_state *written,
                            const act_error *err, void *userdata)
{
    ad_move *m = userdata;
    m->checkpointing = false;
    if (result < 0) {
        roll_back(m, "checkpoint_failed", err ? err->message : "the checkpoint failed");
        return;
    }
    m->written = *written;
    m->checkpointed = true;
    log_move(m, LOG_NOTICE, "checkpoint %s written (%" PRIu64 " bytes)", written->checkpoint,
             written->size);
    ad_publish(host, EV_EVENT_MOVE_CHECKPOINTED, NULL, written->checkpoint);
    checkpoint_done(m);
}

/* Retires whatever runs, then checkpoints what it left. */
static void drain(ad_move *m)
{
    pl_host *pipeline = m->host->pipeline;
    if (m->checkpointed) {
        start_write(m, WRITE_MOVING); /* a write that failed, again */
        return;
    }
    if (m->checkpointing || m->held || m->writing != WRITE_NONE)
        return;
    switch (pl_host_get_state(pipeline)) {
    case PL_HOST_WAKING:
        pl_host_cancel(pipeline, PL_REASON_WRONG_PHASE,
                       "host %s: moving to box %s; this box drains it", m->host->name, m->to);
        return;
    case PL_HOST_SERVING:
        m->generation = m->host->serving ? m->host->serving->number : 0;
        pl_host_park(pipeline, PL_PARK_REQUEST);
        return;
    case PL_HOST_RETIRING:
        return;
    case PL_HOST_PARKED:
    case _PL_HOST_STATE_MAX:
        break;
    }
    /* Not proven stopped: the checkpoint waits for the proof (PROVEN). */
    if (!ad_host_at_rest(m->host))
        return;
#ifdef ACTIVATOR_TEST_HOOKS
    m->held = true;
    ad_step_holds_point(m->host, "drained", checkpoint);
#else
    checkpoint(m->host);
#endif
}

/* ---- the target ------------------------------------------------------------ */

/* Wakes the probe when nothing runs here; its end says what is next. */
static void probe(ad_move *m)
{
    pl_host *pipeline = m->host->pipeline;
    if (m->writing != WRITE_NONE)
        return;
    if (m->timed_out) {
        roll_back(m, m->failure_reason, m->failure_message);
        return;
    }
    if (m->failure_reason[0]) {
        roll_back(m, m->failure_reason, m->failure_message);
        return;
    }
    if (pl_host_get_state(pipeline) != PL_HOST_PARKED || m->host->daemon->stopping)
        return;
    pl_host_wake(pipeline, PL_TRIGGER_CLAIM_CHANGE, NULL, NULL);
}

static int on_step(sd_event_source *source, void *userdata)
{
    ad_move *m = userdata;
    if (m->role == MOVE_SOURCE)
        drain(m);
    else
        probe(m);
    return 0;
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
        schedule(m);
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
    schedule(m);
}

void ad_move_on_transition(ad_host *host, const pl_wake_event *event)
{
    ad_move *m = host->move;
    if (!m)
        return;
    switch (event->type) {
    case PL_WAKE_EVENT_EXECUTED:
        if (m->role == MOVE_TARGET)
            start_deadline(m);
        break;
    case PL_WAKE_EVENT_ADMITTED:
        if (m->role == MOVE_TARGET)
            ad_publish(host, EV_EVENT_MOVE_PROBING, NULL, m->from);
        break;
    case PL_WAKE_EVENT_GAVE_UP:
    case PL_WAKE_EVENT_REFUSED:
    case PL_WAKE_EVENT_CANCELLED:
    case PL_WAKE_EVENT_FAULTED:
        /* The sentence, for the rollback: ENDED carries only the reason. */
        if (m->role == MOVE_TARGET && event->message)
            act_copy_string(m->failure_message, sizeof(m->failure_message), event->message);
        break;
    case PL_WAKE_EVENT_ENDED:
        if (m->role == MOVE_SOURCE) {
            schedule(m);
        } else if (pl_host_get_state(host->pipeline) == PL_HOST_SERVING) {
            /* Published and healthy: the claim says serving here. */
            log_move(m, LOG_NOTICE, "done: it serves here");
            ad_publish(host, EV_EVENT_MOVE_DONE, host->serving, m->from);
            end_move(m);
        } else if (pl_host_get_state(host->pipeline) == PL_HOST_PARKED) {
            probe_ended(m, event->reason);
        }
        break;
    case PL_WAKE_EVENT_PROVEN:
        schedule(m);
        break;
    default:
        break;
    }
}

/* ---- what the claim asks ------------------------------------------------- */

static bool in_role(const claim *c, const char *box, move_role *role)
{
    if (strcmp(c->op.exec, box) != 0)
        return false;
    if (c->op.kind == CLAIM_OP_MOVE && strcmp(c->op.phase, "draining") == 0) {
        *role = MOVE_SOURCE;
        return true;
    }
    if ((c->op.kind == CLAIM_OP_MOVE && strcmp(c->op.phase, "moving") == 0) ||
        c->op.kind == CLAIM_OP_PROBE) {
        *role = MOVE_TARGET;
        return true;
    }
    return false;
}

static ad_move *begin(ad_host *host, const claim *c, move_role role)
{
    ad_move *m = calloc(1, sizeof(*m));
    if (!m || (role == MOVE_TARGET && !ad_host_set_probe_op(host, c->op.id))) {
        free(m);
        act_log(LOG_ERR, "host %s: out of memory; its move %s waits for the next claim", host->name,
                c->op.id);
        return NULL;
    }
    *m = (ad_move){.host = host, .role = role, .generation = c->holder.generation};
    act_copy_string(m->op_id, sizeof(m->op_id), c->op.id);
    act_copy_string(m->from, sizeof(m->from), c->op.from);
    act_copy_string(m->to, sizeof(m->to), c->op.to);
    host->move = m;
    if (role == MOVE_SOURCE) {
        log_move(m, LOG_NOTICE, "draining for box %s: no wake from now on; retiring what runs, "
                                "then a checkpoint", m->to);
        ad_publish(host, EV_EVENT_MOVE_DRAINING, NULL, m->to);
    } else {
        log_move(m, LOG_NOTICE, "box %s drained it; restoring checkpoint %s and probing",
                 m->from, c->state.checkpoint[0] ? c->state.checkpoint : "(none)");
        resume_deadline(m);
    }
    return m;
}

void ad_move_claim_seen(ad_host *host, const claim *c)
{
    assert(host && c);
    const char *box = host->daemon->config.box;
    ad_move *m = host->move;
    move_role role = MOVE_SOURCE;
    bool acts = in_role(c, box, &role);
    if (m && m->role == MOVE_TARGET && c->op.kind == CLAIM_OP_SERVING &&
        strcmp(c->op.id, m->op_id) == 0 && strcmp(c->holder.box, box) == 0 &&
        !c->failure.phase[0] && pl_host_get_state(host->pipeline) == PL_HOST_WAKING)
        return; /* its own publication: the probe's end (healthy or not) decides */
    if (m && (!acts || role != m->role || strcmp(c->op.id, m->op_id) != 0)) {
        /* This box's part is over: handed over, done, rolled back, or
         * replaced by another op. */
        end_move(m);
        m = NULL;
    }
    if (!acts || host->daemon->stopping)
        return;
    if (!m && !(m = begin(host, c, role)))
        return;
    /* A probe waits for the source's release, as an assignment does. */
    if (role == MOVE_TARGET && claim_release_pending(c, box))
        return;
    schedule(m);
}

const char *ad_move_describe(const ad_host *host, char *out, size_t size)
{
    const ad_move *m = host->move;
    if (!m)
        return NULL;
    if (m->role == MOVE_SOURCE)
        snprintf(out, size, "%s for box %s", m->checkpointed ? "handing over" : "draining",
                 m->to);
    else
        snprintf(out, size, "probing from box %s", m->from);
    return out;
}
