/* Names of steps, states, triggers, outcomes and events: the strings that
 * events, logs and control replies carry. */
#include "activator/pipeline/pipeline.h"

#include <assert.h>

#include "common/cleanup.h"

#define NAME_OF(table, value)                                                                      \
    ((unsigned)(value) < ARRAY_SIZE(table) && (table)[value] ? (table)[value] : "unknown")

const char *act_step_to_string(act_step step)
{
    static const char *const names[] = {
        [ACT_STEP_NONE] = "start",          [ACT_STEP_READ] = "read",
        [ACT_STEP_ADMIT] = "admit",         [ACT_STEP_RESTORE] = "restore",
        [ACT_STEP_RESERVE] = "reserve",     [ACT_STEP_MATERIALIZE] = "materialize",
        [ACT_STEP_PREPARE] = "prepare",     [ACT_STEP_GATE] = "gate",
        [ACT_STEP_EXEC] = "exec",           [ACT_STEP_READY] = "ready",
        [ACT_STEP_REPLICATE] = "replicate", [ACT_STEP_PUBLISH] = "publish",
        [ACT_STEP_HEALTHY] = "healthy",     [ACT_STEP_FAILED] = "failed",
    };
    static_assert(ARRAY_SIZE(names) == _ACT_STEP_MAX, "a step without a name");
    return NAME_OF(names, step);
}

const char *act_host_state_to_string(act_host_state state)
{
    static const char *const names[] = {
        [ACT_HOST_PARKED] = "parked",
        [ACT_HOST_WAKING] = "waking",
        [ACT_HOST_SERVING] = "serving",
        [ACT_HOST_RETIRING] = "retiring",
    };
    static_assert(ARRAY_SIZE(names) == _ACT_HOST_STATE_MAX, "a host state without a name");
    return NAME_OF(names, state);
}

const char *act_trigger_to_string(act_trigger trigger)
{
    static const char *const names[] = {
        [ACT_TRIGGER_CONNECTION] = "connection",
        [ACT_TRIGGER_WARM] = "warm",
        [ACT_TRIGGER_CLAIM_CHANGE] = "claim_change",
    };
    static_assert(ARRAY_SIZE(names) == _ACT_TRIGGER_MAX, "a trigger without a name");
    return NAME_OF(names, trigger);
}

const char *act_wake_kind_to_string(act_wake_kind kind)
{
    static const char *const names[] = {
        [ACT_WAKE_SERVING] = "serving",
        [ACT_WAKE_REFUSED] = "refused",
        [ACT_WAKE_FAILED] = "failed",
        [ACT_WAKE_CANCELLED] = "cancelled",
    };
    static_assert(ARRAY_SIZE(names) == ACT_WAKE_CANCELLED + 1, "a wake kind without a name");
    return NAME_OF(names, kind);
}

const char *act_wake_event_type_to_string(act_wake_event_type type)
{
    static const char *const names[] = {
        [ACT_WAKE_EVENT_WAKING] = "waking",
        [ACT_WAKE_EVENT_JOINED] = "joined",
        [ACT_WAKE_EVENT_DEFERRED] = "deferred",
        [ACT_WAKE_EVENT_STEP] = "step",
        [ACT_WAKE_EVENT_ADMITTED] = "admitted",
        [ACT_WAKE_EVENT_HELD] = "held",
        [ACT_WAKE_EVENT_EXECUTED] = "executed",
        [ACT_WAKE_EVENT_READY] = "ready",
        [ACT_WAKE_EVENT_PUBLISHED] = "published",
        [ACT_WAKE_EVENT_FAILED] = "failed",
        [ACT_WAKE_EVENT_REFUSED] = "refused",
        [ACT_WAKE_EVENT_RETIRING] = "retiring",
        [ACT_WAKE_EVENT_RETIRED] = "retired",
        [ACT_WAKE_EVENT_UNPROVEN] = "unproven",
        [ACT_WAKE_EVENT_BACKOFF] = "backoff",
        [ACT_WAKE_EVENT_SERVING] = "serving",
        [ACT_WAKE_EVENT_GAVE_UP] = "gave_up",
        [ACT_WAKE_EVENT_CANCELLED] = "cancelled",
        [ACT_WAKE_EVENT_EXITED] = "exited",
        [ACT_WAKE_EVENT_PARKING] = "parking",
        [ACT_WAKE_EVENT_PARKED] = "parked",
        [ACT_WAKE_EVENT_PROVEN] = "proven",
        [ACT_WAKE_EVENT_SWAP_STARTED] = "swap_started",
        [ACT_WAKE_EVENT_SWAP_DONE] = "swap_done",
        [ACT_WAKE_EVENT_SWAP_FAILED] = "swap_failed",
        [ACT_WAKE_EVENT_ENDED] = "ended",
    };
    static_assert(ARRAY_SIZE(names) == _ACT_WAKE_EVENT_MAX, "a wake event type without a name");
    return NAME_OF(names, type);
}
