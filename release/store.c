/* The releases directory, host directories, the live link, locks and the
 * removal of leftovers. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/names.h"
#include "release/internal.h"

int rel_store_open(const char *releases_dir, rel_store **out, act_error *err)
{
    assert(out);
    if (!releases_dir || releases_dir[0] == '\0')
        return act_error_set(err, EINVAL, "releases directory is empty; configure a path");
    int r = act_mkdir_p(releases_dir, 0755, err);
    if (r < 0)
        return act_error_prefix(err, "releases directory %s", releases_dir);
    _cleanup_close_ int dirfd = open(releases_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return act_error_set(err, errno, "cannot open releases directory %s: %s", releases_dir,
                             strerror(errno));
    _cleanup_(rel_store_freep) rel_store *store = calloc(1, sizeof(*store));
    if (store) {
        store->dirfd = TAKE_FD(dirfd);
        store->path = strdup(releases_dir);
    }
    if (!store || !store->path)
        return act_error_set(err, ENOMEM, "out of memory opening releases directory %s",
                             releases_dir);
    *out = TAKE_PTR(store);
    return 0;
}

void rel_store_free(rel_store *store)
{
    if (!store)
        return;
    act_closep(&store->dirfd);
    free(store->path);
    free(store);
}

int rel_host_open(rel_store *store, const char *host, bool create, act_error *err)
{
    assert(store);
    assert(host);
    if (create) {
        if (mkdirat(store->dirfd, host, 0755) == 0) {
            int r = act_fsync_dir(store->dirfd, err);
            if (r < 0)
                return act_error_prefix(err, "releases directory %s", store->path);
        } else if (errno != EEXIST) {
            return act_error_set(err, errno, "host %s: cannot create %s/%s: %s", host, store->path,
                                 host, strerror(errno));
        }
    }
    int fd = openat(store->dirfd, host, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    if (errno == ENOENT)
        return act_error_set(err, ENOENT,
                             "host %s: nothing is staged (no directory %s/%s); "
                             "stage a release first",
                             host, store->path, host);
    if (errno == ELOOP || errno == ENOTDIR)
        return act_error_set(err, ELOOP,
                             "host %s: %s/%s is not a directory (a symlink or a "
                             "file); remove it",
                             host, store->path, host);
    return act_error_set(err, errno, "host %s: cannot open %s/%s: %s", host, store->path, host,
                         strerror(errno));
}

int rel_host_open_if_staged(rel_store *store, const char *host, act_error *err)
{
    assert(store);
    assert(host);
    act_error why = {0};
    int fd = rel_host_open(store, host, false, &why);
    if (fd < 0 && fd != -ENOENT && err)
        *err = why;
    return fd;
}

int rel_version_open(rel_store *store, int host_dirfd, const char *host, const char *version,
                     act_error *err)
{
    assert(store);
    assert(host);
    assert(version);
    int fd = openat(host_dirfd, version, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    if (errno == ENOENT)
        return act_error_set(err, ENOENT,
                             "host %s: version %s is not staged (no %s/%s/%s); "
                             "stage it first",
                             host, version, store->path, host, version);
    if (errno == ELOOP || errno == ENOTDIR)
        return act_error_set(err, ELOOP,
                             "host %s: version %s: %s/%s/%s is a symlink or a file, "
                             "not a staged build; remove it and stage the version again",
                             host, version, store->path, host, version);
    return act_error_set(err, errno, "host %s: version %s: cannot open %s/%s/%s: %s", host, version,
                         store->path, host, version, strerror(errno));
}

int rel_live_read(rel_store *store, int host_dirfd, const char *host, char out[REL_NAME_SIZE],
                  act_error *err)
{
    assert(store);
    assert(host);
    assert(out);
    char target[256];
    ssize_t n = readlinkat(host_dirfd, REL_LIVE_NAME, target, sizeof(target) - 1);
    if (n < 0) {
        if (errno == ENOENT)
            return act_error_set(err, ENOENT,
                                 "host %s: no live version (%s/%s/live does not "
                                 "exist); promote a staged version first",
                                 host, store->path, host);
        if (errno == EINVAL)
            return act_error_set(err, EUCLEAN,
                                 "host %s: %s/%s/live is not a symlink; remove it "
                                 "and promote a version",
                                 host, store->path, host);
        return act_error_set(err, errno, "host %s: cannot read %s/%s/live: %s", host, store->path,
                             host, strerror(errno));
    }
    target[n] = '\0';
    /* The target is only ever a bare version name written by promote. A
     * link to "../other" or an absolute path is someone else's edit and would
     * lead resolve out of the host's directory. */
    act_error name_err = {0};
    if ((size_t)n >= REL_NAME_SIZE || rel_version_check(target, &name_err) < 0)
        return act_error_set(err, EUCLEAN,
                             "host %s: %s/%s/live points to something that is not "
                             "a version name (%s); promote a version to repair it",
                             host, store->path, host, name_err.message);
    memcpy(out, target, (size_t)n + 1);
    return 0;
}

