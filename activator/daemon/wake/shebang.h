/* The "#!" line of a build's executable, read as the kernel reads it. Pure:
 * no I/O, for tests. */
#pragma once

#include <stddef.h>

#include "common/error.h"

/* The kernel reads at most this much of a "#!" line (BINPRM_BUF_SIZE). */
#define AD_SHEBANG_MAX 256

/* Reads a "#!" line from the start of text (n bytes): 1 with the
 * interpreter's path in out, 0 when text is not a script, or a negative
 * errno with err saying what is wrong with the line (no interpreter, a
 * relative one, a line longer than the kernel reads). */
int ad_shebang_parse(const char *text, size_t n, char out[AD_SHEBANG_MAX], act_error *err);
