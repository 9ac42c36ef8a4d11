/* Copying strings into the fixed-size fields of records (claims, events). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Copies src into dst of size bytes, always NUL-terminated, cutting it short
 * when it does not fit (a sentence in a 256-byte field: the start is what a
 * reader needs). Returns true when all of src fit. */
bool act_copy_string(char *dst, size_t size, const char *src);
