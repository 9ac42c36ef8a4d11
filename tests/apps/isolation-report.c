/* act-testapp --isolation-report: what a host's code may do from inside its
 * generation, tried once at start and written to
 * $STATE_DIRECTORY/isolation-report as "name=result" lines, where result is
 * ok or the errno's name. Each try is harmless when it is allowed: a
 * missing path, a bad argument, or a child that exits at once. The calls
 * are made raw, so that libc's own fallbacks cannot hide a refusal. */
#include "tests/apps/isolation-report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *result(long r, int error)
{
    if (r >= 0)
        return "ok";
    switch (error) {
    case EPERM:
        return "EPERM";
    case EACCES:
        return "EACCES";
    case ENOSYS:
        return "ENOSYS";
    case ENOENT:
        return "ENOENT";
    case EINVAL:
        return "EINVAL";
    case EFAULT:
        return "EFAULT";
    case EADDRINUSE:
        return "EADDRINUSE";
    case EROFS:
        return "EROFS";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case ENETUNREACH:
        return "ENETUNREACH";
    default:
        return "other";
    }
}

#define TRY(out, name, call)                                                                       \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(call);                                                                    \
        fprintf(out, "%s=%s\n", name, result(r_, errno));                                          \
    } while (0)

/* unshare(CLONE_NEWUSER) may work: try it in a child that exits at once. */
static long unshare_in_child(int flags)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(syscall(SYS_unshare, flags) == 0 ? 0 : errno);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    errno = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
    return errno ? -1 : 0;
}

static long bind_port_80(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sin = {
        .sin_family = AF_INET, .sin_port = htons(80), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int));
    long r = bind(fd, (struct sockaddr *)&sin, sizeof(sin));
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

/* Opening path for writing, closed unwritten: whether a write to a kernel
 * setting would be let through, without changing it. */
static long open_for_writing(const char *path)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    return fd;
}

/* Opening the first block device in /dev for reading: a disk, whose every
 * file a reader would see whatever their modes say. ENOENT with none. */
