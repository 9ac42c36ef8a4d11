/* The activator's cgroup root: finding it, preparing it (hosts/ node,
 * controllers enabled down the subtree), and for tests a throwaway root that
 * is removed with everything below it. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"

const char *const cg_controller_names[CG_CONTROLLER_COUNT] = {
    [CG_MEMORY] = "memory",
    [CG_PIDS] = "pids",
    [CG_CPU] = "cpu",
};


void cg_root_free(cg_root *root)
{
    if (!root)
        return;
    if (root->dir_fd >= 0)
        close(root->dir_fd);
    if (root->hosts_fd >= 0)
        close(root->hosts_fd);
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        free(root->v1_mount[c]);
    free(root->subtree_enable);
    free(root->v2_mount);
    free(root->rel);
    free(root->v2_path);
    free(root);
}

const char *cg_root_v2_mount(const cg_root *root)
{
    return root->v2_mount;
}

const char *cg_root_path(const cg_root *root)
{
    assert(root);
    return root->v2_path;
}

/* A cgroup path from configuration becomes directories we create: no empty,
 * "." or ".." components, so it can never climb out of the mount. */
static int check_rel_path(const char *rel, const char *shown, act_error *err)
{
    if (rel[0] == '\0')
        return act_error_set(err, EINVAL,
                             "cgroup root \"%s\" is the whole cgroup2 hierarchy; give a "
                             "subdirectory such as activator",
                             shown);
    const char *p = rel;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return act_error_set(err, EINVAL,
                                 "cgroup root \"%s\" has an empty, \".\" or \"..\" component; "
                                 "give a plain path",
                                 shown);
        p += n;
        if (*p == '/')
            p++;
    }
    return 0;
}

static bool word_listed(const char *words, const char *wanted)
{
    size_t len = strlen(wanted);
    for (const char *p = words; *p;) {
        p += strspn(p, " \n");
        size_t n = strcspn(p, " \n");
        if (n == len && strncmp(p, wanted, len) == 0)
            return true;
        p += n;
    }
    return false;
}

/* Enables every controller the root offers for its children, one by one so
 * a refused controller (a threaded one, say) does not block the others, then
 * records what ended up enabled: that set goes into hosts/ and every host
 * node, and decides which limits v2 enforces. */
static int enable_controllers(cg_root *root, act_error *err)
{
    char available[1024];
    int r = cg_read_file_at(root->dir_fd, "cgroup.controllers", available, sizeof(available));
    if (r < 0)
        return act_error_set(err, -r, "cannot read %s/cgroup.controllers: %s", root->v2_path,
                             strerror(-r));
    for (char *p = available; *p;) {
        p += strspn(p, " \n");
        size_t n = strcspn(p, " \n");
        if (n == 0)
            break;
        char change[80];
        snprintf(change, sizeof(change), "+%.*s", (int)n, p);
        r = cg_write_file_at(root->dir_fd, "cgroup.subtree_control", change);
        if (r < 0)
            act_log(LOG_WARNING, "cgroup root %s: cannot enable controller %s: %s", root->v2_path,
                    change + 1, strerror(-r));
        p += n;
    }

    char enabled[1024];
    r = cg_read_file_at(root->dir_fd, "cgroup.subtree_control", enabled, sizeof(enabled));
    if (r < 0)
        return act_error_set(err, -r, "cannot read %s/cgroup.subtree_control: %s", root->v2_path,
                             strerror(-r));
    size_t cap = strlen(enabled) * 2 + 2;
    root->subtree_enable = calloc(1, cap);
    if (!root->subtree_enable)
        return act_error_set(err, ENOMEM, "out of memory");
    for (char *p = enabled; *p;) {
        p += strspn(p, " \n");
        size_t n = strcspn(p, " \n");
        if (n == 0)
            break;
        size_t used = strlen(root->subtree_enable);
        snprintf(root->subtree_enable + used, cap - used, "%s+%.*s", used ? " " : "", (int)n, p);
        p += n;
    }
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        root->v2_has[c] = word_listed(enabled, cg_controller_names[c]);
    return 0;
}

/* Hybrid hosts: each controller v2 does not give us comes from its v1
 * hierarchy, when there is one. */
static int find_v1_controllers(cg_root *root, act_error *err)
{
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        if (root->v2_has[c])
            continue;
        int r = cg_find_v1_mount(cg_controller_names[c], &root->v1_mount[c], err);
        if (r < 0 && r != -ENOENT)
            return r;
    }
    return 0;
}

