/* A move's writes on the claim, pure: what the orchestrator, the source and
 * a rollback make of the claim they read, so activatorctl --store, the
 * daemon's control socket and the daemons' own steps make the same claim of
 * the same one. Each is written by compare-and-swap at the revision read,
 * so the revision of each step fences the next. */
#include "claims/claims.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

const char *claim_move_phase(const claim *c)
{
    assert(c);
    if (c->op.kind == CLAIM_OP_MOVE || c->op.kind == CLAIM_OP_PROBE)
        return c->op.phase;
    return NULL;
}

static void set_string(char *out, size_t size, const char *value)
{
    snprintf(out, size, "%s", value ? value : "");
}

int claim_move_start(const char *host, const claim *current, const char *to, const char *op_id,
                     bool force, uint64_t stamp_usec, claim *next, act_error *err)
{
    assert(host && current && to && op_id && next);
    *next = *current;
    char owner[160];
    claim_describe_owner(current, owner, sizeof(owner));
    if (current->revision == 0)
        return act_error_set(err, ENOENT,
                             "host %s has no claim, so no box runs it and nothing can move; "
                             "assign it to a box first (activatorctl claim assign %s BOX)",
                             host, host);
    const char *phase = claim_move_phase(current);
    if (phase) {
        if (strcmp(current->op.to, to) == 0)
            return 1;
        return act_error_set(err, EPERM,
                             "host %s: move %s from %s to %s is in flight (phase %s; %s); "
                             "wait for it, or roll it back with 'activatorctl move --abort %s'",
                             host, current->op.id, current->op.from, current->op.to, phase,
                             owner, host);
    }
    if (!current->op.exec[0])
        return act_error_set(err, EPERM,
                             "host %s is released (%s): no box runs it, so there is nothing to "
                             "move; assign it instead (activatorctl claim assign %s %s)",
                             host, owner, host, to);
    if (current->held[0])
        return act_error_set(err, EPERM,
                             "host %s is held on version %s (%s); a move would start it on %s "
                             "with whatever is staged there, so unhold it first (activatorctl "
                             "unhold %s)",
                             host, current->held, owner, to, host);
    const char *source = claim_executor(current);
    if (strcmp(source, to) == 0)
        return act_error_set(err, EPERM, "host %s already runs on box %s (%s); nothing to move",
                             host, to, owner);

    set_string(next->op.id, sizeof(next->op.id), op_id);
    next->op.kind = CLAIM_OP_MOVE;
    set_string(next->op.from, sizeof(next->op.from), source);
    set_string(next->op.to, sizeof(next->op.to), to);
    next->holder.starting_generation = 0;
    next->has_failure = false;
    next->failure = (claim_failure){0};
    if (!force) {
        set_string(next->op.phase, sizeof(next->op.phase), "draining");
        set_string(next->op.exec, sizeof(next->op.exec), source);
        return 0;
    }
    /* The source cannot drain: its box is gone, and what it ran with it.
     * The operator says so; its release is taken as given, as claim assign
     * --force takes it, and the target restores the last checkpoint. */
    set_string(next->op.phase, sizeof(next->op.phase), "moving");
    set_string(next->op.exec, sizeof(next->op.exec), to);
    next->holder.handle[0] = '\0';
    if (next->holder.box[0] && !next->holder.released_usec)
        next->holder.released_usec = stamp_usec ? stamp_usec : 1;
    return 0;
}

void claim_move_next_moving(const claim *current, const claim_state *written,
                            uint64_t stamp_usec, claim *next)
{
    assert(current && next);
    *next = *current;
    set_string(next->op.phase, sizeof(next->op.phase), "moving");
    set_string(next->op.exec, sizeof(next->op.exec), current->op.to);
    if (written && written->checkpoint[0])
        next->state = *written;
    next->holder.handle[0] = '\0';
    next->holder.starting_generation = 0;
    if (next->holder.box[0] && !next->holder.released_usec)
        next->holder.released_usec = stamp_usec ? stamp_usec : 1;
}

int claim_move_rollback(const claim *current, const char *reason, const char *message,
                        const char *box, uint64_t stamp_usec, claim *next, act_error *err)
{
    assert(current && reason && next);
    const char *phase = claim_move_phase(current);
    if (!phase || !current->op.from[0])
        return act_error_set(err, EINVAL,
                             "host %s: op %s is %s/%s, not a move; there is nothing to roll back",
                             current->host, current->op.id,
                             claim_op_kind_to_string(current->op.kind), current->op.phase);
    *next = *current;
    next->op.kind = CLAIM_OP_SERVING;
    set_string(next->op.phase, sizeof(next->op.phase), CLAIM_PHASE_ASSIGNED);
    set_string(next->op.exec, sizeof(next->op.exec), current->op.from);
    next->op.from[0] = '\0';
    next->op.to[0] = '\0';
    next->holder.handle[0] = '\0';
    next->holder.starting_generation = 0;
    next->has_failure = true;
    next->failure = (claim_failure){.stamp_usec = stamp_usec};
    set_string(next->failure.reason, sizeof(next->failure.reason), reason);
    /* One line, as the codec wants it, cut where it does not fit. */
    set_string(next->failure.message, sizeof(next->failure.message), message);
    for (char *c = next->failure.message; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    set_string(next->failure.phase, sizeof(next->failure.phase), phase);
    set_string(next->failure.box, sizeof(next->failure.box), box);
    return 0;
}
