/* Host and version names: the only strings from outside that become path
 * components. And certificate subject CNs, which name remote control
 * clients. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define ACT_NAME_MAX 64

/* True when name is 1 to 64 characters of [A-Za-z0-9._-] and does not start
 * with '.', so it can never be "..", a hidden file or contain a '/'. */
bool act_name_is_valid(const char *name);

/* Checks name and, when it is bad, fills err with a sentence naming what kind
 * of name it is (what: "host", "version"), the offending value shown safely,
 * and the rule. Returns 0 or -EINVAL. */
int act_name_check(const char *what, const char *name, act_error *err);

/* X.509's upper bound for a subject CN (ub-common-name). */
#define ACT_CN_MAX 64

/* True when the len bytes at cn are a CN that ControlOperators= and
 * ControlViewers= can name: 1 to 64 printable ASCII characters, spaces
 * included. A certificate whose CN is anything else is named by no list. */
bool act_cn_is_valid(const char *cn, size_t len);
