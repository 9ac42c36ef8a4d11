/* Test app: puts a process of its own into a cgroup and holds it in
 * uninterruptible sleep (state D) until told to let go, so that the cgroup
 * cannot be proven empty for a while, SIGKILL or not.
 *
 * Usage: cg-stuck CGROUP_DIR
 *   prints "held victim=PID" once PID, in CGROUP_DIR, is held;
 *   a line (or EOF) on stdin lets it go; then prints
 *   "released victim=PID killed=SIG" or "released victim=PID exited=CODE"
 *   once the victim ended, and exits 0. Exit 3: FUSE is not usable here.
 *
 * What holds it is a read from a FUSE filesystem that this program serves
 * and leaves unanswered. Once the server has taken a request, the reader
 * waits for the answer uninterruptibly (the kernel's request_wait_answer):
 * a SIGKILL stays pending until the answer comes. Neither freezer does
 * this on every host: cgroup v2's cgroup.freeze lets a fatal signal through
 * (a frozen task dies), and cgroup v1's freezer, which would hold a killed
 * task, is not there on a host booted with cgroup v2 only.
 *
 * The filesystem is mounted in a mount namespace of our own, so nothing
 * else on the machine ever sees it or reads from it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define FILE_NAME "stuck"
#define FILE_INODE 2

static int fuse_fd = -1;

static int fail(int code, const char *what)
{
    fprintf(stderr, "cg-stuck: %s: %s\n", what, strerror(errno));
    return code;
}

static void reply(uint64_t unique, int error, const void *data, size_t len)
{
    char buf[sizeof(struct fuse_out_header) + 256];
    struct fuse_out_header header = {
        .len = (uint32_t)(sizeof(header) + len), .error = error, .unique = unique};
    memcpy(buf, &header, sizeof(header));
    if (len)
        memcpy(buf + sizeof(header), data, len);
    if (write(fuse_fd, buf, sizeof(header) + len) < 0 && errno != ENOENT)
        fprintf(stderr, "cg-stuck: cannot answer request %llu: %s\n", (unsigned long long)unique,
                strerror(errno));
}

static void fill_attr(struct fuse_attr *attr, uint64_t inode)
{
    *attr = (struct fuse_attr){
        .ino = inode,
        .mode = inode == FUSE_ROOT_ID ? (S_IFDIR | 0755) : (S_IFREG | 0444),
        .nlink = 1,
        .size = inode == FUSE_ROOT_ID ? 0 : 4096,
    };
}

/* Answers one request. The victim's first read is held (*held set to its
 * id) unless the test let go already; any other read fails at once.
 * Returns false once the filesystem is gone. */
static bool serve_one(pid_t victim, bool released, uint64_t *held)
{
    static char buf[FUSE_MIN_READ_BUFFER + 128 * 1024];
    ssize_t n = read(fuse_fd, buf, sizeof(buf));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN || errno == ENOENT;
    if ((size_t)n < sizeof(struct fuse_in_header))
        return true;
    const struct fuse_in_header *in = (const void *)buf;
    const char *arg = buf + sizeof(*in);
    switch (in->opcode) {
    case FUSE_INIT: {
        const struct fuse_init_in *init = (const void *)arg;
        struct fuse_init_out out = {
            .major = FUSE_KERNEL_VERSION,
            .minor = init->minor < FUSE_KERNEL_MINOR_VERSION ? init->minor
                                                             : FUSE_KERNEL_MINOR_VERSION,
            .max_readahead = init->max_readahead,
            .max_write = 4096,
        };
        reply(in->unique, 0, &out, sizeof(out));
        break;
    }
    case FUSE_LOOKUP: {
        if (in->nodeid != FUSE_ROOT_ID || strcmp(arg, FILE_NAME) != 0) {
            reply(in->unique, -ENOENT, NULL, 0);
            break;
        }
        struct fuse_entry_out entry = {.nodeid = FILE_INODE, .generation = 1};
        fill_attr(&entry.attr, FILE_INODE);
        reply(in->unique, 0, &entry, sizeof(entry));
        break;
    }
    case FUSE_GETATTR: {
        struct fuse_attr_out out = {0};
        fill_attr(&out.attr, in->nodeid);
        reply(in->unique, 0, &out, sizeof(out));
        break;
    }
    case FUSE_OPEN: {
        /* Direct I/O: the read comes here as it is, with no readahead. */
        struct fuse_open_out out = {.fh = 1, .open_flags = FOPEN_DIRECT_IO};
        reply(in->unique, 0, &out, sizeof(out));
        break;
    }
    case FUSE_READ:
        if (!*held && !released && (pid_t)in->pid == victim)
            *held = in->unique;
        else
            reply(in->unique, -EIO, NULL, 0);
        break;
    case FUSE_INTERRUPT: /* the SIGKILL: not answered, which is the point */
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
        break;
    case FUSE_FLUSH:
    case FUSE_RELEASE:
        reply(in->unique, 0, NULL, 0);
        break;
    default:
        reply(in->unique, -ENOSYS, NULL, 0);
        break;
    }
    return true;
}

