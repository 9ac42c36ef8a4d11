/* Command lines and word lists from outside (Exec=, ExecRestore=,
 * ExecReplicate=, HealthCheck=exec:, Environment=, SystemCallFilter=), split
 * by one grammar, systemd's for ExecStart= and Environment=
 * (systemd.service(5), "Command lines"), without a shell ever seeing them. */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "common/strv.h"

/* Splits text into words. Blanks separate words. 'Single' and "double"
 * quotes keep blanks in a word and may sit inside one (a"b c"d is one word).
 * A backslash starts a C escape, inside quotes too: \a \b \f \n \r \t \v \\
 * \" \' \s (a space), \xHH, \NNN (octal), \uHHHH and \UHHHHHHHH (as UTF-8);
 * a backslash before a blank keeps the blank in the word. Any other escape,
 * one that makes a NUL byte, an unclosed quote and a trailing backslash are
 * errors. There is no other expansion: $VAR, ~ and ; are plain characters.
 * *out is a NULL-terminated malloc'd array of malloc'd words (free with
 * act_strv_free), with zero words for a blank text. */
int act_split_argv(const char *text, char ***out, act_error *err);
