/* A move's source (op.from, exec in move/draining): it admits no wake (the
 * phase refuses them), retires whatever runs with proof, writes a
 * checkpoint of the state directory (none for State=none), then hands over
 * with one CAS to move/moving (moves/fence.c). A checkpoint that fails
 * rolls the move back. A daemon that died meanwhile drains and checkpoints
 * again. */
#include <inttypes.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/moves/checkpoints.h"
#include "activator/daemon/moves/internal.h"
#ifdef ACTIVATOR_TEST_HOOKS
#include "activator/daemon/host/step_holds.h"
#endif

static void on_checkpointed(ad_host *host, int result, const claim_state *written,
                            const act_error *err, void *userdata);

static void hand_over(ad_host *host)
{
    ad_move *m = host->move;
    if (!m || m->role != MOVE_SOURCE || !m->checkpointed)
        return;
    m->held = false;
    ad_move_write_moving(m);
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
        ad_move_log(m, LOG_INFO, "drained; stateless, so no checkpoint to carry");
        checkpoint_done(m);
        return;
    }
    act_error err = {0};
    if (ad_checkpoint_start(host, m->generation, on_checkpointed, m, &err) < 0) {
        ad_move_roll_back(m, "checkpoint_failed", err.message);
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
        ad_move_roll_back(m, "checkpoint_failed", err ? err->message : "the checkpoint failed");
        return;
    }
    m->written = *written;
    m->checkpointed = true;
    ad_move_log(m, LOG_NOTICE, "checkpoint %s written (%" PRIu64 " bytes)", written->checkpoint,
                written->size);
    ad_publish(host, EV_EVENT_MOVE_CHECKPOINTED, NULL, written->checkpoint);
    checkpoint_done(m);
}

/* Retires whatever runs, then checkpoints what it left. */
void ad_move_drain(ad_move *m)
{
    pl_host *pipeline = m->host->pipeline;
    if (m->checkpointed) {
        ad_move_write_moving(m); /* a write that failed, again */
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

/* A wake or a retirement that ended, or the proof that what ran stopped:
 * the drain goes on. */
void ad_move_source_on_transition(ad_move *m, const pl_wake_event *event)
{
    if (event->type == PL_WAKE_EVENT_ENDED || event->type == PL_WAKE_EVENT_PROVEN)
        ad_move_schedule(m);
}
