/* Delays between starts, as pure functions of counts and configured units.
 *
 * Two different backoffs exist and they must not be confused:
 *   - inside one wake, the attempt backoff between failed starts of the same
 *     admission: unit · 2^(n-1) after the n-th failed start (1, 2, 4, 8 s);
 *   - across wakes, the failure-park backoff before re-activating a host whose
 *     last n tenures ended in failure: base · 2^(n-1), capped (25 ms .. 30 s).
 * Both take their units as arguments so tests can shrink them. The capped
 * doubling of the second also paces the restarts of a replica
 * (ExecReplicate=) while its generation serves. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Wait before the start that follows the failed_starts-th failed one:
 * unit_usec · 2^(failed_starts-1). 0 for failed_starts 0. Saturates instead of
 * overflowing. */
uint64_t pl_attempt_backoff_usec(unsigned failed_starts, uint64_t unit_usec);

/* The n-th wait of a run of waits that double, capped:
 * min(max_usec, unit_usec · 2^(n-1)); 0 for n 0. The failure-park backoff
 * is one such run; the restarts of a replica (ExecReplicate=) in a row are
 * another. */
uint64_t pl_doubling_delay_usec(unsigned n, uint64_t unit_usec, uint64_t max_usec);

/* Wait before re-activating a host after streak consecutive failure parks:
 * min(max_usec, base_usec · 2^(streak-1)); 0 for streak 0. */
uint64_t pl_failure_park_delay_usec(unsigned streak, uint64_t base_usec, uint64_t max_usec);

/* How a tenure (a serving generation, or a wake that never reached serving)
 * ended, for the failure-park streak. */
typedef enum pl_park_cause {
    PL_PARK_IDLE,       /* idle timeout, or the generation exited with status 0 */
    PL_PARK_REQUEST,    /* an operator's park (activatorctl park) */
    PL_PARK_CLAIM_LOST, /* another box now owns the host */
    PL_PARK_FAILURE,    /* the generation crashed, failed its health, or the wake gave up */
    _PL_PARK_CAUSE_MAX,
} pl_park_cause;

/* "idle", "request", "claim_lost", "failure". */
const char *pl_park_cause_to_string(pl_park_cause cause);

/* The failure-park streak after a park. An idle park resets it. A failure
 * extends it, counted from zero when the tenure served for FailureResetSec
 * (served_long_enough): a generation that served well before crashing is not
 * part of a crash loop. A request or a lost claim says nothing about the
 * build's health and leaves the streak as it was. */
unsigned pl_failure_streak_next(unsigned streak, pl_park_cause cause, bool served_long_enough);
