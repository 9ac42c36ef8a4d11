/* Test app: daemonizes a grandchild the classic way (fork, setsid, fork,
 * intermediate exits), then reports both pids in one write ending in "end";
 * both stay until killed. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    int pipe_fds[2];
    if (pipe(pipe_fds) < 0)
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        setsid();
        pid_t grandchild = fork();
        if (grandchild == 0) {
            close(pipe_fds[0]);
            close(pipe_fds[1]);
            for (;;)
                pause();
        }
        (void)!write(pipe_fds[1], &grandchild, sizeof(grandchild));
        _exit(grandchild < 0 ? 1 : 0);
    }
    close(pipe_fds[1]);
    pid_t grandchild = -1;
    if (read(pipe_fds[0], &grandchild, sizeof(grandchild)) != sizeof(grandchild))
        return 1;
    waitpid(child, NULL, 0);
    printf("grandchild=%d\nmain=%d\nend\n", (int)grandchild, (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
