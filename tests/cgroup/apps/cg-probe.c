/* Test app: reports what it was started with (fds, LISTEN_*, session, ids,
 * umask, cwd, signal state, no_new_privs, seccomp, capabilities, securebits, rlimits), one
 * "key=value" per line ending with "end", then exits with argv[1]. With argv[2] "wait" it stays
 * until SIGTERM and then exits with argv[1]. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int exit_code;

static void on_term(int sig)
{
    (void)sig;
    _exit(exit_code);
}

static void print_status_line(const char *key, const char *name)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':') {
            char *v = line + strlen(key) + 1;
            v += strspn(v, " \t");
            printf("%s=%s", name, v);
        }
    }
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    exit_code = argc > 1 ? atoi(argv[1]) : 0;
    int wait = argc > 2 && strcmp(argv[2], "wait") == 0;
    if (wait)
        signal(SIGTERM, on_term);

    printf("pid=%d\n", (int)getpid());
    const char *vars[] = {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_PID",
                          "CG_TEST_MARK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        printf("%s=%s\n", vars[i], v ? v : "(unset)");
    }
    DIR *d = opendir("/proc/self/fd");
    printf("fds=");
    struct dirent *de;
    int first = 1;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || atoi(de->d_name) == dirfd(d))
            continue;
        printf("%s%s", first ? "" : " ", de->d_name);
        first = 0;
    }
    printf("\n");
    if (d)
        closedir(d);
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    if (getsockname(3, (struct sockaddr *)&sin, &len) == 0 && sin.sin_family == AF_INET)
        printf("fd3port=%d\n", ntohs(sin.sin_port));
    printf("session_leader=%d\n", getsid(0) == getpid());
    printf("uid=%d\ngid=%d\n", (int)getuid(), (int)getgid());
    gid_t groups[64];
    int n = getgroups(64, groups);
    printf("groups=");
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", (int)groups[i]);
    printf("\n");
    mode_t mask = umask(0);
    printf("umask=%04o\n", (unsigned)mask);
    char cwd[4096];
    printf("cwd=%s\n", getcwd(cwd, sizeof(cwd)) ? cwd : "?");
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    printf("nofile=%llu\n", (unsigned long long)rl.rlim_cur);
    print_status_line("SigBlk", "sigblk");
    print_status_line("SigIgn", "sigign");
    print_status_line("NoNewPrivs", "nnp");
    print_status_line("Seccomp", "seccomp");
    print_status_line("CapInh", "capinh");
    print_status_line("CapPrm", "capprm");
    print_status_line("CapEff", "capeff");
    print_status_line("CapBnd", "capbnd");
    print_status_line("CapAmb", "capamb");
    printf("securebits=%d\n", prctl(PR_GET_SECUREBITS, 0, 0, 0, 0));
    /* The user namespace's map, its fields single-spaced; and whether it
     * may signal pid 1, the box's root (signal 0 sends nothing). */
    unsigned inside = 0, outside = 0, count = 0;
    FILE *map = fopen("/proc/self/uid_map", "re");
    if (map && fscanf(map, "%u %u %u", &inside, &outside, &count) == 3)
        printf("uid_map=%u %u %u\n", inside, outside, count);
    if (map)
        fclose(map);
    printf("signal_pid1=%s\n", kill(1, 0) == 0 ? "ok" : errno == EPERM ? "EPERM" : "other");
    printf("end\n");
    fflush(stdout);
    if (wait)
        for (;;)
            pause();
    return exit_code;
}
