/* The claim's JSON body, strict in both directions.
 *
 * Body layout (host and revision live in the store key and the store):
 *   {
 *     "holder": {"box": "b1", "incarnation": "9f..", "session": 3, "generation": 7,
 *                "stamp_usec": 1700000000000000, "handle": "/run/...",
 *                "starting_generation": 8},       optional; starting_generation too
 *     "op":     {"id": "op-12", "kind": "serving", "phase": "serving", "exec": "b1",
 *                "from": "b1", "to": "b2"},              from and to optional (moves)
 *     "pin":    {"version": "v2", "digest": "<sha256 hex>",
 *                "failure_reason": "", "failure_message": "",
 *                "failure_box": "b1", "failure_usec": 1700000000000000,
 *                "fallback_version": "v1",
 *                "fallback_digest": "<sha256 hex>",
 *                "source": "docker://r/app@sha256:<hex>"},  optional; the last five too
 *     "held":   "v1",                                                     optional
 *     "held_digest": "<sha256 hex>",                            optional, with held
 *     "held_source": "docker://r/app@sha256:<hex>",        optional, with held_digest
 *     "state":  {"checkpoint": "...", "sha256": "<hex>", "size": 1024,
 *                "generation": 7, "box": "b1", "stamp_usec": ...},  optional; all but
 *                                                                   checkpoint too
 *     "failure": {"reason": "crashed", "message": "...", "attempts": 2,
 *                 "stamp_usec": 1700000000000000,
 *                 "phase": "probing", "box": "b2"}         optional; phase, box too
 *     "failover": {"boxes": ["b2", "b3"]}      optional (failover on); boxes may be []
 *   }
 * starting_generation is written only when set, so a claim outside a swap
 * reads as it always did.
 * Unknown fields are refused: a box must not act on a claim it only partly
 * understands, because the part it skipped may be the part that fences it. */
#include "claims/claims.h"
#include "claims/store_internal.h"

#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup_json.h"
#include "common/json_fields.h"

/* Refuses members outside allowed so a typo ("sesion") is an error, not a
 * silently missing value. */
static int check_known(const act_json_reader *rd, json_object *obj, const char *const *allowed)
{
    json_object_object_foreach(obj, key, value)
    {
        (void)value;
        bool known = false;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(*a, key) == 0;
        if (!known) {
            char shown[41];
            snprintf(shown, sizeof(shown), "%s", key);
            return act_json_field_error(rd, shown, "is not a claim field");
        }
    }
    return 0;
}

/* The reader of the object nested under parent. */
static act_json_reader nested(const act_json_reader *rd, const char *parent)
{
    act_json_reader in = *rd;
    in.parent = parent;
    return in;
}

static int parse_holder(const act_json_reader *outer, json_object *obj, claim_holder *h)
{
    static const char *const allowed[] = {
        "box", "incarnation", "session", "generation", "stamp_usec", "handle",
        "starting_generation", "released_usec", NULL};
    act_json_reader in = nested(outer, "holder");
    act_json_reader *rd = &in;
    int r = check_known(rd, obj, allowed);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "box", ACT_JSON_REQUIRED, h->box, sizeof(h->box));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "incarnation", ACT_JSON_REQUIRED, h->incarnation,
                                sizeof(h->incarnation));
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "session", ACT_JSON_REQUIRED, &h->session);
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "generation", ACT_JSON_REQUIRED, &h->generation);
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "stamp_usec", ACT_JSON_REQUIRED, &h->stamp_usec);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "handle", ACT_JSON_OPTIONAL, h->handle, sizeof(h->handle));
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "starting_generation", ACT_JSON_OPTIONAL,
                             &h->starting_generation);
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "released_usec", ACT_JSON_OPTIONAL, &h->released_usec);
    return r;
}

