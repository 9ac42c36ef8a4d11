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
    snprintf(iso->host_releases, sizeof(iso->host_releases), "%s/state/releases/bench", iso->root);
    snprintf(iso->build, sizeof(iso->build), "%s/state/releases/bench/v1", iso->root);
    const char *dirs[] = {iso->state,  iso->hosts,    iso->host_dir,      iso->host_state, iso->run,
                          iso->notify, iso->releases, iso->host_releases, iso->build};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        if (mkdir(dirs[i], 0755) < 0)
            return -errno;
    return 0;
}

void raw_isolation_cleanup(const struct raw_isolation *iso)
{
    const char *dirs[] = {iso->notify,   iso->run,        iso->build,    iso->host_releases,
                          iso->releases, iso->host_state, iso->host_dir, iso->hosts,
                          iso->state,    iso->root};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        rmdir(dirs[i]);
}

#define TMPFS_FLAGS (MS_NOSUID | MS_NODEV)
#define HIDE_FLAGS (MS_NOSUID | MS_NODEV | MS_NOEXEC)

/* The kernel's settings bound read-only over themselves, as a view does:
 * the ones this kernel has. */
static int protect_proc(void)
{
    static const char *const files[] = {"/proc/sys",  "/proc/sysrq-trigger", "/proc/acpi",
                                        "/proc/apm",  "/proc/asound",        "/proc/bus",
                                        "/proc/fs",   "/proc/irq",           "/proc/latency_stats",
                                        "/proc/mtrr", "/proc/scsi",          "/proc/timer_stats"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        if (syscall(SYS_mount, files[i], files[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
            if (errno == ENOENT)
                continue;
            return -1;
        }
        if (syscall(SYS_mount, NULL, files[i], NULL,
                    MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
            return -1;
    }
    return 0;
}

/* A /dev of a few devices, as a view makes it; read-only once /dev/shm is
 * in place. */
static int private_dev(void)
{
    static const char *const nodes[] = {"/dev/null",   "/dev/zero",    "/dev/full",
                                        "/dev/random", "/dev/urandom", "/dev/tty"};
    static const unsigned int numbers[] = {0x103, 0x105, 0x107, 0x108, 0x109, 0x500};
    static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},
                                           {"/proc/self/fd/0", "/dev/stdin"},
                                           {"/proc/self/fd/1", "/dev/stdout"},
                                           {"/proc/self/fd/2", "/dev/stderr"},
                                           {"pts/ptmx", "/dev/ptmx"}};
    if (syscall(SYS_mount, "tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
                "mode=0755,size=4m,nr_inodes=1024") < 0)
        return -1;
    for (size_t i = 0; i < 6; i++)
        if (syscall(SYS_mknodat, AT_FDCWD, nodes[i], S_IFCHR | 0600, numbers[i]) < 0 ||
            syscall(SYS_fchmodat, AT_FDCWD, nodes[i], 0666) < 0)
            return -1;
    for (size_t i = 0; i < 5; i++)
        if (syscall(SYS_symlinkat, links[i][0], AT_FDCWD, links[i][1]) < 0)
            return -1;
    if (syscall(SYS_mkdir, "/dev/pts", 0755) < 0 || syscall(SYS_mkdir, "/dev/shm", 0755) < 0)
        return -1;
    syscall(SYS_mount, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
            "newinstance,ptmxmode=0666,mode=0620");
    return 0;
}

int raw_isolate(const struct raw_isolation *iso)
{
    struct mount_attr read_only = {.attr_set = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_unshare, CLONE_NEWIPC) < 0 || syscall(SYS_unshare, CLONE_NEWNS) < 0 ||
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
        syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &read_only, sizeof(read_only)) <
            0 ||
        private_dev() < 0 ||
        syscall(SYS_mount, "tmpfs", "/dev/shm", "tmpfs", TMPFS_FLAGS, "mode=01777") < 0 ||
        syscall(SYS_mount, "proc", "/proc", "proc", HIDE_FLAGS, "hidepid=invisible") < 0 ||
        protect_proc() < 0 ||
        syscall(SYS_mount, "tmpfs", iso->run, "tmpfs", HIDE_FLAGS, "mode=0755") < 0 ||
        syscall(SYS_mkdir, iso->notify, 0755) < 0 ||
        syscall(SYS_move_mount, notify_tree, "", AT_FDCWD, iso->notify, MOVE_MOUNT_F_EMPTY_PATH) <
            0 ||
        syscall(SYS_mount, "tmpfs", iso->state, "tmpfs", HIDE_FLAGS, "mode=0755") < 0 ||
        syscall(SYS_mkdir, iso->releases, 0755) < 0 ||
        syscall(SYS_mkdir, iso->host_releases, 0755) < 0 ||
        syscall(SYS_mkdir, iso->build, 0755) < 0 ||
        syscall(SYS_move_mount, build_tree, "", AT_FDCWD, iso->build, MOVE_MOUNT_F_EMPTY_PATH) <
            0 ||
        syscall(SYS_mkdir, iso->hosts, 0755) < 0 || syscall(SYS_mkdir, iso->host_dir, 0755) < 0 ||
        syscall(SYS_mkdir, iso->host_state, 0755) < 0 ||
        syscall(SYS_move_mount, state_tree, "", AT_FDCWD, iso->host_state,
                MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
        syscall(SYS_mount, "tmpfs", "/tmp", "tmpfs", TMPFS_FLAGS, "mode=01777") < 0 ||
        syscall(SYS_mount, "tmpfs", "/var/tmp", "tmpfs", TMPFS_FLAGS, "mode=01777") < 0 ||
        syscall(SYS_mount_setattr, AT_FDCWD, iso->run, 0, &read_only, sizeof(read_only)) < 0 ||
        syscall(SYS_mount_setattr, AT_FDCWD, iso->state, 0, &read_only, sizeof(read_only)) < 0 ||
        syscall(SYS_mount_setattr, AT_FDCWD, "/dev", 0, &read_only, sizeof(read_only)) < 0)
        return errno;
    syscall(SYS_close, state_tree);
    syscall(SYS_close, notify_tree);
    syscall(SYS_close, build_tree);
    return 0;
}
