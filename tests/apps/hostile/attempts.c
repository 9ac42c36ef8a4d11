/* The one-shot attempts (attempts.h). Whatever could change the app itself
 * if it succeeded (a cgroup move, a new user namespace, a setuid, a joined
 * keyring, a mount) runs in a child made for that one attempt, which reports
 * through a pipe and exits: so one attempt that succeeds cannot make the
 * next one succeed or fail for the wrong reason, and a process that escaped
 * its cgroup is gone at once instead of living on outside the leaf, where
 * the daemon could neither kill it nor prove it stopped. */
#include "attempts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/keyctl.h>

#include "report.h"

/* ---- helpers ---- */

/* Runs fn in a child; returns 0 when fn did what it tried, its errno when it
 * failed, or -1 with *why set when the child could not be made or died. */
static int in_child(int (*fn)(const void *arg), const void *arg, const char **why)
{
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
        *why = "pipe failed";
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        *why = "fork failed";
        return -1;
    }
    if (pid == 0) {
        close(pipe_fds[0]);
        int result = fn(arg);
        (void)!write(pipe_fds[1], &result, sizeof(result));
        _exit(0);
    }
    close(pipe_fds[1]);
    int result = -1;
    ssize_t got = read(pipe_fds[0], &result, sizeof(result));
    close(pipe_fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got != sizeof(result)) {
        *why = "the child died before it reported";
        return -1;
    }
    return result;
}

static void report_child(const char *name, int result, const char *why, const char *detail)
{
    if (result < 0)
        report_untried(name, why);
    else
        report_attempt(name, result == 0, result, detail);
}

static int sockaddr_for(const char *path, struct sockaddr_un *addr, socklen_t *len)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n >= sizeof(addr->sun_path))
        return -ENAMETOOLONG;
    memcpy(addr->sun_path, path, n);
    /* systemd's convention: a leading @ names an abstract socket. */
    if (path[0] == '@')
        addr->sun_path[0] = '\0';
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '@' ? 0 : 1));
    return 0;
}

/* ---- the other host's files, the releases, the daemon's sockets ---- */

static void try_read(const char *path)
{
    char name[PATH_MAX + 16];
    snprintf(name, sizeof(name), "read:%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int error = errno;
    if (fd >= 0) {
        char buf[64];
        ssize_t got = read(fd, buf, sizeof(buf));
        error = errno;
        close(fd);
        report_attempt(name, got >= 0, error, got >= 0 ? "read it" : "opened, not read");
        return;
    }
    report_attempt(name, false, error, "open");
}

static void try_list(const char *path)
{
    char name[PATH_MAX + 16];
    snprintf(name, sizeof(name), "list:%s", path);
    DIR *dir = opendir(path);
    if (!dir) {
        report_attempt(name, false, errno, "opendir");
        return;
    }
    size_t entries = 0;
    while (readdir(dir))
        entries++;
    closedir(dir);
    char detail[64];
    snprintf(detail, sizeof(detail), "%zu entries", entries);
    report_attempt(name, true, 0, detail);
}

/* Opening for writing is the whole attempt: writing would change a build the
 * other host's next start verifies, and the open already proves it could. */
static void try_write(const char *path)
{
    char name[PATH_MAX + 16];
    snprintf(name, sizeof(name), "write:%s", path);
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        report_attempt(name, false, errno, "open O_WRONLY");
        return;
    }
    close(fd);
    report_attempt(name, true, 0, "opened for writing");
}

static void try_create_in(const char *dir)
{
    char name[PATH_MAX + 16], path[PATH_MAX];
    snprintf(name, sizeof(name), "create-in:%s", dir);
    snprintf(path, sizeof(path), "%s/.act-hostile-%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        report_attempt(name, false, errno, "open O_CREAT");
        return;
    }
    close(fd);
    unlink(path);
    report_attempt(name, true, 0, "created (and removed) a file");
}

