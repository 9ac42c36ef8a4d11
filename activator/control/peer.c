#include "activator/control/peer.h"

#include <grp.h>
#include <pwd.h>
#include <stdlib.h>

#include "common/cleanup.h"

bool act_peer_allowed(uid_t uid, gid_t gid, bool have_group, gid_t group)
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
