/* A small Prometheus text-format (exposition format 0.0.4) parser for tests. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Returns true when text is valid exposition format; fills why otherwise.
 * Checks: HELP/TYPE lines, every sample belongs to a TYPE'd family (with the
 * _bucket/_sum/_count suffixes for histograms), label syntax and escapes, and
 * values that parse as floats. When want (a full sample name with labels,
 * e.g. activator_wakes_total{outcome="serving",reason="none"}) is given, its
 * value goes to *found, and a missing want is a failure. */
bool parse_prometheus(const char *text, const char *want, double *found, char *why,
                      size_t why_size);
