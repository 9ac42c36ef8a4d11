/* One kept socket for systemd's FD store (see hosts/fd_store.h). */
#include "activator/daemon/hosts/fd_store.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

static int kept = -1;
static struct sockaddr_un address;
static socklen_t address_len;
static bool unusable; /* $NOTIFY_SOCKET is not a unix socket path: libsystemd's way */

/* A socket connected to the unix address in $NOTIFY_SOCKET (a path, or "@"
 * for the abstract namespace), or -1 where libsystemd must do it (a vsock
 * address, no variable, a connect that failed). Connected once, so that
 * storing 10,000 sockets looks the path up once, not with each. */
static int kept_socket(void)
{
    if (kept >= 0 || unusable)
        return kept;
    const char *e = getenv("NOTIFY_SOCKET");
    size_t len = e ? strlen(e) : 0;
    if (len < 2 || (e[0] != '/' && e[0] != '@') || len > sizeof(address.sun_path)) {
        unusable = true;
        return -1;
    }
    memset(&address, 0, sizeof(address));
    address.sun_family = AF_UNIX;
    memcpy(address.sun_path, e, len);
    if (e[0] == '@')
        address.sun_path[0] = '\0';
    address_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                              (e[0] == '/' && len < sizeof(address.sun_path)));
    kept = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (kept >= 0 && connect(kept, (const struct sockaddr *)&address, address_len) < 0) {
        close(kept);
        kept = -1;
    }
    return kept;
}

/* One message: its text, and the fd in its control data. */
typedef struct message {
    char state[320];
    struct iovec iov;
    union {
        struct cmsghdr header;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
} message;

static void message_init(message *m, struct msghdr *msg, const char *name, int fd)
{
    int len = snprintf(m->state, sizeof(m->state), "FDSTORE=1\nFDNAME=%s", name);
    m->iov = (struct iovec){.iov_base = m->state, .iov_len = (size_t)len};
    memset(&m->control, 0, sizeof(m->control));
    *msg = (struct msghdr){
        .msg_iov = &m->iov,
        .msg_iovlen = 1,
        .msg_control = m->control.buf,
        .msg_controllen = sizeof(m->control.buf),
    };
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
}

/* A failed send drops the kept socket: the manager's may be a new one (it
 * re-executed), and the next put connects again. */
static void drop_kept(void)
{
    close(kept);
    kept = -1;
}

static bool send_kept(const char *name, int fd)
{
    int s = kept_socket();
    if (s < 0)
        return false;
    message m;
    struct msghdr msg;
    message_init(&m, &msg, name, fd);
    ssize_t n;
    do
        n = sendmsg(s, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        drop_kept();
    return n >= 0;
}

void ad_fd_store_put(const char *name, int fd)
{
    /* A failed send (the manager re-executing, say) is tried once more the
     * way libsystemd does it, on a socket of its own. */
    if (!send_kept(name, fd)) {
        char state[320];
        snprintf(state, sizeof(state), "FDSTORE=1\nFDNAME=%s", name);
        sd_pid_notify_with_fds(0, 0, state, &fd, 1);
    }
}

/* Messages per sendmmsg. */
#define BATCH 64

size_t ad_fd_store_put_many(char *const *names, const int *fds, size_t n, bool wait)
{
    size_t done = 0;
    int s = n ? kept_socket() : -1;
    while (s >= 0 && done < n) {
        message m[BATCH];
        struct mmsghdr msgs[BATCH];
        unsigned k = 0;
        for (; k < BATCH && done + k < n; k++) {
            message_init(&m[k], &msgs[k].msg_hdr, names[done + k], fds[done + k]);
            msgs[k].msg_len = 0;
        }
        int sent = sendmmsg(s, msgs, k, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && !wait && (errno == EAGAIN || errno == EWOULDBLOCK))
            return done; /* the manager's queue is full: the rest later */
        if (sent <= 0) {
            drop_kept();
            break;
        }
        done += (size_t)sent;
        if (!wait && (unsigned)sent < k)
            return done;
    }
    if (!wait)
        return done;
    /* What a batch did not take goes one by one, with their fallback. */
    for (; done < n; done++)
        ad_fd_store_put(names[done], fds[done]);
    return n;
}

void ad_fd_store_close(void)
{
    if (kept >= 0)
        close(kept);
    kept = -1;
    unusable = false;
}
