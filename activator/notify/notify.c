#include "activator/notify/notify.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/closer.h"
#include "common/log.h"

/* systemd caps notify datagrams at the same size; apps never send more. */
#define NOTIFY_DATAGRAM_MAX 4096
/* The most fds one datagram can carry (the kernel's SCM_MAX_FD): room for
 * all of them, since those a datagram brings beyond the room are closed by
 * the kernel inside our recvmsg, where a lingering socket would stall us. */
#define NOTIFY_FDS_MAX 253

/* Debian 12's headers predate these (Linux 6.5 and 6.13); the values are
 * the kernel's ABI. */
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

/* PIDFD_GET_INFO's first version (64 bytes); a newer kernel fills what
 * this size holds. */
struct ntf_pidfd_info {
    __u64 mask;
    __u64 cgroupid;
    __u32 pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    __u32 spare0[1];
};
#define NTF_PIDFD_GET_INFO _IOWR(0xFF, 11, struct ntf_pidfd_info)
#define NTF_PIDFD_INFO_CGROUPID (1ULL << 2)
/* Linux 6.15: a sender that exited (and was reaped) before we read its
 * datagram still has the cgroup it died in ("systemd-notify --ready" is
 * gone by then). Older kernels ignore the bit and say ESRCH. */
#define NTF_PIDFD_INFO_EXIT (1ULL << 3)

struct ntf_socket {
    sd_event_source *source;
    char *socket_path;
    char *cgroup_path;
    char *label;
    uint64_t cgroup_id;
    unsigned burst;
    unsigned per_window;
    uint64_t window_usec;
    sd_event_source *resume; /* re-enables source when a full window ends */
    uint64_t window_start;   /* CLOCK_MONOTONIC */
    unsigned in_window;      /* datagrams read since window_start */
    bool passes_pidfd; /* SO_PASSPIDFD took */
    ntf_handler handler;
    void *userdata;
    uint64_t refused;
    uint64_t accepted;
};

int ntf_pid_cgroup(int32_t pid, char *out, size_t out_size)
{
    assert(out);
    assert(out_size > 0);
    char proc_path[64];
    snprintf(proc_path, sizeof(proc_path), "/proc/%d/cgroup", (int)pid);
    _cleanup_fclose_ FILE *file = fopen(proc_path, "re");
    if (!file)
        return -errno;
    char line[4096];
    while (fgets(line, sizeof(line), file)) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        if (snprintf(out, out_size, "%s", line + 3) >= (int)out_size)
            return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}

int ntf_cgroup_id(const char *cgroup_dir, uint64_t *out)
{
    assert(cgroup_dir && out);
    /* The cgroup's file handle is its 64-bit id, the one the kernel
     * reports for a process in it (as systemd's cg_path_get_cgroupid). */
    union {
        struct file_handle handle;
        char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } buffer = {.handle.handle_bytes = MAX_HANDLE_SZ};
    int mount_id;
    if (name_to_handle_at(AT_FDCWD, cgroup_dir, &buffer.handle, &mount_id, 0) < 0)
        return -errno;
    if (buffer.handle.handle_bytes != sizeof(uint64_t))
        return -EOPNOTSUPP;
    memcpy(out, buffer.handle.f_handle, sizeof(uint64_t));
    return 0;
}

bool ntf_kernel_passes_pidfd(void)
{
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int on = 1;
    return fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_PASSPIDFD, &on, sizeof(on)) == 0;
}

/* A pid in a child cgroup of the leaf would also be ours, but generation
 * leaves have no children, so an exact match is the whole rule. */
static bool pid_in_cgroup(const struct ntf_socket *notify, int32_t pid)
{
    char actual[4096];
    if (pid <= 0 || ntf_pid_cgroup(pid, actual, sizeof(actual)) < 0)
        return false;
    return strcmp(actual, notify->cgroup_path) == 0;
}

static bool pidfd_alive(int pidfd)
{
    return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
}

/* 1: the pidfd's process is (or died) in the leaf; 0: it is not, or it
 * cannot be told; -ENOTTY: the kernel has no PIDFD_GET_INFO. */
