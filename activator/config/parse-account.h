/* User= and Group= values. */
#pragma once

#include "common/error.h"

/* A user or group name as useradd accepts it ([A-Za-z_][A-Za-z0-9_.-]*,
 * optionally ending in $, at most 32 characters) or a numeric id. The name is
 * not looked up here: a user may be created after the file is written; the
 * start that needs it resolves it. what is "user" or "group". */
int act_parse_account_name(const char *what, const char *text, act_error *err);
