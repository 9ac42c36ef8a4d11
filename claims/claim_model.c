/* The claim model: kinds, their phases, and field validation shared by the
 * codec and by callers that build claims in memory. */
#include "claims/claims.h"

#include <assert.h>
#include <ctype.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/names.h"

/* The phase table from claims.h, indexed by kind. */
static const char *const serving_phases[] = {
    CLAIM_PHASE_ASSIGNED, "starting", "serving", "frozen", "parked", "failed", NULL};
static const char *const hold_phases[] = {"holding", NULL};
static const char *const move_phases[] = {"draining", "moving", NULL};
static const char *const probe_phases[] = {"probing", NULL};

static const struct {
    const char *name;
    const char *const *phases;
} kinds[] = {
    [CLAIM_OP_SERVING] = {"serving", serving_phases},
    [CLAIM_OP_HOLD] = {"hold", hold_phases},
    [CLAIM_OP_MOVE] = {"move", move_phases},
    [CLAIM_OP_PROBE] = {"probe", probe_phases},
};
static_assert(ARRAY_SIZE(kinds) == CLAIM_OP_PROBE + 1, "an op kind without phases");

/* The name fields hold a common/names.h name and its NUL, which is what
 * claim_validate checks them against. */
static_assert(sizeof(((claim *)0)->host) == ACT_NAME_MAX + 1, "claim.host is not a name field");
static_assert(sizeof(((claim_holder *)0)->box) == ACT_NAME_MAX + 1,
              "holder.box is not a name field");
static_assert(sizeof(((claim_op *)0)->exec) == ACT_NAME_MAX + 1, "op.exec is not a name field");

const char *claim_op_kind_to_string(claim_op_kind kind)
{
    if ((unsigned)kind >= ARRAY_SIZE(kinds))
        return NULL;
    return kinds[kind].name;
}

int claim_op_kind_from_string(const char *name, claim_op_kind *out)
{
    assert(out);
    for (unsigned i = 0; i < ARRAY_SIZE(kinds); i++) {
        if (name && strcmp(kinds[i].name, name) == 0) {
            *out = (claim_op_kind)i;
            return 0;
        }
    }
    return -EINVAL;
}

bool claim_phase_is_valid(claim_op_kind kind, const char *phase)
{
    if ((unsigned)kind >= ARRAY_SIZE(kinds) || !phase)
        return false;
    for (const char *const *p = kinds[kind].phases; *p; p++) {
        if (strcmp(*p, phase) == 0)
            return true;
    }
    return false;
}

bool claim_has_holder(const claim *c)
{
    assert(c);
    return c->holder.box[0] != '\0';
}

static bool is_hex_digest(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        if (!isxdigit((unsigned char)s[n]) || isupper((unsigned char)s[n]))
            return false;
    }
    return n == 64;
}

/* Optional names (box, exec, incarnation, op id, versions) may be empty but,
 * when set, follow the same rule as host names: they end up in paths, logs
 * and control messages, where traversal or control characters do harm. */
static int check_optional_name(const claim *c, const char *field, const char *value,
                               act_error *err)
{
    if (value[0] == '\0' || act_name_is_valid(value))
        return 0;
    act_error why = {0};
    act_name_check(field, value, &why);
    return act_error_set(err, EINVAL, "host %s: claim field %s: %s", c->host, field, why.message);
}

/* A failure's reason is a code that programs compare, like the daemon's
 * refusal codes: short, lowercase, no spaces. */
static bool is_reason_token(const char *s)
{
    if (!s[0])
        return false;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_' && *s != '-')
            return false;
    return true;
}

