/* The pipeline's configuration: its defaults (man activatord.conf),
 * and the checks that keep a bad value from reaching a running host. */
#include <assert.h>
#include <errno.h>
#include <math.h>

#include "activator/pipeline/pipeline.h"

#define USEC_PER_MSEC 1000ULL
#define USEC_PER_SEC 1000000ULL

void pl_config_init(pl_config *config)
{
    assert(config);
    *config = (pl_config){
        .max_starts = 5,
        .backoff_unit_usec = USEC_PER_SEC,
        .ready_timeout_usec = 30 * USEC_PER_SEC,
        /* The pipeline alone bounds nothing end to end; the daemon sets the
         * host's WakeTimeoutSec= (90 s unless configured). */
        .wake_timeout_usec = 0,
        .park_backoff_base_usec = 25 * USEC_PER_MSEC,
        .park_backoff_max_usec = 30 * USEC_PER_SEC,
        .start_rate_per_sec = 0,
        .budget_wait_max_usec = 30 * USEC_PER_SEC,
        .start_cap = NULL,
    };
}

int pl_config_check(const pl_config *config, act_error *err)
{
    assert(config);
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
    if (config->wake_timeout_usec > 3600 * USEC_PER_SEC)
        return act_error_set(err, EINVAL,
                             "WakeTimeoutSec of %llu us is out of range: use 0 for no bound, or "
                             "at most 1 h",
                             (unsigned long long)config->wake_timeout_usec);
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
