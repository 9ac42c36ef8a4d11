/* What a move's files share (moves/move.c, moves/source.c, moves/target.c,
 * moves/fence.c): the move's state, its log line, and the next step. The
 * arrows go one way: move.c hands the step and the transitions to the
 * source's part or the target's, and both write the claim through
 * fence.c. Private to those four files. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "activator/daemon/moves/move.h"
#include "common/log.h"

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
    /* move.c's on_step, set when the move begins: the parts below it ask
     * for the step (ad_move_schedule) without calling up into move.c */
    sd_event_handler_t on_step;
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

static inline void ad_move_log(const ad_move *m, int priority, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void ad_move_log(const ad_move *m, int priority, const char *fmt, ...)
{
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    act_log_fields(priority, &(act_log_ctx){.host = m->host->name}, "host %s: move %s: %s",
                   m->host->name, m->op_id, text);
}

/* The next step runs from the loop, never from inside the claim watch or a
 * transition, so it may park, wake or cancel the host. */
static inline void ad_move_schedule(ad_move *m)
{
    if (!m->step && sd_event_add_defer(m->host->daemon->loop, &m->step, m->on_step, m) < 0)
        ad_move_log(m, LOG_ERR, "cannot schedule its next step");
    else if (m->step)
        sd_event_source_set_enabled(m->step, SD_EVENT_ONESHOT);
}

/* moves/source.c: the source's part. drain is its step: it retires
 * whatever runs, then checkpoints what it left and hands over. */
void ad_move_drain(ad_move *m);
void ad_move_source_on_transition(ad_move *m, const pl_wake_event *event);

/* moves/target.c: the target's part. probe is its step: it wakes the
 * probe when nothing runs here, or rolls back a probe that failed. Its
 * on_transition is true when the probe serves: the move is done here. */
void ad_move_probe(ad_move *m);
bool ad_move_target_on_transition(ad_move *m, const pl_wake_event *event);
/* A restarted daemon keeps the deadline probe.json journalled for this op;
 * forget removes the record when this box's part ends. */
void ad_move_resume_deadline(ad_move *m);
void ad_move_forget_probe_record(ad_move *m);

/* moves/fence.c: the move's writes on the claim, each a compare-and-swap
 * at the revision read. Neither starts while another write is in flight. */
/* The source drained: draining -> moving, naming m->written. */
void ad_move_write_moving(ad_move *m);
/* The move failed on this box: back to the source, with why. */
void ad_move_roll_back(ad_move *m, const char *reason, const char *message);
