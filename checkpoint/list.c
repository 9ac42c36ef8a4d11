/* Listing a host's checkpoints and keeping the newest few. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"

int ckpt_newest_first(const void *a, const void *b)
{
    const ckpt_info *x = a, *y = b;
    if (x->stamp_usec != y->stamp_usec)
        return x->stamp_usec > y->stamp_usec ? -1 : 1;
    return -strcmp(x->id, y->id);
}

/* The id of an archive's file name; false for anything else in the
 * directory (temporaries are hidden, so never valid ids). */
static bool archive_id(const char *name, char id[CKPT_ID_SIZE])
{
    size_t len = strlen(name), suffix = strlen(CKPT_ARCHIVE_SUFFIX);
    if (len <= suffix || len - suffix >= CKPT_ID_SIZE ||
        strcmp(name + len - suffix, CKPT_ARCHIVE_SUFFIX) != 0)
        return false;
    memcpy(id, name, len - suffix);
    id[len - suffix] = '\0';
    return act_name_is_valid(id);
}

int ckpt_list(const char *dir, const char *host, ckpt_info **out, size_t *n, act_error *err)
{
    *out = NULL;
    *n = 0;
    act_error open_err = {0};
    _cleanup_close_ int host_dirfd = ckpt_open_host_dir(dir, host, false, &open_err);
    if (host_dirfd == -ENOENT && act_name_is_valid(host))
        return 0; /* no checkpoint was ever written for it */
    if (host_dirfd < 0) {
        *err = open_err;
        return host_dirfd;
    }
    DIR *d = act_opendir_at(host_dirfd, ".");
    if (!d)
        return act_error_set(err, errno, "cannot read %s/%s: %s", dir, host, strerror(errno));
    ckpt_info *items = NULL;
    size_t count = 0, cap = 0;
    int r = 0;
    struct dirent *entry;
    while ((entry = readdir(d))) {
        char id[CKPT_ID_SIZE];
        struct stat st;
        if (!archive_id(entry->d_name, id) ||
            fstatat(host_dirfd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (count == cap) {
            size_t grown_cap = cap ? 2 * cap : 8;
            ckpt_info *grown = realloc(items, grown_cap * sizeof(*items));
            if (!grown) {
                r = act_error_set(err, ENOMEM, "out of memory");
                break;
            }
            items = grown;
            cap = grown_cap;
        }
        ckpt_info *info = &items[count++];
        *info = (ckpt_info){.size = (uint64_t)st.st_size,
                            .stamp_usec = (uint64_t)st.st_mtim.tv_sec * 1000000u +
                                          (uint64_t)st.st_mtim.tv_nsec / 1000u};
        memcpy(info->id, id, sizeof(id));
        act_error ignored = {0};
        (void)ckpt_read_sidecar(host_dirfd, id, info, &ignored);
    }
    closedir(d);
    if (r < 0) {
        free(items);
        return r;
    }
    if (count > 1)
        qsort(items, count, sizeof(*items), ckpt_newest_first);
    *out = items;
    *n = count;
    return 0;
}

bool ckpt_is_protected(const char *id, const char *const *protected, size_t n_protected)
{
    for (size_t i = 0; i < n_protected; i++)
        if (protected[i] && strcmp(protected[i], id) == 0)
            return true;
    return false;
}

int ckpt_prune(const char *dir, const char *host, unsigned keep, const char *const *protected,
               size_t n_protected, act_error *err)
{
    _cleanup_free_ ckpt_info *items = NULL;
    size_t n = 0;
    int r = ckpt_list(dir, host, &items, &n, err);
    if (r < 0 || n <= keep)
        return r;
    _cleanup_close_ int host_dirfd = ckpt_open_host_dir(dir, host, false, err);
    if (host_dirfd < 0)
        return host_dirfd;
    int removed = 0;
    for (size_t i = keep; i < n; i++) {
        if (ckpt_is_protected(items[i].id, protected, n_protected))
            continue;
        char name[CKPT_ID_SIZE + 16];
        /* The archive first: a sidecar left alone is never listed. */
        snprintf(name, sizeof(name), "%s%s", items[i].id, CKPT_ARCHIVE_SUFFIX);
        if (unlinkat(host_dirfd, name, 0) < 0 && errno != ENOENT)
            return act_error_set(err, errno, "cannot remove %s/%s/%s: %s", dir, host, name,
                                 strerror(errno));
        snprintf(name, sizeof(name), "%s%s", items[i].id, CKPT_SIDECAR_SUFFIX);
        (void)unlinkat(host_dirfd, name, 0);
        removed++;
    }
    if (removed > 0 && (r = act_fsync_dir(host_dirfd, err)) < 0)
        return r;
    return removed;
}
