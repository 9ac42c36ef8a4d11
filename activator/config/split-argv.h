/* Command lines and word lists of Exec=, ExecRestore=, Environment= and
 * SystemCallFilter=, split the way a shell would split them, without a shell
 * ever seeing them. */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "common/strv.h"

/* Splits text into words: blanks separate words; 'single quotes' keep
 * everything literally; "double quotes" keep everything but let \" and \\
 * stand for " and \; outside quotes a backslash takes the next character
 * literally. Quotes may sit inside a word (a"b c"d is one word). An
 * unterminated quote or a trailing backslash is an error. *out is a
 * NULL-terminated malloc'd array of malloc'd words (free with act_strv_free),
 * with zero words for a blank text. */
int act_split_argv(const char *text, char ***out, act_error *err);
