/* act-e2e-app: the build the daemon tests stage. It appends "PID GENERATION"
 * to the file named by E2E_MARKER (set through the host's Environment=), then
 * becomes act-testapp with the same arguments.
 *
 * The marker is how a test proves that an app never ran (a refusal must exec
 * nothing) and learns the pid of every attempt, so it can check afterwards
 * that none of them is left. A staged build must be an ELF executable (the
 * daemon execs a verified O_CLOEXEC fd, which rules out "#!" scripts), hence
 * this small C program rather than a shell wrapper. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef E2E_TESTAPP
#error "E2E_TESTAPP must name the act-testapp executable"
#endif

/* This app runs under the daemon's default seccomp profile, which denies
 * ptrace, and LeakSanitizer needs ptrace at exit. It execs act-testapp at
 * once, so there is nothing of its own to check for leaks. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

int main(int argc, char **argv)
{
    const char *marker = getenv("E2E_MARKER");
    if (marker) {
        int fd = open(marker, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "act-e2e-app: cannot open %s: %s\n", marker, strerror(errno));
            return 120;
        }
        const char *generation = getenv("ACTIVATOR_GENERATION");
        dprintf(fd, "%d %s\n", (int)getpid(), generation ? generation : "none");
        close(fd);
    }
    /* act-testapp answers with its version; the daemon tells us which build
     * this is, so the HTTP answer names the staged version. */
    const char *version = getenv("ACTIVATOR_VERSION");
    if (version && !getenv("ACT_TESTAPP_VERSION"))
        setenv("ACT_TESTAPP_VERSION", version, 1);
    (void)argc;
    argv[0] = (char *)"act-testapp";
    execv(E2E_TESTAPP, argv);
    fprintf(stderr, "act-e2e-app: cannot exec %s: %s\n", E2E_TESTAPP, strerror(errno));
    return 127;
}
