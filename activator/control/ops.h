/* The control operations, in one table that the daemon's side (the request
 * parser and the control server) and activatorctl both read: each op's wire
 * name, the fields it requires and allows, the role a peer needs for it, and
 * a one-line summary for help. From one line here the parser accepts an op,
 * the server guards it with its role, and the activatorctl command that
 * sends it takes its arguments, usage and summary. (A new field also needs
 * its place in act_request, request.c.)
 *
 * Plain data with no JSON in it, so activatorctl and the fuzz target take it
 * without the rest of the control server. */
#pragma once

#include <stddef.h>

/* The protocol version this daemon speaks ("v" in every request). */
#define ACT_PROTOCOL_VERSION 1

typedef enum act_op {
    ACT_OP_STATUS,
    ACT_OP_WAKE,
    ACT_OP_PARK,
    ACT_OP_SWAP,
    ACT_OP_STAGE,
    ACT_OP_PROMOTE,
    ACT_OP_RELEASES,
    ACT_OP_CLAIM_SHOW,
    ACT_OP_CLAIM_ASSIGN,
    ACT_OP_CLAIM_RELEASE,
    ACT_OP_STATS,
    ACT_OP_VERSION,
    ACT_OP__COUNT,
} act_op;

/* Fields a request may carry besides "v" and "op", as bits so that an op's
 * required and optional sets are one line of the table. */
typedef enum act_field {
    ACT_FIELD_HOST = 1u << 0,
    ACT_FIELD_VERSION = 1u << 1,
    ACT_FIELD_BOX = 1u << 2,
    ACT_FIELD_PATH = 1u << 3,
    ACT_FIELD_MODE = 1u << 4,
    ACT_FIELD_NO_WAIT = 1u << 5,
    ACT_FIELD_PROMOTE = 1u << 6,
} act_field;

typedef enum act_field_kind {
    ACT_FIELD_KIND_NAME,   /* a string: a host, version or box name (common/names.h) */
    ACT_FIELD_KIND_PATH,   /* a string: an absolute path on the daemon's box */
    ACT_FIELD_KIND_CHOICE, /* a string out of a fixed list */
    ACT_FIELD_KIND_FLAG,   /* a boolean */
} act_field_kind;

typedef struct act_field_spec {
    act_field bit;
    const char *name; /* the JSON key, "no_wait" */
    act_field_kind kind;
    const char *const *choices; /* ACT_FIELD_KIND_CHOICE: the values, NULL-terminated */
} act_field_spec;

/* Who may send an op. Each role may do what the roles before it may. */
typedef enum act_role {
    ACT_ROLE_VIEWER,   /* reads what runs */
    ACT_ROLE_OPERATOR, /* changes what runs and where */
    ACT_ROLE_ROOT,     /* root on the local socket: the op makes the daemon use its
                        * own privileges on something the peer names (a path) */
} act_role;

typedef struct act_op_spec {
    const char *name;  /* the wire name, "claim.assign" */
    unsigned required; /* act_field bits */
    unsigned optional; /* act_field bits */
    act_role role;
    const char *summary; /* one line for help */
} act_op_spec;

/* The table entry of op, or NULL for an out-of-range op. */
const act_op_spec *act_op_spec_of(act_op op);

/* The wire name of an op ("claim.assign"), or NULL for an out-of-range op. */
const char *act_op_name(act_op op);

/* The op named name, or -1 when there is none. */
int act_op_from_name(const char *name);

/* Every field, in table order: n receives how many. */
const act_field_spec *act_fields(size_t *n);

/* The spec of one field bit, or NULL. */
const act_field_spec *act_field_spec_of(act_field field);

/* The index of value in a choice field's choices, or -1. */
int act_field_choice(const act_field_spec *field, const char *value);

/* "viewer", "operator", "root". */
const char *act_role_name(act_role role);

/* Writes the names of the fields in set, in table order, as "host, version"
 * ("none" for an empty set). */
void act_fields_list(unsigned set, char *out, size_t size);

/* Writes the values of a choice field as "overlap, stop-first" with sep
 * between them. */
void act_field_choices_list(const act_field_spec *field, const char *sep, char *out, size_t size);

/* Writes every op's wire name, in table order, as "status, wake, ...". */
void act_ops_list(char *out, size_t size);