static void try_connect(const char *path)
{
    char name[PATH_MAX + 16];
    snprintf(name, sizeof(name), "connect:%s", path);
    struct sockaddr_un addr;
    socklen_t len;
    int r = sockaddr_for(path, &addr, &len);
    if (r < 0) {
        report_untried(name, "path too long");
        return;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        report_untried(name, "socket failed");
        return;
    }
    r = connect(fd, (struct sockaddr *)&addr, len);
    int error = errno;
    char detail[128] = "connect";
    if (r == 0) {
        /* Closing before an NNG listener has sent its SP header wedges the
         * listener for good in NNG 1.5.2 (nanomsg/nng#1518): wait for the
         * header, as a real client does, so that the daemon's answers to
         * the rest of the test measure the isolation, not that bug. */
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        char header[8];
        ssize_t got = poll(&pfd, 1, 1000) == 1 ? read(fd, header, sizeof(header)) : -1;
        snprintf(detail, sizeof(detail), "connected; the server sent %zd header bytes", got);
    }
    close(fd);
    report_attempt(name, r == 0, error, detail);
}

/* A harmless datagram: what matters is whether it is delivered at all, not
 * what a daemon that accepted it would do with STOPPING=1. */
static void try_notify(const char *path)
{
    char name[PATH_MAX + 16];
    snprintf(name, sizeof(name), "notify-other:%s", path);
    struct sockaddr_un addr;
    socklen_t len;
    if (sockaddr_for(path, &addr, &len) < 0) {
        report_untried(name, "path too long");
        return;
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        report_untried(name, "socket failed");
        return;
    }
    static const char message[] = "STATUS=sent by act-hostile";
    ssize_t sent = sendto(fd, message, sizeof(message) - 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                          (struct sockaddr *)&addr, len);
    int error = errno;
    close(fd);
    report_attempt(name, sent > 0, error, "sendto");
}

/* ---- cgroups ---- */

static int move_self(const void *arg)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/cgroup.procs", (const char *)arg);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    ssize_t written = write(fd, pid, (size_t)n);
    int error = errno;
    close(fd);
    return written == n ? 0 : error;
}

static void try_cgroup(const char *dir)
{
    char name[PATH_MAX + 32];
    snprintf(name, sizeof(name), "cgroup-procs:%s", dir);
    const char *why = NULL;
    int r = in_child(move_self, dir, &why);
    report_child(name, r, why, "a child wrote its own pid into cgroup.procs");
}

typedef struct path_set {
    char paths[ATTEMPT_MAX_TARGETS][PATH_MAX];
    size_t n;
} path_set;

static void path_set_add(path_set *set, const char *path)
{
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->paths[i], path) == 0)
            return;
    if (set->n < ATTEMPT_MAX_TARGETS)
        snprintf(set->paths[set->n++], PATH_MAX, "%s", path);
}

/* The line of /proc/self/cgroup for a hierarchy: "0::" for v2, or the one
 * whose controller list holds controller for v1. */
static bool own_cgroup_path(const char *controller, char *out, size_t size)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *controllers = strchr(line, ':');
        char *path = controllers ? strchr(controllers + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        *controllers++ = '\0';
        if (!controller) {
            found = strcmp(line, "0") == 0 && *controllers == '\0';
        } else {
            for (char *save = NULL, *c = strtok_r(controllers, ",", &save); c && !found;
                 c = strtok_r(NULL, ",", &save))
                found = strcmp(c, controller) == 0;
        }
        if (found)
            snprintf(out, size, "%s", path);
    }
    fclose(f);
    return found;
}

/* Every cgroup directory above the app's own, in every hierarchy mounted
 * where it can see it (mountinfo): the cgroup2 one and each v1 controller's.
 * Moving there is leaving the leaf. */
