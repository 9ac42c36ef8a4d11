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

/* act-e2e-app's main (tests/activator/daemon/e2e-app.c), linked in under
 * this name: a staged build must be whole, because a generation's
 * filesystem view does not show the build tree. */
int act_e2e_app_main(int argc, char **argv);

#define EXIT_ALREADY_RUNNING 3

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
    argv[0] = (char *)"act-e2e-app";
    return act_e2e_app_main(argc, argv);
}