/* The message ends up in logs and on terminals as one line. */
static bool has_control_character(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

static int validate_failure(const claim *c, act_error *err)
{
    if (!is_reason_token(c->failure.reason))
        return act_error_set(err, EINVAL,
                             "host %s: claim field failure.reason \"%.31s\" is not a code of "
                             "a-z, 0-9, '_' and '-'; write the reason the wake ended with",
                             c->host, c->failure.reason);
    if (has_control_character(c->failure.message))
        return act_error_set(err, EINVAL, "host %s: claim field failure.message holds a control "
                                          "character; write it as one line",
                             c->host);
    if (c->failure.attempts > CLAIM_FAILURE_ATTEMPTS_MAX)
        return act_error_set(err, EINVAL,
                             "host %s: claim field failure.attempts is %llu; an admission makes "
                             "at most %d starts",
                             c->host, (unsigned long long)c->failure.attempts,
                             CLAIM_FAILURE_ATTEMPTS_MAX);
    if (c->failure.phase[0] && !is_reason_token(c->failure.phase))
        return act_error_set(err, EINVAL,
                             "host %s: claim field failure.phase \"%.31s\" is not a token of "
                             "a-z, 0-9, '_' and '-'; write the phase the op failed in",
                             c->host, c->failure.phase);
    return 0;
}

/* A pin's failure and its fallback: the fallback is what a cold wake runs
 * instead of the failed pin, so it must name a build exactly. The swap
 * writes it with the pin, before anything fails, so that a failure recorded
 * later (by a daemon that no longer knows what served) keeps it; it means
 * nothing until the pin fails. */
static int validate_pin_failure(const claim *c, act_error *err)
{
    const claim_pin *pin = &c->pin;
    if (pin->failure_reason[0] && !is_reason_token(pin->failure_reason))
        return act_error_set(err, EINVAL,
                             "host %s: claim field pin.failure_reason \"%.31s\" is not a code of "
                             "a-z, 0-9, '_' and '-'; write the reason the swap ended with",
                             c->host, pin->failure_reason);
    if (has_control_character(pin->failure_message))
        return act_error_set(err, EINVAL, "host %s: claim field pin.failure_message holds a "
                                          "control character; write it as one line",
                             c->host);
    bool failed = pin->failure_reason[0] != '\0';
    if (!failed && (pin->failure_message[0] || pin->failure_box[0] || pin->failure_usec))
        return act_error_set(err, EINVAL,
                             "host %s: claim field pin.failure_reason is empty but the pin "
                             "describes a failure; name the reason, or drop the failure",
                             c->host);
    if (pin->fallback_version[0] ? !is_hex_digest(pin->fallback_digest)
                                 : pin->fallback_digest[0] != '\0')
        return act_error_set(err, EINVAL,
                             "host %s: claim field pin.fallback_digest must be 64 lowercase hex "
                             "digits (a SHA-256) with pin.fallback_version, and absent without "
                             "it; record the fallback build's digest",
                             c->host);
    if (pin->fallback_source[0] && !pin->fallback_digest[0])
        return act_error_set(err, EINVAL,
                             "host %s: claim field pin.fallback_source is set without "
                             "pin.fallback_digest; a source names a build the fallback names",
                             c->host);
    return 0;
}

/* A build's source as a claim names it: a registry image by digest, which
 * any box can fetch the same bytes from. The image library parses it at
 * the fetch; this only keeps what cannot be one out of the claim. */
static bool is_build_source(const char *s)
{
    static const char scheme[] = "docker://", at[] = "@sha256:";
    size_t n = strlen(s);
    if (strncmp(s, scheme, strlen(scheme)) != 0 || n < strlen(scheme) + 1 + strlen(at) + 64)
        return false;
    if (strncmp(s + n - 64 - strlen(at), at, strlen(at)) != 0 || !is_hex_digest(s + n - 64))
        return false;
    for (const char *p = s; *p; p++)
        if (!isgraph((unsigned char)*p))
            return false;
    return true;
}

static int check_build_source(const claim *c, const char *field, const char *value, act_error *err)
{
    if (!value[0] || is_build_source(value))
        return 0;
    return act_error_set(err, EINVAL,
                         "host %s: claim field %s \"%.80s\" is not a registry image by digest "
                         "(docker://REGISTRY/REPO@sha256:<64 lowercase hex digits>); write the "
                         "source the build was staged from, or leave it out",
                         c->host, field, value);
}

/* A hold names a version, and, when the box that wrote it had that build
 * staged, its digest and source, as a pin does. */
static int validate_held(const claim *c, act_error *err)
{
    if (c->held_digest[0] && (!c->held[0] || !is_hex_digest(c->held_digest)))
        return act_error_set(err, EINVAL,
                             "host %s: claim field held_digest must be 64 lowercase hex digits "
                             "(a SHA-256) beside held, and absent without it; record the held "
                             "build's digest",
                             c->host);
    if (c->held_source[0] && !c->held_digest[0])
        return act_error_set(err, EINVAL,
                             "host %s: claim field held_source is set without held_digest; a "
                             "source is only fetched for a build of known digest",
                             c->host);
    return check_build_source(c, "held_source", c->held_source, err);
}

/* Each box named once, each a box name. */
static int validate_failover(const claim *c, act_error *err)
{
    if (!c->has_failover)
        return 0;
    if (c->failover.n_boxes > CLAIM_FAILOVER_BOXES_MAX)
        return act_error_set(err, EINVAL, "host %s: claim field failover.boxes names more than %d "
                                          "boxes", c->host, CLAIM_FAILOVER_BOXES_MAX);
    for (size_t i = 0; i < c->failover.n_boxes; i++) {
        act_error why = {0};
        if (act_name_check("box", c->failover.boxes[i], &why) < 0)
            return act_error_set(err, EINVAL, "host %s: claim field failover.boxes[%zu]: %s",
                                 c->host, i, why.message);
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->failover.boxes[i], c->failover.boxes[j]) == 0)
                return act_error_set(err, EINVAL,
                                     "host %s: claim field failover.boxes names box %s twice",
                                     c->host, c->failover.boxes[i]);
    }
    return 0;
}

