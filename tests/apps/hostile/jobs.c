/* The flood and the fork bomb (jobs.h). */
#include "jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "report.h"
#include "tests/common/lingering.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void job_flood(int out_fd, long ms)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof(addr.sun_path)) {
        dprintf(out_fd, "untried notify-flood - no usable NOTIFY_SOCKET\n");
        return;
    }
    size_t n = strlen(path);
    memcpy(addr.sun_path, path, n);
    if (path[0] == '@')
        addr.sun_path[0] = '\0';
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] != '@'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, len) < 0) {
        dprintf(out_fd, "untried notify-flood - cannot connect to %s: %s\n", path,
                report_errno_name(errno));
        return;
    }
    /* A daemon that stops reading must not hang the flood past its end. */
    struct timeval timeout = {.tv_usec = 100 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));

    static char large[16 * 1024];
    memcpy(large, "STATUS=", 7);
    memset(large + 7, 'x', sizeof(large) - 7);
    uint64_t deadline = now_ms() + (uint64_t)ms;
    unsigned long sent = 0, refused = 0;
    uint64_t bytes = 0;
    int first_error = 0;
    for (unsigned long i = 0; now_ms() < deadline; i++) {
        char small[64];
        const char *message = small;
        size_t size;
        if (i % 16 == 15) {
            message = large;
            size = sizeof(large);
        } else if (i % 2) {
            size = (size_t)snprintf(small, sizeof(small), "WATCHDOG=1");
        } else {
            size = (size_t)snprintf(small, sizeof(small), "STATUS=flood %lu", i);
        }
        if (send(fd, message, size, MSG_NOSIGNAL) < 0) {
            if (!first_error)
                first_error = errno;
            refused++;
            continue;
        }
        sent++;
        bytes += size;
    }
    close(fd);
    dprintf(out_fd,
            "note notify-flood sent %lu datagrams (%llu bytes) in %ld ms, %lu refused, "
            "the first with %s\n",
            sent, (unsigned long long)bytes, ms, refused, report_errno_name(first_error));
}

void job_linger(int out_fd, long sec)
{
    int peer = -1;
    int fd = lingering_socket((int)sec, &peer);
    if (fd < 0) {
        dprintf(out_fd, "untried notify-linger - no lingering socket: %s\n",
                report_errno_name(errno));
        return;
    }
    int r = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=linger", &fd, 1);
    close(fd);
    if (r <= 0) {
        dprintf(out_fd, "untried notify-linger - sd_pid_notify_with_fds: %s\n",
                r < 0 ? report_errno_name(-r) : "no NOTIFY_SOCKET");
        close(peer);
        return;
    }
    /* The peer stays, reading nothing, for as long as the socket lingers:
     * its close would reset the connection and end the linger. */
    sleep((unsigned)sec + 1);
    close(peer);
    dprintf(out_fd, "note notify-linger pushed a socket lingering %ld s\n", sec);
}

/* Set by SIGUSR1 (/forkbomb-stop): the test has judged the box at the cap. */
static volatile sig_atomic_t let_go;

static void on_let_go(int sig)
{
    (void)sig;
    let_go = 1;
}

void job_forkbomb(int out_fd, long max, long within_ms, long hold_ms)
{
    struct sigaction action = {.sa_handler = on_let_go};
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, NULL);
    /* Every child waits on this pipe and exits when the bomb lets go. */
    int hold[2];
    if (pipe(hold) < 0) {
        dprintf(out_fd, "untried forkbomb - pipe failed\n");
        return;
    }
    uint64_t start = now_ms(), give_up = start + (uint64_t)within_ms, hold_until = 0;
    long made = 0, refused = 0, made_at_first_refusal = -1;
    int first_error = 0;
    uint64_t first_refusal_ms = 0;
    /* One parent forking in a loop reaches a limit as surely as a tree of
     * them does, and stops at max: on a box without the limit (the baseline
     * this test must be able to fail on) a real bomb would take the box.
     * How fast it forks is the machine's business: it forks until the
     * kernel refuses, and only a box too slow to reach the cap within
     * within_ms ends it untried. Once refused, it keeps trying, as a bomb
     * would, until the test lets it go (or hold_ms passed). */
    for (;;) {
        uint64_t now = now_ms();
        if (made >= max || let_go || (!first_error && now >= give_up) ||
            (first_error && now >= hold_until))
            break;
        pid_t pid = fork();
        if (pid == 0) {
            close(out_fd);
            close(hold[1]);
            char c;
            while (read(hold[0], &c, 1) < 0 && errno == EINTR)
                ;
            _exit(0);
        }
        if (pid > 0) {
            made++;
            continue;
        }
        if (!first_error) {
            first_error = errno;
            made_at_first_refusal = made;
            first_refusal_ms = now_ms() - start;
            hold_until = now_ms() + (uint64_t)hold_ms;
            /* The test judges the box while the bomb sits at its cap. */
            dprintf(out_fd, "note forkbomb at the cap: %ld processes made in %llu ms, then %s\n",
                    made, (unsigned long long)first_refusal_ms, report_errno_name(first_error));
        }
        refused++;
        /* A bomb keeps trying; a millisecond apart is still a thousand
         * tries a second, without making this a CPU hog instead. */
        usleep(1000);
    }
    uint64_t held_ms = first_error ? now_ms() - start - first_refusal_ms : 0;
    bool let_go_by_test = let_go;
    close(hold[1]);
    close(hold[0]);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    char detail[320];
    if (!first_error && made < max) {
        /* Neither stopped nor through: too slow to say anything. */
        dprintf(out_fd, "untried forkbomb - only %ld processes made in %ld ms, none refused\n",
                made, within_ms);
        return;
    }
    if (first_error)
        snprintf(detail, sizeof(detail),
                 "%ld processes made; the first refusal after %ld, at %llu ms; %ld refused "
                 "while it held %llu ms at the cap (%s)",
                 made, made_at_first_refusal, (unsigned long long)first_refusal_ms, refused,
                 (unsigned long long)held_ms,
                 let_go_by_test ? "until the test let it go" : "until its own deadline");
    else
        snprintf(detail, sizeof(detail), "%ld processes made, none refused", made);
    dprintf(out_fd, "attempt forkbomb %s %s %s\n", made >= max ? "succeeded" : "failed",
            report_errno_name(made >= max ? 0 : first_error), detail);
}
