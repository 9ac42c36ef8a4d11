/* The daemon's notify socket, read by a thread as systemd reads it: READY=1
 * (timed), STOPPING=1, STATUS= and the fds of FDSTORE=1 messages, which are
 * counted and closed at once because the driver is no fd store. */
#include "tests/driver/daemon_driver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"

static void append_name(char *names, size_t size, const char *name)
{
    size_t used = strlen(names);
    snprintf(names + used, size - used, "%s%s", used ? " " : "", name);
}

static void handle_notify_message(dd_daemon *d, char *text, bool with_fds, uint64_t now)
{
    pthread_mutex_lock(&d->notify_lock);
    bool removal = strstr(text, "FDSTOREREMOVE=1") != NULL;
    char *saved = NULL;
    for (char *line = strtok_r(text, "\n", &saved); line; line = strtok_r(NULL, "\n", &saved)) {
        if (with_fds && strncmp(line, "FDNAME=", 7) == 0)
            append_name(d->fd_names, sizeof(d->fd_names), line + 7);
        else if (removal && strncmp(line, "FDNAME=", 7) == 0)
            append_name(d->fd_removed_names, sizeof(d->fd_removed_names), line + 7);
        else if (strcmp(line, "READY=1") == 0) {
            if (!d->ready_usec)
                d->ready_usec = now;
            d->readies_seen++;
        } else if (strcmp(line, "RELOADING=1") == 0)
            d->reloads_seen++;
        else if (strcmp(line, "STOPPING=1") == 0)
            d->stopping_seen = true;
        else if (strncmp(line, "STATUS=", 7) == 0)
            snprintf(d->last_status, sizeof(d->last_status), "%s", line + 7);
    }
    pthread_mutex_unlock(&d->notify_lock);
}

/* Reads one datagram. Returns false when none waited. */
static bool read_notify(dd_daemon *d)
{
    char text[4096];
    char control[CMSG_SPACE(sizeof(int) * 253)];
    struct iovec iov = {.iov_base = text, .iov_len = sizeof(text) - 1};
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control,
        .msg_controllen = sizeof(control),
    };
    ssize_t n = recvmsg(d->notify_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return false;
    uint64_t now = act_now_usec();
    bool with_fds = false;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int fds[253];
        memcpy(fds, CMSG_DATA(cmsg), count * sizeof(int));
        for (size_t i = 0; i < count; i++)
            close(fds[i]);
        with_fds |= count > 0;
        pthread_mutex_lock(&d->notify_lock);
        d->stored_fds += (unsigned)count;
        pthread_mutex_unlock(&d->notify_lock);
    }
    text[n] = '\0';
    /* Every message carries credentials (SO_PASSCRED); only fds make one
     * an FD store entry. */
    handle_notify_message(d, text, with_fds, now);
    return true;
}

static void *notify_thread(void *arg)
{
    dd_daemon *d = arg;
    for (;;) {
        struct pollfd pfds[2] = {
            {.fd = d->notify_fd, .events = POLLIN},
            {.fd = d->notify_stop[0], .events = POLLIN},
        };
        if (poll(pfds, 2, -1) < 0 && errno != EINTR)
            break;
        if (pfds[0].revents & POLLIN)
            while (read_notify(d))
                ;
        if (pfds[1].revents)
            break;
    }
    /* What arrived before the stop is still read, so no fd stays queued. */
    while (read_notify(d))
        ;
    return NULL;
}

int dd_notify_open(dd_daemon *d, act_error *err)
{
    d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (d->notify_fd < 0)
        return act_error_set(err, errno, "notify socket: %s", strerror(errno));
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(d->notify_path) >= sizeof(addr.sun_path))
        return act_error_set(err, ENAMETOOLONG, "notify socket path too long: %s", d->notify_path);
    memcpy(addr.sun_path, d->notify_path, strlen(d->notify_path) + 1);
    unlink(d->notify_path);
    if (bind(d->notify_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
        return act_error_set(err, errno, "bind %s: %s", d->notify_path, strerror(errno));
    int one = 1;
    setsockopt(d->notify_fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
    /* The daemon sends one FDSTORE=1 datagram per socket at start-up: a deep
     * receive buffer keeps it from waiting on this reader. */
    int size = 4 * 1024 * 1024;
    setsockopt(d->notify_fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
    if (pipe2(d->notify_stop, O_CLOEXEC) < 0)
        return act_error_set(err, errno, "pipe2: %s", strerror(errno));
    d->ready_usec = 0;
    d->readies_seen = d->reloads_seen = 0;
    d->stopping_seen = false;
    if (pthread_create(&d->notify_thread, NULL, notify_thread, d) != 0)
        return act_error_set(err, EAGAIN, "cannot start the notify reader thread");
    d->notify_thread_running = true;
    return 0;
}

void dd_notify_close(dd_daemon *d)
{
    if (d->notify_thread_running) {
        char stop = 1;
        (void)!write(d->notify_stop[1], &stop, 1);
        pthread_join(d->notify_thread, NULL);
        d->notify_thread_running = false;
    }
    for (int i = 0; i < 2; i++) {
        if (d->notify_stop[i] >= 0)
            close(d->notify_stop[i]);
        d->notify_stop[i] = -1;
    }
    if (d->notify_fd >= 0)
        close(d->notify_fd);
    d->notify_fd = -1;
    if (d->notify_path[0])
        unlink(d->notify_path);
}

uint64_t dd_notify_ready_usec(dd_daemon *d)
{
    pthread_mutex_lock(&d->notify_lock);
    uint64_t ready = d->ready_usec;
    pthread_mutex_unlock(&d->notify_lock);
    return ready;
}

bool dd_notify_status_wait(dd_daemon *d, const char *text, int timeout_ms, char *last, size_t size)
{
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        pthread_mutex_lock(&d->notify_lock);
        bool found = strstr(d->last_status, text) != NULL;
        if (last)
            snprintf(last, size, "%s", d->last_status);
        pthread_mutex_unlock(&d->notify_lock);
        if (found)
            return true;
        if (dd_now_ms() >= deadline)
            return false;
        dd_sleep_ms(10);
    }
}

unsigned dd_notify_stored_fds(dd_daemon *d, char *names, size_t size)
{
    pthread_mutex_lock(&d->notify_lock);
    unsigned count = d->stored_fds;
    snprintf(names, size, "%s", d->fd_names);
    pthread_mutex_unlock(&d->notify_lock);
    return count;
}

unsigned dd_notify_removed_fds(dd_daemon *d, char *names, size_t size)
{
    pthread_mutex_lock(&d->notify_lock);
    snprintf(names, size, "%s", d->fd_removed_names);
    unsigned count = 0;
    for (const char *p = d->fd_removed_names; *p; p += strcspn(p, " "), p += strspn(p, " "))
        count++;
    pthread_mutex_unlock(&d->notify_lock);
    return count;
}

void dd_notify_reloads(dd_daemon *d, unsigned *reloading, unsigned *ready)
{
    pthread_mutex_lock(&d->notify_lock);
    *reloading = d->reloads_seen;
    *ready = d->readies_seen;
    pthread_mutex_unlock(&d->notify_lock);
}
