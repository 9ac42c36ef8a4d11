#include "bench/spawn/raw_cycle.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static bool populated(int events_fd)
{
    char buf[128];
    ssize_t n = pread(events_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return true;
    buf[n] = '\0';
    return strstr(buf, "populated 1") != NULL;
}

int raw_cycle(const struct raw_target *target, unsigned cycle)
{
    char v2_leaf[4096], v1_leaf[8][4096];
    snprintf(v2_leaf, sizeof(v2_leaf), "%s/raw-%u", target->v2_host, cycle);
    if (mkdir(v2_leaf, 0755) < 0)
        return -errno;
    int v1_procs[8];
    for (size_t i = 0; i < target->n_v1; i++) {
        snprintf(v1_leaf[i], sizeof(v1_leaf[i]), "%s/raw-%u", target->v1_hosts[i], cycle);
        char procs[4200];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", v1_leaf[i]);
        if (mkdir(v1_leaf[i], 0755) < 0 || (v1_procs[i] = open(procs, O_WRONLY | O_CLOEXEC)) < 0)
            return -errno;
    }
    int dir_fd = open(v2_leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    int pidfd = -1;
    struct clone_args args = {
        .flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
        .pidfd = (uint64_t)(uintptr_t)&pidfd,
        .exit_signal = SIGCHLD,
        .cgroup = (uint64_t)dir_fd,
    };
    char *const argv[] = {"spawn-tiny", NULL};
    char *const envp[] = {NULL};
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
    if (pid == 0) {
        for (size_t i = 0; i < target->n_v1; i++)
            syscall(SYS_write, v1_procs[i], "0", 1);
        if (target->isolation && raw_isolate(target->isolation) != 0)
            syscall(SYS_exit_group, 126);
        syscall(SYS_execveat, target->exec_fd, "", argv, envp, AT_EMPTY_PATH);
        syscall(SYS_exit_group, 127);
    }
    if (pid < 0)
        return -errno;
    siginfo_t info;
    if (waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED) < 0)
        return -errno;
    close(pidfd);
    if (info.si_code != CLD_EXITED || info.si_status != 0)
        return -EIO;
    int events_fd = openat(dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
    while (populated(events_fd)) {
        struct pollfd pfd = {.fd = events_fd, .events = POLLPRI};
        poll(&pfd, 1, 1000);
    }
    close(events_fd);
    close(dir_fd);
    for (size_t i = 0; i < target->n_v1; i++) {
        close(v1_procs[i]);
        if (rmdir(v1_leaf[i]) < 0)
            return -errno;
    }
    return rmdir(v2_leaf) < 0 ? -errno : 0;
}

int fork_exec_cycle(const char *path)
{
    char *const argv[] = {"spawn-tiny", NULL};
    char *const envp[] = {NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execve(path, argv, envp);
        _exit(127);
    }
    if (pid < 0)
        return -errno;
    int status;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? 0 : -ECHILD;
}