int rel_live_version(rel_store *store, const char *host, char out[REL_NAME_SIZE], act_error *err)
{
    assert(store);
    assert(out);
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    _cleanup_close_ int host_dirfd = rel_host_open(store, host, false, err);
    if (host_dirfd < 0)
        return host_dirfd;
    return rel_live_read(store, host_dirfd, host, out, err);
}

int rel_lock(int fd, bool wait)
{
    while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return 0;
}

int rel_lock_host(rel_store *store, int host_dirfd, const char *host, act_error *err)
{
    assert(store);
    assert(host);
    int r = rel_lock(host_dirfd, true);
    if (r < 0)
        return act_error_set(err, -r, "host %s: cannot lock %s/%s: %s", host, store->path, host,
                             strerror(-r));
    return 0;
}

void rel_unlock(int fd)
{
    (void)flock(fd, LOCK_UN);
}

void rel_random_suffix(char out[9])
{
    assert(out);
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
        nonce = (uint32_t)getpid() ^ (uint32_t)(uintptr_t)out;
    snprintf(out, 9, "%08x", nonce);
}

static int remove_children(int dirfd, int depth)
{
    if (depth > REL_MAX_DEPTH)
        return -ELOOP;
    _cleanup_(closedirp) DIR *dir = act_opendir_at(dirfd, ".");
    if (!dir)
        return -errno;
    int r = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        /* Gently: a removal of old builds runs beside wakes. */
        if (act_unlink_gently(dirfd, de->d_name) == 0 || errno == ENOENT)
            continue;
        if (errno != EISDIR && errno != EPERM) {
            r = -errno;
            continue;
        }
        _cleanup_close_ int child =
            openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child < 0) {
            r = -errno;
            continue;
        }
        int cr = remove_children(child, depth + 1);
        if (cr < 0)
            r = cr;
        else if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
            r = -errno;
    }
    return r;
}

int rel_remove_tree(int dirfd, const char *name)
{
    assert(name);
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    int r = remove_children(fd, 0);
    if (r < 0)
        return r;
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

void rel_sweep_stale(int host_dirfd)
{
    _cleanup_(closedirp) DIR *dir = act_opendir_at(host_dirfd, ".");
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (has_prefix(de->d_name, REL_LIVE_TMP_PREFIX)) {
            (void)unlinkat(host_dirfd, de->d_name, 0);
            continue;
        }
        if (!has_prefix(de->d_name, REL_STAGING_PREFIX) &&
            !has_prefix(de->d_name, REL_TRASH_PREFIX))
            continue;
        /* A stage or gc in progress holds an flock on its directory; the
         * kernel drops it when that process dies, so an unlocked one is a
         * crashed run's leftover. */
        _cleanup_close_ int fd =
            openat(host_dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || rel_lock(fd, false) < 0)
            continue;
        int r = rel_remove_tree(host_dirfd, de->d_name);
        if (r < 0)
            act_log(LOG_WARNING, "cannot remove leftover %s: %s", de->d_name, strerror(-r));
    }
}