static int pidfd_in_cgroup(const struct ntf_socket *notify, int pidfd)
{
    struct ntf_pidfd_info info = {.mask = NTF_PIDFD_INFO_CGROUPID | NTF_PIDFD_INFO_EXIT};
    if (ioctl(pidfd, NTF_PIDFD_GET_INFO, &info) < 0)
        return errno == ENOTTY || errno == EINVAL ? -ENOTTY : 0;
    if (!(info.mask & NTF_PIDFD_INFO_CGROUPID))
        return 0;
    return info.cgroupid == notify->cgroup_id;
}

/* Whether the datagram's sender is in the leaf. With a pidfd the answer is
 * about the very process that sent it; the pid of SCM_CREDENTIALS alone
 * could name a process that took a dead sender's number. */
static bool sender_in_cgroup(const struct ntf_socket *notify, const struct ucred *cred, int pidfd)
{
    if (pidfd >= 0 && notify->cgroup_id) {
        int r = pidfd_in_cgroup(notify, pidfd);
        if (r >= 0)
            return r == 1;
    }
    if (!cred || !pid_in_cgroup(notify, cred->pid))
        return false;
    /* Read through the pid: the pidfd (when there is one) says whether the
     * process we read is still the sender. */
    return pidfd < 0 || pidfd_alive(pidfd);
}

static void parse_datagram(char *text, ntf_message *message)
{
    char *saveptr = NULL;
    for (char *line = strtok_r(text, "\n", &saveptr); line; line = strtok_r(NULL, "\n", &saveptr)) {
        if (strcmp(line, "READY=1") == 0)
            message->ready = true;
        else if (strcmp(line, "STOPPING=1") == 0)
            message->stopping = true;
        else if (strcmp(line, "WATCHDOG=1") == 0)
            message->watchdog = true;
        else if (strcmp(line, "WATCHDOG=trigger") == 0)
            message->watchdog_trigger = true;
        else if (strncmp(line, "STATUS=", 7) == 0)
            message->status = line + 7;
    }
}

static void refuse(struct ntf_socket *notify, const struct ucred *cred, const char *why)
{
    if (notify->refused++ == 0)
        act_log(LOG_WARNING,
                "%s: ignoring a notify datagram from pid %d: %s; further ones are only counted "
                "(status shows how many)",
                notify->label, cred ? (int)cred->pid : -1, why);
}

/* The handler of a socket being freed: what it still reads goes nowhere. */
static void ignore_message(ntf_socket *notify, const ntf_message *message, void *userdata)
{
    (void)notify;
    (void)message;
    (void)userdata;
}

/* At most this many queued datagrams are read when a socket is freed (the
 * queue holds far fewer: net.unix.max_dgram_qlen, 512 by default). */
#define NOTIFY_DRAIN_MAX 4096

/* Reads one datagram; false when the queue is empty. */
static bool handle_one(struct ntf_socket *notify, int fd)
{
    char buffer[NOTIFY_DATAGRAM_MAX + 1];
    struct iovec iov = {.iov_base = buffer, .iov_len = NOTIFY_DATAGRAM_MAX};
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int)) +
                   CMSG_SPACE(sizeof(int) * NOTIFY_FDS_MAX)];
    } control;
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = &control,
        .msg_controllen = sizeof(control),
    };
    ssize_t n;
    do
        n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return false; /* EAGAIN: drained */

    struct ucred *cred = NULL;
    _cleanup_close_ int pidfd = -1;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET)
            continue;
        if (cmsg->cmsg_type == SCM_CREDENTIALS && cmsg->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
            cred = (struct ucred *)CMSG_DATA(cmsg);
        else if (cmsg->cmsg_type == SCM_PIDFD && cmsg->cmsg_len == CMSG_LEN(sizeof(int)) &&
                 pidfd < 0)
            memcpy(&pidfd, CMSG_DATA(cmsg), sizeof(int));
        else if (cmsg->cmsg_type == SCM_RIGHTS) {
            /* Apps may push fds (FDSTORE=1); we keep none of theirs, and
             * none of them may make us wait for its close (a lingering
             * socket): common/closer.h. */
            int *fds = (int *)CMSG_DATA(cmsg);
            size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; i++) {
                int one;
                memcpy(&one, fds + i, sizeof(one));
                act_close_foreign(one);
            }
        }
    }
    if ((size_t)n > NOTIFY_DATAGRAM_MAX) {
        refuse(notify, cred, "longer than 4096 bytes");
        return true;
    }
    if (!cred && pidfd < 0) {
        refuse(notify, cred, "no sender credentials");
        return true;
    }
    if (!sender_in_cgroup(notify, cred, pidfd)) {
        refuse(notify, cred, "the sender is not in the generation's cgroup");
        return true;
    }
    buffer[n] = '\0';
    ntf_message message = {.sender_pid = cred ? cred->pid : 0};
    parse_datagram(buffer, &message);
    notify->accepted++;
    notify->handler(notify, &message, notify->userdata);
    return true;
}

