/* Byte sizes for memory limits: "536870912", "512M", "1.5G", "infinity". */
#pragma once

#include <stdint.h>

#include "common/error.h"

/* The value of "infinity": no limit. */
#define ACT_SIZE_INFINITY UINT64_MAX

/* Units are powers of 1024 (K, M, G, T, P), as systemd and the cgroup files
 * use them; a plain number is bytes. A size that rounds to 0 bytes or does
 * not fit in 64 bits is refused. */
int act_parse_size(const char *text, uint64_t *out, act_error *err);
