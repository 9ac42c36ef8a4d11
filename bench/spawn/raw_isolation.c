#include "bench/spawn/raw_isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int raw_isolation_init(struct raw_isolation *iso)
{
    snprintf(iso->root, sizeof(iso->root), "/run/act-bench-spawn-XXXXXX");
    if (!mkdtemp(iso->root))
        return -errno;
    snprintf(iso->state, sizeof(iso->state), "%s/state", iso->root);
    snprintf(iso->hosts, sizeof(iso->hosts), "%s/state/hosts", iso->root);
    snprintf(iso->host_dir, sizeof(iso->host_dir), "%s/state/hosts/bench", iso->root);
    snprintf(iso->host_state, sizeof(iso->host_state), "%s/state/hosts/bench/state", iso->root);
    snprintf(iso->run, sizeof(iso->run), "%s/run", iso->root);
    snprintf(iso->notify, sizeof(iso->notify), "%s/run/notify", iso->root);
    snprintf(iso->releases, sizeof(iso->releases), "%s/state/releases", iso->root);
    snprintf(iso->host_releases, sizeof(iso->host_releases), "%s/state/releases/bench",
             iso->root);
    snprintf(iso->build, sizeof(iso->build), "%s/state/releases/bench/v1", iso->root);
    const char *dirs[] = {iso->state,    iso->hosts,    iso->host_dir,      iso->host_state,
                          iso->run,      iso->notify,   iso->releases,      iso->host_releases,
                          iso->build};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        if (mkdir(dirs[i], 0755) < 0)
            return -errno;
    return 0;
}

void raw_isolation_cleanup(const struct raw_isolation *iso)
{
    const char *dirs[] = {iso->notify, iso->run,   iso->build,    iso->host_releases,
                          iso->releases, iso->host_state, iso->host_dir, iso->hosts,
                          iso->state,  iso->root};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        rmdir(dirs[i]);
}

#define TMPFS_FLAGS (MS_NOSUID | MS_NODEV)
#define HIDE_FLAGS (MS_NOSUID | MS_NODEV | MS_NOEXEC)

int raw_isolate(const struct raw_isolation *iso)
{
    struct mount_attr read_only = {.attr_set = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_unshare, CLONE_NEWNS) < 0 ||
        syscall(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return errno;
    int state_tree = (int)syscall(SYS_open_tree, AT_FDCWD, iso->host_state,
                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    int notify_tree = (int)syscall(SYS_open_tree, AT_FDCWD, iso->notify,
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    int build_tree = (int)syscall(SYS_open_tree, AT_FDCWD, iso->build,
                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (state_tree < 0 || notify_tree < 0 || build_tree < 0 ||
        syscall(SYS_mount_setattr, build_tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &read_only,
                sizeof(read_only)) < 0 ||
        syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &read_only,
                sizeof(read_only)) < 0 ||
        syscall(SYS_mount, "tmpfs", "/dev/shm", "tmpfs", TMPFS_FLAGS, "mode=01777") < 0 ||
        syscall(SYS_mount, "proc", "/proc", "proc", HIDE_FLAGS, "hidepid=invisible") < 0 ||
        syscall(SYS_mount, "tmpfs", iso->run, "tmpfs", HIDE_FLAGS, "mode=0755") < 0 ||
        syscall(SYS_mkdir, iso->notify, 0755) < 0 ||
        syscall(SYS_move_mount, notify_tree, "", AT_FDCWD, iso->notify,
                MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
        syscall(SYS_mount, "tmpfs", iso->state, "tmpfs", HIDE_FLAGS, "mode=0755") < 0 ||
        syscall(SYS_mkdir, iso->releases, 0755) < 0 ||
        syscall(SYS_mkdir, iso->host_releases, 0755) < 0 ||
        syscall(SYS_mkdir, iso->build, 0755) < 0 ||
        syscall(SYS_move_mount, build_tree, "", AT_FDCWD, iso->build,
                MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
        syscall(SYS_mkdir, iso->hosts, 0755) < 0 || syscall(SYS_mkdir, iso->host_dir, 0755) < 0 ||
        syscall(SYS_mkdir, iso->host_state, 0755) < 0 ||
        syscall(SYS_move_mount, state_tree, "", AT_FDCWD, iso->host_state,
                MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
        syscall(SYS_mount, "tmpfs", "/tmp", "tmpfs", TMPFS_FLAGS, "mode=01777") < 0 ||
        syscall(SYS_mount, "tmpfs", "/var/tmp", "tmpfs", TMPFS_FLAGS, "mode=01777") < 0 ||
        syscall(SYS_mount_setattr, AT_FDCWD, iso->run, 0, &read_only, sizeof(read_only)) < 0 ||
        syscall(SYS_mount_setattr, AT_FDCWD, iso->state, 0, &read_only, sizeof(read_only)) < 0)
        return errno;
    syscall(SYS_close, state_tree);
    syscall(SYS_close, notify_tree);
    syscall(SYS_close, build_tree);
    return 0;
}