/* The victim: joins the cgroup, then reads the file and waits there. */
static void run_victim(const char *cgroup_dir, const char *mountpoint)
{
    char path[4096], pid[32];
    snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup_dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    int len = snprintf(pid, sizeof(pid), "%d", (int)getpid());
    if (fd < 0 || write(fd, pid, (size_t)len) != len)
        _exit(fail(120, "cannot join the cgroup"));
    close(fd);
    snprintf(path, sizeof(path), "%s/" FILE_NAME, mountpoint);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        _exit(fail(121, "cannot open the held file"));
    char byte;
    (void)!read(fd, &byte, 1);
    _exit(0);
}

static int mount_filesystem(char *mountpoint)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return fail(3, "cannot make a mount namespace of our own");
    if (!mkdtemp(mountpoint))
        return fail(2, "cannot make the mount point");
    fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fuse_fd < 0) {
        rmdir(mountpoint);
        return fail(3, "cannot open /dev/fuse");
    }
    char options[128];
    snprintf(options, sizeof(options), "fd=%d,rootmode=40000,user_id=0,group_id=0", fuse_fd);
    if (mount("cg-stuck", mountpoint, "fuse.cg-stuck", MS_NOSUID | MS_NODEV, options) < 0) {
        rmdir(mountpoint);
        return fail(3, "cannot mount a FUSE filesystem");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cg-stuck CGROUP_DIR\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char mountpoint[] = "/tmp/cg-stuck-XXXXXX";
    int r = mount_filesystem(mountpoint);
    if (r)
        return r;
    pid_t victim = fork();
    if (victim < 0)
        return fail(2, "cannot fork");
    if (victim == 0)
        run_victim(argv[1], mountpoint);
    int victim_fd = (int)syscall(SYS_pidfd_open, victim, 0);
    if (victim_fd < 0)
        return fail(2, "cannot open a pidfd for the victim");

    uint64_t held = 0;
    bool told = false, released = false;
    for (;;) {
        struct pollfd fds[3] = {
            {.fd = fuse_fd, .events = POLLIN},
            {.fd = victim_fd, .events = POLLIN},
            {.fd = released ? -1 : STDIN_FILENO, .events = POLLIN},
        };
        if (poll(fds, 3, -1) < 0 && errno != EINTR)
            return fail(2, "cannot poll");
        if (fds[1].revents)
            break; /* the victim ended */
        if (fds[0].revents && !serve_one(victim, released, &held))
            break;
        if (held && !told) {
            printf("held victim=%d\n", (int)victim);
            fflush(stdout);
            told = true;
        }
        if (fds[2].revents) {
            char line[64];
            (void)!read(STDIN_FILENO, line, sizeof(line));
            released = true;
            if (held)
                reply(held, -EIO, NULL, 0);
        }
    }
    int status = 0;
    waitpid(victim, &status, 0);
    if (WIFSIGNALED(status))
        printf("released victim=%d killed=%d\n", (int)victim, WTERMSIG(status));
    else
        printf("released victim=%d exited=%d\n", (int)victim, WEXITSTATUS(status));
    fflush(stdout);
    umount2(mountpoint, MNT_DETACH);
    rmdir(mountpoint);
    return 0;
}
