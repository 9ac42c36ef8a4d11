/* A move's writes on the claim, and what fences a move.
 *
 * Three things fence a move. Every write here (the source's move/moving,
 * either box's rollback) is a compare-and-swap at the revision just read,
 * made only while the claim read is still this move's: a step that lost to
 * another writer (an abort, another box) changes nothing. The claim's
 * phases refuse wakes: nobody wakes a draining host, and from moving on
 * only the target's probe may (claim_phase_allows_wake in
 * claims/claim_predicates.c, over the phases claims/claim_move.c writes).
 * And the probe is admitted only under the move's op id: move.c gives the
 * host that op when the target's part begins (host->probe_op), and the
 * wake admits no other (claim_probe_allows_wake, from wake/ops.c).
 *
 * A CAS that lost to an unrelated write (a hold, a pin) is made again on
 * the claim as it is now; a write the store did not answer is made again
 * by the step, after a delay. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/moves/internal.h"
#include "common/clock.h"
#include "common/text.h"

/* A CAS that lost to an unrelated write (a hold, a pin) is tried again on
 * the claim as it is now, this many times. */
#define WRITE_RETRIES 5

/* A write the store did not answer is tried again after 100 ms doubling to
 * 5 s: a store that times out once while its watch goes on brings no claim
 * that would make the step again, and the move would wait for good. */
#define STORE_RETRY_FIRST_USEC (100 * 1000ull)
#define STORE_RETRY_MAX_USEC (5 * 1000 * 1000ull)

static void write_claim(ad_move *m);

static int on_store_retry(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_move *m = userdata;
    m->store_retry_timer = sd_event_source_disable_unref(m->store_retry_timer);
    ad_move_schedule(m);
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
        ad_move_log(m, LOG_ERR,
                    "cannot arm the retry of its claim write; the next claim brings it");
    else
        ad_move_log(m, LOG_INFO, "trying the claim write again in %" PRIu64 " ms",
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
        ad_move_log(m, LOG_WARNING, "cannot write %s to the claim: %s",
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
        ad_move_log(m, LOG_NOTICE,
                    "drained: box %s may restore and probe it (revision %" PRIu64 ")", m->to,
                    new_revision);
        ad_publish(m->host, EV_EVENT_MOVE_MOVING, NULL, m->to);
    } else {
        ad_move_log(m, LOG_NOTICE, "rolled back to box %s: %s (revision %" PRIu64 ")", m->from,
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
        ad_move_log(m, LOG_WARNING, "cannot read the claim to write it: %s",
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
        ad_move_log(m, LOG_INFO, "the claim went on without it (op %s, %s/%s); nothing written",
                    c->op.id, claim_op_kind_to_string(c->op.kind), c->op.phase);
        m->writing = WRITE_NONE;
        return;
    }
    act_error call_err = {0};
    if (claims_cas_async(store, m->host->name, c->revision, &next, on_written, m, &call_err) < 0) {
        ad_move_log(m, LOG_WARNING, "cannot write the claim: %s", call_err.message);
        m->writing = WRITE_NONE;
        retry_after_store_error(m);
    }
}

static void write_claim(ad_move *m)
{
    act_error err = {0};
    if (claims_read_async(m->host->daemon->store, m->host->name, on_read_for_write, m, &err) < 0) {
        ad_move_log(m, LOG_WARNING, "cannot read the claim: %s", err.message);
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

void ad_move_write_moving(ad_move *m)
{
    start_write(m, WRITE_MOVING);
}

void ad_move_roll_back(ad_move *m, const char *reason, const char *message)
{
    if (m->writing != WRITE_NONE)
        return;
    act_copy_string(m->rollback_reason, sizeof(m->rollback_reason), reason);
    act_copy_string(m->rollback_message, sizeof(m->rollback_message), message ? message : "");
    ad_move_log(m, LOG_WARNING, "failed on this box (%s: %s); rolling back to box %s", reason,
                m->rollback_message, m->from);
    start_write(m, WRITE_ROLLBACK);
}
