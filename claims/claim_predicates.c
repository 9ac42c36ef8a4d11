/* Pure questions about claims: who may act, may a wake proceed, did an
 * admission land as ours. No I/O, so the daemon's decisions are unit-testable
 * with hand-made claims. */
#include "claims/claims.h"

#include <assert.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"

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
    if (claim_release_pending(c, box))
        return act_error_set(err, EAGAIN,
                             "host %s: assigned to box %s, but box %s may still run generation "
                             "%llu; %s waits until %s releases it",
                             c->host, box, c->holder.box,
                             (unsigned long long)c->holder.generation, box, c->holder.box);
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
        /* From moving on, the target (op.exec) may make the move's probe;
         * nobody may wake a draining host, whose source is retiring it. */
        if (probe && strcmp(c->op.phase, "moving") == 0)
            return 0;
        break;
    }
    if (strcmp(c->op.phase, "moving") == 0)
        return act_error_set(err, EPERM, "host %s: op %s is move/moving; only its probe may wake "
                                         "the host on box %s", c->host, c->op.id, c->op.exec);
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
        return act_error_set(err, ESTALE,
                             "host %s: admitted session %llu did not grow past the "
                             "observed %llu",
                             admitted->host, (unsigned long long)admitted->holder.session,
                             (unsigned long long)observed->holder.session);
    /* A move's probe is admitted under the move's op, and stays a probe:
     * anything else in its place is another writer's op. */
    if ((observed->op.kind == CLAIM_OP_MOVE || observed->op.kind == CLAIM_OP_PROBE) &&
        (admitted->op.kind != CLAIM_OP_PROBE || strcmp(admitted->op.id, observed->op.id) != 0))
        return act_error_set(err, ESTALE, "host %s: the probe of op %s was admitted as op %s "
                                          "(%s/%s); another writer got in",
                             admitted->host, observed->op.id, admitted->op.id,
                             claim_op_kind_to_string(admitted->op.kind), admitted->op.phase);
    uint64_t started = claim_admitted_generation(admitted);
    if (started == observed->holder.generation || started == observed->holder.starting_generation)
        return act_error_set(err, ESTALE, "host %s: admitted generation %llu is the observed one; "
                                          "an admission starts a new generation", admitted->host,
                             (unsigned long long)started);
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
           a->holder.generation == b->holder.generation &&
           a->holder.starting_generation == b->holder.starting_generation &&
           strcmp(a->op.id, b->op.id) == 0 &&
           a->op.kind == b->op.kind && strcmp(a->op.phase, b->op.phase) == 0 &&
           strcmp(a->op.exec, b->op.exec) == 0;
}

bool claim_is_landed_write(const claim *sent, const claim *current, const char *incarnation)
{
    if (!sent || !current || !incarnation || current->revision == 0 || !claim_has_holder(sent) ||
        strcmp(sent->holder.incarnation, incarnation) != 0 ||
        strcmp(sent->host, current->host) != 0)
        return false;
    char *sent_json = claim_to_json(sent);
    char *current_json = claim_to_json(current);
    bool same = sent_json && current_json && strcmp(sent_json, current_json) == 0;
    free(sent_json);
    free(current_json);
    return same;
}

/* The parts every admission writes: our holder, a new session, and a
 * generation number no earlier admission used (a swap that never published
 * left its number in starting_generation at most). */
static uint64_t admit_holder(const claim *observed, const char *box, const char *incarnation,
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
    next->holder.stamp_usec = stamp_usec;
    next->holder.starting_generation = 0;
    next->holder.released_usec = 0;
    /* A move's failure (failure.phase set) is the op's record, not an
     * admission's: it stays, so whoever follows the move can tell why it
     * rolled back, until the next op replaces it. */
    if (!observed->failure.phase[0]) {
        next->has_failure = false;
        next->failure = (claim_failure){0};
    }
    snprintf(next->op.exec, sizeof(next->op.exec), "%s", box);
    uint64_t newest = observed->holder.generation;
    if (observed->holder.starting_generation > newest)
        newest = observed->holder.starting_generation;
    return newest + 1;
}

