#include "tests/cgroup/stuck.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STUCK_WAIT_MS 10000

extern char **environ;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads one line from fd into line, waiting up to timeout_ms in all. */
static int read_line(int fd, char *line, size_t size, int timeout_ms)
{
    size_t used = 0;
    long long deadline = now_ms() + timeout_ms;
    while (used + 1 < size) {
        long long left = deadline - now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
            return -ETIMEDOUT;
        ssize_t n = read(fd, line + used, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (line[used] == '\n')
            break;
        used++;
    }
    line[used] = '\0';
    return used ? 0 : -EPIPE;
}

/* Waits up to timeout_ms for the helper to exit; its exit status, or -errno. */
static int wait_helper(pid_t helper, int timeout_ms)
{
    int pidfd = (int)syscall(SYS_pidfd_open, helper, 0);
    if (pidfd >= 0) {
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        int ready = poll(&pfd, 1, timeout_ms);
        close(pidfd);
        if (ready == 0) {
            kill(helper, SIGKILL);
            waitpid(helper, NULL, 0);
            return -ETIMEDOUT;
        }
    }
    int status = 0;
    if (waitpid(helper, &status, 0) < 0)
        return -errno;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int cgt_stuck_start(const char *program, const char *cgroup_dir, cgt_stuck *out, char *why,
                    size_t why_size)
{
    *out = (cgt_stuck){0};
    int in[2] = {-1, -1}, from[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0) {
        int r = -errno;
        if (in[0] >= 0) {
            close(in[0]);
            close(in[1]);
        }
        snprintf(why, why_size, "cannot make a pipe: %s", strerror(-r));
        return r;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from[1], STDOUT_FILENO);
    char *argv[] = {(char *)program, (char *)cgroup_dir, NULL};
    pid_t helper = 0;
    int r = posix_spawn(&helper, program, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(from[1]);
    if (r != 0) {
        close(in[1]);
        close(from[0]);
        snprintf(why, why_size, "cannot run %s: %s", program, strerror(r));
        return -r;
    }
    char line[256];
    r = read_line(from[0], line, sizeof(line), STUCK_WAIT_MS);
    int victim = 0;
    if (r == 0 && sscanf(line, "held victim=%d", &victim) == 1) {
        *out = (cgt_stuck){.helper = helper, .to_helper = in[1], .from_helper = from[0],
                           .victim = (pid_t)victim};
        return 0;
    }
    /* It failed: its exit status says whether FUSE was the reason. */
    close(in[1]);
    int status = wait_helper(helper, STUCK_WAIT_MS);
    close(from[0]);
    snprintf(why, why_size, "%s did not hold its victim (%s, exit status %d; its stderr says why)",
             program, r == 0 ? line : strerror(-r), status);
    return status == 3 ? -ENODEV : -EIO;
}

char cgt_stuck_state(const cgt_stuck *stuck)
{
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)stuck->victim);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return '?';
    text[n] = '\0';
    /* "PID (COMM) S ...": the state follows the last ')'. */
    const char *end = strrchr(text, ')');
    return end && end[1] == ' ' && end[2] ? end[2] : '?';
}

int cgt_stuck_release(cgt_stuck *stuck, char *what, size_t what_size)
{
    if (what && what_size)
        what[0] = '\0';
    if (stuck->helper <= 0)
        return 0;
    (void)!write(stuck->to_helper, "go\n", 3);
    close(stuck->to_helper);
    char line[256];
    int r = read_line(stuck->from_helper, line, sizeof(line), STUCK_WAIT_MS);
    if (r == 0 && what)
        snprintf(what, what_size, "%s", line);
    int status = wait_helper(stuck->helper, STUCK_WAIT_MS);
    if (r == 0 && status != 0)
        r = status < 0 ? status : -EIO;
    close(stuck->from_helper);
    *stuck = (cgt_stuck){0};
    return r;
}