static int parse_op(const act_json_reader *outer, json_object *obj, claim_op *op)
{
    static const char *const allowed[] = {"id", "kind", "phase", "exec", "from", "to", NULL};
    char kind[32] = "";
    act_json_reader in = nested(outer, "op");
    act_json_reader *rd = &in;
    int r = check_known(rd, obj, allowed);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "id", ACT_JSON_REQUIRED, op->id, sizeof(op->id));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "kind", ACT_JSON_REQUIRED, kind, sizeof(kind));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "phase", ACT_JSON_REQUIRED, op->phase, sizeof(op->phase));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "exec", ACT_JSON_REQUIRED, op->exec, sizeof(op->exec));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "from", ACT_JSON_OPTIONAL, op->from, sizeof(op->from));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "to", ACT_JSON_OPTIONAL, op->to, sizeof(op->to));
    if (r < 0)
        return r;
    if (claim_op_kind_from_string(kind, &op->kind) < 0)
        return act_json_field_error(rd, "kind", "is not one of serving, hold, move, probe");
    return 0;
}

static int parse_pin(const act_json_reader *outer, json_object *obj, claim_pin *pin)
{
    static const char *const allowed[] = {"version",
                                          "digest",
                                          "failure_reason",
                                          "failure_message",
                                          "failure_box",
                                          "failure_usec",
                                          "fallback_version",
                                          "fallback_digest",
                                          "fallback_source",
                                          "source",
                                          NULL};
    act_json_reader in = nested(outer, "pin");
    act_json_reader *rd = &in;
    int r = check_known(rd, obj, allowed);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "version", ACT_JSON_REQUIRED, pin->version,
                                sizeof(pin->version));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "digest", ACT_JSON_REQUIRED, pin->digest,
                                sizeof(pin->digest));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "failure_reason", ACT_JSON_OPTIONAL, pin->failure_reason,
                                sizeof(pin->failure_reason));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "failure_message", ACT_JSON_OPTIONAL, pin->failure_message,
                                sizeof(pin->failure_message));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "failure_box", ACT_JSON_OPTIONAL, pin->failure_box,
                                sizeof(pin->failure_box));
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "failure_usec", ACT_JSON_OPTIONAL, &pin->failure_usec);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "fallback_version", ACT_JSON_OPTIONAL,
                                pin->fallback_version, sizeof(pin->fallback_version));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "fallback_digest", ACT_JSON_OPTIONAL, pin->fallback_digest,
                                sizeof(pin->fallback_digest));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "fallback_source", ACT_JSON_OPTIONAL, pin->fallback_source,
                                sizeof(pin->fallback_source));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "source", ACT_JSON_OPTIONAL, pin->source,
                                sizeof(pin->source));
    return r;
}

static int parse_failure(const act_json_reader *outer, json_object *obj, claim_failure *failure)
{
    static const char *const allowed[] = {"reason",     "message", "attempts",
                                          "stamp_usec", "phase",   "box",      NULL};
    act_json_reader in = nested(outer, "failure");
    act_json_reader *rd = &in;
    int r = check_known(rd, obj, allowed);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "reason", ACT_JSON_REQUIRED, failure->reason,
                                sizeof(failure->reason));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "message", ACT_JSON_REQUIRED, failure->message,
                                sizeof(failure->message));
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "attempts", ACT_JSON_REQUIRED, &failure->attempts);
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "stamp_usec", ACT_JSON_REQUIRED, &failure->stamp_usec);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "phase", ACT_JSON_OPTIONAL, failure->phase,
                                sizeof(failure->phase));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "box", ACT_JSON_OPTIONAL, failure->box,
                                sizeof(failure->box));
    return r;
}

static int parse_state(const act_json_reader *outer, json_object *obj, claim_state *state)
{
    static const char *const allowed[] = {"checkpoint",    "sha256",       "size",
                                          "generation",    "box",          "stamp_usec",
                                          "build_version", "build_digest", NULL};
    act_json_reader in = nested(outer, "state");
    act_json_reader *rd = &in;
    int r = check_known(rd, obj, allowed);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "checkpoint", ACT_JSON_REQUIRED, state->checkpoint,
                                sizeof(state->checkpoint));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "sha256", ACT_JSON_OPTIONAL, state->sha256,
                                sizeof(state->sha256));
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "size", ACT_JSON_OPTIONAL, &state->size);
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "generation", ACT_JSON_OPTIONAL, &state->generation);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "box", ACT_JSON_OPTIONAL, state->box, sizeof(state->box));
    if (r >= 0)
        r = act_json_get_u64(rd, obj, "stamp_usec", ACT_JSON_OPTIONAL, &state->stamp_usec);
    if (r >= 0)
        r = act_json_get_string(rd, obj, "build_version", ACT_JSON_OPTIONAL, state->build_version,
                                sizeof(state->build_version));
    if (r >= 0)
        r = act_json_get_string(rd, obj, "build_digest", ACT_JSON_OPTIONAL, state->build_digest,
                                sizeof(state->build_digest));
    return r;
}

