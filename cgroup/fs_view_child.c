/* A filesystem view, the child's side: a mount namespace of its own, made
 * between clone3 and exec with raw syscalls on the ops the parent prepared
 * (fs_view.c). Same rules as spawn_child.c: async-signal-safe, no libc
 * wrappers, nothing written but this stack, no sanitizer instrumentation.
 *
 * The order matters:
 *   1. unshare the mount namespace, and make every mount in it private, so
 *      nothing mounted on the box later shows up here writable, and nothing
 *      of ours propagates back;
 *   2. clone every kept tree (open_tree) while the box's view is intact:
 *      the clones keep the box's own mount flags, so a kept path stays
 *      writable exactly where the box has it writable (a read-only one is
 *      made so before it is attached);
 *   3. make the whole tree read-only, recursively (mount_setattr);
 *   4. mount, parents first: the kept clones, the private tmpfs's, the
 *      tmpfs's that hide the daemon's directories (still writable, so the
 *      mount points of what is kept beneath them can be made), /dev with
 *      its few devices, /proc with the kernel's settings bound read-only
 *      over themselves;
 *   5. make the hiding tmpfs's and /dev read-only.
 *
 * The namespace comes from unshare here rather than CLONE_NEWNS in clone3:
 * the kernel takes either with CLONE_VM | CLONE_VFORK (unsharing the mount
 * namespace unshares only the fs struct, never the memory), both cost the
 * same (about 100 us for clone, namespace and exit of a child on the
 * development box, within 2 us of each other), and this way one path serves
 * clone3 with shared or copied memory and the fork fallback alike. */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup/spawn_internal.h"

#define VIEW_TMPFS_FLAGS (MS_NOSUID | MS_NODEV)
#define VIEW_HIDE_FLAGS (MS_NOSUID | MS_NODEV | MS_NOEXEC)

/* Creates path's missing parents, then path itself: a directory, or an
 * empty file as the mount point of a kept file (a socket). Existing ones
 * are fine, even on the read-only tree (mkdir says EEXIST first). */
CG_CHILD_CODE static int make_target(const char *path, bool directory)
{
    char buf[PATH_MAX];
    size_t len = 0;
    while (path[len] && len < sizeof(buf) - 1) {
        buf[len] = path[len];
        len++;
    }
    if (path[len])
        return ENAMETOOLONG;
    buf[len] = '\0';
    for (size_t i = 1; i < len; i++) {
        if (buf[i] != '/')
            continue;
        buf[i] = '\0';
        if (syscall(SYS_mkdir, buf, 0755) < 0 && errno != EEXIST)
            return errno;
        buf[i] = '/';
    }
    long r = directory ? syscall(SYS_mkdir, buf, 0755)
                       : syscall(SYS_mknodat, AT_FDCWD, buf, S_IFREG | 0600, 0);
    return r < 0 && errno != EEXIST ? errno : 0;
}

CG_CHILD_CODE static bool is_symlink(int fd)
{
    struct statx stx;
    return syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx) == 0 &&
           S_ISLNK(stx.stx_mode);
}

/* openat2 by hand, for where it is missing or filtered (a container's
 * seccomp allow-list that predates it says ENOSYS): one component at a
 * time, none of them a symlink. Paths were checked absolute, with no "."
 * or ".." component. */
CG_CHILD_CODE static int walk_no_symlinks(const char *path)
{
    char buf[PATH_MAX];
    size_t len = 0;
    while (path[len] && len < sizeof(buf) - 1) {
        buf[len] = path[len];
        len++;
    }
    if (path[len]) {
        errno = ENAMETOOLONG;
        return -1;
    }
    buf[len] = '\0';
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; fd >= 0 && i < len;) {
        while (buf[i] == '/')
            i++;
        size_t end = i;
        while (end < len && buf[end] != '/')
            end++;
        if (end == i)
            break;
        buf[end] = '\0';
        int next = (int)syscall(SYS_openat, fd, buf + i, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        syscall(SYS_close, fd);
        if (next >= 0 && is_symlink(next)) {
            syscall(SYS_close, next);
            next = -1;
            saved = ELOOP;
        }
        errno = saved;
        fd = next;
        i = end + 1;
    }
    return fd;
}

/* An O_PATH fd of path reached through no symlink at all: a kept path
 * may lie in a directory its host can write, and a symlink put there
 * must not make us bind (or mount onto) somewhere else. */