static void find_ancestors(path_set *set)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return;
    char line[8192];
    while (fgets(line, sizeof(line), f)) {
        /* id parent major:minor root mountpoint options [optional...] - type source super */
        char root[PATH_MAX], mountpoint[PATH_MAX];
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mountpoint) != 2)
            continue;
        char *dash = strstr(line, " - ");
        if (!dash)
            continue;
        char type[64], super[4096];
        if (sscanf(dash + 3, "%63s %*s %4095s", type, super) != 2)
            continue;
        char own[PATH_MAX];
        bool found = false;
        if (strcmp(type, "cgroup2") == 0) {
            found = own_cgroup_path(NULL, own, sizeof(own));
        } else if (strcmp(type, "cgroup") == 0) {
            for (char *save = NULL, *o = strtok_r(super, ",", &save); o && !found;
                 o = strtok_r(NULL, ",", &save))
                if (strcmp(o, "rw") && strcmp(o, "ro"))
                    found = own_cgroup_path(o, own, sizeof(own));
        }
        if (!found)
            continue;
        /* The mount shows the hierarchy from root on; own is from the top. */
        const char *relative = own;
        size_t root_len = strcmp(root, "/") == 0 ? 0 : strlen(root);
        if (root_len) {
            if (strncmp(own, root, root_len) != 0)
                continue;
            relative = own + root_len;
        }
        char dir[PATH_MAX * 2];
        snprintf(dir, sizeof(dir), "%s%s", mountpoint, relative);
        /* A leaf at the top of what the mount shows (a cgroup namespace)
         * has nothing above it here: the mount point is the leaf itself. */
        size_t dir_len = strlen(dir);
        while (dir_len > 1 && dir[dir_len - 1] == '/')
            dir[--dir_len] = '\0';
        for (;;) {
            char *slash = strrchr(dir, '/');
            if (!slash || (size_t)(slash - dir) < strlen(mountpoint))
                break;
            *slash = '\0';
            path_set_add(set, strlen(dir) >= strlen(mountpoint) ? dir : mountpoint);
        }
    }
    fclose(f);
}

/* ---- credentials, namespaces, mounts, keys ---- */

static int do_setuid(const void *arg)
{
    (void)arg;
    if (setuid(0) < 0)
        return errno;
    return geteuid() == 0 ? 0 : EPERM;
}

static int do_setresuid(const void *arg)
{
    (void)arg;
    if (setresuid(0, 0, 0) < 0)
        return errno;
    return geteuid() == 0 ? 0 : EPERM;
}

static int do_unshare_user(const void *arg)
{
    (void)arg;
    return unshare(CLONE_NEWUSER) < 0 ? errno : 0;
}

static int do_unshare_mount(const void *arg)
{
    (void)arg;
    return unshare(CLONE_NEWNS) < 0 ? errno : 0;
}

/* A tmpfs on a directory of the app's own: where it could never harm
 * anything, so that only the permission decides. */
static int do_mount(const void *arg)
{
    const char *dir = arg;
    if (mount("act-hostile", dir, "tmpfs", 0, "size=64k") < 0)
        return errno;
    umount2(dir, MNT_DETACH);
    return 0;
}

static int do_add_key(const void *arg)
{
    (void)arg;
    long key = syscall(SYS_add_key, "user", "act-hostile", "payload", (size_t)7,
                       KEY_SPEC_SESSION_KEYRING);
    if (key < 0)
        return errno;
    syscall(SYS_keyctl, KEYCTL_INVALIDATE, key);
    return 0;
}

static int do_join_keyring(const void *arg)
{
    (void)arg;
    return syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "act-hostile") < 0 ? errno : 0;
}

static int do_ptrace(const void *arg)
{
    const int *request = arg;
    pid_t pid = (pid_t)request[1];
    if (ptrace((enum __ptrace_request)request[0], pid, NULL, NULL) < 0)
        return errno;
    /* PTRACE_ATTACH stopped it: let it go at once. Our exit detaches. */
    if (request[0] == PTRACE_ATTACH) {
        int status;
        waitpid(pid, &status, __WALL);
        ptrace(PTRACE_DETACH, pid, NULL, NULL);
        kill(pid, SIGCONT);
    }
    return 0;
}

