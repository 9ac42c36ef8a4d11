/* Environment= assignments. */
#pragma once

#include <stdbool.h>

#include "common/error.h"

/* Checks one "KEY=VALUE" word: KEY is [A-Za-z_][A-Za-z0-9_]* and is not one
 * the daemon sets for every generation (LISTEN_*, NOTIFY_SOCKET, WATCHDOG_*,
 * ACTIVATOR_*), which a host file could otherwise silently break. */
int cfg_parse_env_assignment(const char *word, act_error *err);

/* True when a and b assign the same KEY. */
bool cfg_env_same_key(const char *a, const char *b);
