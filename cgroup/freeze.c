/* The cgroup v2 freezer for a leaf: every process of it stopped where it
 * stands, nothing killed. The kernel freezes asynchronously (a task in the
 * middle of a system call stops at its way out), so "frozen 1" in
 * cgroup.events, learnt through the leaf's events fd, is the proof that it
 * happened; nothing here sleeps or polls. */
#include <assert.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/internal.h"

int cg_leaf_freeze(cg_leaf *leaf, bool freeze, act_error *err)
{
    assert(leaf);
    int r = cg_write_file_at(leaf->dir_fd, "cgroup.freeze", freeze ? "1" : "0");
    if (r < 0)
        return act_error_set(err, -r, "cannot %s %s (writing cgroup.freeze): %s",
                             freeze ? "freeze" : "thaw", leaf->v2_path, strerror(-r));
    return 0;
}

int cg_leaf_frozen(cg_leaf *leaf, bool *frozen, act_error *err)
{
    assert(leaf);
    assert(frozen);
    /* Drained first, as cg_leaf_populated does: a change after the read
     * below makes the fd readable again, so no edge is lost. */
    if (leaf->inotify_fd >= 0) {
        char buf[4096];
        while (read(leaf->inotify_fd, buf, sizeof(buf)) > 0)
            ;
    }
    char buf[256];
    ssize_t n = pread(leaf->cgevents_fd, buf, sizeof(buf) - 1, 0);
    if (n < 0)
        return act_error_set(err, errno, "cannot read %s/cgroup.events: %s", leaf->v2_path,
                             strerror(errno));
    buf[n] = '\0';
    uint64_t value = 0;
    if (!cg_parse_keyed(buf, "frozen", &value))
        return act_error_set(err, EOPNOTSUPP,
                             "%s/cgroup.events has no \"frozen\" line: this kernel has no cgroup "
                             "v2 freezer (use ParkMode=stop)",
                             leaf->v2_path);
    *frozen = value != 0;
    return 0;
}
