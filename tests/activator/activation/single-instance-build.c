/* act-single-instance-build: a build that cannot run twice, like an app that
 * owns a database file. It takes an exclusive lock on a file in its state
 * directory (shared by every generation of the host) and exits with status 3
 * when another instance holds it; otherwise it keeps the lock (the fd
 * survives the exec) and becomes act-e2e-app. A swap in overlap mode must
 * fail with it; stop-first must work. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#ifndef DH_E2E_APP
#error "DH_E2E_APP must name the act-e2e-app executable"
#endif

#define EXIT_ALREADY_RUNNING 3

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

int main(int argc, char **argv)
{
    const char *state = getenv("STATE_DIRECTORY");
    char path[4096];
    snprintf(path, sizeof(path), "%s/single-instance.lock", state ? state : ".");
    /* No O_CLOEXEC: the app this becomes holds the lock until it exits. */
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        fprintf(stderr, "act-single-instance-build: cannot open %s: %s\n", path, strerror(errno));
        return 120;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        fprintf(stderr, "act-single-instance-build: %s is locked: another instance runs\n", path);
        return EXIT_ALREADY_RUNNING;
    }
    (void)argc;
    argv[0] = (char *)"act-e2e-app";
    execv(DH_E2E_APP, argv);
    fprintf(stderr, "act-single-instance-build: cannot exec %s: %s\n", DH_E2E_APP, strerror(errno));
    return 127;
}
