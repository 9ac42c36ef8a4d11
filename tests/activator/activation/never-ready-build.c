/* act-never-ready-build: a build that starts and serves but never says
 * READY=1, the build a failed swap is made of. Exec= is one line per host,
 * shared by every build of it, so the flag cannot come from the host file:
 * this staged program adds it and runs act-e2e-app's main (which marks the
 * run and runs act-testapp's). It is a C program because staged builds run from
 * a verified O_CLOEXEC fd, which rules out "#!" scripts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* act-e2e-app's main (tests/activator/daemon/e2e-app.c), linked in under
 * this name: a staged build must be whole, because a generation's
 * filesystem view does not show the build tree. */
int act_e2e_app_main(int argc, char **argv);

int main(int argc, char **argv)
{
    char **args = calloc((size_t)argc + 2, sizeof(*args));
    if (!args)
        return 120;
    args[0] = (char *)"act-e2e-app";
    for (int i = 1; i < argc; i++)
        args[i] = argv[i];
    args[argc] = (char *)"--never-ready";
    return act_e2e_app_main(argc + 1, args);
}
