/* Test app: a fork bomb. Every process forks as fast as it can; the first
 * fork refused for lack of pids prints "limit" and the refused process stops
 * forking and waits. Without a PidsMax this would not stop: the test checks
 * the limit is in place before it starts this. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    for (;;) {
        pid_t pid = fork();
        if (pid < 0) {
            if (errno == EAGAIN)
                (void)!write(1, "limit\n", 6);
            for (;;)
                pause();
        }
    }
}
