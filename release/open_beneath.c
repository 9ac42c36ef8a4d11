/* Opening a file inside a build without ever following a symlink, so a link
 * planted in a staged build cannot redirect what resolve hashes and the
 * daemon execs. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "release/internal.h"

int rel_open_beneath_walk(int build_dirfd, const char *path, int flags)
{
    char copy[REL_PATH_SIZE];
    if (!rel_build_path_is_valid(path))
        return -EINVAL;
    strcpy(copy, path);

    /* Each directory on the way is opened with O_NOFOLLOW relative to the
     * previous one, so a symlinked directory fails with ELOOP instead of
     * being traversed; the build paths themselves have no ".." to climb. */
    _cleanup_close_ int dirfd = -1;
    int at = build_dirfd;
    char *component = copy;
    for (;;) {
        char *slash = strchr(component, '/');
        if (!slash)
            break;
        *slash = '\0';
        int next = openat(at, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            /* O_DIRECTORY reports a symlink as ENOTDIR; say what it is. */
            struct stat st;
            if (errno == ENOTDIR && fstatat(at, component, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode))
                return -ELOOP;
            return -errno;
        }
        act_closep(&dirfd);
        dirfd = next;
        at = dirfd;
        component = slash + 1;
    }
    int fd = openat(at, component, flags | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int rel_open_beneath(int build_dirfd, const char *path, int flags)
{
    if (!rel_build_path_is_valid(path))
        return -EINVAL;
    struct open_how how = {
        .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, build_dirfd, path, &how, sizeof(how));
    if (fd >= 0)
        return (int)fd;
    /* ENOSYS: a kernel before 5.6. EPERM can come from a seccomp filter that
     * does not know openat2. Both leave the portable walk. */
    if (errno == ENOSYS || errno == EPERM)
        return rel_open_beneath_walk(build_dirfd, path, flags);
    return -errno;
}