int claim_probe_allows_wake(const claim *c, const char *box, const char *op_id, act_error *err)
{
    assert(c);
    int r = claim_phase_allows_wake(c, box, true, err);
    if (r < 0)
        return r;
    if (!op_id || strcmp(c->op.id, op_id) != 0)
        return act_error_set(err, EPERM, "host %s: this probe is op %s's, the claim's op is %s; "
                                         "a probe runs only under the op that asked for it",
                             c->host, op_id ? op_id : "(none)", c->op.id);
    return 0;
}

void claim_next_admission(const claim *observed, const char *box, const char *incarnation,
                          uint64_t stamp_usec, claim *next)
{
    next->holder.generation = admit_holder(observed, box, incarnation, stamp_usec, next);
    next->holder.handle[0] = '\0';
    /* A move's target admits itself for the probe: the op stays the move's
     * (same id, same two boxes) and becomes a probe, so no other wake fits
     * it until the probe publishes or the move rolls back. */
    if (observed->op.kind == CLAIM_OP_PROBE || observed->op.kind == CLAIM_OP_MOVE) {
        next->op.kind = CLAIM_OP_PROBE;
        snprintf(next->op.phase, sizeof(next->op.phase), "probing");
    } else {
        next->op.kind = CLAIM_OP_SERVING;
        snprintf(next->op.phase, sizeof(next->op.phase), "starting");
    }
}

void claim_next_swap_admission(const claim *observed, const char *box, const char *incarnation,
                               uint64_t stamp_usec, claim *next)
{
    assert(observed);
    if (!claim_names_a_generation(observed)) {
        claim_next_admission(observed, box, incarnation, stamp_usec, next);
        return;
    }
    next->holder.starting_generation = admit_holder(observed, box, incarnation, stamp_usec, next);
}

uint64_t claim_admitted_generation(const claim *c)
{
    assert(c);
    return c->holder.starting_generation ? c->holder.starting_generation : c->holder.generation;
}

/* ---- what the admitting box writes afterwards ------------------------------ */

static void set_phase(claim *c, const char *phase)
{
    snprintf(c->op.phase, sizeof(c->op.phase), "%s", phase);
}

void claim_next_published(const claim *current, const char *handle, claim *next)
{
    assert(current);
    claim_next_serving_again(current, claim_admitted_generation(current), handle, next);
    if (!current->failure.phase[0]) {
        next->has_failure = false;
        next->failure = (claim_failure){0};
    }
    /* A probe that publishes ends its move: the host serves here now. */
    if (current->op.kind == CLAIM_OP_PROBE) {
        next->op.kind = CLAIM_OP_SERVING;
        next->op.from[0] = '\0';
        next->op.to[0] = '\0';
    }
}

void claim_next_serving_again(const claim *current, uint64_t generation, const char *handle,
                              claim *next)
{
    assert(current);
    assert(handle);
    assert(next);
    *next = *current;
    next->holder.generation = generation;
    next->holder.starting_generation = 0;
    snprintf(next->holder.handle, sizeof(next->holder.handle), "%s", handle);
    set_phase(next, "serving");
}

bool claim_release_pending(const claim *c, const char *box)
{
    assert(c);
    /* A move's target waits for the source as an assigned box does; the
     * source writes its release with the CAS to moving, and a forced move
     * takes it as given. */
    bool handing_over = c->op.kind == CLAIM_OP_SERVING ||
                        (c->op.kind == CLAIM_OP_MOVE && strcmp(c->op.phase, "moving") == 0);
    return box && handing_over && c->holder.box[0] &&
           strcmp(c->holder.box, box) != 0 && !c->holder.released_usec &&
           strcmp(c->op.exec, box) == 0;
}

bool claim_release_due(const claim *c, const char *box)
{
    assert(c);
    return box && c->holder.box[0] && strcmp(c->holder.box, box) == 0 &&
           !c->holder.released_usec && !claim_owned_by(c, box);
}