static int parse_failover(const act_json_reader *outer, json_object *obj,
                          claim_failover *failover)
{
    static const char *const allowed[] = {"boxes", NULL};
    act_json_reader in = nested(outer, "failover");
    act_json_reader *rd = &in;
    json_object *boxes = NULL;
    int r = check_known(rd, obj, allowed);
    if (r >= 0)
        r = act_json_get_member(rd, obj, "boxes", json_type_array, ACT_JSON_REQUIRED, &boxes);
    size_t n = r >= 0 ? json_object_array_length(boxes) : 0;
    if (r >= 0 && n > CLAIM_FAILOVER_BOXES_MAX)
        r = act_json_field_error(rd, "boxes", "names %zu boxes, more than %d", n,
                                 CLAIM_FAILOVER_BOXES_MAX);
    for (size_t i = 0; r >= 0 && i < n; i++) {
        json_object *box = json_object_array_get_idx(boxes, i);
        const char *name = json_object_is_type(box, json_type_string) ? json_object_get_string(box)
                                                                       : NULL;
        if (!name || strlen(name) >= sizeof(failover->boxes[0]))
            r = act_json_field_error(rd, "boxes", "item %zu is not a box name", i);
        else
            snprintf(failover->boxes[failover->n_boxes++], sizeof(failover->boxes[0]), "%s", name);
    }
    return r;
}

static int parse_body(const act_json_reader *rd, json_object *root, claim *c)
{
    static const char *const allowed[] = {"holder", "op",          "pin",   "held",
                                          "held_digest", "held_source", "state", "failure",
                                          "failover", NULL};
    const json_type object = json_type_object;
    json_object *holder = NULL, *op = NULL, *pin = NULL, *state = NULL, *failure = NULL;
    int r = check_known(rd, root, allowed);
    if (r >= 0)
        r = act_json_get_member(rd, root, "holder", object, ACT_JSON_OPTIONAL, &holder);
    if (r >= 0 && holder)
        r = parse_holder(rd, holder, &c->holder);
    if (r >= 0)
        r = act_json_get_member(rd, root, "op", object, ACT_JSON_REQUIRED, &op);
    if (r >= 0)
        r = parse_op(rd, op, &c->op);
    if (r >= 0)
        r = act_json_get_member(rd, root, "pin", object, ACT_JSON_OPTIONAL, &pin);
    if (r >= 0 && pin) {
        c->has_pin = true;
        r = parse_pin(rd, pin, &c->pin);
    }
    if (r >= 0)
        r = act_json_get_string(rd, root, "held", ACT_JSON_OPTIONAL, c->held, sizeof(c->held));
    if (r >= 0)
        r = act_json_get_string(rd, root, "held_digest", ACT_JSON_OPTIONAL, c->held_digest,
                                sizeof(c->held_digest));
    if (r >= 0)
        r = act_json_get_string(rd, root, "held_source", ACT_JSON_OPTIONAL, c->held_source,
                                sizeof(c->held_source));
    if (r >= 0)
        r = act_json_get_member(rd, root, "state", object, ACT_JSON_OPTIONAL, &state);
    if (r >= 0 && state)
        r = parse_state(rd, state, &c->state);
    if (r >= 0)
        r = act_json_get_member(rd, root, "failure", object, ACT_JSON_OPTIONAL, &failure);
    if (r >= 0 && failure) {
        c->has_failure = true;
        r = parse_failure(rd, failure, &c->failure);
    }
    json_object *failover = NULL;
    if (r >= 0)
        r = act_json_get_member(rd, root, "failover", object, ACT_JSON_OPTIONAL, &failover);
    if (r >= 0 && failover) {
        c->has_failover = true;
        r = parse_failover(rd, failover, &c->failover);
    }
    return r < 0 ? r : 0;
}

