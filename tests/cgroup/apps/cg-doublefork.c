/* Test app: daemonizes a grandchild the classic way (fork, setsid, fork,
 * intermediate exits), reports both pids, and both stay until killed. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        setsid();
        pid_t grandchild = fork();
        if (grandchild == 0) {
            printf("grandchild=%d\n", (int)getpid());
            fflush(stdout);
            for (;;)
                pause();
        }
        _exit(grandchild < 0 ? 1 : 0);
    }
    waitpid(child, NULL, 0);
    printf("main=%d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
