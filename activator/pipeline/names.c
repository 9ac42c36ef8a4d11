/* Names of steps, states, triggers, outcomes and events, and the pipeline's
 * configuration defaults and checks. */
#include <errno.h>
#include <math.h>

#include "activator/pipeline/pipeline.h"
#include "common/cleanup.h"

#define USEC_PER_MSEC 1000ULL
#define USEC_PER_SEC 1000000ULL

#define NAME_OF(table, value)                                                                      \
    ((unsigned)(value) < ARRAY_SIZE(table) && (table)[value] ? (table)[value] : "unknown")

const char *act_step_to_string(act_step step)
{
    static const char *const names[_ACT_STEP_MAX] = {
        [ACT_STEP_NONE] = "start",          [ACT_STEP_READ] = "read",
        [ACT_STEP_ADMIT] = "admit",         [ACT_STEP_RESTORE] = "restore",
        [ACT_STEP_RESERVE] = "reserve",     [ACT_STEP_MATERIALIZE] = "materialize",
        [ACT_STEP_PREPARE] = "prepare",     [ACT_STEP_GATE] = "gate",
        [ACT_STEP_EXEC] = "exec",           [ACT_STEP_READY] = "ready",
        [ACT_STEP_REPLICATE] = "replicate", [ACT_STEP_PUBLISH] = "publish",
        [ACT_STEP_HEALTHY] = "healthy",     [ACT_STEP_FAILED] = "failed",
    };
    return NAME_OF(names, step);
}

const char *act_host_state_to_string(act_host_state state)
{
    static const char *const names[_ACT_HOST_STATE_MAX] = {
        [ACT_HOST_PARKED] = "parked",
        [ACT_HOST_WAKING] = "waking",
        [ACT_HOST_SERVING] = "serving",
        [ACT_HOST_RETIRING] = "retiring",
    };
    return NAME_OF(names, state);
}

const char *act_trigger_to_string(act_trigger trigger)
{
    static const char *const names[_ACT_TRIGGER_MAX] = {
        [ACT_TRIGGER_CONNECTION] = "connection",
        [ACT_TRIGGER_WARM] = "warm",
        [ACT_TRIGGER_CLAIM_CHANGE] = "claim_change",
    };
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
    return NAME_OF(names, kind);
}

const char *act_event_type_to_string(act_event_type type)
{
    static const char *const names[_ACT_EVENT_MAX] = {
        [ACT_EVENT_WAKING] = "waking",       [ACT_EVENT_JOINED] = "joined",
        [ACT_EVENT_DEFERRED] = "deferred",   [ACT_EVENT_STEP] = "step",
        [ACT_EVENT_ADMITTED] = "admitted",   [ACT_EVENT_HELD] = "held",
        [ACT_EVENT_EXECUTED] = "executed",   [ACT_EVENT_READY] = "ready",
        [ACT_EVENT_PUBLISHED] = "published", [ACT_EVENT_FAILED] = "failed",
        [ACT_EVENT_REFUSED] = "refused",     [ACT_EVENT_RETIRING] = "retiring",
        [ACT_EVENT_RETIRED] = "retired",     [ACT_EVENT_UNPROVEN] = "unproven",
        [ACT_EVENT_BACKOFF] = "backoff",     [ACT_EVENT_SERVING] = "serving",
        [ACT_EVENT_GAVE_UP] = "gave_up",     [ACT_EVENT_CANCELLED] = "cancelled",
        [ACT_EVENT_EXITED] = "exited",       [ACT_EVENT_PARKING] = "parking",
        [ACT_EVENT_PARKED] = "parked",       [ACT_EVENT_PROVEN] = "proven",
    };
    return NAME_OF(names, type);
}

void act_pipeline_config_init(act_pipeline_config *config)
{
    *config = (act_pipeline_config){
        .max_starts = 5,
        .backoff_unit_usec = USEC_PER_SEC,
        .ready_timeout_usec = 30 * USEC_PER_SEC,
        .park_backoff_base_usec = 25 * USEC_PER_MSEC,
        .park_backoff_max_usec = 30 * USEC_PER_SEC,
        .start_rate_per_sec = 0,
        .budget_wait_max_usec = 30 * USEC_PER_SEC,
        .start_cap = NULL,
    };
}

int act_pipeline_config_check(const act_pipeline_config *config, act_error *err)
{
    if (config->max_starts < 1 || config->max_starts > 5)
        return act_error_set(err, EINVAL, "MaxStarts=%u is out of range: use 1 to 5",
                             config->max_starts);
    if (config->backoff_unit_usec == 0 || config->backoff_unit_usec > 60 * USEC_PER_SEC)
        return act_error_set(err, EINVAL,
                             "the attempt backoff unit of %llu us is out of range: use above 0 "
                             "and at most 60 s",
                             (unsigned long long)config->backoff_unit_usec);
    if (config->ready_timeout_usec == 0 || config->ready_timeout_usec > 30 * USEC_PER_SEC)
        return act_error_set(err, EINVAL,
                             "ReadyTimeoutSec of %llu us is out of range: use above 0 and at "
                             "most 30 s",
                             (unsigned long long)config->ready_timeout_usec);
    if (config->park_backoff_base_usec == 0 ||
        config->park_backoff_max_usec < config->park_backoff_base_usec)
        return act_error_set(err, EINVAL,
                             "the failure-park backoff (base %llu us, cap %llu us) is invalid: "
                             "the base must be above 0 and the cap at least the base",
                             (unsigned long long)config->park_backoff_base_usec,
                             (unsigned long long)config->park_backoff_max_usec);
    if (!isfinite(config->start_rate_per_sec) || config->start_rate_per_sec < 0 ||
        config->start_rate_per_sec > 1e6)
        return act_error_set(err, EINVAL,
                             "StartRateLimit=%g is out of range: use 0 for no limit, or a rate "
                             "above 0 and at most 1000000 per second",
                             config->start_rate_per_sec);
    if (config->budget_wait_max_usec == 0)
        return act_error_set(err, EINVAL,
                             "the budget wait must be above 0, or every held start would be "
                             "refused at once");
    return 0;
}
