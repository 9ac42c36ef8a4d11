/* What an operator's command does to a claim: pure, so activatorctl on a
 * workstation and the daemon's control socket make the same claim of the
 * same one, and a refusal reads the same from both. */
#include "claims/claims.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* The op id each edit writes, so a reader of the claim sees who set it. */
static const char *const edit_op_ids[] = {
    [CLAIM_EDIT_ASSIGN] = "assign",
    [CLAIM_EDIT_RELEASE] = "release",
};

int claim_apply_edit(const char *host, const claim *current, const claim_edit *edit, claim *next,
                     act_error *err)
{
    assert(host);
    assert(current);
    assert(edit);
    assert(next);
    bool exists = current->revision != 0;
    *next = exists ? *current : (claim){0};
    snprintf(next->host, sizeof(next->host), "%s", host);
    if (!exists && edit->kind != CLAIM_EDIT_ASSIGN)
        return act_error_set(err, ENOENT,
                             "host %s has no claim; assign it to a box first (activatorctl "
                             "claim assign %s BOX)",
                             host, host);
    switch (edit->kind) {
    case CLAIM_EDIT_ASSIGN:
    case CLAIM_EDIT_RELEASE:
        /* A fresh serving op: the one before it (a move, a probe) is over.
         * The holder stays for the record of who ran the host last, but
         * what belonged to its admission goes with that op: the admission
         * can write nothing back once the op changed (claim_same_admission),
         * so a swap's starting generation would never be cleared, and a
         * failure says why an admission did not serve, not why the host
         * was assigned or released. */
        snprintf(next->op.id, sizeof(next->op.id), "%s", edit_op_ids[edit->kind]);
        next->op.kind = CLAIM_OP_SERVING;
        next->op.from[0] = next->op.to[0] = '\0';
        next->holder.starting_generation = 0;
        next->has_failure = false;
        next->failure = (claim_failure){0};
        if (edit->kind == CLAIM_EDIT_ASSIGN) {
            snprintf(next->op.phase, sizeof(next->op.phase), CLAIM_PHASE_ASSIGNED);
            snprintf(next->op.exec, sizeof(next->op.exec), "%s", edit->box);
            if (edit->taken_from[0]) {
                snprintf(next->op.id, sizeof(next->op.id), "%s", CLAIM_OP_ID_TAKEOVER);
                snprintf(next->op.from, sizeof(next->op.from), "%s", edit->taken_from);
            }
            if (edit->holder_gone && claim_release_pending(next, edit->box)) {
                claim released;
                claim_next_released(next, edit->stamp_usec, &released);
                *next = released;
            }
        } else {
            snprintf(next->op.phase, sizeof(next->op.phase), "parked");
            next->op.exec[0] = '\0';
        }
        return 0;
    case CLAIM_EDIT_HOLD:
        if (strcmp(current->held, edit->version) == 0 &&
            strcmp(current->held_digest, edit->digest) == 0 &&
            strcmp(current->held_source, edit->source) == 0)
            return 1;
        snprintf(next->held, sizeof(next->held), "%s", edit->version);
        snprintf(next->held_digest, sizeof(next->held_digest), "%s", edit->digest);
        snprintf(next->held_source, sizeof(next->held_source), "%s", edit->source);
        return 0;
    case CLAIM_EDIT_UNHOLD:
        if (!current->held[0])
            return 1;
        next->held[0] = next->held_digest[0] = next->held_source[0] = '\0';
        return 0;
    case CLAIM_EDIT_UNPIN:
        if (!current->has_pin)
            return 1;
        next->has_pin = false;
        memset(&next->pin, 0, sizeof(next->pin));
        return 0;
    }
    return act_error_set(err, EINVAL, "host %s: claim edit %d is not known", host,
                         (int)edit->kind);
}

void claim_describe_owner(const claim *c, char *out, size_t size)
{
    assert(c);
    assert(out);
    const char *executor = claim_executor(c);
    if (c->revision == 0)
        snprintf(out, size, "no claim");
    else if (!c->op.exec[0])
        snprintf(out, size, "revision %llu, released", (unsigned long long)c->revision);
    else if (claim_has_holder(c) && strcmp(c->holder.box, executor) != 0)
        snprintf(out, size, "revision %llu, box %s (last run by %s)",
                 (unsigned long long)c->revision, executor, c->holder.box);
    else
        snprintf(out, size, "revision %llu, box %s", (unsigned long long)c->revision, executor);
}
