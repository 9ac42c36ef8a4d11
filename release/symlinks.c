/* Where a build's symlinks lead. A build may hold symlinks (images are
 * full of them), but none may lead out of the build: followed by the app,
 * a link to "../../etc" would reach the box's files. A target that is
 * lexically inside can still lead out through another link ("d/l/.." when
 * d/l is "..": the kernel follows d/l first), so each target is resolved
 * the way the kernel resolves it, through the entries the manifest lists,
 * which verify holds the staged tree to. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "release/internal.h"

/* Linux's own limit on the symlinks one lookup follows. */
#define SYMLINK_HOPS_MAX 40

typedef enum resolution {
    STAYS_INSIDE,
    LEADS_OUT,
    LOOPS,
} resolution;

/* Drops the last component of dir ("a/b" -> "a", "a" -> ""). */
static void drop_last(char *dir)
{
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
}

/* Resolves the symlink link of m. dir is the directory the lookup is in
 * (relative to the build's root, "" for the root); pending the components
 * still to look up, '/' separated. */
static resolution resolve_link(const rel_manifest *m, const rel_file *link)
{
    char dir[REL_PATH_SIZE], pending[4 * REL_PATH_SIZE], candidate[REL_PATH_SIZE];
    snprintf(dir, sizeof(dir), "%s", link->path);
    drop_last(dir);
    snprintf(pending, sizeof(pending), "%s", link->target);
    unsigned hops = 1;
    while (pending[0]) {
        char component[256];
        char *slash = strchr(pending, '/');
        size_t len = slash ? (size_t)(slash - pending) : strlen(pending);
        if (len >= sizeof(component))
            return LEADS_OUT; /* no such name can be inside */
        memcpy(component, pending, len);
        component[len] = '\0';
        memmove(pending, slash ? slash + 1 : pending + len, strlen(slash ? slash + 1 : "") + 1);
        if (len == 0 || strcmp(component, ".") == 0)
            continue;
        if (strcmp(component, "..") == 0) {
            if (dir[0] == '\0')
                return LEADS_OUT;
            drop_last(dir);
            continue;
        }
        int n = dir[0] ? snprintf(candidate, sizeof(candidate), "%s/%s", dir, component)
                       : snprintf(candidate, sizeof(candidate), "%s", component);
        if (n < 0 || (size_t)n >= sizeof(candidate))
            return STAYS_INSIDE; /* longer than any entry: the lookup fails there */
        const rel_file *entry = rel_manifest_find(m, candidate);
        if (!entry || entry->type == REL_ENTRY_FILE)
            return STAYS_INSIDE; /* missing, or a file (ENOTDIR if more follows) */
        if (entry->type == REL_ENTRY_DIR) {
            snprintf(dir, sizeof(dir), "%s", candidate);
            continue;
        }
        if (++hops > SYMLINK_HOPS_MAX)
            return LOOPS;
        /* The link's target replaces it, looked up from the same dir. */
        char rest[4 * REL_PATH_SIZE];
        snprintf(rest, sizeof(rest), "%s", pending);
        n = snprintf(pending, sizeof(pending), "%s%s%s", entry->target, rest[0] ? "/" : "", rest);
        if (n < 0 || (size_t)n >= sizeof(pending))
            return LOOPS;
    }
    return STAYS_INSIDE;
}

int rel_symlinks_stay_inside(const rel_manifest *m, const char *label, act_error *err)
{
    for (size_t i = 0; i < m->n_files; i++) {
        const rel_file *f = &m->files[i];
        if (f->type != REL_ENTRY_SYMLINK)
            continue;
        switch (resolve_link(m, f)) {
        case STAYS_INSIDE:
            continue;
        case LEADS_OUT:
            return act_error_set(err, EXDEV,
                                 "%s: symlink %s -> %s leads out of the build; a build's "
                                 "symlinks must stay inside it (point it at a file of the "
                                 "build, or copy the file in)",
                                 label, f->path, f->target);
        case LOOPS:
            return act_error_set(err, ELOOP,
                                 "%s: symlink %s -> %s does not resolve (more than %d links "
                                 "in a row, or a loop); fix or remove it",
                                 label, f->path, f->target, SYMLINK_HOPS_MAX);
        }
    }
    return 0;
}
