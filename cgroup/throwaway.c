/* Removing a throwaway root (the tests' own subtree, cg_root_create_throwaway):
 * every cgroup below it killed with proof, deepest first, then removed from
 * every hierarchy, and its absence checked. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"

/* How long the throwaway teardown waits for a populated cgroup to die. */
#define CG_DESTROY_KILL_TIMEOUT_USEC (10 * 1000 * 1000ULL)

/* Kills whatever runs in the cgroup rel, with proof; 0 when it was empty or
 * is gone. The leaf handle is closed on return, before any rmdir, so the
 * kernel has no open control files to drain. */
static int kill_remaining(cg_root *root, const char *rel, act_error *err)
{
    _cleanup_(cg_leaf_freep) cg_leaf *leaf = NULL;
    bool populated = false;
    if (cg_leaf_open_rel(root, rel, "", "", &leaf, err) < 0 ||
        cg_leaf_populated(leaf, &populated, err) < 0 || !populated)
        return 0;
    return cg_leaf_kill_and_wait(leaf, CG_DESTROY_KILL_TIMEOUT_USEC, err);
}

static int destroy_tree(cg_root *root, const char *rel, act_error *err);

/* destroy_tree of each subdirectory of rel; the first failure is returned. */
static int destroy_children(cg_root *root, const char *rel, act_error *err)
{
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", root->v2_mount, rel) < 0)
        return act_error_set(err, ENOMEM, "out of memory");
    int result = 0;
    _cleanup_(closedirp) DIR *dir = opendir(path);
    for (struct dirent *de; dir && (de = readdir(dir));) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *child = NULL;
        if (asprintf(&child, "%s/%s", rel, de->d_name) < 0)
            return act_error_set(err, ENOMEM, "out of memory");
        int r = destroy_tree(root, child, err);
        if (r < 0 && result == 0)
            result = r;
    }
    return result;
}

/* Removes rel's subdirectories, deepest first, killing whatever runs in
 * each (proving it dead) before its rmdir, then rel itself the same way.
 * Used only on throwaway roots. */
static int destroy_tree(cg_root *root, const char *rel, act_error *err)
{
    int result = destroy_children(root, rel, err);
    act_error kill_err = {0};
    int r = kill_remaining(root, rel, &kill_err);
    if (r < 0 && result == 0) {
        if (err)
            *err = kill_err;
        result = r;
    }
    r = cg_rmdir_everywhere(root, rel, err);
    return result < 0 ? result : r;
}

int cg_root_destroy_throwaway(cg_root *root_arg, act_error *err)
{
    /* The handle goes on every path, refused or not. */
    _cleanup_(cg_root_freep) cg_root *root = root_arg;
    if (!root)
        return 0;
    if (!root->throwaway)
        return act_error_set(err, EPERM,
                             "cgroup root %s was opened, not created as a throwaway; refusing "
                             "to delete a subtree that is not ours",
                             root->v2_path);
    _cleanup_free_ char *rel = strdup(root->rel);
    int r = rel ? destroy_tree(root, rel, err) : act_error_set(err, ENOMEM, "out of memory");

    /* The proof: the root is gone from every hierarchy we used. */
    for (int h = -1; r == 0 && h < CG_CONTROLLER_COUNT; h++) {
        const char *mount = h < 0 ? root->v2_mount : root->v1_mount[h];
        if (!mount)
            continue;
        _cleanup_free_ char *path = NULL;
        struct stat st;
        if (asprintf(&path, "%s/%s", mount, root->rel) >= 0 && stat(path, &st) == 0)
            r = act_error_set(err, EBUSY, "throwaway cgroup %s is still there after removal",
                              path);
    }
    return r;
}
