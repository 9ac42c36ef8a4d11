/* The control operations, in one table that the daemon's side (the request
 * parser and the control server) and activatorctl both read: each op's wire
 * name, the fields it requires and allows, the role a peer needs for it, and
 * a one-line summary for help. From one line here the parser accepts an op,
 * the server guards it with its role, and the activatorctl command that
 * sends it takes its arguments, usage and summary. (A new field also needs
 * its place in ctrl_request, request.c.)
 *
 * Plain data with no JSON in it, so activatorctl and the fuzz target take it
 * without the rest of the control server. */
#pragma once

#include <stddef.h>

/* The protocol version this daemon speaks ("v" in every request). */
#define CTRL_PROTOCOL_VERSION 1

typedef enum ctrl_op {
    CTRL_OP_STATUS,
    CTRL_OP_WAKE,
    CTRL_OP_PARK,
    CTRL_OP_SWAP,
    CTRL_OP_STAGE,
    CTRL_OP_PROMOTE,
    CTRL_OP_RELEASES,
    CTRL_OP_CLAIM_SHOW,
    CTRL_OP_CLAIM_WAIT,
    CTRL_OP_CLAIM_ASSIGN,
    CTRL_OP_CLAIM_RELEASE,
    CTRL_OP_CLAIMS,
    CTRL_OP_BOXES,
    CTRL_OP_HOLD,
    CTRL_OP_UNHOLD,
    CTRL_OP_UNPIN,
    CTRL_OP_MOVE,
    CTRL_OP_MOVE_ABORT,
    CTRL_OP_STATS,
    CTRL_OP_VERSION,
    CTRL_OP_RELOAD,
    CTRL_OP_GC,
    CTRL_OP_CHECKPOINT,
    CTRL_OP_CHECKPOINTS,
    CTRL_OP_FREEZE,
    CTRL_OP_THAW,
    CTRL_OP_BOX_DRAIN,
    CTRL_OP_BOX_UNDRAIN,
    CTRL_OP__COUNT,
} ctrl_op;

/* Fields a request may carry besides "v" and "op", as bits so that an op's
 * required and optional sets are one line of the table. */
typedef enum ctrl_field {
    CTRL_FIELD_HOST = 1u << 0,
    CTRL_FIELD_VERSION = 1u << 1,
    CTRL_FIELD_BOX = 1u << 2,
    CTRL_FIELD_PATH = 1u << 3,
    CTRL_FIELD_MODE = 1u << 4,
    CTRL_FIELD_NO_WAIT = 1u << 5,
    CTRL_FIELD_PROMOTE = 1u << 6,
    CTRL_FIELD_FORCE = 1u << 7,
    CTRL_FIELD_KEEP = 1u << 8,
    CTRL_FIELD_DRY_RUN = 1u << 9,
    CTRL_FIELD_REVISION = 1u << 10,
    CTRL_FIELD_WAIT = 1u << 11,
} ctrl_field;

typedef enum ctrl_field_kind {
    CTRL_FIELD_KIND_NAME,     /* a string: a host, version or box name (common/names.h) */
    CTRL_FIELD_KIND_PATH,     /* a string: an absolute path on the daemon's box */
    CTRL_FIELD_KIND_CHOICE,   /* a string out of a fixed list */
    CTRL_FIELD_KIND_FLAG,     /* a boolean */
    CTRL_FIELD_KIND_COUNT,    /* a whole number from 0 to CTRL_FIELD_COUNT_MAX */
    CTRL_FIELD_KIND_REVISION, /* a whole number from 0 to INT64_MAX: a claim's revision */
} ctrl_field_kind;

/* The largest value of a count field (gc --keep). */
#define CTRL_FIELD_COUNT_MAX 1000

/* claim.wait's wait in seconds: when the request names none, and the most
 * it may name. A wait holds one of the control server's few contexts. */
#define CTRL_CLAIM_WAIT_DEFAULT_SEC 30
#define CTRL_CLAIM_WAIT_MAX_SEC 300

typedef struct ctrl_field_spec {
    ctrl_field bit;
    const char *name; /* the JSON key, "no_wait" */
    ctrl_field_kind kind;
    const char *const *choices; /* CTRL_FIELD_KIND_CHOICE: the values, NULL-terminated */
} ctrl_field_spec;

/* Who may send an op. Each role may do what the roles before it may. */
typedef enum ctrl_role {
    CTRL_ROLE_VIEWER,   /* reads what runs */
    CTRL_ROLE_OPERATOR, /* changes what runs and where */
    CTRL_ROLE_ROOT,     /* root on the local socket: the op makes the daemon use its
                         * own privileges on something the peer names (a path) */
} ctrl_role;

typedef struct ctrl_op_spec {
    const char *name;  /* the wire name, "claim.assign" */
    unsigned required; /* ctrl_field bits */
    unsigned optional; /* ctrl_field bits */
    ctrl_role role;
    const char *summary; /* one line for help */
} ctrl_op_spec;

/* The table entry of op, or NULL for an out-of-range op. */
const ctrl_op_spec *ctrl_op_spec_of(ctrl_op op);

/* The wire name of an op ("claim.assign"), or NULL for an out-of-range op. */
const char *ctrl_op_name(ctrl_op op);

/* The op named name, or -1 when there is none. */
int ctrl_op_from_name(const char *name);

/* Every field, in table order: n receives how many. */
const ctrl_field_spec *ctrl_fields(size_t *n);

/* The spec of one field bit, or NULL. */
const ctrl_field_spec *ctrl_field_spec_of(ctrl_field field);

/* The index of value in a choice field's choices, or -1. */
int ctrl_field_choice(const ctrl_field_spec *field, const char *value);

/* "viewer", "operator", "root". */
const char *ctrl_role_name(ctrl_role role);

/* Writes the names of the fields in set, in table order, as "host, version"
 * ("none" for an empty set). */
void ctrl_fields_list(unsigned set, char *out, size_t size);

/* Writes the values of a choice field as "overlap, stop-first" with sep
 * between them. */
void ctrl_field_choices_list(const ctrl_field_spec *field, const char *sep, char *out, size_t size);

/* Writes every op's wire name, in table order, as "status, wake, ...". */
void ctrl_ops_list(char *out, size_t size);