/* ---- /proc ---- */

static bool first_line_of(const char *path, const char *prefix, char *out, size_t size)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        if (strncmp(line, prefix, strlen(prefix)) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, size, "%s", line);
            found = true;
        }
    fclose(f);
    return found;
}

/* Processes the app can see in /proc that are not in its own cgroup: other
 * tenants, the daemon, the box's own services. */
static void try_proc_foreign(void)
{
    char own[4096];
    if (!first_line_of("/proc/self/cgroup", "0::", own, sizeof(own))) {
        report_untried("proc-foreign-processes", "no 0:: line in /proc/self/cgroup");
        return;
    }
    DIR *proc = opendir("/proc");
    if (!proc) {
        report_attempt("proc-foreign-processes", false, errno, "opendir /proc");
        return;
    }
    size_t foreign = 0;
    char example[256] = "";
    struct dirent *entry;
    while ((entry = readdir(proc))) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        char path[300], theirs[4096];
        snprintf(path, sizeof(path), "/proc/%s/cgroup", entry->d_name);
        if (!first_line_of(path, "0::", theirs, sizeof(theirs)) || strcmp(theirs, own) == 0)
            continue;
        if (foreign++ == 0) {
            char comm[64] = "?";
            snprintf(path, sizeof(path), "/proc/%s/comm", entry->d_name);
            first_line_of(path, "", comm, sizeof(comm));
            snprintf(example, sizeof(example), "e.g. pid %.16s (%.32s) in %.150s", entry->d_name, comm,
                     theirs + 3);
        }
    }
    closedir(proc);
    char detail[400];
    snprintf(detail, sizeof(detail), "%zu visible outside our cgroup; %s", foreign,
             foreign ? example : "none");
    report_attempt("proc-foreign-processes", foreign > 0, foreign ? 0 : ENOENT, detail);
}

static void try_proc_pid(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    struct stat st;
    int r = stat(path, &st);
    report_attempt("proc-other-pid", r == 0, errno, path);
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int error = errno;
    ssize_t got = -1;
    if (fd >= 0) {
        char buf[64];
        got = read(fd, buf, sizeof(buf));
        error = errno;
        close(fd);
    }
    report_attempt("proc-other-environ", got >= 0, error, path);
}

/* ---- through a helper ---- */

/* The pids of other processes running as us (the host's helpers, which the
 * daemon starts as the host: ExecReplicate=, ExecCheckpoint=), whose
 * /proc/<pid>/root shows the filesystem they see. Waits up to 5 s for one
 * to appear, since a helper starts once the generation is ready. */
static size_t same_uid_strangers(pid_t *pids, size_t max)
{
    size_t n = 0;
    for (int waited = 0; n == 0 && waited <= 5000; waited += 50) {
        DIR *proc = opendir("/proc");
        if (!proc)
            return 0;
        for (struct dirent *e; n < max && (e = readdir(proc));) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            pid_t pid = (pid_t)atoi(e->d_name);
            char path[64], comm[64] = "";
            struct stat st;
            snprintf(path, sizeof(path), "/proc/%d", (int)pid);
            if (pid == getpid() || stat(path, &st) < 0 || st.st_uid != getuid())
                continue;
            /* Our own children (the jobs) share our view: not helpers. */
            snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
            first_line_of(path, "", comm, sizeof(comm));
            if (strcmp(comm, "act-hostile") == 0)
                continue;
            pids[n++] = pid;
        }
        closedir(proc);
        if (n == 0)
            usleep(50 * 1000);
    }
    return n;
}

/* Reads each read target through every helper's root: what the helper
 * sees, the host sees through it. */
