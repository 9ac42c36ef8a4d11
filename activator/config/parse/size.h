/* Byte sizes for memory limits, in systemd's forms for MemoryMax=:
 * "536870912", "512M", "1.5G", "50%", "infinity". */
#pragma once

#include <stdint.h>

#include "common/error.h"

/* The value of "infinity": no limit. */
#define CFG_SIZE_INFINITY UINT64_MAX

/* Units are powers of 1024 (K, M, G, T, P, E), as systemd and the cgroup
 * files use them, optionally followed by B ("512MB"); a plain number, or one
 * with B alone, is bytes. "N%" (up to two decimals, at most 100%) is that
 * share of this box's physical memory, as systemd reads it. A size that
 * rounds to 0 bytes or does not fit in 64 bits is refused. */
int cfg_parse_size(const char *text, uint64_t *out, act_error *err);