static int open_hosts_node(cg_root *root, act_error *err)
{
    if (mkdirat(root->dir_fd, "hosts", 0755) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create %s/hosts: %s", root->v2_path,
                             strerror(errno));
    root->hosts_fd = openat(root->dir_fd, "hosts", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root->hosts_fd < 0)
        return act_error_set(err, errno, "cannot open %s/hosts: %s", root->v2_path,
                             strerror(errno));
    if (root->subtree_enable[0]) {
        int r = cg_write_file_at(root->hosts_fd, "cgroup.subtree_control", root->subtree_enable);
        if (r < 0)
            return act_error_set(err, -r, "cannot enable \"%s\" in %s/hosts: %s",
                                 root->subtree_enable, root->v2_path, strerror(-r));
    }
    return 0;
}

/* Writes pid ("0": the caller) into <root>/<node>/cgroup.procs, making
 * the node when it is missing. */
static int move_into_node(cg_root *root, const char *node, const char *pid, act_error *err)
{
    if (mkdirat(root->dir_fd, node, 0755) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create %s/%s: %s", root->v2_path, node,
                             strerror(errno));
    _cleanup_close_ int fd = openat(root->dir_fd, node, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno, "cannot open %s/%s: %s", root->v2_path, node,
                             strerror(errno));
    int r = cg_write_file_at(fd, "cgroup.procs", pid);
    if (r < 0)
        return act_error_set(err, -r,
                             "cannot move process %s into %s/%s: %s; is the cgroup "
                             "delegated to us (Delegate=yes)?",
                             strcmp(pid, "0") == 0 ? "activatord" : pid, root->v2_path, node,
                             strerror(-r));
    return 0;
}

/* Moves the calling process into <root>/supervisor, so the root itself
 * holds no process and may enable controllers for its children. */
static int move_into_supervisor(cg_root *root, act_error *err)
{
    return move_into_node(root, "supervisor", "0", err);
}

int cg_root_place_process(cg_root *root, const char *node, pid_t pid, act_error *err)
{
    char text[32];
    snprintf(text, sizeof(text), "%d", (int)pid);
    return move_into_node(root, node, text, err);
}

