/* A leaf's cgroup.events: read (populated, frozen) and watched. The kernel
 * changes the file when either value does, and inotify says so: the one
 * way this library learns that a leaf emptied or froze, never by sleeping
 * and looking again. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"

int cg_leaf_events_fd(cg_leaf *leaf, act_error *err)
{
    assert(leaf);
    if (leaf->inotify_fd >= 0)
        return leaf->inotify_fd;
    _cleanup_close_ int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno, "cannot create an inotify instance for %s: %s",
                             leaf->v2_path, strerror(errno));
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/cgroup.events", leaf->v2_path);
    if (inotify_add_watch(fd, path, IN_MODIFY) < 0)
        return act_error_set(err, errno, "cannot watch %s: %s", path, strerror(errno));
    leaf->inotify_fd = TAKE_FD(fd);
    return leaf->inotify_fd;
}

static void drain(int fd)
{
    char buf[4096];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

int cg_leaf_events_read(cg_leaf *leaf, const char *key, uint64_t *value, act_error *err)
{
    assert(leaf);
    assert(key);
    assert(value);
    if (leaf->inotify_fd >= 0)
        drain(leaf->inotify_fd);
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
