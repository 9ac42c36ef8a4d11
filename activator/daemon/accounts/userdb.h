/* The hosts' dynamic users in the box's user database: a service of
 * systemd's user and group record lookup API over varlink
 * (io.systemd.UserDatabase), whose socket in /run/systemd/userdb/ every
 * program that resolves users through nss-systemd asks, so that `ps` and
 * `ls -l` name a host's uid (act-<host>), and systemd's own allocator of
 * DynamicUser= uids sees ours as taken.
 *
 * The protocol: NUL-terminated JSON messages on a stream socket. A call is
 * {"method": M, "parameters": {...}, "more": bool}; a reply is
 * {"parameters": {...}} (with "continues": true before the last of several,
 * when the call asked for more), or {"error": NAME, "parameters": {...}}.
 * Three methods are answered: GetUserRecord (by uid, by userName, or every
 * record with "more"), GetGroupRecord (each host's group, the same number)
 * and GetMemberships (none). A call must name this service ("service") as
 * systemd's clients do; a record carries it in its per-machine status, which
 * systemd's clients require.
 *
 * The daemon's own listing of the user database (system_ids.c) must not
 * see these records, or every uid would look taken by someone else: main
 * sets SYSTEMD_BYPASS_USERDB to this service's name before any lookup. */
#pragma once

#include <stddef.h>

#include <systemd/sd-event.h>

#include "activator/daemon/accounts/dynamic_users.h"
#include "common/error.h"

#define AD_USERDB_SERVICE "io.activator.DynamicUser"
/* The user and group name of a host's dynamic user: this prefix and the
 * host's name. */
#define AD_USERDB_NAME_PREFIX "act-"

typedef struct ad_userdb ad_userdb;

/* Keeps this process's own lookups (nss-systemd) from asking this service:
 * adds AD_USERDB_SERVICE to SYSTEMD_BYPASS_USERDB. Before any lookup. */
void ad_userdb_bypass_self(void);

/* Listens on <directory>/AD_USERDB_SERVICE, answering from users, which
 * must outlive the service. A directory that does not exist (a box without
 * systemd's userdb) starts nothing: *out stays NULL and 0 is returned. */
int ad_userdb_start(sd_event *loop, const char *directory, const ad_dynamic_users *users,
                    ad_userdb **out, act_error *err);

/* Stops listening and removes the socket, if it is still ours. */
void ad_userdb_free(ad_userdb *userdb);

/* The reply to one call (request, len bytes, no NUL) from users: one or
 * more NUL-terminated messages in *reply (malloc'd, *reply_len bytes), or
 * none (*reply NULL) for a oneway call. machine_id is the 32 hex digits the
 * records' status is keyed by. -ENOMEM only; a bad call gets an error
 * reply. Pure, for tests. */
int ad_userdb_answer(const ad_dynamic_users *users, const char *machine_id, const char *request,
                     size_t len, char **reply, size_t *reply_len);
