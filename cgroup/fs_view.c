/* A filesystem view, the parent's side: every path checked and the mount
 * steps put in the order the child takes them (fs_view_child.c), once per
 * view; a spawn only merges in the paths passed to that one process. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup/spawn_internal.h"
#include "common/cleanup.h"
#include "common/paths.h"
#include "common/text.h"

struct cg_fs_view {
    struct cg_view_op *ops; /* in the child's order, make_target filled in */
    size_t n_ops;
    char **paths;           /* what ops[].path point into */
    size_t n_paths;
    char tmpfs_options[64]; /* what the private tmpfs's ops[].options point to */
};

void cg_fs_view_free(cg_fs_view *view)
{
    if (!view)
        return;
    for (size_t i = 0; i < view->n_paths; i++)
        free(view->paths[i]);
    free(view->paths);
    free(view->ops);
    free(view);
}

/* "/a//b/" as "/a/b": the ancestor test below compares plain prefixes. */
static char *normalized(const char *path)
{
    char *out = malloc(strlen(path) + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    for (const char *p = path; *p; p++)
        if (*p != '/' || n == 0 || out[n - 1] != '/')
            out[n++] = *p;
    while (n > 1 && out[n - 1] == '/')
        n--;
    out[n] = '\0';
    return out;
}

/* True when dir is a proper ancestor of path. */
static bool beneath(const char *path, const char *dir)
{
    size_t len = strlen(dir);
    return strncmp(path, dir, len) == 0 && path[len] == '/';
}

static const char *kind_name(uint8_t kind)
{
    switch (kind) {
    case CG_VIEW_KEEP: return "a path kept";
    case CG_VIEW_TMPFS: return "a private temporary directory";
    case CG_VIEW_HIDE: return "a hidden directory";
    case CG_VIEW_PROC: return "/proc";
    case CG_VIEW_DEV:
        return "the private /dev";
    }
    return "a mount";
}

static int check_path(const char *path, uint8_t kind, act_error *err)
{
    int r = act_path_check_absolute(path, err);
    if (r < 0)
        return act_error_prefix(err, "filesystem view: %s", kind_name(kind));
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(path, shown, sizeof(shown));
    if (path[strspn(path, "/")] == '\0')
        return act_error_set(err, EINVAL,
                             "filesystem view: %s is \"/\", the whole box; name a directory "
                             "beneath it",
                             kind_name(kind));
    if (strcmp(path, "/proc") == 0 || strncmp(path, "/proc/", 6) == 0)
        return act_error_set(err, EINVAL,
                             "filesystem view: %s \"%s\" is beneath /proc, which each process "
                             "gets fresh; name a path outside it",
                             kind_name(kind), shown);
    return 0;
}

static int compare_ops(const void *a, const void *b)
{
    const struct cg_view_op *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (int)x->kind - (int)y->kind;
}

/* Sorts ops so that a parent's mount comes before its children's (a prefix
 * sorts first), drops repeats, and marks the ops that land inside a tmpfs
 * of this view, whose mount points the child must create. */
static size_t order_ops(struct cg_view_op *ops, size_t n)
{
    qsort(ops, n, sizeof(*ops), compare_ops);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept && compare_ops(&ops[kept - 1], &ops[i]) == 0)
            continue;
        ops[kept++] = ops[i];
    }
    for (size_t i = 0; i < kept; i++) {
        ops[i].make_target = false;
        for (size_t j = 0; j < i; j++)
            if ((ops[j].kind == CG_VIEW_TMPFS || ops[j].kind == CG_VIEW_HIDE ||
                 ops[j].kind == CG_VIEW_DEV) &&
                beneath(ops[i].path, ops[j].path))
                ops[i].make_target = ops[i].kind != CG_VIEW_HIDE;
    }
    return kept;
}

static size_t count(const char *const *list)
{
    size_t n = 0;
    while (list && list[n])
        n++;
    return n;
}

/* Appends one op with a normalized copy of path, checked. */
static int add_op(cg_fs_view *view, const char *path, uint8_t kind, bool if_present,
                  act_error *err)
{
    int r = check_path(path, kind, err);
    if (r < 0)
        return r;
    char *copy = normalized(path);
    if (!copy)
        return act_error_set(err, ENOMEM, "out of memory");
    view->paths[view->n_paths++] = copy;
    view->ops[view->n_ops++] = (struct cg_view_op){
        .path = copy, .kind = kind, .if_present = if_present};
    return 0;
}

