/* Time spans for the *Sec= keys, in systemd.time(7)'s syntax: "30",
 * "500ms", "1min 30s", "1min30s", "5 min", "1.5s", "2w", "infinity". */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define CFG_USEC_PER_SEC UINT64_C(1000000)
/* "infinity": no end. Only keys that say so take it. */
#define CFG_USEC_INFINITY UINT64_MAX

/* One or more NUMBER[UNIT] terms, added up, as systemd.time(7) writes them:
 * blanks between terms and between a number and its unit are optional; a
 * number without a unit is seconds; a number may have a fraction. Units: us
 * usec μs, ms msec, s sec second seconds, m min minute minutes, h hr hour
 * hours, d day days, w week weeks, M month months (30.44 days), y year years
 * (365.25 days). "infinity" alone is CFG_USEC_INFINITY. Result in
 * microseconds. */
int cfg_parse_duration(const char *text, uint64_t *usec, act_error *err);

/* The same, then refuses results outside min_usec..max_usec (infinity too,
 * unless max_usec is CFG_USEC_INFINITY) with a message naming the bounds in
 * readable units. */
int cfg_parse_duration_range(const char *text, uint64_t min_usec, uint64_t max_usec, uint64_t *usec,
                             act_error *err);

/* "30s", "1min 30s", "250ms", "0", "infinity": the shortest exact readable
 * form. */
void cfg_format_duration(uint64_t usec, char *out, size_t out_size);