static long open_a_disk(void)
{
    DIR *dev = opendir("/dev");
    if (!dev)
        return -1;
    long r = -1;
    errno = ENOENT;
    for (struct dirent *e; r < 0 && errno == ENOENT && (e = readdir(dev));) {
        struct stat st;
        if (fstatat(dirfd(dev), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISBLK(st.st_mode)) {
            errno = ENOENT;
            continue;
        }
        int fd = openat(dirfd(dev), e->d_name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            r = 0;
        }
    }
    int saved = errno;
    closedir(dev);
    errno = saved;
    return r;
}

/* A SysV shared memory segment under the key ACT_SHM_KEY names, left
 * behind on purpose: the test looks for it from the box's side. */
static long leave_shared_memory(void)
{
    const char *key = getenv("ACT_SHM_KEY");
    if (!key) {
        errno = ENOENT;
        return -1;
    }
    return shmget((key_t)strtol(key, NULL, 0), 4096, IPC_CREAT | 0600);
}

/* A TCP connection to 127.0.0.1:ACT_NET_PORT, a listener of the box's. */
static long connect_box_port(void)
{
    const char *port = getenv("ACT_NET_PORT");
    if (!port) {
        errno = ENOENT;
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)atoi(port)),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    long r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

/* A connection to the abstract unix socket ACT_ABSTRACT names: abstract
 * names belong to a network namespace, not to the filesystem. */
static long connect_abstract(void)
{
    const char *name = getenv("ACT_ABSTRACT");
    if (!name || strlen(name) + 2 > sizeof(((struct sockaddr_un *)0)->sun_path)) {
        errno = ENOENT;
        return -1;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path + 1, name, strlen(name));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    long r = connect(fd, (struct sockaddr *)&addr, len);
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

/* A connection to the unix socket at ACT_ROOT_SOCKET: one only root may
 * connect to, as systemd's and a container engine's are. */
static long connect_root_socket(void)
{
    const char *path = getenv("ACT_ROOT_SOCKET");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof(addr.sun_path)) {
        errno = ENOENT;
        return -1;
    }
    memcpy(addr.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    long r = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

/* Creating a file at path (removed again if it worked). */
static long create_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(path);
    return 0;
}

/* Lists dir and looks for name in it (any entry but . and .. when NULL):
 * a directory that opens but shows nothing, as a filesystem view's empty
 * stand-in does, is as good as absent (ENOENT). */
static long list_finds(const char *path, const char *name)
{
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    bool found = false;
    for (struct dirent *e; (e = readdir(dir)) && !found;)
        found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
                (!name || strcmp(e->d_name, name) == 0);
    closedir(dir);
    if (!found)
        errno = ENOENT;
    return found ? 0 : -1;
}

/* What the daemon keeps beside the state directory
 * (<state>/hosts/<host>/state): the releases, and the other hosts. With
 * ACT_OTHER_HOST naming another host, its state directory is tried too. */
static void try_neighbours(FILE *out, const char *dir)
{
    const char *host = getenv("ACTIVATOR_HOST"), *version = getenv("ACTIVATOR_VERSION");
    const char *other = getenv("ACT_OTHER_HOST");
    char path[4096];
    snprintf(path, sizeof(path), "%s/../../../releases/%s/act-test", dir, host ? host : "");
    TRY(out, "write_releases", create_file(path));
    snprintf(path, sizeof(path), "%s/../../../releases/%s/%s/manifest.json", dir, host ? host : "",
             version ? version : "");
    TRY(out, "write_manifest", open(path, O_WRONLY | O_CLOEXEC));
    snprintf(path, sizeof(path), "%s/../..", dir);
    TRY(out, "list_hosts", list_finds(path, other));
    if (other) {
        snprintf(path, sizeof(path), "%s/../../%s/state/act-test", dir, other);
        TRY(out, "write_other_state", create_file(path));
        snprintf(path, sizeof(path), "%s/../../%s/state", dir, other);
        TRY(out, "list_other_state", open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
}

void act_isolation_report(void)
{
    const char *dir = getenv("STATE_DIRECTORY");
    char path[4096], temp[4200];
    snprintf(path, sizeof(path), "%s/isolation-report", dir ? dir : ".");
    snprintf(temp, sizeof(temp), "%s.tmp", path);
    FILE *out = fopen(temp, "we");
    if (!out) {
        fprintf(stderr, "act-testapp: cannot write %s: %s\n", temp, strerror(errno));
        return;
    }
    fprintf(out, "uid=%d\ngid=%d\n", (int)getuid(), (int)getgid());
    fprintf(out, "securebits=%ld\n", (long)prctl(PR_GET_SECUREBITS, 0, 0, 0, 0));
    TRY(out, "keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    TRY(out, "add_key", syscall(SYS_add_key, "user", "act-test", "x", 1, KEY_SPEC_PROCESS_KEYRING));
    TRY(out, "chroot", syscall(SYS_chroot, "/nonexistent-act-test"));
    TRY(out, "mount", syscall(SYS_mount, "none", "/nonexistent-act-test", "tmpfs", 0, NULL));
    TRY(out, "io_uring_setup", syscall(SYS_io_uring_setup, 0, NULL));
    TRY(out, "unshare_user", unshare_in_child(CLONE_NEWUSER));
    TRY(out, "setuid0", syscall(SYS_setuid, 0));
    TRY(out, "bind80", bind_port_80());
    TRY(out, "socket", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    TRY(out, "uname", syscall(SYS_uname, &(char[512]){0}));
    TRY(out, "kernel_setting", open_for_writing("/proc/sys/kernel/core_pattern"));
    TRY(out, "sysrq", open_for_writing("/proc/sysrq-trigger"));
    TRY(out, "disk", open_a_disk());
    TRY(out, "dev_null", open_for_writing("/dev/null"));
    TRY(out, "sysv_shm", leave_shared_memory());
    TRY(out, "net_box_port", connect_box_port());
    TRY(out, "net_abstract", connect_abstract());
    TRY(out, "root_socket", connect_root_socket());
    /* Signal 0 checks the permission and sends nothing; pid 1 is root's. */
    TRY(out, "signal_root", syscall(SYS_kill, 1, 0));
    if (dir)
        try_neighbours(out, dir);
    fprintf(out, "end\n");
    if (fclose(out) != 0 || rename(temp, path) < 0)
        fprintf(stderr, "act-testapp: cannot write %s: %s\n", path, strerror(errno));
}
