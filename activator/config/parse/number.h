/* Booleans, bounded integers, percentages and rates from configuration
 * values. Each parser fills err with "what is wrong (what to do)" and leaves
 * *out untouched on failure. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* yes/no, true/false, on/off, 1/0, y/n, t/f, in any case, as systemd. */
int cfg_parse_bool(const char *text, bool *out, act_error *err);

/* A decimal integer in min..max, digits only (no sign, no spaces). */
int cfg_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out, act_error *err);

/* "200%": a whole percent in min..max. */
int cfg_parse_percent(const char *text, uint32_t min, uint32_t max, uint32_t *out, act_error *err);

/* A positive decimal rate ("10", "0.5") up to max. */
int cfg_parse_rate(const char *text, double max, double *out, act_error *err);
