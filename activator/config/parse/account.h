/* User=, Group= and ControlGroup= values: checked when a file is read, and
 * resolved on this box when they are used (a user may be created after the
 * file is written). One grammar for the three keys: a name or a number. */
#pragma once

#include <sys/types.h>

#include "common/error.h"

/* A user or group name as useradd accepts it ([A-Za-z_][A-Za-z0-9_.-]*,
 * optionally ending in $, at most 32 characters) or a numeric id (0 to
 * 4294967294, not 65535: as systemd, the 16-bit and 32-bit -1 are never
 * real ids). what is "user" or "group". */
int cfg_parse_account_name(const char *what, const char *text, act_error *err);

/* key=text (User=) on this box: a name is looked up in the user database
 * for its uid and primary gid; a number is the uid itself, with the primary
 * gid of its entry, or the same number when no entry names it (as systemd's
 * User= runs an id that has no passwd entry). Errors read "User=web1: no
 * such user on this box; create it or change User=". Not thread-safe: it
 * uses getpwnam(3). */
int cfg_resolve_user(const char *key, const char *text, uid_t *uid, gid_t *gid, act_error *err);

/* key=text (Group=, ControlGroup=) on this box: a name is looked up in the
 * group database; a number is the gid itself. Not thread-safe either. */
int cfg_resolve_group(const char *key, const char *text, gid_t *gid, act_error *err);
