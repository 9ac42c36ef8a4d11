/* Pure questions about claims: who may act, may a wake proceed, did an
 * admission land as ours. No I/O, so the daemon's decisions are unit-testable
 * with hand-made claims. */
#include "claims/claims.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

const char *claim_executor(const claim *c)
{
    assert(c);
    /* Once a box is admitted to serve, the holder is the one running it; the
     * op's exec may lag behind (an orchestrator sets exec, the box sets the
     * holder), and the running box is what fencing must protect. An
     * assignment is the exception: it is an operator naming the box that
     * runs the host from now on, so its exec wins over a holder that only
     * ran it last; the old holder then reads a claim that is not its own
     * and retires, and the new box may admit itself. */
    if (c->op.kind == CLAIM_OP_SERVING && claim_has_holder(c) &&
        strcmp(c->op.phase, CLAIM_PHASE_ASSIGNED) != 0)
        return c->holder.box;
    return c->op.exec;
}

bool claim_owned_by(const claim *c, const char *box)
{
    assert(c);
    if (!box || box[0] == '\0' || c->op.exec[0] == '\0')
        return false;
    return strcmp(claim_executor(c), box) == 0;
}

int claim_phase_allows_wake(const claim *c, const char *box, bool probe, act_error *err)
{
    assert(c);
    const char *kind = claim_op_kind_to_string(c->op.kind);
    if (c->op.exec[0] == '\0')
        return act_error_set(err, EPERM, "host %s: claim is released (op.exec is empty); no box "
                                         "may wake it until it is assigned again", c->host);
    if (!claim_owned_by(c, box))
        return act_error_set(err, EPERM, "host %s: claim names box %s as executor, this box is %s",
                             c->host, claim_executor(c), box ? box : "(none)");
    if (!kind || !claim_phase_is_valid(c->op.kind, c->op.phase))
        return act_error_set(err, EPERM, "host %s: op phase \"%.31s\" is not known; refusing to "
                                         "wake", c->host, c->op.phase);
    switch (c->op.kind) {
    case CLAIM_OP_SERVING:
    case CLAIM_OP_HOLD:
        if (!probe)
            return 0;
        return act_error_set(err, EPERM, "host %s: op %s is %s/%s, not a probe; a probe wake "
                                         "needs a probe op", c->host, c->op.id, kind, c->op.phase);
    case CLAIM_OP_PROBE:
        if (probe)
            return 0;
        return act_error_set(err, EPERM, "host %s: op %s is probing; only its probe may wake the "
                                         "host", c->host, c->op.id);
    case CLAIM_OP_MOVE:
        break;
    }
    return act_error_set(err, EPERM, "host %s: op %s is %s/%s and does not allow a wake; wait for "
                                     "the move to finish", c->host, c->op.id, kind, c->op.phase);
}

int claim_admission_ok(const claim *observed, const claim *admitted, const char *incarnation,
                       act_error *err)
{
    assert(observed);
    assert(admitted);
    if (strcmp(observed->host, admitted->host) != 0)
        return act_error_set(err, EINVAL, "admission check compares host %s with host %s",
                             observed->host, admitted->host);
    if (!incarnation || strcmp(admitted->holder.incarnation, incarnation) != 0)
        return act_error_set(err, ESTALE, "host %s: admitted claim names incarnation %s, ours is "
                                          "%s; another daemon admitted itself",
                             admitted->host, admitted->holder.incarnation,
                             incarnation ? incarnation : "(none)");
    if (admitted->holder.session <= observed->holder.session)
        return act_error_set(err, ESTALE, "host %s: admitted session %llu did not grow past the "
                                          "observed %llu", admitted->host,
                             (unsigned long long)admitted->holder.session,
                             (unsigned long long)observed->holder.session);
    if (admitted->holder.generation == observed->holder.generation)
        return act_error_set(err, ESTALE, "host %s: admitted generation %llu is the observed one; "
                                          "an admission starts a new generation", admitted->host,
                             (unsigned long long)admitted->holder.generation);
    return 0;
}

bool claim_same_admission(const claim *a, const claim *b)
{
    if (!a || !b || a->revision == 0 || b->revision == 0)
        return false;
    if (!claim_has_holder(a) || !claim_has_holder(b))
        return false;
    return strcmp(a->host, b->host) == 0 &&
           strcmp(a->holder.incarnation, b->holder.incarnation) == 0 &&
           a->holder.stamp_usec == b->holder.stamp_usec && a->holder.session == b->holder.session &&
           a->holder.generation == b->holder.generation && strcmp(a->op.id, b->op.id) == 0 &&
           a->op.kind == b->op.kind && strcmp(a->op.phase, b->op.phase) == 0 &&
           strcmp(a->op.exec, b->op.exec) == 0;
}

void claim_next_admission(const claim *observed, const char *box, const char *incarnation,
                          uint64_t stamp_usec, claim *next)
{
    assert(observed);
    assert(box);
    assert(incarnation);
    assert(next);
    *next = *observed;
    snprintf(next->holder.box, sizeof(next->holder.box), "%s", box);
    snprintf(next->holder.incarnation, sizeof(next->holder.incarnation), "%s", incarnation);
    next->holder.session = observed->holder.session + 1;
    next->holder.generation = observed->holder.generation + 1;
    next->holder.stamp_usec = stamp_usec;
    next->holder.handle[0] = '\0';
    snprintf(next->op.exec, sizeof(next->op.exec), "%s", box);
    if (observed->op.kind == CLAIM_OP_PROBE) {
        snprintf(next->op.phase, sizeof(next->op.phase), "probing");
    } else {
        next->op.kind = CLAIM_OP_SERVING;
        snprintf(next->op.phase, sizeof(next->op.phase), "starting");
    }
}