CG_CHILD_CODE static int open_no_symlinks(const char *path)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
    if (fd < 0 && (errno == ENOSYS || errno == EPERM))
        fd = walk_no_symlinks(path);
    return fd;
}

CG_CHILD_CODE static bool is_directory(int fd)
{
    struct statx stx;
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx) < 0)
        return true;
    return S_ISDIR(stx.stx_mode);
}

/* The files of a fresh /proc through which root, even without a
 * capability, changes the kernel rather than its own process: the
 * settings (/proc/sys: kernel.core_pattern names a program the kernel runs
 * as full root), the magic SysRq key, and the drivers' and buses' knobs.
 * The per-process files (/proc/self/...) stay as the kernel guards them. */
static const char *const kernel_files[] = {
    "/proc/sys",           "/proc/sysrq-trigger", "/proc/acpi", "/proc/apm",
    "/proc/asound",        "/proc/bus",           "/proc/fs",   "/proc/irq",
    "/proc/latency_stats", "/proc/mtrr",          "/proc/scsi", "/proc/timer_stats",
};

/* Binds each kernel file read-only over itself; one this kernel lacks is
 * skipped. */
CG_CHILD_CODE static int protect_kernel_files(void)
{
    for (size_t i = 0; i < sizeof(kernel_files) / sizeof(kernel_files[0]); i++) {
        const char *path = kernel_files[i];
        if (syscall(SYS_mount, path, path, NULL, MS_BIND | MS_REC, NULL) < 0) {
            if (errno == ENOENT)
                continue;
            return errno;
        }
        if (syscall(SYS_mount, NULL, path, NULL,
                    MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
            return errno;
    }
    return 0;
}

/* The devices of a private /dev: harmless to every user, and what
 * runtimes open by path. Their numbers are the kernel's fixed ABI
 * (Documentation/admin-guide/devices.txt), small enough for the old
 * encoding of a dev_t, major << 8 | minor, which the kernel still takes. */
static const struct {
    const char *path;
    unsigned int major, minor;
} dev_nodes[] = {
    {"/dev/null", 1, 3},   {"/dev/zero", 1, 5},    {"/dev/full", 1, 7},
    {"/dev/random", 1, 8}, {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0},
};

static const struct {
    const char *path, *target;
} dev_links[] = {
    {"/dev/fd", "/proc/self/fd"},       {"/dev/stdin", "/proc/self/fd/0"},
    {"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"},
    {"/dev/ptmx", "pts/ptmx"},
};

/* Fills the fresh tmpfs on /dev. The box's /dev/log, a symlink to the
 * journal's socket where there is one, is recreated from log_target. A
 * pts of its own is best effort: a kernel or container that refuses a new
 * devpts instance leaves a host without terminals, which few need. */
CG_CHILD_CODE static int fill_dev(const char *log_target)
{
    for (size_t i = 0; i < sizeof(dev_nodes) / sizeof(dev_nodes[0]); i++) {
        /* Made 0600 under any umask, then opened to all, as a box's are. */
        if (syscall(SYS_mknodat, AT_FDCWD, dev_nodes[i].path, S_IFCHR | 0600,
                    (dev_nodes[i].major << 8) | dev_nodes[i].minor) < 0 ||
            syscall(SYS_fchmodat, AT_FDCWD, dev_nodes[i].path, 0666) < 0)
            return errno;
    }
    for (size_t i = 0; i < sizeof(dev_links) / sizeof(dev_links[0]); i++)
        if (syscall(SYS_symlinkat, dev_links[i].target, AT_FDCWD, dev_links[i].path) < 0)
            return errno;
    if (log_target[0] && syscall(SYS_symlinkat, log_target, AT_FDCWD, "/dev/log") < 0)
        return errno;
    if (syscall(SYS_mkdir, "/dev/pts", 0755) < 0)
        return errno;
    syscall(SYS_mount, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
            "newinstance,ptmxmode=0666,mode=0620");
    return 0;
}

/* Step 4 for one op; *mounted says whether anything was mounted. */
CG_CHILD_CODE static int take_op(const struct cg_view_op *op, int clone_fd, bool *mounted)
{
    *mounted = false;
    if (op->kind == CG_VIEW_KEEP && clone_fd < 0)
        return 0; /* if_present, and it was not */
    if (op->make_target) {
        int e = make_target(op->path, op->kind != CG_VIEW_KEEP || is_directory(clone_fd));
        if (e)
            return e;
    }
    long r = 0;
    int target = -1;
    switch (op->kind) {
    case CG_VIEW_KEEP:
        target = open_no_symlinks(op->path);
        if (target < 0)
            return errno;
        r = syscall(SYS_move_mount, clone_fd, "", target, "",
                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
        syscall(SYS_close, target);
        break;
    case CG_VIEW_TMPFS:
        r = syscall(SYS_mount, "tmpfs", op->path, "tmpfs", VIEW_TMPFS_FLAGS,
                    op->options ? op->options : "mode=01777");
        break;
    case CG_VIEW_HIDE:
        r = syscall(SYS_mount, "tmpfs", op->path, "tmpfs", VIEW_HIDE_FLAGS, "mode=0755");
        break;
    case CG_VIEW_PROC:
        /* Per-mount proc options arrived in Linux 5.8; before that the
         * option would change the box's own /proc, so EINVAL it is. */
        r = syscall(SYS_mount, "proc", op->path, "proc", VIEW_HIDE_FLAGS, "hidepid=invisible");
        if (r == 0) {
            *mounted = true;
            return protect_kernel_files();
        }
        break;
    case CG_VIEW_DEV: {
        /* The box's /dev/log is read before the tmpfs hides it. */
        char log_target[PATH_MAX];
        long n = syscall(SYS_readlinkat, AT_FDCWD, "/dev/log", log_target, sizeof(log_target) - 1);
        log_target[n > 0 ? n : 0] = '\0';
        r = syscall(SYS_mount, "tmpfs", op->path, "tmpfs", MS_NOSUID | MS_NOEXEC,
                    "mode=0755,size=4m,nr_inodes=1024");
        if (r == 0) {
            *mounted = true;
            return fill_dev(log_target);
        }
        break;
    }
    }
    if (r < 0)
        return op->if_present && errno == ENOENT ? 0 : errno;
    *mounted = true;
    return 0;
}

CG_CHILD_CODE int cg_child_enter_view(const struct cg_view_op *ops, size_t n_ops, int32_t *failed)
{
    int clones[CG_FS_VIEW_PATHS_MAX + CG_FS_VIEW_OWN_OPS];
    bool mounted[CG_FS_VIEW_PATHS_MAX + CG_FS_VIEW_OWN_OPS];
    if (n_ops > CG_FS_VIEW_PATHS_MAX + CG_FS_VIEW_OWN_OPS) {
        *failed = CG_VIEW_FAILED_UNSHARE;
        return E2BIG;
    }
    struct mount_attr read_only = {.attr_set = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_unshare, CLONE_NEWNS) < 0) {
        *failed = CG_VIEW_FAILED_UNSHARE;
        return errno;
    }
    if (syscall(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        *failed = CG_VIEW_FAILED_PRIVATE;
        return errno;
    }
    for (size_t i = 0; i < n_ops; i++) {
        clones[i] = -1;
        if (ops[i].kind != CG_VIEW_KEEP)
            continue;
        int source = open_no_symlinks(ops[i].path);
        if (source >= 0) {
            clones[i] = (int)syscall(SYS_open_tree, source, "",
                                     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                         AT_EMPTY_PATH);
            int saved = errno;
            syscall(SYS_close, source);
            errno = saved;
        }
        if (clones[i] < 0 && !(ops[i].if_present && errno == ENOENT)) {
            *failed = (int32_t)i;
            return errno;
        }
        if (clones[i] >= 0 && ops[i].read_only &&
            syscall(SYS_mount_setattr, clones[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &read_only,
                    sizeof(read_only)) < 0) {
            *failed = (int32_t)i;
            return errno;
        }
    }
    if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &read_only, sizeof(read_only)) <
        0) {
        *failed = CG_VIEW_FAILED_READ_ONLY;
        return errno;
    }
    for (size_t i = 0; i < n_ops; i++) {
        int e = take_op(&ops[i], clones[i], &mounted[i]);
        if (clones[i] >= 0)
            syscall(SYS_close, clones[i]);
        if (e) {
            *failed = (int32_t)i;
            return e;
        }
    }
    /* Only the hiding tmpfs (or /dev) itself, not what is kept beneath it. */
    for (size_t i = 0; i < n_ops; i++)
        if ((ops[i].kind == CG_VIEW_HIDE || ops[i].kind == CG_VIEW_DEV) && mounted[i] &&
            syscall(SYS_mount_setattr, AT_FDCWD, ops[i].path, 0, &read_only, sizeof(read_only)) <
                0) {
            *failed = (int32_t)i;
            return errno;
        }
    return 0;
}