bool claim_failover_allows(const claim *c, const char *box)
{
    if (!c || !c->has_failover || !box)
        return false;
    if (c->failover.n_boxes == 0)
        return true;
    for (size_t i = 0; i < c->failover.n_boxes; i++)
        if (strcmp(c->failover.boxes[i], box) == 0)
            return true;
    return false;
}

bool claim_pin_failed(const claim *c)
{
    return c && c->has_pin && c->pin.failure_reason[0] != '\0';
}

int claim_validate(const claim *c, act_error *err)
{
    assert(c);
    act_error why = {0};
    if (act_name_check("host", c->host, &why) < 0)
        return act_error_set(err, EINVAL, "claim: %s", why.message);

    const struct {
        const char *field;
        const char *value;
    } names[] = {
        {"holder.box", c->holder.box},
        {"holder.incarnation", c->holder.incarnation},
        {"op.id", c->op.id},
        {"op.exec", c->op.exec},
        {"held", c->held},
        {"pin.version", c->has_pin ? c->pin.version : ""},
        {"op.from", c->op.from},
        {"op.to", c->op.to},
        {"state.box", c->state.box},
        {"failure.box", c->has_failure ? c->failure.box : ""},
        {"pin.failure_box", c->has_pin ? c->pin.failure_box : ""},
        {"pin.fallback_version", c->has_pin ? c->pin.fallback_version : ""},
        /* A checkpoint's id becomes a file name (the built-in store) and
         * ExecRestore='s ACTIVATOR_CHECKPOINT: every writer makes it a name. */
        {"state.checkpoint", c->state.checkpoint},
        {"state.build_version", c->state.build_version},
    };
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        int r = check_optional_name(c, names[i].field, names[i].value, err);
        if (r < 0)
            return r;
    }
    if (c->op.id[0] == '\0')
        return act_error_set(err, EINVAL, "host %s: claim field op.id is empty; every op needs an id",
                             c->host);
    const char *kind = claim_op_kind_to_string(c->op.kind);
    if (!kind)
        return act_error_set(err, EINVAL, "host %s: claim field op.kind has no known value (%d)",
                             c->host, (int)c->op.kind);
    if (!claim_phase_is_valid(c->op.kind, c->op.phase))
        return act_error_set(err, EINVAL,
                             "host %s: claim field op.phase: \"%.31s\" is not a phase of a %s op; "
                             "see the phase table in claims/claims.h",
                             c->host, c->op.phase, kind);
    if (c->has_pin) {
        if (c->pin.version[0] == '\0')
            return act_error_set(err, EINVAL, "host %s: claim field pin.version is empty; a pin "
                                              "names a version", c->host);
        if (!is_hex_digest(c->pin.digest))
            return act_error_set(err, EINVAL,
                                 "host %s: claim field pin.digest is not 64 lowercase hex digits "
                                 "(a SHA-256); record the build's digest",
                                 c->host);
        int r = validate_pin_failure(c, err);
        if (r < 0)
            return r;
        r = check_build_source(c, "pin.source", c->pin.source, err);
        if (r < 0)
            return r;
        r = check_build_source(c, "pin.fallback_source", c->pin.fallback_source, err);
        if (r < 0)
            return r;
    }
    int held = validate_held(c, err);
    if (held < 0)
        return held;
    int failover = validate_failover(c, err);
    if (failover < 0)
        return failover;
    if (c->state.sha256[0] && !is_hex_digest(c->state.sha256))
        return act_error_set(err, EINVAL,
                             "host %s: claim field state.sha256 is not 64 lowercase hex digits "
                             "(a SHA-256); record the checkpoint's digest, or leave it out",
                             c->host);
    if (c->state.build_digest[0] &&
        (!c->state.build_version[0] || !is_hex_digest(c->state.build_digest)))
        return act_error_set(err, EINVAL,
                             "host %s: claim field state.build_digest must be 64 lowercase hex "
                             "digits beside state.build_version; record the build's digest with "
                             "its version, or leave both out",
                             c->host);
    if (c->state.checkpoint[0] == '\0' &&
        (c->state.sha256[0] || c->state.size || c->state.generation || c->state.box[0] ||
         c->state.build_version[0]))
        return act_error_set(err, EINVAL,
                             "host %s: claim field state.checkpoint is empty but the state "
                             "describes a checkpoint; name it, or drop the state",
                             c->host);
    if (c->holder.starting_generation && c->holder.starting_generation <= c->holder.generation)
        return act_error_set(err, EINVAL,
                             "host %s: claim field holder.starting_generation %llu is not above "
                             "holder.generation %llu; a swap starts a newer generation",
                             c->host, (unsigned long long)c->holder.starting_generation,
                             (unsigned long long)c->holder.generation);
    if (c->has_failure)
        return validate_failure(c, err);
    return 0;
}
