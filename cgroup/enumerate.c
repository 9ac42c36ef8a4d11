/* Finding the leaves and processes a previous daemon left running: the base
 * of recovery after a restart. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"

static bool pid_listed(const pid_t *pids, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* A pid read from cgroup.procs may be recycled before pidfd_open. A pidfd
 * whose process is still alive after a second read that lists the pid again
 * is proven to be the process in the leaf: a live process's pid belongs to
 * nobody else, and it was alive at the moment of that second read. */
static int open_pidfds(int dirfd, cg_found_process **out, size_t *n_out)
{
    _cleanup_free_ pid_t *first = NULL, *second = NULL;
    size_t n_first = 0, n_second = 0;
    int r = cg_read_pids(dirfd, &first, &n_first);
    if (r < 0)
        return r;
    _cleanup_free_ cg_found_process *procs = calloc(n_first ? n_first : 1, sizeof(*procs));
    if (!procs)
        return -ENOMEM;
    for (size_t i = 0; i < n_first; i++) {
        procs[i].pid = first[i];
        procs[i].pidfd = (int)syscall(SYS_pidfd_open, first[i], 0);
    }
    r = cg_read_pids(dirfd, &second, &n_second);
    size_t kept = 0;
    for (size_t i = 0; i < n_first; i++) {
        bool proven = r == 0 && procs[i].pidfd >= 0 && pid_listed(second, n_second, procs[i].pid) &&
                      syscall(SYS_pidfd_send_signal, procs[i].pidfd, 0, NULL, 0) == 0;
        if (!proven) {
            if (procs[i].pidfd >= 0)
                close(procs[i].pidfd);
            continue;
        }
        procs[kept++] = procs[i];
    }
    if (r < 0)
        return r;
    *out = TAKE_PTR(procs);
    *n_out = kept;
    return 0;
}

static int visit_leaf(cg_root *root, int host_fd, const char *host, const char *leaf_name,
                      cg_enumerate_fn fn, void *userdata, act_error *err)
{
    _cleanup_close_ int leaf_fd = openat(host_fd, leaf_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (leaf_fd < 0)
        return errno == ENOENT ? 0
                               : act_error_set(err, errno, "cannot open %s/hosts/%s/%s: %s",
                                               root->v2_path, host, leaf_name, strerror(errno));
    cg_found_process *procs = NULL;
    size_t n = 0;
    int r = open_pidfds(leaf_fd, &procs, &n);
    if (r == -ENOENT)
        return 0; /* removed while we looked */
    if (r < 0)
        return act_error_set(err, -r, "cannot list the processes of %s/hosts/%s/%s: %s",
                             root->v2_path, host, leaf_name, strerror(-r));
    r = fn(host, leaf_name, procs, n, userdata);
    for (size_t i = 0; i < n; i++)
        if (procs[i].pidfd >= 0)
            close(procs[i].pidfd);
    free(procs);
    return r;
}

static bool usable_name(const char *where, const char *name)
{
    if (name[0] == '.')
        return false;
    if (act_name_is_valid(name))
        return true;
    act_log(LOG_WARNING, "cgroup %s/%s: name is not one the activator makes; skipping it", where,
            name);
    return false;
}

/* A host node that vanished since it was listed has no leaves to visit. */
static int visit_host(cg_root *root, const char *host, cg_enumerate_fn fn, void *userdata,
                      act_error *err)
{
    _cleanup_close_ int host_fd =
        openat(root->hosts_fd, host, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (host_fd < 0)
        return 0;
    _cleanup_(closedirp) DIR *leaves = act_opendir_at(host_fd, ".");
    if (!leaves)
        return act_error_set(err, errno, "cannot list %s/hosts/%s: %s", root->v2_path, host,
                             strerror(errno));
    int r = 0;
    struct dirent *le;
    while (r == 0 && (le = readdir(leaves))) {
        if (le->d_type != DT_DIR || !usable_name(root->v2_path, le->d_name))
            continue;
        r = visit_leaf(root, host_fd, host, le->d_name, fn, userdata, err);
    }
    return r;
}

int cg_enumerate(cg_root *root, cg_enumerate_fn fn, void *userdata, act_error *err)
{
    assert(root);
    assert(fn);
    _cleanup_(closedirp) DIR *hosts = act_opendir_at(root->hosts_fd, ".");
    if (!hosts)
        return act_error_set(err, errno, "cannot list %s/hosts: %s", root->v2_path,
                             strerror(errno));
    int r = 0;
    struct dirent *he;
    while (r == 0 && (he = readdir(hosts))) {
        if (he->d_type != DT_DIR || !usable_name(root->v2_path, he->d_name))
            continue;
        r = visit_host(root, he->d_name, fn, userdata, err);
    }
    return r;
}
