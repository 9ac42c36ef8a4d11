#include "activator/control/fleet.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/json_fields.h"
#include "common/cleanup.h"
#include "common/clock.h"

static void refuse(ctrl_fleet_outcome *out, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void refuse(ctrl_fleet_outcome *out, const char *code, const char *fmt, ...)
{
    char message[sizeof(out->error.message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    *out = (ctrl_fleet_outcome){.code = code};
    act_error_set(&out->error, EPERM, "%s", message);
}

bool ctrl_fleet_is_fleet_op(ctrl_op op)
{
    switch (op) {
    case CTRL_OP_CLAIMS:
    case CTRL_OP_BOXES:
    case CTRL_OP_CLAIM_SHOW:
    case CTRL_OP_CLAIM_WAIT:
    case CTRL_OP_CLAIM_ASSIGN:
    case CTRL_OP_CLAIM_RELEASE:
    case CTRL_OP_HOLD:
    case CTRL_OP_UNHOLD:
    case CTRL_OP_UNPIN:
    case CTRL_OP_MOVE:
    case CTRL_OP_MOVE_ABORT:
    case CTRL_OP_BOX_DRAIN:
    case CTRL_OP_BOX_UNDRAIN:
        return true;
    default:
        return false;
    }
}

bool ctrl_fleet_lists_boxes(const ctrl_request *request)
{
    /* A move looks at both boxes' leases, --force included: it is refused
     * while the source's lease is live, since a live source can drain. */
    /* An assignment with --force skips only the lease: a drained box is
     * refused all the same. */
    return request->op == CTRL_OP_CLAIM_ASSIGN || request->op == CTRL_OP_MOVE;
}

/* The edit an op makes; false for an op that edits nothing. */
static bool edit_of(const ctrl_request *request, claim_edit *edit)
{
    *edit = (claim_edit){0};
    switch (request->op) {
    case CTRL_OP_CLAIM_ASSIGN:
        edit->kind = CLAIM_EDIT_ASSIGN;
        snprintf(edit->box, sizeof(edit->box), "%s", request->box);
        /* --force: the operator knows the old box is gone, so neither its
         * lease nor its release is waited for. */
        edit->holder_gone = request->force;
        edit->stamp_usec = act_wallclock_usec();
        return true;
    case CTRL_OP_CLAIM_RELEASE:
        edit->kind = CLAIM_EDIT_RELEASE;
        return true;
    case CTRL_OP_HOLD:
        edit->kind = CLAIM_EDIT_HOLD;
        snprintf(edit->version, sizeof(edit->version), "%s", request->version);
        snprintf(edit->digest, sizeof(edit->digest), "%s", request->held_digest);
        snprintf(edit->source, sizeof(edit->source), "%s", request->held_source);
        return true;
    case CTRL_OP_UNHOLD:
        edit->kind = CLAIM_EDIT_UNHOLD;
        return true;
    case CTRL_OP_UNPIN:
        edit->kind = CLAIM_EDIT_UNPIN;
        return true;
    default:
        return false;
    }
}

/* The claim as claim.show and the edits show it: its body and revision. */
static json_object *claim_body(const claim *c)
{
    _cleanup_free_ char *text = claim_to_json(c);
    json_object *body = text ? json_tokener_parse(text) : NULL;
    if (!body)
        body = json_object_new_object();
    act_json_add_u64(body, "revision", c->revision);
    return body;
}

static json_object *edited_result(const claim *c, bool changed)
{
    json_object *result = json_object_new_object();
    act_json_add_string(result, "host", c->host);
    json_object_object_add(result, "executor",
                           json_object_new_string(c->op.exec[0] ? claim_executor(c) : ""));
    act_json_add_u64(result, "revision", c->revision);
    json_object_object_add(result, "changed", json_object_new_boolean(changed));
    json_object_object_add(result, "claim", claim_body(c));
    return result;
}

unsigned ctrl_fleet_wait_sec(const ctrl_request *request)
{
    return request->wait_sec ? request->wait_sec : CTRL_CLAIM_WAIT_DEFAULT_SEC;
}

int ctrl_fleet_wait_plan(const ctrl_request *request, int found, const claim *current,
                         uint64_t waited_usec, bool last_look, uint64_t *watch_from,
                         ctrl_fleet_outcome *out)
{
    assert(request && current && watch_from && out);
    *out = (ctrl_fleet_outcome){0};
    *watch_from = 0;
    bool changed = found > 0 && current->revision > request->revision;
    if (found <= 0 && request->revision > 0) {
        refuse(out, "no_claim",
               "host %s has no claim: it was deleted after revision %" PRIu64
               " (activatorctl claims lists the hosts that have one)",
               request->host, request->revision);
        return 1;
    }
    if (!changed && !last_look) {
        /* Absent: from now, since what was never written has no revision
         * to watch from (a claim made before the watch starts is seen by
         * the last look). */
        if (found > 0)
            *watch_from =
                (current->revision > request->revision ? current->revision : request->revision) + 1;
        return 0;
    }
    if (found <= 0) {
        refuse(out, "no_claim", "host %s has no claim, and none was written in %u s", request->host,
               ctrl_fleet_wait_sec(request));
        return 1;
    }
    out->result = json_object_new_object();
    act_json_add_string(out->result, "host", current->host);
    json_object_object_add(out->result, "changed", json_object_new_boolean(changed));
    act_json_add_u64(out->result, "waited_ms", waited_usec / 1000);
    json_object_object_add(out->result, "claim", claim_body(current));
    return 1;
}

/* A move's op id: unique, so a probe or a rollback of another move (an
 * earlier one to the same box, aborted and started again) never passes
 * for this one. */
static void new_move_id(char *out, size_t size)
{
    uint64_t draw = 0;
    if (getrandom(&draw, sizeof(draw), GRND_NONBLOCK) != sizeof(draw))
        draw = act_now_usec() ^ act_wallclock_usec();
    snprintf(out, size, "move-%016llx", (unsigned long long)draw);
}

/* move and move.abort: a new move (or the one in flight to the same box,
 * resumed: nothing written, answered with where it stands), or its
 * rollback to the box it leaves. */
static int plan_move(const ctrl_request *request, int found, const claim *current, claim *next,
                     ctrl_fleet_outcome *out)
{
    claim read = found > 0 ? *current : (claim){0};
    act_error why = {0};
    char owner[160];
    claim_describe_owner(&read, owner, sizeof(owner));
    if (request->op == CTRL_OP_MOVE_ABORT) {
        if (found <= 0) {
            refuse(out, "no_claim", "host %s has no claim; there is no move to roll back",
                   request->host);
            return 1;
        }
        char message[200];
        snprintf(message, sizeof(message), "the operator rolled move %s back in phase %s",
                 read.op.id, read.op.phase);
        if (claim_move_rollback(&read, "aborted", message, "", act_wallclock_usec(), next,
                                &why) < 0) {
            refuse(out, "no_move", "host %s: no move is in flight (%s, op %s/%s); nothing was "
                   "changed", request->host, owner, claim_op_kind_to_string(read.op.kind),
                   read.op.phase);
            return 1;
        }
        return 0;
    }
    char id[sizeof(read.op.id)];
    new_move_id(id, sizeof(id));
    int r = claim_move_start(request->host, &read, request->box, id, request->force,
                             act_wallclock_usec(), next, &why);
    if (r < 0) {
        refuse(out, r == -ENOENT ? "no_claim" : "move_refused", "%s", why.message);
        return 1;
    }
    if (r == 1) {
        out->result = edited_result(&read, false);
        return 1;
    }
    return 0;
}

int ctrl_fleet_plan(const ctrl_request *request, int found, const claim *current, claim *next,
                    ctrl_fleet_outcome *out)
{
    assert(request && current && next && out);
    *out = (ctrl_fleet_outcome){0};
    if (request->op == CTRL_OP_CLAIM_SHOW) {
        if (found <= 0) {
            refuse(out, "no_claim", "host %s has no claim", request->host);
            return 1;
        }
        out->result = json_object_new_object();
        act_json_add_string(out->result, "host", current->host);
        json_object_object_add(out->result, "claim", claim_body(current));
        return 1;
    }
    if (request->op == CTRL_OP_MOVE || request->op == CTRL_OP_MOVE_ABORT)
        return plan_move(request, found, current, next, out);
    claim_edit edit;
    if (!edit_of(request, &edit)) {
        refuse(out, "internal", "op %s does not edit a claim", ctrl_op_name(request->op));
        return 1;
    }
    claim read = found > 0 ? *current : (claim){0};
    act_error why = {0};
    int r = claim_apply_edit(request->host, &read, &edit, next, &why);
    if (r < 0) {
        refuse(out, r == -ENOENT ? "no_claim" : "internal", "%s", why.message);
        return 1;
    }
    if (r == 1) {
        out->result = edited_result(&read, false);
        return 1;
    }
    return 0;
}

/* "no record in the claim store", "its lease ran out 12 s ago". */
static void describe_lease(const claims_box *record, char *out, size_t size)
{
    uint64_t now = act_wallclock_usec();
    if (!record)
        snprintf(out, size, "no record in the claim store");
    else if (record->live)
        snprintf(out, size, "its lease is live");
    else if (record->expires_usec && record->expires_usec <= now)
        snprintf(out, size, "its lease ran out %llu s ago",
                 (unsigned long long)(now - record->expires_usec) / 1000000);
    else
        snprintf(out, size, "its lease has expired");
}

/* A box an operator drained takes no new host, by assignment or move,
 * --force or not: 1 with the refusal. */
static int refuse_drained(const ctrl_request *request, const claim *current,
                          const claims_box *record, ctrl_fleet_outcome *out)
{
    if (!record || !record->drained_usec)
        return 0;
    char owner[160], since[40] = "";
    claim_describe_owner(current, owner, sizeof(owner));
    uint64_t now = act_wallclock_usec();
    if (record->drained_usec > 1 && record->drained_usec <= now)
        snprintf(since, sizeof(since), " %llu s ago",
                 (unsigned long long)(now - record->drained_usec) / 1000000);
    refuse(out, "box_drained",
           "host %s: box %s was drained%s and takes no new host; nothing was changed (%s); name "
           "another box, or 'activatorctl undrain %s' first",
           request->host, request->box, since, owner, request->box);
    return 1;
}

/* A move goes to a box whose daemon runs (it must restore and probe), from
 * one whose daemon runs (it must drain) unless --force says that box is
 * gone, which its lease must then say too. */
static int check_move_boxes(const ctrl_request *request, const claim *current,
                            const claims_box *boxes, size_t n, ctrl_fleet_outcome *out)
{
    char owner[160], seen[96];
    claim_describe_owner(current, owner, sizeof(owner));
    const claims_box *target = claims_box_find(boxes, n, request->box);
    if (refuse_drained(request, current, target, out))
        return 1;
    if (!target || !target->live) {
        describe_lease(target, seen, sizeof(seen));
        refuse(out, target ? "box_not_live" : "unknown_box",
               "host %s: box %s %s (%s), so no daemon there could restore and probe it; "
               "nothing was changed (%s); name a box that 'activatorctl boxes' lists as live",
               request->host, request->box, target ? "has no live lease" : "is not known", seen,
               owner);
        return 1;
    }
    const char *source_box = claim_executor(current);
    const claims_box *source = claims_box_find(boxes, n, source_box);
    bool source_live = source && source->live;
    describe_lease(source, seen, sizeof(seen));
    if (request->force && source_live) {
        refuse(out, "source_live",
               "host %s: box %s, which runs it, is alive (%s) and can drain it, so --force "
               "would lose what it wrote since its last checkpoint; nothing was changed (%s); "
               "move without --force",
               request->host, source_box, seen, owner);
        return 1;
    }
    if (!request->force && !source_live) {
        refuse(out, "box_not_live",
               "host %s: box %s, which runs it, has no live lease (%s), so it cannot drain "
               "it; nothing was changed (%s); start activatord there, or move with --force "
               "from the last checkpoint",
               request->host, source_box, seen, owner);
        return 1;
    }
    return 0;
}

int ctrl_fleet_check_box(const ctrl_request *request, const claim *current,
                         const claims_box *boxes, size_t n, ctrl_fleet_outcome *out)
{
    assert(request && current && out);
    *out = (ctrl_fleet_outcome){0};
    if (request->op == CTRL_OP_MOVE)
        return check_move_boxes(request, current, boxes, n, out);
    const claims_box *record = claims_box_find(boxes, n, request->box);
    if (refuse_drained(request, current, record, out))
        return 1;
    if ((record && record->live) || request->force)
        return 0;
    char owner[160], seen[96];
    claim_describe_owner(current, owner, sizeof(owner));
    uint64_t now = act_wallclock_usec();
    if (!record)
        snprintf(seen, sizeof(seen), "no record in the claim store");
    else if (record->expires_usec && record->expires_usec <= now)
        snprintf(seen, sizeof(seen), "its lease ran out %llu s ago",
                 (unsigned long long)(now - record->expires_usec) / 1000000);
    else
        snprintf(seen, sizeof(seen), "its lease has expired");
    refuse(out, "box_not_live",
           "host %s: box %s has no live lease (%s), so no daemon there would run it; the claim "
           "stays as it is (%s); start activatord on %s, or assign with --force",
           request->host, request->box, seen, owner, request->box);
    return 1;
}

static const char *or_none(const char *name)
{
    return name[0] ? name : "none";
}

static bool same_pin(const claim *a, const claim *b)
{
    return a->has_pin == b->has_pin &&
           (!a->has_pin || (strcmp(a->pin.version, b->pin.version) == 0 &&
                            strcmp(a->pin.digest, b->pin.digest) == 0));
}

/* The op on the claim, as an assignment or a release replaces it: the
 * phase is left out, since the holder writes it back after each transition
 * of the same op (its admission names the box it already executes for). A
 * release empties op.exec while claim_executor still names the holder, so
 * both are compared. */
static bool same_op(const claim *a, const claim *b)
{
    return strcmp(a->op.id, b->op.id) == 0 && a->op.kind == b->op.kind &&
           strcmp(a->op.exec, b->op.exec) == 0 &&
           strcmp(claim_executor(a), claim_executor(b)) == 0 &&
           strcmp(a->op.from, b->op.from) == 0 && strcmp(a->op.to, b->op.to) == 0;
}

bool ctrl_fleet_same_decision(const ctrl_request *request, const claim *read, const claim *now,
                              char *why, size_t size)
{
    assert(request && read && now && why && size);
    why[0] = '\0';
    if ((read->revision == 0) != (now->revision == 0)) {
        snprintf(why, size, "the claim was %s", now->revision ? "created" : "deleted");
        return false;
    }
    switch (request->op) {
    case CTRL_OP_UNPIN:
        /* The pin it drops, whatever its failure says now; or none left. */
        if (!now->has_pin || same_pin(read, now))
            return true;
        snprintf(why, size, "its pin is now %s (it was %s)", now->pin.version,
                 read->has_pin ? read->pin.version : "none");
        return false;
    case CTRL_OP_HOLD:
    case CTRL_OP_UNHOLD: {
        /* The hold it replaces, or already the one it makes: another
         * operator's hold is not one to overwrite unseen. */
        const char *makes = request->op == CTRL_OP_HOLD ? request->version : "";
        if (strcmp(now->held, read->held) == 0 || strcmp(now->held, makes) == 0)
            return true;
        snprintf(why, size, "its hold is now %s (it was %s)", or_none(now->held),
                 or_none(read->held));
        return false;
    }
    case CTRL_OP_CLAIM_ASSIGN:
    case CTRL_OP_CLAIM_RELEASE:
        /* The op it ends; a holder's write-back within that op changes
         * nothing the assignment or the release says. */
        if (!same_op(read, now)) {
            snprintf(why, size, "its op is now %s %s/%s on box %s (it was %s %s/%s on box %s)",
                     now->op.id, claim_op_kind_to_string(now->op.kind), now->op.phase,
                     or_none(now->op.exec[0] ? claim_executor(now) : ""), read->op.id,
                     claim_op_kind_to_string(read->op.kind), read->op.phase,
                     or_none(read->op.exec[0] ? claim_executor(read) : ""));
            return false;
        }
        /* --force takes that holder's release as given: not another's. */
        if (request->op == CTRL_OP_CLAIM_ASSIGN && request->force &&
            strcmp(read->holder.box, now->holder.box) != 0) {
            snprintf(why, size,
                     "its holder is now box %s (it was %s), whose release --force would take "
                     "as given",
                     or_none(now->holder.box), or_none(read->holder.box));
            return false;
        }
        return true;
    default:
        snprintf(why, size, "%s goes on only from the claim it read", ctrl_op_name(request->op));
        return false;
    }
}

int ctrl_fleet_written(const ctrl_request *request, int result, uint64_t new_revision,
                       unsigned writes, claim *read, claim *next, const claim *current,
                       const act_error *err, ctrl_fleet_outcome *out)
{
    assert(request && read && next && out);
    *out = (ctrl_fleet_outcome){0};
    if (result == CLAIMS_CHANGED) {
        char owner[160], why[512];
        claim now = current ? *current : (claim){0};
        claim_describe_owner(&now, owner, sizeof(owner));
        if (request->op == CTRL_OP_MOVE || request->op == CTRL_OP_MOVE_ABORT) {
            /* A move's step is fenced by the claim it read: never again. */
            refuse(out, "claim_changed",
                   "host %s: the claim changed after it was read (now %s); nothing was "
                   "written, look at it again and retry",
                   request->host, owner);
            return 1;
        }
        if (!ctrl_fleet_same_decision(request, read, &now, why, sizeof(why))) {
            refuse(out, "claim_changed",
                   "host %s: the claim changed after it was read, and with it what %s decided "
                   "on: %s (now %s); nothing was written; look at it again (activatorctl claim "
                   "show %s) and retry",
                   request->host, ctrl_op_name(request->op), why, owner, request->host);
            return 1;
        }
        if (writes >= CTRL_FLEET_WRITES_MAX) {
            refuse(out, "claim_changed",
                   "host %s: the claim changed between read and write %u times in a row (now "
                   "%s); nothing was written; retry when it is quieter",
                   request->host, writes, owner);
            return 1;
        }
        /* Only what the op did not decide on changed (the daemon wrote the
         * claim back, say): the same op on the claim now there. */
        if (ctrl_fleet_plan(request, now.revision ? 1 : 0, &now, next, out) != 0)
            return 1;
        *read = now;
        return 0;
    }
    if (result < 0) {
        ctrl_fleet_store_error(request, err, out);
        return 1;
    }
    claim written = *next;
    written.revision = new_revision;
    out->result = edited_result(&written, true);
    /* A forced move restores what the last checkpoint holds: say how old. */
    if (request->op == CTRL_OP_MOVE && request->force) {
        uint64_t now = act_wallclock_usec();
        if (written.state.checkpoint[0] && written.state.stamp_usec &&
            written.state.stamp_usec <= now)
            act_json_add_u64(out->result, "checkpoint_age_usec", now - written.state.stamp_usec);
    }
    return 1;
}

void ctrl_fleet_store_error(const ctrl_request *request, const act_error *err,
                            ctrl_fleet_outcome *out)
{
    if (request->host[0])
        refuse(out, "store_error", "host %s: %s", request->host,
               err ? err->message : "the claim store failed");
    else
        refuse(out, "store_error", "%s", err ? err->message : "the claim store failed");
}

json_object *ctrl_fleet_claims_result(const claim *claims, size_t n, ctrl_fleet_version_fn version,
                                      void *userdata)
{
    json_object *list = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        const claim *c = &claims[i];
        json_object *row = json_object_new_object();
        act_json_add_string(row, "host", c->host);
        /* A released claim has no box, whoever ran it last. */
        act_json_add_string(row, "box", c->op.exec[0] ? claim_executor(c) : "");
        act_json_add_string(row, "holder", c->holder.box);
        act_json_add_string(row, "op", claim_op_kind_to_string(c->op.kind));
        act_json_add_string(row, "phase", c->op.phase);
        act_json_add_u64(row, "generation", c->holder.generation);
        act_json_add_u64(row, "session", c->holder.session);
        const char *running = version ? version(c, userdata) : NULL;
        /* What a start runs: the pin, or once it failed, its fallback (none
         * for a failed pin without one: no start runs). */
        const char *runs = running;
        if (c->has_pin)
            runs = claim_pin_failed(c) ? c->pin.fallback_version : c->pin.version;
        act_json_add_string(row, "version", runs);
        act_json_add_string(row, "pin", c->has_pin ? c->pin.version : "");
        if (claim_pin_failed(c)) {
            /* The fleet view shows that every box now runs the fallback. */
            act_json_add_string(row, "pin_failure", c->pin.failure_reason);
            act_json_add_string(row, "pin_failure_message", c->pin.failure_message);
            act_json_add_string(row, "pin_failure_box", c->pin.failure_box);
            act_json_add_string(row, "pin_fallback", c->pin.fallback_version);
        }
        act_json_add_string(row, "held", c->held);
        if (c->holder.stamp_usec)
            act_json_add_u64(row, "stamp_usec", c->holder.stamp_usec);
        act_json_add_u64(row, "revision", c->revision);
        act_json_add_string(row, "handle", c->holder.handle);
        json_object_array_add(list, row);
    }
    json_object *result = json_object_new_object();
    json_object_object_add(result, "claims", list);
    return result;
}

static size_t hosts_on(const claim *claims, size_t n, const char *box)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (claims[i].op.exec[0] && strcmp(claim_executor(&claims[i]), box) == 0)
            count++;
    return count;
}

/* Whether c was taken over from box (and not moved or assigned since). */
static bool taken_from(const claim *c, const char *box)
{
    return strcmp(c->op.id, CLAIM_OP_ID_TAKEOVER) == 0 && strcmp(c->op.from, box) == 0;
}

/* What became of the hosts of a box: those taken over from it, each with
 * the box that took it, and, when the box is not live, the hosts whose
 * claim still names it to run them (no box may wake them: a host without
 * failover waits for the box, an operator's move --force, or an assign). */
static void add_hosts_fate(json_object *row, const claims_box *record, const claim *claims,
                           size_t n_claims)
{
    json_object *taken = json_object_new_array();
    json_object *stranded = json_object_new_array();
    for (size_t i = 0; i < n_claims; i++) {
        const claim *c = &claims[i];
        if (taken_from(c, record->box)) {
            json_object *entry = json_object_new_object();
            act_json_add_string(entry, "host", c->host);
            act_json_add_string(entry, "to", claim_executor(c));
            json_object_array_add(taken, entry);
        } else if (!record->live && c->op.exec[0] && strcmp(claim_executor(c), record->box) == 0) {
            json_object_array_add(stranded, json_object_new_string(c->host));
        }
    }
    if (json_object_array_length(taken))
        json_object_object_add(row, "taken_over", taken);
    else
        json_object_put(taken);
    if (json_object_array_length(stranded))
        json_object_object_add(row, "stranded", stranded);
    else
        json_object_put(stranded);
}

static json_object *box_row(const claims_box *record, const claim *claims, size_t n_claims)
{
    json_object *row = json_object_new_object();
    act_json_add_string(row, "box", record->box);
    json_object_object_add(row, "live", json_object_new_boolean(record->live));
    json_object_object_add(row, "record", json_object_new_boolean(record->lease_ttl_usec != 0));
    act_json_add_string(row, "incarnation", record->incarnation);
    act_json_add_string(row, "version", record->version);
    if (record->started_usec)
        act_json_add_u64(row, "started_usec", record->started_usec);
    act_json_add_string(row, "control_url", record->control_url);
    act_json_add_string(row, "events_url", record->events_url);
    if (record->lease_ttl_usec)
        act_json_add_u64(row, "lease_ttl_usec", record->lease_ttl_usec);
    if (record->lease_id)
        act_json_add_u64(row, "lease", record->lease_id);
    if (record->refreshed_usec)
        act_json_add_u64(row, "refreshed_usec", record->refreshed_usec);
    if (record->expires_usec)
        act_json_add_u64(row, "expires_usec", record->expires_usec);
    if (record->drained_usec)
        act_json_add_u64(row, "drained_usec", record->drained_usec);
    act_json_add_u64(row, "hosts", hosts_on(claims, n_claims, record->box));
    add_hosts_fate(row, record, claims, n_claims);
    return row;
}

json_object *ctrl_fleet_boxes_result(const claims_box *boxes, size_t n, const claim *claims,
                                     size_t n_claims)
{
    /* The records, then a bare dead entry for each box a claim names that
     * has none (as its executor, its holder, or the box a takeover took it
     * from), in one list sorted by box. */
    _cleanup_free_ claims_box *all = calloc(n + 3 * n_claims + 1, sizeof(*all));
    size_t n_all = 0;
    for (size_t i = 0; all && i < n; i++)
        all[n_all++] = boxes[i];
    for (size_t i = 0; all && i < n_claims; i++) {
        const char *named[] = {claims[i].op.exec, claims[i].holder.box,
                               taken_from(&claims[i], claims[i].op.from) ? claims[i].op.from : ""};
        for (size_t k = 0; k < ARRAY_SIZE(named); k++) {
            if (!named[k][0] || claims_box_find(all, n_all, named[k]))
                continue;
            all[n_all] = (claims_box){0};
            snprintf(all[n_all].box, sizeof(all[n_all].box), "%s", named[k]);
            n_all++;
        }
    }
    if (n_all > 1)
        qsort(all, n_all, sizeof(*all), claims_box_compare);
    json_object *list = json_object_new_array();
    for (size_t i = 0; i < n_all; i++)
        json_object_array_add(list, box_row(&all[i], claims, n_claims));
    json_object *result = json_object_new_object();
    json_object_object_add(result, "boxes", list);
    return result;
}

json_object *ctrl_fleet_drain_result(const ctrl_request *request, const claims_box *record)
{
    json_object *result = json_object_new_object();
    act_json_add_string(result, "box", request->box);
    json_object_object_add(result, "drained",
                           json_object_new_boolean(request->op == CTRL_OP_BOX_DRAIN));
    if (record && record->drained_usec)
        act_json_add_u64(result, "drained_usec", record->drained_usec);
    return result;
}
