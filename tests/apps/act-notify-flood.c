/* act-notify-flood: sends WATCHDOG=1 to $NOTIFY_SOCKET as fast as the
 * socket takes it until it is killed, and says every second how many it
 * has sent so far ("act-notify-flood: sent N datagrams"). A host's own
 * process flooding its notify socket, for the tests that check the flood
 * costs that host only: they wait for the flood to be under way however
 * fast this machine is, measure, and retire the host to end it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* It runs under the activator's seccomp profile, which denies ptrace, and
 * LeakSanitizer needs ptrace at exit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || path[0] != '/' || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        fprintf(stderr, "act-notify-flood: NOTIFY_SOCKET is not an absolute socket path\n");
        return 2;
    }
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    memcpy(address.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
        fprintf(stderr, "act-notify-flood: cannot connect to %s: %s\n", path, strerror(errno));
        return 1;
    }
    /* Its output is a file: each line goes out as it is said. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsigned long long sent = 0;
    double next_report = now_seconds() + 1.0;
    for (;;) {
        /* Blocking sends: a full queue holds us, not the daemon. */
        for (int i = 0; i < 64; i++)
            if (send(fd, "WATCHDOG=1", 10, 0) == 10)
                sent++;
        if (now_seconds() >= next_report) {
            printf("act-notify-flood: sent %llu datagrams\n", sent);
            next_report += 1.0;
        }
    }
}
