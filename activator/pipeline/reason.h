/* Why a wake was refused or failed: one code per cause, with the policy the
 * pipeline applies to it (retry it, blame the build for it, call it a refusal).
 *
 * The codes are stable strings ("not_owner", ...) because they travel in
 * events, logs (REASON=) and control replies that other programs parse. */
#pragma once

#include <stdbool.h>

typedef enum pl_reason {
    PL_REASON_NONE = 0,          /* "ok": no refusal, no failure */
    PL_REASON_NOT_OWNER,         /* the claim names another box as executor */
    PL_REASON_WRONG_PHASE,       /* the claim's op phase does not allow a wake */
    PL_REASON_UNPROVEN_STOP,     /* an earlier generation is not proven stopped */
    PL_REASON_CLAIM_CHANGED,     /* the claim moved away from our admission */
    PL_REASON_PIN_MISMATCH,      /* the build to run is not the pinned one */
    PL_REASON_HELD_MISMATCH,     /* the build to run is not the held one */
    PL_REASON_DIGEST_MISMATCH,   /* the staged bytes do not hash to the manifest */
    PL_REASON_RESTORE_FAILED,    /* the restore (built-in or ExecRestore=) failed or timed out */
    PL_REASON_EXEC_FAILED,       /* the generation could not be exec'd */
    PL_REASON_READY_TIMEOUT,     /* no readiness within ReadyTimeoutSec */
    PL_REASON_PUBLISH_LOST,      /* the admission was lost before or during publication */
    PL_REASON_BUDGET,            /* a start budget (rate or box-wide cap) ran out */
    PL_REASON_STORE_ERROR,       /* the claim store did not answer or answered badly */
    PL_REASON_NOT_STAGED,        /* the build to run is not staged */
    PL_REASON_SETUP_FAILED,      /* a local resource (cgroup, file, socket) could not be set up */
    PL_REASON_CRASHED,           /* the generation exited (before ready, or while serving) */
    PL_REASON_REPLICATE_FAILED,  /* ExecReplicate= could not be started, or with
                                  * ReplicateRequired=yes its replica stayed down */
    PL_REASON_UNHEALTHY,         /* the health check after publication failed, or
                                  * HealthCheckFailures= repeated ones in a row */
    PL_REASON_WATCHDOG,          /* no WATCHDOG=1 within WatchdogSec=, or WATCHDOG=trigger */
    PL_REASON_CANCELLED,         /* a park request or shutdown ended the wake */
    PL_REASON_STORE_UNAVAILABLE, /* the claim store is unreachable: no admission until it answers */
    PL_REASON_RELEASE_PENDING,   /* assigned here, but the box that held it has not released it */
    PL_REASON_PIN_FAILED,        /* the pin failed and no build that served can stand in */
    PL_REASON_CHECKPOINTING,     /* a checkpoint of the parked host's state is being written */
    PL_REASON_BUILD_UNAVAILABLE, /* the pinned build is not staged here and cannot be fetched */
    PL_REASON_STATE_BUILD_MISMATCH, /* RestoreRequiresSameBuild=yes, and the state to restore was
                                     * written by another build */
    PL_REASON_FENCED, /* the box cannot prove its lease: its failover hosts are fenced */
    _PL_REASON_MAX,
} pl_reason;

/* "ok", "not_owner", ...; "unknown" for a value out of range. */
const char *pl_reason_to_string(pl_reason reason);

/* The code for a string from pl_reason_to_string, or -EINVAL. */
int pl_reason_from_string(const char *name);

/* True for the reasons that say "this wake must not happen" rather than "this
 * start went wrong": they end a wake as refused. */
bool pl_reason_is_refusal(pl_reason reason);

/* True when another start in the same admission, after the backoff, can
 * reasonably succeed. reason.c holds the table and the argument per reason. */
bool pl_reason_is_retryable(pl_reason reason);

/* True when the failure is the running build's own (it was exec'd and did not
 * come up, or came up sick), so a failed attempt of that build is recorded. */
bool pl_reason_blames_build(pl_reason reason);
