/* Test app: tries calls a seccomp profile may deny and calls every server
 * makes, printing "name=ok" or "name=<ERRNO NAME>". Every denied-call attempt
 * is harmless when it is allowed (bad arguments, a missing mount point). */
#include <errno.h>
#include <linux/keyctl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void report(const char *name, long r)
{
    const char *what = r >= 0 ? "ok" : errno == EPERM ? "EPERM" : errno == ENOSYS ? "ENOSYS" : "other";
    printf("%s=%s\n", name, what);
}

static void *thread_main(void *arg)
{
    return arg;
}

int main(void)
{
    report("mount", mount("none", "/nonexistent-cg-test", "tmpfs", 0, NULL));
    report("unshare", unshare(CLONE_NEWUTS));
    report("ptrace", ptrace(PTRACE_PEEKUSER, 1, NULL, NULL)); /* ESRCH: pid 1 is not our tracee */
    report("reboot", syscall(SYS_reboot, 0, 0, 0, NULL));
    report("bpf", syscall(SYS_bpf, -1, NULL, 0));
    struct timespec ts = {0};
    report("clock_settime", clock_settime(CLOCK_MONOTONIC, &ts));
    report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    report("chroot", chroot("/nonexistent-cg-test"));               /* ENOENT when allowed */
    report("io_uring_setup", syscall(SYS_io_uring_setup, 0, NULL)); /* EINVAL/EFAULT */
    struct utsname u;
    report("uname", uname(&u));

    report("getpid", getpid());
    report("clock_gettime", clock_gettime(CLOCK_MONOTONIC, &ts));
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    report("open", fd);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    report("socket", s);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    report("bind", bind(s, (struct sockaddr *)&sin, sizeof(sin)));
    report("listen", listen(s, 16));
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    report("fork", pid);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    pthread_t t;
    int r = pthread_create(&t, NULL, thread_main, NULL);
    if (r != 0)
        errno = r;
    report("thread", r == 0 ? 0 : -1);
    if (r == 0)
        pthread_join(t, NULL);
    printf("end\n");
    return 0;
}