static void try_helper_roots(const target_list *read)
{
    pid_t helpers[16];
    size_t n = same_uid_strangers(helpers, 16);
    if (n == 0) {
        report_untried("helper-root", "no process of ours but our own is visible: no helper "
                                      "runs (give the host ExecReplicate=)");
        return;
    }
    if (read->n == 0) {
        report_untried("helper-root", "no read= targets given");
        return;
    }
    for (size_t t = 0; t < read->n; t++) {
        char name[PATH_MAX + 32];
        snprintf(name, sizeof(name), "helper-root:%s", read->paths[t]);
        bool opened = false;
        int error = ENOENT;
        char detail[128] = "";
        for (size_t i = 0; i < n && !opened; i++) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof(path), "/proc/%d/root%s", (int)helpers[i], read->paths[t]);
            int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
            error = errno;
            opened = fd >= 0;
            if (fd >= 0)
                close(fd);
            snprintf(detail, sizeof(detail), "through pid %d (%zu helpers seen)", (int)helpers[i],
                     n);
        }
        report_attempt(name, opened, opened ? 0 : error, detail);
    }
}

/* Its output grown to 1 TiB with ftruncate() (sparse: nothing written).
 * A log file the host held itself would take it; its output is the log
 * keeper's pipe, or a journal stream, which cannot be truncated. The
 * positive control, the file without the keeper, is daemon-surfaces'. */
static void try_grow_output(void)
{
    int r = ftruncate(STDOUT_FILENO, (off_t)1 << 40);
    report_attempt("output-grow", r == 0, errno, "ftruncate(stdout, 1 TiB)");
}

/* What root owns on the box: the kernel's settings (core_pattern names a
 * program the kernel runs as full root), the magic SysRq key, a disk and
 * the box's processes. Opening for writing is the whole attempt (nothing
 * is written; a disk is opened to read), and signal 0 to pid 1 checks the
 * permission and sends nothing. Refused by the host's uid, by its view,
 * and for User=root by its user namespace; the controls (the same root as
 * the box's root, with the box's files) are daemon-isolation's. */
static void try_box_root_surfaces(void)
{
    int fd = open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC);
    report_attempt("core-pattern", fd >= 0, errno, "/proc/sys/kernel/core_pattern for writing");
    if (fd >= 0)
        close(fd);
    fd = open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC);
    report_attempt("sysrq-trigger", fd >= 0, errno, "/proc/sysrq-trigger for writing");
    if (fd >= 0)
        close(fd);
    /* The box's first disk, by the name the kernel gives it (a box with
     * none: the usual name, which is then nowhere). */
    char disk[PATH_MAX] = "/dev/sda";
    DIR *block = opendir("/sys/block");
    for (struct dirent *e; block && (e = readdir(block));)
        if (e->d_name[0] != '.' && strncmp(e->d_name, "loop", 4) != 0 &&
            strncmp(e->d_name, "ram", 3) != 0) {
            snprintf(disk, sizeof(disk), "/dev/%s", e->d_name);
            break;
        }
    if (block)
        closedir(block);
    fd = open(disk, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    report_attempt("open-disk", fd >= 0, errno, disk);
    if (fd >= 0)
        close(fd);
    int k = kill(1, 0);
    report_attempt("kill-root", k == 0, errno, "kill(1, 0)");
}

/* ---- the controls ---- */

static void controls(void)
{
    const char *state = getenv("STATE_DIRECTORY");
    if (!state) {
        report_control("write-own-state", false, ENOENT);
    } else {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/act-hostile-was-here", state);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int error = errno;
        bool ok = fd >= 0 && write(fd, "yes\n", 4) == 4;
        if (fd >= 0)
            close(fd);
        report_control("write-own-state", ok, error);
    }
    const char *notify = getenv("NOTIFY_SOCKET");
    struct sockaddr_un addr;
    socklen_t len;
    if (!notify || sockaddr_for(notify, &addr, &len) < 0) {
        report_control("notify-own", false, ENOENT);
    } else {
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        static const char message[] = "STATUS=act-hostile attacked";
        ssize_t sent = fd < 0 ? -1
                              : sendto(fd, message, sizeof(message) - 1, MSG_NOSIGNAL,
                                       (struct sockaddr *)&addr, len);
        report_control("notify-own", sent > 0, errno);
        if (fd >= 0)
            close(fd);
    }
}