void claim_next_released(const claim *current, uint64_t stamp_usec, claim *next)
{
    assert(current);
    assert(next);
    *next = *current;
    next->holder.released_usec = stamp_usec ? stamp_usec : 1;
    next->holder.handle[0] = '\0';
    next->holder.starting_generation = 0;
}

void claim_next_parked(const claim *current, claim *next)
{
    assert(current);
    assert(next);
    *next = *current;
    next->holder.starting_generation = 0;
    next->holder.handle[0] = '\0';
    set_phase(next, "parked");
}

void claim_next_frozen(const claim *current, claim *next)
{
    assert(current);
    assert(next);
    *next = *current;
    next->holder.starting_generation = 0;
    set_phase(next, "frozen");
}

bool claim_names_a_generation(const claim *c)
{
    assert(c);
    return c->op.kind == CLAIM_OP_SERVING &&
           (strcmp(c->op.phase, "serving") == 0 || strcmp(c->op.phase, "frozen") == 0);
}

void claim_next_failed(const claim *current, const claim_failure *failure, claim *next)
{
    assert(failure);
    claim_next_parked(current, next);
    set_phase(next, "failed");
    next->has_failure = true;
    next->failure = *failure;
}

static void boxes_add(claim_boxes *boxes, const char *box)
{
    if (!box[0])
        return;
    for (size_t i = 0; i < boxes->n; i++)
        if (strcmp(boxes->box[i], box) == 0)
            return;
    assert(boxes->n < CLAIM_BOXES_MAX);
    snprintf(boxes->box[boxes->n++], sizeof(boxes->box[0]), "%s", box);
}

void claim_named_boxes(const claim *c, claim_boxes *out)
{
    assert(c);
    assert(out);
    out->n = 0;
    boxes_add(out, c->holder.box);
    boxes_add(out, c->op.exec);
    boxes_add(out, c->op.from);
    boxes_add(out, c->op.to);
}

bool claim_names_box(const claim *c, const char *box)
{
    assert(c);
    if (!box || !box[0])
        return false;
    return strcmp(c->holder.box, box) == 0 || strcmp(c->op.exec, box) == 0 ||
           strcmp(c->op.from, box) == 0 || strcmp(c->op.to, box) == 0;
}

void claim_boxes_merge(claim_boxes *into, const claim_boxes *more)
{
    assert(into);
    assert(more);
    for (size_t i = 0; i < more->n; i++)
        boxes_add(into, more->box[i]);
}

static bool pins_build(const claim *c, const char *version, const char *digest)
{
    return c->has_pin && strcmp(c->pin.version, version) == 0 && strcmp(c->pin.digest, digest) == 0;
}

bool claim_record_pin_failure(claim *c, const claim_pin *failed, const char *box,
                              uint64_t stamp_usec)
{
    assert(c && failed && box);
    if (!failed->failure_reason[0] || !pins_build(c, failed->version, failed->digest) ||
        claim_pin_failed(c))
        return false;
    claim_pin *pin = &c->pin;
    snprintf(pin->failure_reason, sizeof(pin->failure_reason), "%s", failed->failure_reason);
    act_copy_string(pin->failure_message, sizeof(pin->failure_message), failed->failure_message);
    /* The claim's message is one line whatever the failure's text held. */
    for (char *p = pin->failure_message; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    snprintf(pin->failure_box, sizeof(pin->failure_box), "%s", box);
    pin->failure_usec = stamp_usec;
    return true;
}

bool claim_clear_pin_failure(claim *c, const char *version, const char *digest)
{
    assert(c && version && digest);
    if (!pins_build(c, version, digest) || !claim_pin_failed(c))
        return false;
    c->pin.failure_reason[0] = '\0';
    c->pin.failure_message[0] = '\0';
    c->pin.failure_box[0] = '\0';
    c->pin.failure_usec = 0;
    return true;
}
