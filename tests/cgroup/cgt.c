#include "tests/cgroup/cgt.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"

int cgt_check_can_run(const char *suite)
{
    if (geteuid() != 0) {
        printf("SKIP %s: needs root to create cgroups (run the tests as root)\n", suite);
        return CGT_SKIP;
    }
    cg_root *root = NULL;
    act_error err = {0};
    int r = cg_root_create_throwaway("act-probe", &root, &err);
    if (r == -ENOENT) {
        printf("SKIP %s: no cgroup2 hierarchy here: %s\n", suite, err.message);
        return CGT_SKIP;
    }
    if (r < 0) {
        printf("FAIL %s: cannot create a throwaway cgroup: %s\n", suite, err.message);
        return 1;
    }
    r = cg_root_destroy_throwaway(root, &err);
    if (r < 0) {
        printf("FAIL %s: cannot remove a throwaway cgroup: %s\n", suite, err.message);
        return 1;
    }
    return 0;
}

cg_spawn_method cgt_spawn_method(void)
{
    const char *name = getenv("CG_TEST_SPAWN_METHOD");
    if (name && strcmp(name, "fork") == 0)
        return CG_SPAWN_FORK;
    if (name && strcmp(name, "clone3-copy") == 0)
        return CG_SPAWN_CLONE3_COPY;
    return CG_SPAWN_AUTO;
}

int cgt_use_fd_window(void)
{
    if (!getenv("CG_TEST_FD_WINDOW"))
        return 0;
    act_error err = {0};
    if (cg_spawn_reserve_fds(16, &err) < 0) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    /* Like a daemon's thousands of listening sockets: every fd opened from
     * here on, and so everything a test hands a child, is numbered far
     * above the window. */
    struct rlimit nofile = {8192, 8192};
    setrlimit(RLIMIT_NOFILE, &nofile);
    for (int i = 0; i < 3000; i++)
        if (socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) < 0) {
            perror("socket");
            return -1;
        }
    return 1;
}

bool cgt_spawn_held(void)
{
    const char *held = getenv("CG_TEST_SPAWN_HELD");
    return held && strcmp(held, "1") == 0;
}

bool cgt_blocked_in_read(pid_t pid)
{
    char path[64], text[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    bool got = fgets(text, sizeof(text), f) != NULL;
    fclose(f);
    /* "0 0x..." : syscall 0, read, on x86-64. */
    return got && strncmp(text, "0 ", 2) == 0;
}

/* The executable pid runs, as /proc shows it. */
static void exe_of(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, buf, size - 1);
    buf[n < 0 ? 0 : n] = '\0';
}

int cgt_cg_spawn(cg_leaf *leaf, const cg_spawn_spec *spec, cg_process *proc, act_error *err)
{
    if (!cgt_spawn_held())
        return cg_spawn(leaf, spec, proc, err);
    cg_held_spawn *held = NULL;
    int r = cg_spawn_hold(leaf, spec, &held, err);
    if (r < 0)
        return r;
    char ours[4096], theirs[4096];
    exe_of(getpid(), ours, sizeof(ours));
    exe_of(cg_held_pid(held), theirs, sizeof(theirs));
    /* Unreadable once a child that failed its setup has exited. */
    if (theirs[0] && strcmp(ours, theirs) != 0) {
        cg_held_abandon(held);
        fail_msg("a held child runs %s before its release", theirs);
    }
    return cg_held_release(held, proc, err);
}

const char *cgt_spawn_method_name(void)
{
    if (cgt_spawn_held())
        return "held, then released";
    switch (cgt_spawn_method()) {
    case CG_SPAWN_FORK:
        return "fork fallback";
    case CG_SPAWN_CLONE3_COPY:
        return "clone3 copying memory";
    default:
        return getenv("CG_TEST_FD_WINDOW") ? "default spawn through the fd window"
                                           : "default spawn";
    }
}

bool cgt_force_kill_fallback(void)
{
    return getenv("CG_TEST_FORCE_KILL_FALLBACK") != NULL;
}

int cgt_setup_root(void **state)
{
    cg_root *root = NULL;
    act_error err = {0};
    if (cg_root_create_throwaway("act-test", &root, &err) < 0) {
        print_error("cannot create a throwaway root: %s\n", err.message);
        return -1;
    }
    *state = root;
    return 0;
}

/* The final check: every child of ours has been reaped (none left running
 * or as a zombie), and the throwaway subtree is gone everywhere. */
int cgt_teardown_root(void **state)
{
    cg_root *root = *state;
    char path[4096];
    snprintf(path, sizeof(path), "%s", cg_root_path(root));
    act_error err = {0};
    int r = cg_root_destroy_throwaway(root, &err);
    if (r < 0) {
        print_error("throwaway root not removed: %s\n", err.message);
        return -1;
    }
    if (!cgt_gone(path)) {
        print_error("%s is still there\n", path);
        return -1;
    }
    if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
        print_error("a child process of the test is left over\n");
        return -1;
    }
    return 0;
}

