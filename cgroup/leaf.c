/* Generation leaves: <root>/hosts/<host>/<leaf> in v2, mirrored into the v1
 * hierarchies that carry limits on a hybrid host. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"

void cg_leaf_free(cg_leaf *leaf)
{
    if (!leaf)
        return;
    int fds[] = {leaf->dir_fd, leaf->cgevents_fd, leaf->freeze_fd};
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        if (leaf->v1_procs_fd[c] >= 0)
            close(leaf->v1_procs_fd[c]);
        free(leaf->v1_path[c]);
    }
    free(leaf->rel);
    free(leaf->v2_path);
    free(leaf);
}

const char *cg_leaf_path(const cg_leaf *leaf)
{
    assert(leaf);
    return leaf->v2_path;
}

const char *cg_leaf_relative_path(const cg_leaf *leaf)
{
    assert(leaf);
    return leaf->rel;
}

const char *cg_leaf_host(const cg_leaf *leaf)
{
    assert(leaf);
    return leaf->host;
}

const char *cg_leaf_name(const cg_leaf *leaf)
{
    assert(leaf);
    return leaf->name;
}

const char *cg_leaf_v1_path(const cg_leaf *leaf, const char *controller)
{
    assert(leaf);
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        if (controller && strcmp(controller, cg_controller_names[c]) == 0)
            return leaf->v1_path[c];
    return NULL;
}

void cg_leaf_force_kill_fallback(cg_leaf *leaf, bool force)
{
    assert(leaf);
    leaf->force_kill_fallback = force;
}

/* The v1 mirrors are opened up front so that joining them in a spawned
 * child is one write of "0" to an fd it already has. A mirror that does not
 * exist (a node this layer did not create through libcgroup) is skipped,
 * and one already open is kept. */
static int open_v1_mirrors(cg_leaf *leaf, act_error *err)
{
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        const char *mount = leaf->root->v1_mount[c];
        if (!mount || leaf->v1_procs_fd[c] >= 0)
            continue;
        _cleanup_free_ char *path = NULL, *procs = NULL;
        if (asprintf(&path, "%s/%s", mount, leaf->rel) < 0 ||
            asprintf(&procs, "%s/cgroup.procs", path) < 0)
            return act_error_set(err, ENOMEM, "out of memory");
        int fd = open(procs, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 && errno == ENOENT)
            continue;
        if (fd < 0)
            return act_error_set(err, errno, "cannot open %s: %s", procs, strerror(errno));
        leaf->v1_procs_fd[c] = fd;
        free(leaf->v1_path[c]);
        leaf->v1_path[c] = TAKE_PTR(path);
    }
    return 0;
}

