/* Who may use the local control socket. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* True for uid 0, for a peer whose primary gid is group, and for a uid whose
 * supplementary groups (the group database) include group. have_group false
 * (no ControlGroup=) admits root only. May read the group database, so it is
 * called on an NNG thread, never on the event loop. */
bool act_peer_allowed(uid_t uid, gid_t gid, bool have_group, gid_t group);
