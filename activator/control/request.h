/* Control requests: the JSON a client sends, validated into a typed request.
 *
 * Everything a client can send is checked here, at the edge, before any part
 * of the daemon sees it: the body size, that it is one JSON object, the
 * protocol version, the op, every field's presence and type, host, version and
 * box names (common/names.h), and that no unknown field is present (a typo in
 * a field name must not be silently ignored). Which op takes which fields is
 * the op table's (activator/control/ops.h). A refusal carries a stable code
 * for scripts and a sentence naming the field and what to send instead. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "activator/control/ops.h"
#include "common/error.h"
#include "common/names.h"

/* Bodies above this are refused with CTRL_REQ_TOO_LARGE before parsing. No
 * legitimate request comes close: the longest is a stage with a path. */
#define CTRL_REQUEST_MAX_BYTES (64 * 1024)

/* The longest path a stage request may name (PATH_MAX without the NUL). */
#define CTRL_REQUEST_PATH_MAX 4095

/* The values of the "mode" field, in the order of its choices in the op
 * table. */
typedef enum ctrl_swap_mode {
    CTRL_SWAP_OVERLAP,    /* start N+1 while N serves, then retire N */
    CTRL_SWAP_STOP_FIRST, /* retire N first, for apps that cannot run twice */
} ctrl_swap_mode;

/* A validated request. Absent optional names are empty strings. */
typedef struct ctrl_request {
    ctrl_op op;
    char host[ACT_NAME_MAX + 1];    /* status (optional), and every per-host op */
    char version[ACT_NAME_MAX + 1]; /* swap, stage, promote, hold */
    char box[ACT_NAME_MAX + 1];     /* claim.assign, move */
    char path[CTRL_REQUEST_PATH_MAX + 1]; /* stage: an absolute path on this box */
    ctrl_swap_mode mode;                  /* swap; CTRL_SWAP_OVERLAP when absent */
    bool no_wait;                        /* wake, swap: reply once started */
    bool promote;                        /* stage: make it live too */
    bool force;                          /* claim.assign: to a box without a live lease;
                                          * move: from a box without one */
    bool has_keep;                       /* gc: keep was given */
    unsigned keep;                       /* gc: versions kept besides those in use */
    bool dry_run;                        /* gc: say what would go, remove nothing */
    uint64_t revision;                   /* claim.wait: answer once the claim is past it */
    unsigned wait_sec; /* claim.wait: 1..CTRL_CLAIM_WAIT_MAX_SEC; 0 = the default */
    /* hold: the held build's digest and registry source (the claim's
     * held_digest and held_source), filled by the daemon that takes the
     * request when it has the version staged; never read from the wire. */
    char held_digest[65];
    char held_source[640];
} ctrl_request;

/* Stable error codes of refused requests (the "code" of an error reply). */
#define CTRL_REQ_TOO_LARGE "too_large"
#define CTRL_REQ_BAD_JSON "bad_json"
#define CTRL_REQ_BAD_VERSION "bad_protocol_version"
#define CTRL_REQ_UNKNOWN_OP "unknown_op"
#define CTRL_REQ_MISSING_FIELD "missing_field"
#define CTRL_REQ_BAD_TYPE "bad_type"
#define CTRL_REQ_UNKNOWN_FIELD "unknown_field"
#define CTRL_REQ_BAD_NAME "bad_name"
#define CTRL_REQ_BAD_VALUE "bad_value"
/* Not a parse failure: the peer may not use the control socket at all, or
 * lacks the role the op needs (activator/control/ops.h). */
#define CTRL_REQ_FORBIDDEN "forbidden"

typedef struct ctrl_request_error {
    const char *code; /* one of CTRL_REQ_* */
    act_error error;  /* the sentence */
} ctrl_request_error;

/* Parses and validates len bytes (not NUL-terminated; may hold anything).
 * Returns 0 with *req filled, or -EINVAL (-EMSGSIZE for too large) with *err
 * filled and *req unspecified. Never reads past len. */
int ctrl_request_parse(const void *data, size_t len, ctrl_request *req, ctrl_request_error *err);

/* The wire name of a swap mode ("overlap", "stop-first"). */
const char *ctrl_swap_mode_name(ctrl_swap_mode mode);
