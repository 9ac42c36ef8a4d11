/* Why a wake was refused or failed: one code per cause, with the policy the
 * pipeline applies to it (retry it, blame the build for it, call it a refusal).
 *
 * The codes are stable strings ("not_owner", ...) because they travel in
 * events, logs (REASON=) and control replies that other programs parse. */
#pragma once

#include <stdbool.h>

typedef enum act_reason {
    ACT_REASON_NONE = 0,         /* "ok": no refusal, no failure */
    ACT_REASON_NOT_OWNER,        /* the claim names another box as executor */
    ACT_REASON_WRONG_PHASE,      /* the claim's op phase does not allow a wake */
    ACT_REASON_UNPROVEN_STOP,    /* an earlier generation is not proven stopped */
    ACT_REASON_CLAIM_CHANGED,    /* the claim moved away from our admission */
    ACT_REASON_PIN_MISMATCH,     /* the build to run is not the pinned one */
    ACT_REASON_HELD_MISMATCH,    /* the build to run is not the held one */
    ACT_REASON_DIGEST_MISMATCH,  /* the staged bytes do not hash to the manifest */
    ACT_REASON_RESTORE_FAILED,   /* ExecRestore= failed or timed out */
    ACT_REASON_EXEC_FAILED,      /* the generation could not be exec'd */
    ACT_REASON_READY_TIMEOUT,    /* no readiness within ReadyTimeoutSec */
    ACT_REASON_PUBLISH_LOST,     /* the admission was lost before or during publication */
    ACT_REASON_BUDGET,           /* a start budget (rate or box-wide cap) ran out */
    ACT_REASON_STORE_ERROR,      /* the claim store did not answer or answered badly */
    ACT_REASON_NOT_STAGED,       /* the build to run is not staged */
    ACT_REASON_SETUP_FAILED,     /* a local resource (cgroup, file, socket) could not be set up */
    ACT_REASON_CRASHED,          /* the generation exited (before ready, or while serving) */
    ACT_REASON_REPLICATE_FAILED, /* ExecReplicate= could not be started */
    ACT_REASON_UNHEALTHY,        /* the health check after publication failed */
    ACT_REASON_CANCELLED,        /* a park request or shutdown ended the wake */
    _ACT_REASON_MAX,
} act_reason;

/* "ok", "not_owner", ...; "unknown" for a value out of range. */
const char *act_reason_to_string(act_reason reason);

/* The code for a string from act_reason_to_string, or -EINVAL. */
int act_reason_from_string(const char *name);

/* True for the reasons that say "this wake must not happen" rather than "this
 * start went wrong": they end a wake as refused. */
bool act_reason_is_refusal(act_reason reason);

/* True when another start in the same admission, after the backoff, can
 * reasonably succeed. reason.c holds the table and the argument per reason. */
bool act_reason_is_retryable(act_reason reason);

/* True when the failure is the running build's own (it was exec'd and did not
 * come up, or came up sick), so a failed attempt of that build is recorded. */
bool act_reason_blames_build(act_reason reason);
