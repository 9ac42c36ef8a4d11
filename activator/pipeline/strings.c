/* Names of steps, states, triggers, outcomes and events: the strings that
 * events, logs and control replies carry. */
#include "activator/pipeline/pipeline.h"

#include <assert.h>

#include "common/cleanup.h"

#define NAME_OF(table, value)                                                                      \
    ((unsigned)(value) < ARRAY_SIZE(table) && (table)[value] ? (table)[value] : "unknown")

const char *pl_step_to_string(pl_step step)
{
    static const char *const names[] = {
        [PL_STEP_NONE] = "start",          [PL_STEP_READ] = "read",
        [PL_STEP_ADMIT] = "admit",         [PL_STEP_RESTORE] = "restore",
        [PL_STEP_RESERVE] = "reserve",     [PL_STEP_MATERIALIZE] = "materialize",
        [PL_STEP_PREPARE] = "prepare",     [PL_STEP_GATE] = "gate",
        [PL_STEP_EXEC] = "exec",           [PL_STEP_READY] = "ready",
        [PL_STEP_REPLICATE] = "replicate", [PL_STEP_PUBLISH] = "publish",
        [PL_STEP_HEALTHY] = "healthy",     [PL_STEP_FAILED] = "failed",
    };
    static_assert(ARRAY_SIZE(names) == _PL_STEP_MAX, "a step without a name");
    return NAME_OF(names, step);
}

const char *pl_host_state_to_string(pl_host_state state)
{
    static const char *const names[] = {
        [PL_HOST_PARKED] = "parked",
        [PL_HOST_WAKING] = "waking",
        [PL_HOST_SERVING] = "serving",
        [PL_HOST_RETIRING] = "retiring",
    };
    static_assert(ARRAY_SIZE(names) == _PL_HOST_STATE_MAX, "a host state without a name");
    return NAME_OF(names, state);
}

const char *pl_trigger_to_string(pl_trigger trigger)
{
    static const char *const names[] = {
        [PL_TRIGGER_CONNECTION] = "connection",
        [PL_TRIGGER_WARM] = "warm",
        [PL_TRIGGER_CLAIM_CHANGE] = "claim_change",
    };
    static_assert(ARRAY_SIZE(names) == _PL_TRIGGER_MAX, "a trigger without a name");
    return NAME_OF(names, trigger);
}

const char *pl_wake_kind_to_string(pl_wake_kind kind)
{
    static const char *const names[] = {
        [PL_WAKE_SERVING] = "serving",
        [PL_WAKE_REFUSED] = "refused",
        [PL_WAKE_FAILED] = "failed",
        [PL_WAKE_CANCELLED] = "cancelled",
    };
    static_assert(ARRAY_SIZE(names) == PL_WAKE_CANCELLED + 1, "a wake kind without a name");
    return NAME_OF(names, kind);
}

const char *pl_wake_event_type_to_string(pl_wake_event_type type)
{
    static const char *const names[] = {
        [PL_WAKE_EVENT_WAKING] = "waking",
        [PL_WAKE_EVENT_JOINED] = "joined",
        [PL_WAKE_EVENT_DEFERRED] = "deferred",
        [PL_WAKE_EVENT_STEP] = "step",
        [PL_WAKE_EVENT_ADMITTED] = "admitted",
        [PL_WAKE_EVENT_HELD] = "held",
        [PL_WAKE_EVENT_EXECUTED] = "executed",
        [PL_WAKE_EVENT_READY] = "ready",
        [PL_WAKE_EVENT_PUBLISHED] = "published",
        [PL_WAKE_EVENT_FAILED] = "failed",
        [PL_WAKE_EVENT_REFUSED] = "refused",
        [PL_WAKE_EVENT_RETIRING] = "retiring",
        [PL_WAKE_EVENT_RETIRED] = "retired",
        [PL_WAKE_EVENT_UNPROVEN] = "unproven",
        [PL_WAKE_EVENT_BACKOFF] = "backoff",
        [PL_WAKE_EVENT_SERVING] = "serving",
        [PL_WAKE_EVENT_GAVE_UP] = "gave_up",
        [PL_WAKE_EVENT_CANCELLED] = "cancelled",
        [PL_WAKE_EVENT_EXITED] = "exited",
        [PL_WAKE_EVENT_FAULTED] = "faulted",
        [PL_WAKE_EVENT_PARKING] = "parking",
        [PL_WAKE_EVENT_PARKED] = "parked",
        [PL_WAKE_EVENT_PROVEN] = "proven",
        [PL_WAKE_EVENT_SWAP_STARTED] = "swap_started",
        [PL_WAKE_EVENT_SWAP_DONE] = "swap_done",
        [PL_WAKE_EVENT_SWAP_FAILED] = "swap_failed",
        [PL_WAKE_EVENT_ENDED] = "ended",
    };
    static_assert(ARRAY_SIZE(names) == _PL_WAKE_EVENT_MAX, "a wake event type without a name");
    return NAME_OF(names, type);
}
