/* act-never-ready-build: a build that starts and serves but never says
 * READY=1, the build a failed swap is made of. Exec= is one line per host,
 * shared by every build of it, so the flag cannot come from the host file:
 * this staged program adds it and becomes act-e2e-app (which marks the run
 * and becomes act-testapp). It is a C program because staged builds run from
 * a verified O_CLOEXEC fd, which rules out "#!" scripts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DH_E2E_APP
#error "DH_E2E_APP must name the act-e2e-app executable"
#endif

/* It runs under the daemon's default seccomp profile, which denies ptrace,
 * and LeakSanitizer needs ptrace at exit; it execs at once anyway. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

int main(int argc, char **argv)
{
    char **args = calloc((size_t)argc + 2, sizeof(*args));
    if (!args)
        return 120;
    args[0] = (char *)"act-e2e-app";
    for (int i = 1; i < argc; i++)
        args[i] = argv[i];
    args[argc] = (char *)"--never-ready";
    execv(DH_E2E_APP, args);
    fprintf(stderr, "act-never-ready-build: cannot exec %s: %s\n", DH_E2E_APP, strerror(errno));
    return 127;
}
