/* The keeper's datagrams with their descriptors (protocol.h). */
#include "activator/log_keeper/protocol.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int lk_send(int sock, const char *text, const int *fds, size_t n_fds, int flags)
{
    if (n_fds > LK_FDS_MAX)
        return -EINVAL;
    union {
        char buffer[CMSG_SPACE(sizeof(int) * LK_FDS_MAX)];
        struct cmsghdr align;
    } control = {0};
    struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n_fds) {
        msg.msg_control = control.buffer;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
    }
    ssize_t sent;
    do
        sent = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    return sent < 0 ? -errno : 0;
}

ssize_t lk_receive(int sock, char *text, size_t size, int *fds, size_t max_fds, size_t *n_fds)
{
    union {
        char buffer[CMSG_SPACE(sizeof(int) * LK_FDS_MAX)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {.iov_base = text, .iov_len = size - 1};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buffer,
                         .msg_controllen = sizeof(control.buffer)};
    *n_fds = 0;
    ssize_t got;
    do
        got = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return -errno;
    size_t received = 0;
    int received_fds[LK_FDS_MAX];
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(fd));
            if (received < LK_FDS_MAX)
                received_fds[received++] = fd;
            else
                close(fd);
        }
    }
    bool refused = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || received > max_fds;
    if (refused) {
        for (size_t i = 0; i < received; i++)
            close(received_fds[i]);
        return -EBADMSG;
    }
    memcpy(fds, received_fds, sizeof(int) * received);
    *n_fds = received;
    text[got] = '\0';
    return got;
}
