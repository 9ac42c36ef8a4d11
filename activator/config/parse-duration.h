/* Time spans for the *Sec= keys: "30", "500ms", "1min 30s", "1.5s". */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define ACT_USEC_PER_SEC UINT64_C(1000000)

/* One or more NUMBER[UNIT] terms, added up; a term without a unit is seconds
 * (as in systemd). Units: us, ms, s, sec, m, min, h, hr, d, also spelt out
 * (seconds, minutes, ...). Result in microseconds. */
int act_parse_duration(const char *text, uint64_t *usec, act_error *err);

/* The same, then refuses results outside min_usec..max_usec with a message
 * naming the bounds in readable units. */
int act_parse_duration_range(const char *text, uint64_t min_usec, uint64_t max_usec, uint64_t *usec,
                             act_error *err);

/* "30s", "1min 30s", "250ms", "0": the shortest exact readable form. */
void act_format_duration(uint64_t usec, char *out, size_t out_size);