int cg_leaf_open_rel(cg_root *root, const char *rel, const char *host, const char *name,
                     cg_leaf **out, act_error *err)
{
    assert(root);
    assert(rel);
    assert(host);
    assert(name);
    assert(out);
    _cleanup_(cg_leaf_freep) cg_leaf *leaf = calloc(1, sizeof(*leaf));
    if (!leaf)
        return act_error_set(err, ENOMEM, "out of memory");
    leaf->root = root;
    leaf->dir_fd = leaf->cgevents_fd = leaf->freeze_fd = -1;
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        leaf->v1_procs_fd[c] = -1;
    snprintf(leaf->host, sizeof(leaf->host), "%s", host);
    snprintf(leaf->name, sizeof(leaf->name), "%s", name);
    leaf->rel = strdup(rel);
    if (!leaf->rel || asprintf(&leaf->v2_path, "%s/%s", root->v2_mount, rel) < 0) {
        leaf->v2_path = NULL;
        return act_error_set(err, ENOMEM, "out of memory");
    }
    leaf->dir_fd = open(leaf->v2_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (leaf->dir_fd < 0)
        return act_error_set(err, errno, "cannot open cgroup %s: %s", leaf->v2_path,
                             strerror(errno));
    leaf->cgevents_fd = openat(leaf->dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
    if (leaf->cgevents_fd < 0)
        return act_error_set(err, errno, "cannot open %s/cgroup.events: %s", leaf->v2_path,
                             strerror(errno));
    int r = open_v1_mirrors(leaf, err);
    if (r < 0)
        return r;
    *out = TAKE_PTR(leaf);
    return 0;
}

static int leaf_rel(const cg_root *root, const char *host, const char *leaf_name, char **out,
                    act_error *err)
{
    if (asprintf(out, "%s/hosts/%s/%s", root->rel, host, leaf_name) < 0)
        return act_error_set(err, ENOMEM, "out of memory");
    return 0;
}

static int check_names(const char *host, const char *leaf_name, act_error *err)
{
    int r = act_name_check("host", host, err);
    if (r == 0)
        r = act_name_check("cgroup leaf", leaf_name, err);
    return r;
}

int cg_leaf_open(cg_root *root, const char *host, const char *leaf_name, cg_leaf **out,
                 act_error *err)
{
    assert(root);
    assert(out);
    _cleanup_free_ char *rel = NULL;
    int r = check_names(host, leaf_name, err);
    if (r == 0)
        r = leaf_rel(root, host, leaf_name, &rel, err);
    if (r == 0)
        r = cg_leaf_open_rel(root, rel, host, leaf_name, out, err);
    if (r < 0)
        return act_error_prefix(err, "host %s: cannot open cgroup leaf %s", host ? host : "",
                                leaf_name ? leaf_name : "");
    return 0;
}

/* A new host node enables the root's controllers for its leaves, exactly
 * as hosts/ does, so limits land in leaves. */
static int make_host_node(cg_root *root, const char *host, act_error *err)
{
    if (mkdirat(root->hosts_fd, host, 0755) < 0) {
        if (errno == EEXIST)
            return 0;
        return act_error_set(err, errno, "cannot create %s/hosts/%s: %s", root->v2_path, host,
                             strerror(errno));
    }
    if (!root->subtree_enable[0])
        return 0;
    _cleanup_close_ int fd = openat(root->hosts_fd, host, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int r = fd < 0 ? -errno
                   : cg_write_file_at(fd, "cgroup.subtree_control", root->subtree_enable);
    if (r < 0)
        return act_error_set(err, -r, "cannot enable \"%s\" in %s/hosts/%s: %s",
                             root->subtree_enable, root->v2_path, host, strerror(-r));
    return 0;
}

/* The v2 node answers first: while it still holds another leaf, so do the
 * v1 mirrors, and asking them too costs more than the whole leaf removal. */
static void remove_host_node_if_empty(cg_root *root, const char *host)
{
    if (unlinkat(root->hosts_fd, host, AT_REMOVEDIR) < 0)
        return;
    _cleanup_free_ char *rel = NULL;
    act_error ignored = {0};
    if (asprintf(&rel, "%s/hosts/%s", root->rel, host) >= 0)
        cg_rmdir_everywhere(root, rel, &ignored);
}

int cg_leaf_create(cg_root *root, const char *host, const char *leaf_name,
                   const cg_limits *limits, cg_leaf **out, act_error *err)
{
    assert(root);
    assert(out);
    int r = check_names(host, leaf_name, err);
    if (r < 0)
        return act_error_prefix(err, "cannot create cgroup leaf");
    if ((r = cg_limits_check(root, limits, err)) < 0)
        return act_error_prefix(err, "host %s: leaf %s", host, leaf_name);
    _cleanup_free_ char *rel = NULL;
    if ((r = leaf_rel(root, host, leaf_name, &rel, err)) < 0)
        return r;
    if ((r = make_host_node(root, host, err)) < 0)
        return act_error_prefix(err, "host %s: leaf %s", host, leaf_name);

    char at_host[2 * ACT_NAME_MAX + 2];
    snprintf(at_host, sizeof(at_host), "%s/%s", host, leaf_name);
    if (mkdirat(root->hosts_fd, at_host, 0755) < 0) {
        int e = errno;
        if (e == EEXIST)
            return act_error_set(err, EEXIST,
                                 "host %s: cgroup leaf %s/hosts/%s already exists; a leaf name "
                                 "is used by one start only, retire and remove the old one first",
                                 host, root->v2_path, at_host);
        remove_host_node_if_empty(root, host);
        return act_error_set(err, e, "host %s: cannot create cgroup leaf %s/hosts/%s: %s", host,
                             root->v2_path, at_host, strerror(e));
    }

    cg_leaf *leaf = NULL;
    r = cg_v1_create(root, rel, limits, err);
    if (r == 0)
        r = cg_leaf_open_rel(root, rel, host, leaf_name, &leaf, err);
    if (r == 0)
        r = cg_limits_apply_v2(leaf, limits, err);
    if (r < 0) {
        act_error ignored = {0};
        cg_leaf_free(leaf);
        cg_rmdir_everywhere(root, rel, &ignored);
        remove_host_node_if_empty(root, host);
        return act_error_prefix(err, "host %s: leaf %s", host, leaf_name);
    }
    *out = leaf;
    return 0;
}

/* Moves every process of the leaf (its v2 cgroup.procs) into the v1 mirror
 * of controller c just made for it. A process may fork while it is moved,
 * and its child starts where the parent was: the pass repeats until a pass
 * finds nothing left to move. */
static int move_into_mirror(cg_leaf *leaf, enum cg_controller c, act_error *err)
{
    enum { PASSES = 16 };
    for (int pass = 0; pass < PASSES; pass++) {
        _cleanup_free_ pid_t *pids = NULL, *moved = NULL;
        size_t n = 0, n_moved = 0;
        int r = cg_read_pids(leaf->dir_fd, &pids, &n);
        _cleanup_close_ int mirror_fd =
            open(leaf->v1_path[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r == 0 && mirror_fd < 0)
            r = -errno;
        if (r == 0)
            r = cg_read_pids(mirror_fd, &moved, &n_moved);
        if (r < 0)
            return act_error_set(err, -r, "cannot list the processes of %s: %s", leaf->v2_path,
                                 strerror(-r));
        bool all_there = true;
        for (size_t i = 0; i < n; i++) {
            bool there = false;
            for (size_t j = 0; j < n_moved && !there; j++)
                there = moved[j] == pids[i];
            if (there)
                continue;
            all_there = false;
            char pid[24];
            snprintf(pid, sizeof(pid), "%d", (int)pids[i]);
            /* A process that exited meanwhile has nothing left to move. */
            r = cg_write_file_at(mirror_fd, "cgroup.procs", pid);
            if (r < 0 && r != -ESRCH)
                return act_error_set(err, -r, "cannot move pid %s into %s: %s", pid,
                                     leaf->v1_path[c], strerror(-r));
        }
        if (all_there)
            return 0;
    }
    return act_error_set(err, EAGAIN,
                         "the processes of %s kept forking while they were moved into %s; "
                         "try again",
                         leaf->v2_path, leaf->v1_path[c]);
}

int cg_leaf_set_limits(cg_leaf *leaf, const cg_limits *limits, act_error *err)
{
    assert(leaf);
    static const cg_limits none;
    if (!limits)
        limits = &none;
    int r = cg_limits_check(leaf->root, limits, err);
    bool made[CG_CONTROLLER_COUNT] = {false};
    if (r == 0)
        r = cg_v1_set(leaf, limits, made, err);
    for (int c = 0; r == 0 && c < CG_CONTROLLER_COUNT; c++) {
        if (!made[c])
            continue;
        r = open_v1_mirrors(leaf, err);
        if (r == 0 && !leaf->v1_path[c])
            r = act_error_set(err, ENOENT, "the v1 %s cgroup made for %s is gone",
                              cg_controller_names[c], leaf->v2_path);
        if (r == 0)
            r = move_into_mirror(leaf, c, err);
    }
    if (r == 0)
        r = cg_limits_set_v2(leaf, limits, err);
    return r < 0 ? act_error_prefix(err, "host %s: leaf %s", leaf->host, leaf->name) : 0;
}

/* Open control files make the kernel drain them when their directory goes,
 * which costs more than the rmdir itself; a removed leaf needs none of them. */
static void close_control_files(cg_leaf *leaf)
{
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        if (leaf->v1_procs_fd[c] >= 0)
            close(leaf->v1_procs_fd[c]);
        leaf->v1_procs_fd[c] = -1;
    }
    int *fds[] = {&leaf->cgevents_fd, &leaf->freeze_fd};
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
}

/* The v2 leaf, then exactly the v1 mirrors this leaf has. */
static int remove_leaf_dirs(cg_leaf *leaf, act_error *err)
{
    if (rmdir(leaf->v2_path) < 0 && errno != ENOENT)
        return act_error_set(err, errno, "cannot remove cgroup %s: %s", leaf->v2_path,
                             strerror(errno));
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        if (leaf->v1_path[c] && rmdir(leaf->v1_path[c]) < 0 && errno != ENOENT)
            return act_error_set(err, errno, "cannot remove cgroup %s: %s", leaf->v1_path[c],
                                 strerror(errno));
    return 0;
}

int cg_leaf_remove(cg_leaf *leaf, act_error *err)
{
    assert(leaf);
    bool populated = false;
    if (cg_leaf_populated(leaf, &populated, err) == 0 && populated)
        return act_error_set(err, EBUSY,
                             "cannot remove cgroup leaf %s: processes remain in it; kill it with "
                             "proof of empty first",
                             leaf->v2_path);
    close_control_files(leaf);
    int r = remove_leaf_dirs(leaf, err);
    if (r < 0) {
        /* Still there: keep the handle usable for another kill and try. */
        act_error ignored = {0};
        leaf->cgevents_fd = openat(leaf->dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
        open_v1_mirrors(leaf, &ignored);
        return r;
    }
    if (leaf->host[0])
        remove_host_node_if_empty(leaf->root, leaf->host);
    return 0;
}

/* A control file holding one number, or (with key) a "key value" line. */
static int read_number_at(int dirfd, const char *file, const char *key, uint64_t *value)
{
    char buf[4096];
    int r = cg_read_file_at(dirfd, file, buf, sizeof(buf));
    if (r < 0)
        return r;
    if (key)
        return cg_parse_keyed(buf, key, value) ? 0 : -EBADMSG;
    char *end = NULL;
    *value = strtoull(buf, &end, 10);
    return end != buf ? 0 : -EBADMSG;
}

static int read_v1_number(const cg_leaf *leaf, enum cg_controller c, const char *file,
                          const char *key, uint64_t *value)
{
    char path[PATH_MAX];
    if (!leaf->v1_path[c])
        return -ENOENT;
    snprintf(path, sizeof(path), "%s/%s", leaf->v1_path[c], file);
    return read_number_at(AT_FDCWD, path, key, value);
}

static int read_v2_number(const cg_leaf *leaf, const char *file, const char *key,
                          uint64_t *value)
{
    return read_number_at(leaf->dir_fd, file, key, value);
}

int cg_leaf_stats(cg_leaf *leaf, cg_stats *stats, act_error *err)
{
    assert(leaf);
    assert(stats);
    memset(stats, 0, sizeof(*stats));
    const cg_root *root = leaf->root;
    int r;
    if (root->v2_has[CG_MEMORY]) {
        r = read_v2_number(leaf, "memory.current", NULL, &stats->memory_current);
        if (r == 0)
            r = read_v2_number(leaf, "memory.events", "oom_kill", &stats->oom_kills);
    } else if (leaf->v1_path[CG_MEMORY]) {
        r = read_v1_number(leaf, CG_MEMORY, "memory.usage_in_bytes", NULL,
                           &stats->memory_current);
        if (r == 0)
            r = read_v1_number(leaf, CG_MEMORY, "memory.oom_control", "oom_kill",
                               &stats->oom_kills);
    } else {
        r = 1;
    }
    if (r < 0)
        return act_error_set(err, -r, "cannot read memory stats of %s: %s", leaf->v2_path,
                             strerror(-r));
    stats->has_memory = r == 0;

    if (root->v2_has[CG_PIDS])
        r = read_v2_number(leaf, "pids.current", NULL, &stats->pids_current);
    else if (leaf->v1_path[CG_PIDS])
        r = read_v1_number(leaf, CG_PIDS, "pids.current", NULL, &stats->pids_current);
    else
        r = 1;
    if (r < 0)
        return act_error_set(err, -r, "cannot read pids stats of %s: %s", leaf->v2_path,
                             strerror(-r));
    stats->has_pids = r == 0;

    r = read_v2_number(leaf, "cpu.stat", "usage_usec", &stats->cpu_usage_usec);
    if (r < 0)
        return act_error_set(err, -r, "cannot read %s/cpu.stat: %s", leaf->v2_path,
                             strerror(-r));
    return 0;
}
