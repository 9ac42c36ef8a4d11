/* rel_gc: remove old versions, never one that is live or that the caller
 * says is pinned, held or running. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/names.h"
#include "release/internal.h"

static bool is_kept(const char *version, const char *const *keep, size_t n_keep)
{
    for (size_t i = 0; i < n_keep; i++)
        if (strcmp(version, keep[i]) == 0)
            return true;
    return false;
}

/* Renames the version to a hidden trash name first: the version vanishes in
 * one step, so a concurrent resolve sees it whole or not at all, and a crash
 * during the deletion leaves only a trash directory for the next sweep. */
static int remove_version(rel_store *store, int host_dirfd, const char *host, const char *version,
                          act_error *err)
{
    char suffix[9], trash[NAME_MAX + 1];
    rel_random_suffix(suffix);
    snprintf(trash, sizeof(trash), "%s%s-%s", REL_TRASH_PREFIX, version, suffix);
    if (renameat(host_dirfd, version, host_dirfd, trash) < 0)
        return act_error_set(err, errno, "host %s: cannot remove version %s (%s/%s/%s): %s", host,
                             version, store->path, host, version, strerror(errno));
    int r = act_fsync_dir(host_dirfd, err);
    if (r < 0)
        return act_error_prefix(err, "host %s: removing version %s", host, version);
    _cleanup_close_ int trash_fd =
        openat(host_dirfd, trash, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (trash_fd >= 0)
        (void)rel_lock(trash_fd, false);
    r = rel_remove_tree(host_dirfd, trash);
    if (r < 0)
        return act_error_set(err, -r,
                             "host %s: version %s is gone from view but %s/%s/%s could "
                             "not be deleted: %s; the next gc retries",
                             host, version, store->path, host, trash, strerror(-r));
    return 0;
}

static int newest_first(const void *a, const void *b)
{
    const rel_entry *x = a, *y = b;
    if (x->identity.staged_at != y->identity.staged_at)
        return x->identity.staged_at > y->identity.staged_at ? -1 : 1;
    return strcmp(y->identity.version, x->identity.version);
}

int rel_gc(rel_store *store, const char *host, const char *const *keep_versions, size_t n_keep,
           size_t keep_newest, size_t *removed, act_error *err)
{
    rel_gc_options options = {
        .keep_versions = keep_versions, .n_keep = n_keep, .keep_newest = keep_newest};
    rel_gc_removed gone = {0};
    int r = rel_gc_versions(store, host, &options, &gone, err);
    if (removed)
        *removed = gone.n;
    free(gone.versions);
    return r;
}

/* Adds version to what gc removed (or would remove); false when out of memory. */
static bool note_removed(rel_gc_removed *gone, const char *version)
{
    char(*grown)[REL_NAME_SIZE] = realloc(gone->versions, (gone->n + 1) * sizeof(*grown));
    if (!grown)
        return false;
    gone->versions = grown;
    snprintf(gone->versions[gone->n++], REL_NAME_SIZE, "%s", version);
    return true;
}

int rel_gc_versions(rel_store *store, const char *host, const rel_gc_options *options,
                    rel_gc_removed *removed, act_error *err)
{
    assert(store && options && removed);
    assert(options->keep_versions || options->n_keep == 0);
    *removed = (rel_gc_removed){0};
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < options->n_keep; i++) {
        r = rel_version_check(options->keep_versions[i], err);
        if (r < 0)
            return act_error_prefix(err, "host %s: gc keep list entry %zu", host, i);
    }
    _cleanup_close_ int host_dirfd = rel_host_open_if_staged(store, host, err);
    if (host_dirfd == -ENOENT)
        return 0;
    if (host_dirfd < 0)
        return host_dirfd;
    /* The host lock keeps a promote from making a version live while it is
     * being removed. */
    r = rel_lock_host(store, host_dirfd, host, err);
    if (r < 0)
        return r;

    char live[REL_NAME_SIZE] = "";
    act_error live_err = {0};
    r = rel_live_read(store, host_dirfd, host, live, &live_err);
    if (r < 0 && r != -ENOENT) {
        /* A damaged live link means we do not know what is live: removing
         * anything could remove it. */
        if (err)
            *err = live_err;
        return act_error_prefix(err, "host %s: gc refused", host);
    }

    _cleanup_free_ rel_entry *entries = NULL;
    size_t n = 0;
    r = rel_list_open(store, host_dirfd, host, &entries, &n, err);
    if (r < 0)
        return r;
    /* Versions with unreadable manifests sort as the oldest (staged_at 0):
     * they are the first to go, unless named in keep. */
    qsort(entries, n, sizeof(rel_entry), newest_first);
    int first_error = 0;
    for (size_t i = 0; i < n; i++) {
        const char *version = entries[i].identity.version;
        if (i < options->keep_newest || strcmp(version, live) == 0 ||
            is_kept(version, options->keep_versions, options->n_keep))
            continue;
        act_error remove_err = {0};
        r = options->dry_run ? 0 : remove_version(store, host_dirfd, host, version, &remove_err);
        if (r == 0 && !note_removed(removed, version))
            r = act_error_set(&remove_err, ENOMEM, "host %s: out of memory in gc", host);
        if (r < 0) {
            act_log(LOG_WARNING, "%s", remove_err.message);
            if (!first_error) {
                first_error = r;
                if (err)
                    *err = remove_err;
            }
        }
    }
    if (!options->dry_run)
        rel_sweep_stale(host_dirfd);
    return first_error;
}
