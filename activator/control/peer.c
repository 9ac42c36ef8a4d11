#include "activator/control/peer.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"

bool ctrl_peer_allowed(uid_t uid, gid_t gid, bool have_group, gid_t group)
{
    if (uid == 0)
        return true;
    if (!have_group)
        return false;
    if (gid == group)
        return true;

    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) != 0 || !found)
        return false;

    /* The peer's process may have dropped supplementary groups, but the
     * operator configured membership in the group database, so that is what
     * counts. */
    int count = 64;
    for (int attempt = 0; attempt < 2; attempt++) {
        _cleanup_free_ gid_t *groups = calloc((size_t)count, sizeof(gid_t));
        if (!groups)
            return false;
        int n = count;
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) >= 0) {
            for (int i = 0; i < n; i++)
                if (groups[i] == group)
                    return true;
            return false;
        }
        count = n; /* getgrouplist told us how many it needs */
    }
    return false;
}

int ctrl_ipc_socket_mode(int configured, bool have_group)
{
    if (configured)
        return configured;
    return have_group ? 0660 : 0600;
}

int ctrl_ipc_socket_to_group(const char *url, bool have_group, gid_t group, act_error *err)
{
    if (!have_group || strncmp(url, "ipc://", 6) != 0)
        return 0;
    if (chown(url + 6, (uid_t)-1, group) < 0)
        return act_error_set(err, errno, "%s: cannot hand the socket to ControlGroup= gid %u: %s",
                             url, (unsigned)group, strerror(errno));
    return 0;
}
