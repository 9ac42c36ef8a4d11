/* act-notify-echo: the smallest notify-ready server, for bench/wake. It
 * takes its sockets from LISTEN_FDS (or --listen ADDR:PORT), sends READY=1
 * and echoes every byte back on every connection until SIGTERM. Nothing in
 * it is slower than it has to be, so a benchmark measures the activator and
 * not the app. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activator/listen/listen.h"

#define MAX_LISTEN 16

/* epoll data: listeners and the signalfd are tagged so a connection's fd
 * number can never be mistaken for one of them. */
#define TAG_LISTEN (1ULL << 32)
#define TAG_SIGNAL (2ULL << 32)

/* When the project is built with AddressSanitizer, this app is too. It runs
 * under the activator's seccomp profile, which denies ptrace, and
 * LeakSanitizer needs ptrace at exit: without this it would turn every clean
 * exit into status 1. Leaks are checked in the project's own tests. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

int main(int argc, char **argv)
{
    int listen_fds[MAX_LISTEN];
    int n_listen = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc && n_listen < MAX_LISTEN) {
            lsn_address address;
            act_error err = {0};
            int fd = -1;
            if (lsn_parse(argv[++i], "--listen", &address, &err) < 0 ||
                (fd = lsn_bind(&address, SOMAXCONN, &err)) < 0) {
                fprintf(stderr, "act-notify-echo: %s\n", err.message);
                return 2;
            }
            listen_fds[n_listen++] = fd;
        } else {
            fprintf(stderr, "usage: act-notify-echo [--listen ADDR:PORT|PATH]...\n");
            return 2;
        }
    }
    if (n_listen == 0) {
        int n = sd_listen_fds(1);
        for (int i = 0; i < n && n_listen < MAX_LISTEN; i++)
            listen_fds[n_listen++] = SD_LISTEN_FDS_START + i;
    }
    if (n_listen == 0) {
        fprintf(stderr, "act-notify-echo: no sockets (pass --listen or LISTEN_FDS)\n");
        return 2;
    }

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (sig_fd < 0 || ep < 0)
        return 1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_SIGNAL};
    epoll_ctl(ep, EPOLL_CTL_ADD, sig_fd, &ev);
    for (int i = 0; i < n_listen; i++) {
        fcntl(listen_fds[i], F_SETFL, fcntl(listen_fds[i], F_GETFL) | O_NONBLOCK);
        ev = (struct epoll_event){.events = EPOLLIN,
                                  .data.u64 = TAG_LISTEN | (unsigned)listen_fds[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, listen_fds[i], &ev);
    }
    sd_notify(0, "READY=1");

    for (;;) {
        struct epoll_event events[64];
        int n = epoll_wait(ep, events, 64, -1);
        if (n < 0 && errno != EINTR)
            return 1;
        for (int i = 0; i < n; i++) {
            uint64_t data = events[i].data.u64;
            int fd = (int)(data & 0xffffffffu);
            if (data & TAG_SIGNAL) {
                sd_notify(0, "STOPPING=1");
                return 0;
            }
            if (data & TAG_LISTEN) {
                int c;
                while ((c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    ev = (struct epoll_event){.events = EPOLLIN | EPOLLRDHUP,
                                              .data.u64 = (unsigned)c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                }
                continue;
            }
            char buf[16384];
            ssize_t got;
            while ((got = read(fd, buf, sizeof(buf))) > 0) {
                /* Echo replies are small; a full send buffer means a client
                 * that does not read, and it is dropped. */
                if (send(fd, buf, (size_t)got, MSG_NOSIGNAL) != got) {
                    got = 0;
                    break;
                }
            }
            if (got == 0 || (got < 0 && errno != EAGAIN))
                close(fd); /* closing removes it from the epoll set */
        }
    }
}
