/* What the claim asks of this box in a move, and the move's state: a claim
 * seen begins this box's part (the source's, moves/source.c, or the
 * target's, moves/target.c) or ends it; the step and the host's
 * transitions go to that part; status describes it. The parts write the
 * claim through moves/fence.c. */
#include "activator/daemon/moves/move.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/moves/checkpoints.h"
#include "activator/daemon/moves/internal.h"
#include "common/text.h"

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
        ad_move_forget_probe_record(m);
    move_free(m);
}

/* ---- this box's part: its step and the host's transitions ------------------ */

/* The step, run from the loop (ad_move_schedule): this box's part. */
static int on_step(sd_event_source *source, void *userdata)
{
    ad_move *m = userdata;
    if (m->role == MOVE_SOURCE)
        ad_move_drain(m);
    else
        ad_move_probe(m);
    return 0;
}

void ad_move_on_transition(ad_host *host, const pl_wake_event *event)
{
    ad_move *m = host->move;
    if (!m)
        return;
    if (m->role == MOVE_SOURCE)
        ad_move_source_on_transition(m, event);
    else if (ad_move_target_on_transition(m, event))
        end_move(m); /* the probe serves: the move is done */
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
    m->on_step = on_step;
    act_copy_string(m->op_id, sizeof(m->op_id), c->op.id);
    act_copy_string(m->from, sizeof(m->from), c->op.from);
    act_copy_string(m->to, sizeof(m->to), c->op.to);
    host->move = m;
    if (role == MOVE_SOURCE) {
        ad_move_log(m, LOG_NOTICE,
                    "draining for box %s: no wake from now on; retiring what runs, "
                    "then a checkpoint",
                    m->to);
        ad_publish(host, EV_EVENT_MOVE_DRAINING, NULL, m->to);
    } else {
        ad_move_log(m, LOG_NOTICE, "box %s drained it; restoring checkpoint %s and probing",
                    m->from, c->state.checkpoint[0] ? c->state.checkpoint : "(none)");
        ad_move_resume_deadline(m);
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
    ad_move_schedule(m);
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