/* ---- all of them ---- */

void attack(const attack_targets *t)
{
    for (size_t i = 0; i < t->read.n; i++)
        try_read(t->read.paths[i]);
    for (size_t i = 0; i < t->list.n; i++)
        try_list(t->list.paths[i]);
    for (size_t i = 0; i < t->write.n; i++)
        try_write(t->write.paths[i]);
    for (size_t i = 0; i < t->create_in.n; i++)
        try_create_in(t->create_in.paths[i]);
    for (size_t i = 0; i < t->connect.n; i++)
        try_connect(t->connect.paths[i]);
    for (size_t i = 0; i < t->notify.n; i++)
        try_notify(t->notify.paths[i]);

    static path_set cgroups;
    cgroups.n = 0;
    for (size_t i = 0; i < t->cgroup.n; i++)
        path_set_add(&cgroups, t->cgroup.paths[i]);
    find_ancestors(&cgroups);
    for (size_t i = 0; i < cgroups.n; i++)
        try_cgroup(cgroups.paths[i]);

    const char *why = NULL;
    int r = in_child(do_setuid, NULL, &why);
    report_child("setuid-0", r, why, "setuid(0)");
    r = in_child(do_setresuid, NULL, &why);
    report_child("setresuid-0", r, why, "setresuid(0, 0, 0)");
    r = in_child(do_unshare_user, NULL, &why);
    report_child("unshare-user", r, why, "unshare(CLONE_NEWUSER)");
    r = in_child(do_unshare_mount, NULL, &why);
    report_child("unshare-mount", r, why, "unshare(CLONE_NEWNS)");

    char mount_dir[PATH_MAX];
    const char *state = getenv("STATE_DIRECTORY");
    snprintf(mount_dir, sizeof(mount_dir), "%s/act-hostile-mnt", state ? state : "/tmp");
    if (mkdir(mount_dir, 0755) < 0 && errno != EEXIST) {
        snprintf(mount_dir, sizeof(mount_dir), "/tmp/act-hostile-mnt-%d", (int)getpid());
        if (mkdir(mount_dir, 0755) < 0 && errno != EEXIST)
            snprintf(mount_dir, sizeof(mount_dir), "/");
    }
    r = in_child(do_mount, mount_dir, &why);
    report_child("mount-tmpfs", r, why, mount_dir);

    r = in_child(do_add_key, NULL, &why);
    report_child("add-key", r, why, "add_key(user, KEY_SPEC_SESSION_KEYRING)");
    r = in_child(do_join_keyring, NULL, &why);
    report_child("keyctl-join-session", r, why, "keyctl(KEYCTL_JOIN_SESSION_KEYRING)");

    if (t->other_pid > 0) {
        int attach[2] = {PTRACE_ATTACH, (int)t->other_pid};
        r = in_child(do_ptrace, attach, &why);
        report_child("ptrace-attach", r, why, "PTRACE_ATTACH the other host");
        int seize[2] = {PTRACE_SEIZE, (int)t->other_pid};
        r = in_child(do_ptrace, seize, &why);
        report_child("ptrace-seize", r, why, "PTRACE_SEIZE the other host");
        /* Signal 0 is the kernel's whole permission check for a signal, and
         * leaves the other host serving for the rest of the run. */
        int k = kill(t->other_pid, 0);
        report_attempt("kill-other", k == 0, errno, "kill(pid, 0)");
        try_proc_pid(t->other_pid);
    } else {
        report_untried("ptrace-attach", "no other-pid= given");
        report_untried("ptrace-seize", "no other-pid= given");
        report_untried("kill-other", "no other-pid= given");
        report_untried("proc-other-pid", "no other-pid= given");
    }
    try_proc_foreign();
    try_helper_roots(&t->read);
    try_grow_output();
    try_box_root_surfaces();
    controls();
}
