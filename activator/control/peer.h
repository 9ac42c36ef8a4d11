/* Who may use the local control socket. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

/* True for uid 0, for a peer whose primary gid is group, and for a uid whose
 * supplementary groups (the group database) include group. have_group false
 * (no ControlGroup=) admits root only. May read the group database, so it is
 * called on an NNG thread, never on the event loop. */
bool ctrl_peer_allowed(uid_t uid, gid_t gid, bool have_group, gid_t group);

/* The file mode of an ipc:// socket: what is configured, else 0600, or 0660
 * with ControlGroup= so that its members can connect at all (the peer check
 * above still decides per message). */
int ctrl_ipc_socket_mode(int configured, bool have_group);

/* With ControlGroup=, hands an ipc:// socket file (url "ipc:///path") to that
 * group once it is listening; other URLs and no group: nothing to do. */
int ctrl_ipc_socket_to_group(const char *url, bool have_group, gid_t group, act_error *err);
