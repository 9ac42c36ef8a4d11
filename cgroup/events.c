/* A leaf's cgroup.events: read (populated, frozen) and watched. The kernel
 * changes the file when either value does, and says so to whoever polls
 * it for POLLPRI (kernfs's notification, as for any sysfs attribute): the
 * one way this library learns that a leaf emptied or froze, never by
 * sleeping and looking again. Each read of the file acknowledges what it
 * saw, so a change after a read always raises POLLPRI again.
 *
 * The fd polled is the one the leaf reads: no inotify instance per leaf.
 * Closing an inotify instance waits for an SRCU grace period (milliseconds
 * each), and a daemon with a hundred generations paid a hundred of them
 * in a row when it handed over. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/internal.h"

int cg_leaf_events_fd(cg_leaf *leaf, act_error *err)
{
    assert(leaf);
    if (leaf->cgevents_fd < 0)
        return act_error_set(err, EBADF, "%s/cgroup.events is closed: the leaf was removed",
                             leaf->v2_path);
    return leaf->cgevents_fd;
}

int cg_leaf_events_read(cg_leaf *leaf, const char *key, uint64_t *value, act_error *err)
{
    assert(leaf);
    assert(key);
    assert(value);
    char buf[256];
    ssize_t n = pread(leaf->cgevents_fd, buf, sizeof(buf) - 1, 0);
    if (n < 0)
        return act_error_set(err, errno, "cannot read %s/cgroup.events: %s", leaf->v2_path,
                             strerror(errno));
    buf[n] = '\0';
    return cg_parse_keyed(buf, key, value) ? 1 : 0;
}

int cg_leaf_populated(cg_leaf *leaf, bool *populated, act_error *err)
{
    assert(populated);
    uint64_t value = 0;
    int r = cg_leaf_events_read(leaf, "populated", &value, err);
    if (r < 0)
        return r;
    if (r == 0)
        return act_error_set(err, EBADMSG, "%s/cgroup.events has no \"populated\" line",
                             leaf->v2_path);
    *populated = value != 0;
    return 0;
}
