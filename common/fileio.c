#include "common/fileio.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

DIR *act_opendir_at(int dirfd, const char *path)
{
    assert(path);
    int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *dir = fdopendir(fd);
    if (!dir)
        act_closep(&fd); /* keeps errno for the caller */
    return dir;
}

ssize_t act_read_full(int fd, void *buf, size_t size)
{
    assert(buf || size == 0);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, (char *)buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int act_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Cuts the large regular file dirfd/name down from its end, one chunk per
 * commit. Advice only: any failure stops it and leaves the rest to unlink. */
static void cut_down(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        st.st_nlink != 1 || (uint64_t)st.st_blocks * 512 <= 2 * (uint64_t)ACT_UNLINK_CHUNK_BYTES)
        return;
    /* Opened only when it was a regular file, and checked again once open:
     * opening a device or a FIFO for writing could do something. */
    _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat opened;
    if (fd < 0 || fstat(fd, &opened) < 0 || opened.st_ino != st.st_ino ||
        opened.st_dev != st.st_dev || !S_ISREG(opened.st_mode) || opened.st_nlink != 1)
        return;
    for (off_t size = opened.st_size; size > (off_t)ACT_UNLINK_CHUNK_BYTES;) {
        size -= (off_t)ACT_UNLINK_CHUNK_BYTES;
        if (ftruncate(fd, size) < 0 || fdatasync(fd) < 0)
            return;
    }
}

int act_unlink_gently(int dirfd, const char *name)
{
    cut_down(dirfd, name);
    return unlinkat(dirfd, name, 0);
}

int act_fsync_dir(int dirfd, act_error *err)
{
    if (fsync(dirfd) < 0)
        return act_error_set(err, errno, "fsync of directory failed: %s", strerror(errno));
    return 0;
}

static int write_replacing(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                           bool durable, act_error *err)
{
    assert(name);
    assert(data || len == 0);
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
        nonce = (uint32_t)getpid();
    char tmp[NAME_MAX + 1];
    if (snprintf(tmp, sizeof(tmp), ".%s.tmp-%08x", name, nonce) >= (int)sizeof(tmp))
        return act_error_set(err, ENAMETOOLONG, "file name %s is too long to write atomically",
                             name);

    _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return act_error_set(err, errno, "cannot create %s: %s", tmp, strerror(errno));
    int r = act_write_all(fd, data, len);
    if (r == 0 && fchmod(fd, mode) < 0)
        r = -errno; /* the umask must not narrow what the caller asked for */
    if (r == 0 && durable && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        r = -errno;
    if (r < 0) {
        unlinkat(dirfd, tmp, 0);
        return act_error_set(err, -r, "cannot write %s: %s", name, strerror(-r));
    }
    return durable ? act_fsync_dir(dirfd, err) : 0;
}

int act_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                     act_error *err)
{
    return write_replacing(dirfd, name, data, len, mode, true, err);
}

int act_write_replace(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                      act_error *err)
{
    return write_replacing(dirfd, name, data, len, mode, false, err);
}

int act_read_fd(int fd, size_t size_hint, size_t max, char **out, size_t *out_len)
{
    assert(out);
    size_t cap = size_hint + 1, len = 0;
    _cleanup_free_ char *buf = malloc(cap + 1);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len == cap) {
            if (cap > max)
                return -EFBIG;
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger)
                return -ENOMEM;
            buf = bigger;
            cap *= 2;
        }
        ssize_t n = act_read_full(fd, buf + len, cap - len);
        if (n < 0)
            return (int)n;
        len += (size_t)n;
        if (len < cap)
            break; /* the end of fd */
    }
    if (len > max)
        return -EFBIG;
    buf[len] = '\0';
    if (out_len)
        *out_len = len;
    *out = TAKE_PTR(buf);
    return 0;
}

int act_read_file(int dirfd, const char *name, size_t max, char **out, size_t *out_len,
                  act_error *err)
{
    assert(name);
    assert(out);
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return act_error_set(err, errno, "cannot open %s: %s", name, strerror(errno));
    int r = act_read_fd(fd, 4095, max, out, out_len);
    if (r == -EFBIG)
        return act_error_set(err, EFBIG, "%s is larger than %zu bytes; refusing to read it", name,
                             max);
    if (r == -ENOMEM)
        return act_error_set(err, ENOMEM, "out of memory reading %s", name);
    if (r < 0)
        return act_error_set(err, -r, "cannot read %s: %s", name, strerror(-r));
    return 0;
}

int act_mkdir_p(const char *path, mode_t mode, act_error *err)
{
    assert(path);
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return act_error_set(err, ENAMETOOLONG, "path %s is too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return act_error_set(err, errno, "cannot create directory %s: %s", buf,
                                     strerror(errno));
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    return 0;
}