int cg_root_remove_node(cg_root *root, const char *node, act_error *err)
{
    if (unlinkat(root->dir_fd, node, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return act_error_set(err, errno, "cannot remove %s/%s: %s", root->v2_path, node,
                             strerror(errno));
    return 0;
}

/* Makes and prepares the directory of a root whose mount and relative path
 * are set. */
static int root_prepare(cg_root *root, bool move_self, act_error *err)
{
    if (asprintf(&root->v2_path, "%s/%s", root->v2_mount, root->rel) < 0) {
        root->v2_path = NULL;
        return act_error_set(err, ENOMEM, "out of memory");
    }
    int r = act_mkdir_p(root->v2_path, 0755, err);
    if (r < 0)
        return r;
    root->dir_fd = open(root->v2_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root->dir_fd < 0)
        return act_error_set(err, errno, "cannot open cgroup root %s: %s", root->v2_path,
                             strerror(errno));
    if (move_self && (r = move_into_supervisor(root, err)) < 0)
        return r;
    if ((r = enable_controllers(root, err)) < 0 || (r = open_hosts_node(root, err)) < 0)
        return r;
    return find_v1_controllers(root, err);
}

/* Takes v2_mount and rel, which may be NULL after a failed strdup. */
static int root_open_rel(char *v2_mount, char *rel, bool move_self, cg_root **out,
                         act_error *err)
{
    _cleanup_free_ char *mount_owned = v2_mount, *rel_owned = rel;
    _cleanup_(cg_root_freep) cg_root *root = calloc(1, sizeof(*root));
    if (!root || !v2_mount || !rel)
        return act_error_set(err, ENOMEM, "out of memory");
    root->dir_fd = root->hosts_fd = -1;
    root->v2_mount = TAKE_PTR(mount_owned);
    root->rel = TAKE_PTR(rel_owned);
    int r = root_prepare(root, move_self, err);
    if (r < 0)
        return act_error_prefix(err, "cgroup root");
    *out = TAKE_PTR(root);
    return 0;
}

int cg_root_open(const char *path_or_auto, cg_root **out, act_error *err)
{
    assert(out);
    if (!path_or_auto || !path_or_auto[0])
        return act_error_set(err, EINVAL,
                             "cgroup root is empty; give \"auto\" or a path under the cgroup2 "
                             "mount");
    _cleanup_free_ char *mount = NULL;
    int r = cg_find_v2_mount(&mount, err);
    if (r < 0)
        return r;

    _cleanup_free_ char *rel = NULL;
    bool move_self = false;
    if (strcmp(path_or_auto, "auto") == 0) {
        _cleanup_free_ char *own = NULL;
        if ((r = cg_own_v2_cgroup(&own, err)) < 0)
            return r;
        const char *own_rel = own + strspn(own, "/");
        if (!own_rel[0])
            return act_error_set(err, EPERM,
                                 "cgroup root \"auto\": this process runs in the cgroup2 root, "
                                 "which is the whole machine; run under systemd with "
                                 "Delegate=yes or configure a path");
        const char *last = strrchr(own_rel, '/');
        const char *base = last ? last + 1 : own_rel;
        if (strcmp(base, "supervisor") == 0) {
            if (!last)
                return act_error_set(err, EPERM,
                                     "cgroup root \"auto\": own cgroup /supervisor is directly "
                                     "below the cgroup2 root; configure a path instead");
            rel = strndup(own_rel, (size_t)(last - own_rel));
        } else {
            rel = strdup(own_rel);
            move_self = true;
        }
    } else if (path_or_auto[0] == '/') {
        size_t len = strlen(mount);
        if (strncmp(path_or_auto, mount, len) != 0 || path_or_auto[len] != '/')
            return act_error_set(err, EINVAL,
                                 "cgroup root %s is not under the cgroup2 mount %s; give an "
                                 "absolute path below it or a path relative to it",
                                 path_or_auto, mount);
        rel = strdup(path_or_auto + len + 1);
    } else {
        rel = strdup(path_or_auto);
    }
    if (!rel)
        return act_error_set(err, ENOMEM, "out of memory");
    size_t n = strlen(rel);
    while (n > 0 && rel[n - 1] == '/')
        rel[--n] = '\0';
    if ((r = check_rel_path(rel, path_or_auto, err)) < 0)
        return r;
    return root_open_rel(TAKE_PTR(mount), TAKE_PTR(rel), move_self, out, err);
}

int cg_root_create_throwaway(const char *label, cg_root **out, act_error *err)
{
    assert(out);
    int r = act_name_check("throwaway root label", label, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *mount = NULL, *own = NULL;
    if ((r = cg_find_v2_mount(&mount, err)) < 0 || (r = cg_own_v2_cgroup(&own, err)) < 0)
        return r;
    const char *own_rel = own + strspn(own, "/");
    for (int attempt = 0; attempt < 16; attempt++) {
        uint32_t nonce = 0;
        if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
            nonce = (uint32_t)attempt;
        _cleanup_free_ char *rel = NULL, *path = NULL;
        if (asprintf(&rel, "%s%s%s-%d-%08x", own_rel, own_rel[0] ? "/" : "", label,
                     (int)getpid(), nonce) < 0 ||
            asprintf(&path, "%s/%s", mount, rel) < 0)
            return act_error_set(err, ENOMEM, "out of memory");
        /* mkdir, not mkdir -p: an existing directory is somebody else's. */
        if (mkdir(path, 0755) < 0) {
            if (errno == EEXIST)
                continue;
            return act_error_set(err, errno, "cannot create throwaway cgroup %s: %s", path,
                                 strerror(errno));
        }
        cg_root *root = NULL;
        r = root_open_rel(strdup(mount), TAKE_PTR(rel), false, &root, err);
        if (r < 0) {
            rmdir(path);
            return r;
        }
        root->throwaway = true;
        *out = root;
        return 0;
    }
    return act_error_set(err, EEXIST, "cannot find a free throwaway cgroup name below %s/%s",
                         mount, own_rel);
}

int cg_rmdir_everywhere(cg_root *root, const char *rel, act_error *err)
{
    assert(root);
    assert(rel);
    int result = 0;
    for (int h = -1; h < CG_CONTROLLER_COUNT; h++) {
        const char *mount = h < 0 ? root->v2_mount : root->v1_mount[h];
        if (!mount)
            continue;
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", mount, rel) < 0)
            return act_error_set(err, ENOMEM, "out of memory");
        if (rmdir(path) < 0 && errno != ENOENT && result == 0)
            result = act_error_set(err, errno, "cannot remove cgroup %s: %s", path,
                                   strerror(errno));
    }
    return result;
}