static int on_window_end(sd_event_source *source, uint64_t usec, void *userdata)
{
    struct ntf_socket *notify = userdata;
    return sd_event_source_set_enabled(notify->source, SD_EVENT_ON);
}

/* The window's worth is read: the socket rests until the window ends. A
 * source that cannot be rested stays on, read a burst at a time, as before
 * there were windows. */
static void rest_until_window_end(struct ntf_socket *notify, sd_event_source *source)
{
    uint64_t end = notify->window_start + notify->window_usec;
    int r = notify->resume ? sd_event_source_set_time(notify->resume, end)
                           : sd_event_add_time(sd_event_source_get_event(source), &notify->resume,
                                               CLOCK_MONOTONIC, end, 1000, on_window_end, notify);
    if (r >= 0)
        r = sd_event_source_set_enabled(notify->resume, SD_EVENT_ONESHOT);
    if (r >= 0)
        sd_event_source_set_enabled(notify->source, SD_EVENT_OFF);
}

/* A burst at most, then back to the loop: the socket stays readable, so
 * the loop comes back to it after the sources that waited meanwhile. Past
 * the window's worth, it is not read until the window ends. */
static int on_datagram(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    struct ntf_socket *notify = userdata;
    uint64_t now = act_loop_now_usec(sd_event_source_get_event(source));
    if (now - notify->window_start >= notify->window_usec) {
        notify->window_start = now;
        notify->in_window = 0;
    }
    for (unsigned i = 0; i < notify->burst && notify->in_window < notify->per_window; i++) {
        if (!handle_one(notify, fd))
            return 0;
        notify->in_window++;
    }
    if (notify->in_window >= notify->per_window)
        rest_until_window_end(notify, source);
    return 0;
}

/* The host's directory, made and handed to uid:gid with mode 0700. Opened
 * without following a link, from a parent that is root's, so the fchown
 * and fchmod land on the directory itself whatever its owner put where. */
static int prepare_directory(const ntf_options *options, act_error *err)
{
    _cleanup_free_ char *copy = strdup(options->directory);
    _cleanup_free_ char *copy2 = strdup(options->directory);
    if (!copy || !copy2)
        return act_error_set(err, ENOMEM, "out of memory");
    const char *parent = dirname(copy);
    const char *base = basename(copy2);
    _cleanup_close_ int parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent_fd < 0)
        return act_error_set(err, errno, "cannot open the notify directory %s: %s", parent,
                             strerror(errno));
    if (mkdirat(parent_fd, base, 0700) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create the notify directory %s: %s",
                             options->directory, strerror(errno));
    _cleanup_close_ int dir_fd =
        openat(parent_fd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0)
        return act_error_set(err, errno,
                             "cannot open the notify directory %s: %s; remove whatever is there "
                             "in its place",
                             options->directory, strerror(errno));
    if (fchown(dir_fd, options->uid, options->gid) < 0 || fchmod(dir_fd, 0700) < 0)
        return act_error_set(err, errno, "cannot hand the notify directory %s to uid %u: %s",
                             options->directory, (unsigned)options->uid, strerror(errno));
    return TAKE_FD(dir_fd);
}