int claim_from_json(const char *host, const char *text, size_t len, claim *out, act_error *err)
{
    assert(text || len == 0);
    assert(out);
    memset(out, 0, sizeof(*out));
    const char *shown_host = host && host[0] ? host : "(unnamed)";
    if (len > CLAIM_JSON_MAX)
        return act_error_set(err, EFBIG,
                             "host %s: claim body is %zu bytes, over the %d byte limit; the "
                             "stored value is not a claim, rewrite or delete it",
                             shown_host, len, CLAIM_JSON_MAX);
    _cleanup_(json_tokener_freep) json_tokener *tok = json_tokener_new();
    if (!tok)
        return act_error_set(err, ENOMEM, "host %s: out of memory parsing claim", shown_host);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    _cleanup_(json_object_putp) json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t consumed = json_tokener_get_parse_end(tok);
    if (!root || jerr != json_tokener_success)
        return act_error_set(err, EINVAL,
                             "host %s: claim body is not valid JSON (%s at byte %zu); rewrite or "
                             "delete the claim",
                             shown_host,
                             jerr == json_tokener_continue ? "unexpected end"
                                                           : json_tokener_error_desc(jerr),
                             consumed);
    for (size_t i = consumed; i < len; i++)
        if (text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r')
            return act_error_set(err, EINVAL,
                                 "host %s: claim body has trailing bytes after the JSON object "
                                 "at byte %zu; rewrite the claim", shown_host, i);
    return claim_from_json_object(host, root, out, err);
}

int claim_from_json_object(const char *host, json_object *root, claim *out, act_error *err)
{
    assert(root);
    assert(out);
    const char *shown_host = host && host[0] ? host : "(unnamed)";
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "host %s: claim ", shown_host);
    act_json_reader rd = {
        .prefix = prefix, .advice = "fix or rewrite the claim", .errnum = EINVAL, .err = err};
    int r;
    memset(out, 0, sizeof(*out));
    if (!json_object_is_type(root, json_type_object))
        r = act_error_set(err, EINVAL, "host %s: claim body must be a JSON object, not %s",
                          shown_host, json_type_to_name(json_object_get_type(root)));
    else
        r = parse_body(&rd, root, out);
    if (r < 0) {
        memset(out, 0, sizeof(*out));
        return r;
    }
    snprintf(out->host, sizeof(out->host), "%s", host ? host : "");
    if ((r = claim_validate(out, err)) < 0) {
        memset(out, 0, sizeof(*out));
        return r;
    }
    return 0;
}

static bool holder_is_empty(const claim_holder *h)
{
    return !h->box[0] && !h->incarnation[0] && !h->session && !h->generation && !h->stamp_usec &&
           !h->handle[0] && !h->starting_generation && !h->released_usec;
}

static void add_string(json_object *obj, const char *key, const char *value)
{
    json_object_object_add(obj, key, json_object_new_string(value));
}

