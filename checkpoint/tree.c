/* Removing a tree: the blocking helper the archive code shares. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"

static int remove_children(int dirfd)
{
    DIR *dir = act_opendir_at(dirfd, ".");
    if (!dir)
        return -errno;
    int result = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        int r = ckpt_remove_tree(dirfd, entry->d_name);
        if (r < 0 && result == 0)
            result = r;
    }
    closedir(dir);
    return result;
}

int ckpt_remove_tree(int dirfd, const char *name)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    /* A directory: O_NOFOLLOW, so a symlink swapped in meanwhile is not
     * followed out of the tree. */
    _cleanup_close_ int child =
        openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0)
        return errno == ENOENT ? 0 : -errno;
    /* A tree restored from an archive may hold read-only directories. */
    (void)fchmod(child, 0700);
    int r = remove_children(child);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return r < 0 ? r : -errno;
    return r;
}
