/* The ids the user and group databases know, read once per configuration
 * rather than asked about one id at a time.
 *
 * A dynamic user's uid must be one no account or group of the box has. Asked
 * one id at a time (getpwuid_r, getgrgid_r) that costs two lookups per host
 * and start, and through nss-systemd each one walks every userdb directory
 * or asks systemd-userdbd: 150-300 us here, most of a 10,000-host start.
 * Listed once (getpwent, getgrent) it costs well under a millisecond.
 *
 * A list holds all a source knows only for the sources that enumerate
 * everything they answer for: files, extrausers and systemd (its dynamic
 * users and userdb records; machined answers lookups for the uid ranges of
 * registered containers without listing them, which DynamicUserRange=
 * should keep clear of anyway). When nsswitch.conf names another source for
 * passwd or group (ldap, sss, nis...), an id the lists lack is still looked
 * up one at a time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct ad_system_ids ad_system_ids;

/* Lists the user and group databases. nsswitch is the path of nsswitch.conf
 * (NULL: /etc/nsswitch.conf); a missing file means glibc's default, files.
 * Fails only for want of memory. */
int ad_system_ids_read(const char *nsswitch, ad_system_ids **out, act_error *err);
void ad_system_ids_free(ad_system_ids *ids);

/* Whether the user or group database has id as a uid or a gid. With ids
 * NULL, or not listed whole, an id not in the lists is looked up; a failed
 * lookup counts as known. */
bool ad_system_ids_known(const ad_system_ids *ids, uint32_t id);

/* Whether every source a nsswitch.conf text names for passwd and for group
 * lists all it knows (a database without a line defaults to files). Pure,
 * for tests. */
bool ad_nsswitch_lists_whole(const char *text);