cg_leaf *cgt_leaf(cg_root *root, const char *host, const char *name, const cg_limits *limits)
{
    cg_leaf *leaf = NULL;
    act_error err = {0};
    int r = cg_leaf_create(root, host, name, limits, &leaf, &err);
    if (r < 0)
        print_error("cg_leaf_create: %s\n", err.message);
    assert_int_equal(r, 0);
    cg_leaf_force_kill_fallback(leaf, cgt_force_kill_fallback());
    return leaf;
}

int cgt_open_app(const char *name)
{
    char path[4096];
    /* An absolute name is an app built elsewhere (act-testapp). */
    if (name[0] == '/')
        snprintf(path, sizeof(path), "%s", name);
    else
        snprintf(path, sizeof(path), "%s/%s", CG_APP_DIR, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        print_error("cannot open test app %s: %s\n", path, strerror(errno));
    assert_true(fd >= 0);
    return fd;
}

/* app with argv (argv[0] added) and stdout on a pipe, tweaked, handed to
 * go (a spawn or a hold) with out. */
static int with_app_spec(cg_leaf *leaf, const char *app, const char *const *args,
                         void (*tweak)(cg_spawn_spec *spec, void *data), void *data,
                         int (*go)(cg_leaf *, const cg_spawn_spec *, void *, act_error *),
                         void *out, int *stdout_read, act_error *err)
{
    const char *argv[80] = {app};
    for (size_t i = 0; args && args[i] && i < 78; i++)
        argv[i + 1] = args[i];
    int pipe_fds[2];
    assert_int_equal(pipe2(pipe_fds, O_CLOEXEC), 0);
    _cleanup_close_ int exec_fd = cgt_open_app(app);
    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.exec_fd = exec_fd;
    spec.argv = argv;
    spec.stdout_fd = pipe_fds[1];
    spec.method = cgt_spawn_method();
    if (tweak)
        tweak(&spec, data);
    int r = go(leaf, &spec, out, err);
    close(pipe_fds[1]);
    if (stdout_read)
        *stdout_read = pipe_fds[0];
    else
        close(pipe_fds[0]);
    return r;
}

static int go_spawn(cg_leaf *leaf, const cg_spawn_spec *spec, void *out, act_error *err)
{
    return cgt_cg_spawn(leaf, spec, out, err);
}

static int go_hold(cg_leaf *leaf, const cg_spawn_spec *spec, void *out, act_error *err)
{
    return cg_spawn_hold(leaf, spec, out, err);
}

int cgt_spawn(cg_leaf *leaf, const char *app, const char *const *args,
              void (*tweak)(cg_spawn_spec *spec, void *data), void *data, cg_process *proc,
              int *stdout_read, act_error *err)
{
    return with_app_spec(leaf, app, args, tweak, data, go_spawn, proc, stdout_read, err);
}

int cgt_hold(cg_leaf *leaf, const char *app, const char *const *args,
             void (*tweak)(cg_spawn_spec *spec, void *data), void *data, cg_held_spawn **held,
             int *stdout_read, act_error *err)
{
    return with_app_spec(leaf, app, args, tweak, data, go_hold, held, stdout_read, err);
}

void cgt_start(cg_leaf *leaf, const char *app, const char *const *args, const char *marker,
               cg_process *proc, int *stdout_read)
{
    act_error err = {0};
    int r = cgt_spawn(leaf, app, args, NULL, NULL, proc, stdout_read, &err);
    if (r < 0)
        fail_msg("cannot start %s: %s", app, err.message);
    free(cgt_read_until(*stdout_read, marker, 10000));
}

char *cgt_read_until(int fd, const char *marker, int timeout_ms)
{
    size_t cap = 65536, len = 0;
    char *buf = calloc(1, cap + 1);
    assert_non_null(buf);
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    while (!strstr(buf, marker) && len < cap) {
        uint64_t now = act_now_usec();
        if (now >= deadline)
            break;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)((deadline - now) / 1000) + 1) <= 0)
            continue;
        ssize_t n = read(fd, buf + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
    }
    return buf;
}

bool cgt_value(const char *text, const char *key, char *buf, size_t size)
{
    size_t key_len = strlen(key);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == '=') {
            const char *v = line + key_len + 1;
            size_t n = strcspn(v, "\n");
            snprintf(buf, size, "%.*s", (int)n, v);
            return true;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return false;
}

void cgt_reap(int pidfd, siginfo_t *info)
{
    siginfo_t ignored;
    memset(info ? info : &ignored, 0, sizeof(siginfo_t));
    assert_int_equal(waitid(P_PIDFD, (id_t)pidfd, info ? info : &ignored, WEXITED), 0);
    close(pidfd);
}

bool cgt_pid_in_cgroup(const char *dir, pid_t pid)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    long p;
    bool found = false;
    while (!found && fscanf(f, "%ld", &p) == 1)
        found = p == pid;
    fclose(f);
    return found;
}

bool cgt_gone(const char *path)
{
    struct stat st;
    return stat(path, &st) < 0 && errno == ENOENT;
}