int ntf_open(sd_event *loop, const ntf_options *options, ntf_handler handler, void *userdata,
             ntf_socket **out, act_error *err)
{
    assert(loop && options && options->directory && options->name && options->cgroup_path);
    assert(handler);
    assert(out);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    int len = snprintf(address.sun_path, sizeof(address.sun_path), "%s/%s", options->directory,
                       options->name);
    if (len < 0 || (size_t)len >= sizeof(address.sun_path))
        return act_error_set(err, ENAMETOOLONG,
                             "notify socket path %s/%s is longer than %zu bytes; use a shorter "
                             "RuntimeDirectory=",
                             options->directory, options->name, sizeof(address.sun_path) - 1);

    _cleanup_free_ struct ntf_socket *notify = calloc(1, sizeof(*notify));
    if (!notify)
        return act_error_set(err, ENOMEM, "out of memory");
    _cleanup_close_ int dir_fd = prepare_directory(options, err);
    if (dir_fd < 0)
        return dir_fd;
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return act_error_set(err, errno, "cannot create notify socket: %s", strerror(errno));
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0)
        return act_error_set(err, errno, "cannot enable SO_PASSCRED: %s", strerror(errno));
    /* Linux 6.5 and later: a pidfd of the sender with each datagram. */
    notify->passes_pidfd = setsockopt(fd, SOL_SOCKET, SO_PASSPIDFD, &on, sizeof(on)) == 0;
    /* The socket inode's mode becomes the file's at bind (less the umask),
     * so the file is never, even for an instant, open to more than its
     * owner. */
    if (fchmod(fd, 0600) < 0)
        return act_error_set(err, errno, "cannot set the notify socket's mode: %s",
                             strerror(errno));
    /* A socket file left by a crashed daemon for the same generation would
     * make bind fail; it belongs to us, so it goes. */
    unlinkat(dir_fd, options->name, 0);
    if (bind(fd, (struct sockaddr *)&address, sizeof(address)) < 0)
        return act_error_set(err, errno, "cannot bind notify socket %s: %s", address.sun_path,
                             strerror(errno));
    /* The host's user connects to it: the file is theirs (never a link's
     * target: they own the directory and could have swapped the name). */
    if (fchownat(dir_fd, options->name, options->uid, options->gid, AT_SYMLINK_NOFOLLOW) < 0) {
        int saved = errno;
        unlinkat(dir_fd, options->name, 0);
        return act_error_set(err, saved, "cannot hand notify socket %s to uid %u: %s",
                             address.sun_path, (unsigned)options->uid, strerror(saved));
    }

    notify->socket_path = strdup(address.sun_path);
    notify->cgroup_path = strdup(options->cgroup_path);
    notify->label = strdup(options->label ? options->label : address.sun_path);
    notify->cgroup_id = options->cgroup_id;
    notify->burst = options->burst ? options->burst : NTF_DEFAULT_BURST;
    notify->per_window = options->per_window ? options->per_window : NTF_DEFAULT_PER_WINDOW;
    notify->window_usec = options->window_usec ? options->window_usec : NTF_DEFAULT_WINDOW_USEC;
    notify->handler = handler;
    notify->userdata = userdata;
    int r = notify->socket_path && notify->cgroup_path && notify->label ? 0 : -ENOMEM;
    if (r == 0)
        r = sd_event_add_io(loop, &notify->source, fd, EPOLLIN, on_datagram, notify);
    if (r < 0) {
        unlinkat(dir_fd, options->name, 0);
        free(notify->socket_path);
        free(notify->cgroup_path);
        free(notify->label);
        return act_error_set(err, -r, "cannot watch notify socket %s: %s", address.sun_path,
                             strerror(-r));
    }
    sd_event_source_set_io_fd_own(notify->source, 1);
    sd_event_source_set_description(notify->source, "notify");
    TAKE_FD(fd);
    *out = TAKE_PTR(notify);
    return 0;
}

const char *ntf_socket_path(const ntf_socket *notify)
{
    assert(notify);
    return notify->socket_path;
}

uint64_t ntf_refused_count(const ntf_socket *notify)
{
    assert(notify);
    return notify->refused;
}

uint64_t ntf_accepted_count(const ntf_socket *notify)
{
    assert(notify);
    return notify->accepted;
}

void ntf_free(ntf_socket *notify)
{
    if (!notify)
        return;
    /* Datagrams still queued are read first: closing the socket with them
     * would close the fds they carry here, on the loop (handle_one hands
     * those to the closer). Their messages are no longer anyone's. */
    int fd = notify->source ? sd_event_source_get_io_fd(notify->source) : -1;
    notify->handler = ignore_message;
    for (unsigned n = 0; fd >= 0 && n < NOTIFY_DRAIN_MAX && handle_one(notify, fd); n++)
        ;
    sd_event_source_disable_unref(notify->source);
    sd_event_source_disable_unref(notify->resume);
    unlink(notify->socket_path);
    free(notify->socket_path);
    free(notify->cgroup_path);
    free(notify->label);
    free(notify);
}
