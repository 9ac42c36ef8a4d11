/* Dynamic users: the uid each host without User= runs as, its own and
 * never another host's, from DynamicUserRange=. The uid is its gid too.
 *
 * A host's uid is derived from its name (a hash into the range), so that it
 * is the same on every box where that uid is free, and probed onwards from
 * there past every uid the user or group database knows and every uid
 * another host of this daemon was given. The tables here are the
 * reservation (one daemon owns a state directory); each choice is recorded
 * durably before it is used, as a "<uid> <host>" line of
 * <state>/dynamic-users/records, which is replaced whole (temp file, fsync,
 * rename): one file for every host, so that a start that gives 10,000 hosts
 * their uids creates one inode, not 10,000. The next daemon reads them all
 * back, so a host keeps its uid across restarts, and its state directory
 * stays its own. A record is never dropped, not even for a host taken out
 * of the configuration: its state directory may still hold files of that
 * uid, which a new host given the uid would own. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "activator/config/config.h"
#include "activator/daemon/accounts/system_ids.h"
#include "common/error.h"

typedef struct ad_dynamic_users ad_dynamic_users;

/* Reads (creating the directory when missing) the records in
 * <state_dirfd>/dynamic-users/records. A line that is not "<uid> <host>" is
 * refused with its path and line, and so are any other file in the
 * directory (but a dot file a cut-short write left), one host named twice
 * and one uid given to two hosts. */
int ad_dynamic_users_open(int state_dirfd, uint32_t uid_min, uint32_t uid_max,
                          ad_dynamic_users **out, act_error *err);
void ad_dynamic_users_free(ad_dynamic_users *users);

/* The hosts of a configuration (all of them, n): the ids their User= and
 * Group= give by number are never given out to a dynamic user, replacing
 * the set before. A named account needs no such care: it is in the user
 * or group database, whose ids are never given out anyway. */
int ad_dynamic_users_exclude_hosts(ad_dynamic_users *users, const cfg_host *hosts, size_t n,
                                   act_error *err);

/* Lists the user and group databases once (accounts/system_ids.h), for the uids
 * given out from here on: call it before each configuration's hosts get
 * theirs, so that an account added since is seen. Without it, each uid is
 * looked up on its own. */
int ad_dynamic_users_read_system(ad_dynamic_users *users, act_error *err);

/* From here until ad_dynamic_users_sync, a new record is not written on its
 * own: a start that gives 10,000 hosts their uids writes the records once,
 * which must come before any of those uids is used (owns a file, runs a
 * process). */
void ad_dynamic_users_defer_sync(ad_dynamic_users *users);
/* Writes the records durably if one was made (or dropped) since the last
 * write, and ends the deferral. */
int ad_dynamic_users_sync(ad_dynamic_users *users, act_error *err);

/* The host whose dynamic user uid is, or NULL: a User= or Group= naming it
 * would share that host's files. */
const char *ad_dynamic_users_owner(const ad_dynamic_users *users, uint32_t uid);

/* The uid recorded for host, without making one: 0 when it has none. */
uint32_t ad_dynamic_users_uid_of(const ad_dynamic_users *users, const char *host);

/* The records one by one, in no order: *cursor starts at 0; false once
 * every record was given. */
bool ad_dynamic_users_next(const ad_dynamic_users *users, size_t *cursor, uint32_t *uid,
                           const char **host);

/* The uid of host: its record when it has one inside the range whose uid
 * the user and group databases still do not know (a record is the host's
 * even where a User= names its uid: that User= is refused, see
 * ad_dynamic_users_owner), else a new one outside the excluded ids, recorded
 * durably before this returns unless deferred. Fails naming the range when
 * every uid of it is taken. Blocks on the user and group databases and, not
 * deferred, on writing the records: called once per host and daemon start
 * (and for a host a reload adds). Not thread-safe. */
int ad_dynamic_user_get(ad_dynamic_users *users, const char *host, uid_t *uid, act_error *err);