int cg_fs_view_new(const cg_fs_view_spec *spec, cg_fs_view **out, act_error *err)
{
    assert(spec && out);
    *out = NULL;
    size_t n_hidden = count(spec->hidden), n_writable = count(spec->writable),
           n_if_present = count(spec->writable_if_present);
    size_t n = n_hidden + n_writable + n_if_present + CG_FS_VIEW_OWN_OPS;
    if (n - CG_FS_VIEW_OWN_OPS > CG_FS_VIEW_PATHS_MAX)
        return act_error_set(err, E2BIG,
                             "filesystem view: %zu paths is more than %d; keep fewer paths "
                             "writable",
                             n - CG_FS_VIEW_OWN_OPS, CG_FS_VIEW_PATHS_MAX);
    _cleanup_(cg_fs_view_freep) cg_fs_view *view = calloc(1, sizeof(*view));
    if (!view || !(view->ops = calloc(n, sizeof(*view->ops))) ||
        !(view->paths = calloc(n, sizeof(*view->paths))))
        return act_error_set(err, ENOMEM, "out of memory");
    int r = 0;
    for (size_t i = 0; r == 0 && i < n_writable; i++)
        r = add_op(view, spec->writable[i], CG_VIEW_KEEP, false, err);
    for (size_t i = 0; r == 0 && i < n_if_present; i++)
        r = add_op(view, spec->writable_if_present[i], CG_VIEW_KEEP, true, err);
    for (size_t i = 0; r == 0 && i < n_hidden; i++)
        r = add_op(view, spec->hidden[i], CG_VIEW_HIDE, true, err);
    if (r < 0)
        return r;
    /* Hiding a directory hides what is beneath it; a second tmpfs deeper
     * down would only cost a mount. */
    for (size_t i = 0; i < view->n_ops; i++)
        for (size_t j = 0; j < view->n_ops; j++)
            if (i != j && view->ops[i].kind == CG_VIEW_HIDE &&
                view->ops[j].kind == CG_VIEW_HIDE &&
                beneath(view->ops[i].path, view->ops[j].path)) {
                view->ops[i--] = view->ops[--view->n_ops];
                break;
            }
    if (spec->private_tmp) {
        /* Formatted here: the child allocates nothing. */
        if (spec->tmp_size)
            snprintf(view->tmpfs_options, sizeof(view->tmpfs_options), "mode=01777,size=%llu",
                     (unsigned long long)spec->tmp_size);
        else
            snprintf(view->tmpfs_options, sizeof(view->tmpfs_options), "mode=01777");
        /* A box without /var/tmp or /dev/shm simply has none to replace. */
        static const char *const tmp_dirs[] = {"/tmp", "/var/tmp", "/dev/shm"};
        for (size_t i = 0; i < 3; i++)
            view->ops[view->n_ops++] = (struct cg_view_op){.path = tmp_dirs[i],
                                                           .kind = CG_VIEW_TMPFS,
                                                           .if_present = true,
                                                           .options = view->tmpfs_options};
    }
    if (spec->hide_processes)
        view->ops[view->n_ops++] = (struct cg_view_op){.path = "/proc", .kind = CG_VIEW_PROC};
    /* A view that keeps /dev itself asked for the box's devices. */
    bool dev_kept = false;
    for (size_t i = 0; i < view->n_ops; i++)
        dev_kept |= view->ops[i].kind == CG_VIEW_KEEP && strcmp(view->ops[i].path, "/dev") == 0;
    if (spec->private_dev && !dev_kept)
        view->ops[view->n_ops++] = (struct cg_view_op){.path = "/dev", .kind = CG_VIEW_DEV};
    view->n_ops = order_ops(view->ops, view->n_ops);
    *out = TAKE_PTR(view);
    return 0;
}

int cg_fs_view_plan(const cg_fs_view *view, const char *const *passed,
                    const char *const *read_only, const struct cg_view_op **ops, size_t *n_ops,
                    struct cg_view_op **owned, act_error *err)
{
    assert(view && ops && n_ops && owned);
    *owned = NULL;
    size_t n_passed = count(passed), n_read_only = count(read_only);
    size_t n_extra = n_passed + n_read_only;
    if (n_extra == 0) {
        *ops = view->ops;
        *n_ops = view->n_ops;
        return 0;
    }
    if (view->n_ops + n_extra > CG_FS_VIEW_PATHS_MAX + CG_FS_VIEW_OWN_OPS)
        return act_error_set(err, E2BIG, "filesystem view: %zu passed paths are too many",
                             n_extra);
    struct cg_view_op *merged = calloc(view->n_ops + n_extra, sizeof(*merged));
    if (!merged)
        return act_error_set(err, ENOMEM, "out of memory");
    memcpy(merged, view->ops, view->n_ops * sizeof(*merged));
    for (size_t i = 0; i < n_extra; i++) {
        bool ro = i >= n_passed;
        const char *path = ro ? read_only[i - n_passed] : passed[i];
        int r = check_path(path, CG_VIEW_KEEP, err);
        if (r < 0) {
            free(merged);
            return r;
        }
        /* The paths stay the caller's; cg_spawn keeps them alive until the
         * child has exec'd. A passed path is one the daemon made: it must
         * exist, so it is not if_present. */
        merged[view->n_ops + i] = (struct cg_view_op){
            .path = path, .kind = CG_VIEW_KEEP, .read_only = ro};
    }
    *n_ops = order_ops(merged, view->n_ops + n_extra);
    *ops = *owned = merged;
    return 0;
}

const char *cg_view_op_sentence(const struct cg_view_op *op)
{
    return kind_name(op->kind);
}
