/* act-e2e-app: the build the daemon tests stage. It appends "PID GENERATION"
 * to the file named by E2E_MARKER (set through the host's Environment=), then
 * runs act-testapp's main, linked in, with the same arguments. (It once
 * exec'd act-testapp from the build tree, which a generation's filesystem
 * view hides when the tree sits under /tmp.)
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

/* act-testapp's main (tests/apps/act-testapp.c, built into this program
 * under this name; it also sets the sanitizer options). */
int act_testapp_main(int argc, char **argv);

/* The builds of tests/activator/activation link this file in too, and call
 * it by another name after their own prologue. */
#ifndef E2E_APP_MAIN
#define E2E_APP_MAIN main
#endif
int E2E_APP_MAIN(int argc, char **argv);
int E2E_APP_MAIN(int argc, char **argv)
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
    argv[0] = (char *)"act-testapp";
    return act_testapp_main(argc, argv);
}