json_object *claim_to_json_object(const claim *c)
{
    assert(c);
    json_object *root = json_object_new_object();
    if (!root)
        return NULL;
    if (!holder_is_empty(&c->holder)) {
        json_object *h = json_object_new_object();
        add_string(h, "box", c->holder.box);
        add_string(h, "incarnation", c->holder.incarnation);
        json_object_object_add(h, "session", json_object_new_uint64(c->holder.session));
        json_object_object_add(h, "generation", json_object_new_uint64(c->holder.generation));
        json_object_object_add(h, "stamp_usec", json_object_new_uint64(c->holder.stamp_usec));
        add_string(h, "handle", c->holder.handle);
        if (c->holder.starting_generation)
            json_object_object_add(h, "starting_generation",
                                   json_object_new_uint64(c->holder.starting_generation));
        if (c->holder.released_usec)
            json_object_object_add(h, "released_usec",
                                   json_object_new_uint64(c->holder.released_usec));
        json_object_object_add(root, "holder", h);
    }
    json_object *op = json_object_new_object();
    add_string(op, "id", c->op.id);
    const char *kind = claim_op_kind_to_string(c->op.kind);
    add_string(op, "kind", kind ? kind : "");
    add_string(op, "phase", c->op.phase);
    add_string(op, "exec", c->op.exec);
    if (c->op.from[0])
        add_string(op, "from", c->op.from);
    if (c->op.to[0])
        add_string(op, "to", c->op.to);
    json_object_object_add(root, "op", op);
    if (c->has_pin) {
        json_object *pin = json_object_new_object();
        add_string(pin, "version", c->pin.version);
        add_string(pin, "digest", c->pin.digest);
        add_string(pin, "failure_reason", c->pin.failure_reason);
        add_string(pin, "failure_message", c->pin.failure_message);
        if (c->pin.failure_box[0])
            add_string(pin, "failure_box", c->pin.failure_box);
        if (c->pin.failure_usec)
            json_object_object_add(pin, "failure_usec",
                                   json_object_new_uint64(c->pin.failure_usec));
        if (c->pin.fallback_version[0]) {
            add_string(pin, "fallback_version", c->pin.fallback_version);
            add_string(pin, "fallback_digest", c->pin.fallback_digest);
            if (c->pin.fallback_source[0])
                add_string(pin, "fallback_source", c->pin.fallback_source);
        }
        if (c->pin.source[0])
            add_string(pin, "source", c->pin.source);
        json_object_object_add(root, "pin", pin);
    }
    if (c->held[0])
        add_string(root, "held", c->held);
    if (c->held_digest[0])
        add_string(root, "held_digest", c->held_digest);
    if (c->held_source[0])
        add_string(root, "held_source", c->held_source);
    if (c->state.checkpoint[0]) {
        json_object *state = json_object_new_object();
        add_string(state, "checkpoint", c->state.checkpoint);
        if (c->state.sha256[0])
            add_string(state, "sha256", c->state.sha256);
        if (c->state.size)
            json_object_object_add(state, "size", json_object_new_uint64(c->state.size));
        if (c->state.generation)
            json_object_object_add(state, "generation",
                                   json_object_new_uint64(c->state.generation));
        if (c->state.box[0])
            add_string(state, "box", c->state.box);
        if (c->state.stamp_usec)
            json_object_object_add(state, "stamp_usec",
                                   json_object_new_uint64(c->state.stamp_usec));
        if (c->state.build_version[0])
            add_string(state, "build_version", c->state.build_version);
        if (c->state.build_digest[0])
            add_string(state, "build_digest", c->state.build_digest);
        json_object_object_add(root, "state", state);
    }
    if (c->has_failure) {
        json_object *failure = json_object_new_object();
        add_string(failure, "reason", c->failure.reason);
        add_string(failure, "message", c->failure.message);
        json_object_object_add(failure, "attempts", json_object_new_uint64(c->failure.attempts));
        json_object_object_add(failure, "stamp_usec",
                               json_object_new_uint64(c->failure.stamp_usec));
        if (c->failure.phase[0])
            add_string(failure, "phase", c->failure.phase);
        if (c->failure.box[0])
            add_string(failure, "box", c->failure.box);
        json_object_object_add(root, "failure", failure);
    }
    if (c->has_failover) {
        json_object *failover = json_object_new_object();
        json_object *boxes = json_object_new_array();
        for (size_t i = 0; i < c->failover.n_boxes; i++)
            json_object_array_add(boxes, json_object_new_string(c->failover.boxes[i]));
        json_object_object_add(failover, "boxes", boxes);
        json_object_object_add(root, "failover", failover);
    }
    return root;
}

char *claim_to_json(const claim *c)
{
    _cleanup_(json_object_putp) json_object *root = claim_to_json_object(c);
    if (!root)
        return NULL;
    const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE);
    return text ? strdup(text) : NULL;
}
