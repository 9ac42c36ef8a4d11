/* Test app: ignores SIGTERM, says "ready" once it does, and stays. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    signal(SIGTERM, SIG_IGN);
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
