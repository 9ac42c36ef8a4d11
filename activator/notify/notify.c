#include "activator/notify/notify.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"

/* systemd caps notify datagrams at the same size; apps never send more. */
#define NOTIFY_DATAGRAM_MAX 4096

struct ntf_socket {
    sd_event_source *source;
    char *socket_path;
    char *cgroup_path;
    ntf_handler handler;
    void *userdata;
    uint64_t refused;
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

/* A pid in a child cgroup of the leaf would also be ours, but generation
 * leaves have no children, so an exact match is the whole rule. */
static bool sender_in_cgroup(const struct ntf_socket *notify, int32_t pid)
{
    char actual[4096];
    if (pid <= 0 || ntf_pid_cgroup(pid, actual, sizeof(actual)) < 0)
        return false;
    return strcmp(actual, notify->cgroup_path) == 0;
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

static int on_datagram(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    struct ntf_socket *notify = userdata;
    for (;;) {
        char buffer[NOTIFY_DATAGRAM_MAX + 1];
        struct iovec iov = {.iov_base = buffer, .iov_len = NOTIFY_DATAGRAM_MAX};
        union {
            struct cmsghdr align;
            char space[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 16)];
        } control;
        struct msghdr msg = {
            .msg_iov = &iov,
            .msg_iovlen = 1,
            .msg_control = &control,
            .msg_controllen = sizeof(control),
        };
        ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return 0; /* EAGAIN: drained */
        }

        struct ucred *cred = NULL;
        for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
            if (cmsg->cmsg_level != SOL_SOCKET)
                continue;
            if (cmsg->cmsg_type == SCM_CREDENTIALS &&
                cmsg->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                cred = (struct ucred *)CMSG_DATA(cmsg);
            else if (cmsg->cmsg_type == SCM_RIGHTS) {
                /* Apps may push fds (FDSTORE=1); we keep none of theirs. */
                int *fds = (int *)CMSG_DATA(cmsg);
                size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < count; i++)
                    close(fds[i]);
            }
        }
        if ((size_t)n > NOTIFY_DATAGRAM_MAX || !cred || !sender_in_cgroup(notify, cred->pid)) {
            notify->refused++;
            continue;
        }
        buffer[n] = '\0';
        ntf_message message = {.sender_pid = cred->pid};
        parse_datagram(buffer, &message);
        notify->handler(notify, &message, notify->userdata);
    }
}

int ntf_open(sd_event *loop, const char *socket_path, const char *cgroup_path, ntf_handler handler,
             void *userdata, ntf_socket **out, act_error *err)
{
    assert(loop);
    assert(socket_path);
    assert(handler);
    assert(out);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof(address.sun_path))
        return act_error_set(err, ENAMETOOLONG,
                             "notify socket path %s is longer than %zu bytes; use a shorter "
                             "RuntimeDirectory=",
                             socket_path, sizeof(address.sun_path) - 1);
    memcpy(address.sun_path, socket_path, strlen(socket_path) + 1);

    _cleanup_free_ struct ntf_socket *notify = calloc(1, sizeof(*notify));
    if (!notify)
        return act_error_set(err, ENOMEM, "out of memory");
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return act_error_set(err, errno, "cannot create notify socket: %s", strerror(errno));
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0)
        return act_error_set(err, errno, "cannot enable SO_PASSCRED: %s", strerror(errno));
    /* A socket file left by a crashed daemon for the same generation would
     * make bind fail; it belongs to us, so it goes. */
    unlink(socket_path);
    if (bind(fd, (struct sockaddr *)&address, sizeof(address)) < 0)
        return act_error_set(err, errno, "cannot bind notify socket %s: %s", socket_path,
                             strerror(errno));
    if (chmod(socket_path, 0666) < 0) {
        int saved = errno;
        unlink(socket_path);
        return act_error_set(err, saved, "cannot open up notify socket %s: %s", socket_path,
                             strerror(saved));
    }

    notify->socket_path = strdup(socket_path);
    notify->cgroup_path = strdup(cgroup_path);
    notify->handler = handler;
    notify->userdata = userdata;
    int r = notify->socket_path && notify->cgroup_path ? 0 : -ENOMEM;
    if (r == 0)
        r = sd_event_add_io(loop, &notify->source, fd, EPOLLIN, on_datagram, notify);
    if (r < 0) {
        unlink(socket_path);
        free(notify->socket_path);
        free(notify->cgroup_path);
        return act_error_set(err, -r, "cannot watch notify socket %s: %s", socket_path,
                             strerror(-r));
    }
    sd_event_source_set_io_fd_own(notify->source, 1);
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

void ntf_free(ntf_socket *notify)
{
    if (!notify)
        return;
    sd_event_source_disable_unref(notify->source);
    unlink(notify->socket_path);
    free(notify->socket_path);
    free(notify->cgroup_path);
    free(notify);
}
