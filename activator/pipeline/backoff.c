/* Attempt and failure-park backoff (see backoff.h). */
#include "activator/pipeline/backoff.h"

#include <assert.h>
#include <limits.h>

#include "common/cleanup.h"

/* unit · 2^exponent, saturating at UINT64_MAX so that a large streak or a
 * large configured unit can never wrap to a short delay. */
static uint64_t doubled(uint64_t unit, unsigned exponent)
{
    if (unit == 0)
        return 0;
    if (exponent >= 63 || unit > (UINT64_MAX >> exponent))
        return UINT64_MAX;
    return unit << exponent;
}

uint64_t pl_attempt_backoff_usec(unsigned failed_starts, uint64_t unit_usec)
{
    if (failed_starts == 0)
        return 0;
    return doubled(unit_usec, failed_starts - 1);
}

uint64_t pl_doubling_delay_usec(unsigned n, uint64_t unit_usec, uint64_t max_usec)
{
    if (n == 0)
        return 0;
    uint64_t delay = doubled(unit_usec, n - 1);
    return delay < max_usec ? delay : max_usec;
}

uint64_t pl_failure_park_delay_usec(unsigned streak, uint64_t base_usec, uint64_t max_usec)
{
    return pl_doubling_delay_usec(streak, base_usec, max_usec);
}

const char *pl_park_cause_to_string(pl_park_cause cause)
{
    static const char *const names[] = {
        [PL_PARK_IDLE] = "idle",
        [PL_PARK_REQUEST] = "request",
        [PL_PARK_CLAIM_LOST] = "claim_lost",
        [PL_PARK_FAILURE] = "failure",
    };
    static_assert(ARRAY_SIZE(names) == _PL_PARK_CAUSE_MAX, "a park cause without a name");
    if ((unsigned)cause >= ARRAY_SIZE(names))
        return "unknown";
    return names[cause];
}

unsigned pl_failure_streak_next(unsigned streak, pl_park_cause cause, bool served_long_enough)
{
    switch (cause) {
    case PL_PARK_IDLE:
        return 0;
    case PL_PARK_FAILURE:
        if (served_long_enough)
            return 1;
        return streak == UINT_MAX ? streak : streak + 1;
    case PL_PARK_REQUEST:
    case PL_PARK_CLAIM_LOST:
    default:
        return streak;
    }
}
