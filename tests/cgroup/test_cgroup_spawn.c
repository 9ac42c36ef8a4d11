/* cg_spawn against real cgroups and processes: joining the leaf, exit status
 * through the pidfd, exactly the fds asked for, LISTEN_* and WATCHDOG_PID
 * with the child's own pid, credentials, seccomp, another process's mount
 * namespace joined, a journal stream of the child's own, and exec failures
 * reported to the caller; a held child that waits in its leaf for its
 * release, and one abandoned there.
 * CG_TEST_SPAWN_HELD=1 runs every spawn held, then released.
 * CG_TEST_SPAWN_METHOD=fork or clone3-copy runs the same tests on the paths
 * that the default (clone3 sharing memory, on x86-64) falls back to, and
 * CG_TEST_FD_WINDOW=1 runs them through the spawn fd window. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "tests/cgroup/cgt.h"

static void expect_kv(const char *out, const char *key, const char *want)
{
    char got[512];
    if (!cgt_value(out, key, got, sizeof(got))) {
        print_error("no %s= in output:\n%s\n", key, out);
        fail();
    }
    if (strcmp(got, want) != 0) {
        print_error("%s=%s, expected %s\n", key, got, want);
        fail();
    }
}

/* Reaps the process of pidfd, which must have exited with status. */
static void expect_exited(int pidfd, int status)
{
    siginfo_t info;
    cgt_reap(pidfd, &info);
    assert_int_equal(info.si_code, CLD_EXITED);
    assert_int_equal(info.si_status, status);
}

static void spawn_joins_leaf_and_pidfd_reports_exit(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-1", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    const char *args[] = {"7", "wait", NULL};
    assert_int_equal(cgt_spawn(leaf, "cg-probe", args, NULL, NULL, &proc, &out_fd, &err), 0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
    char pid_text[32];
    snprintf(pid_text, sizeof(pid_text), "%d", (int)proc.pid);
    expect_kv(out, "pid", pid_text);
    assert_true(cgt_pid_in_cgroup(cg_leaf_path(leaf), proc.pid));
    for (const char *c = "memory"; c; c = strcmp(c, "memory") == 0 ? "pids" : NULL)
        if (cg_leaf_v1_path(leaf, c))
            assert_true(cgt_pid_in_cgroup(cg_leaf_v1_path(leaf, c), proc.pid));

    assert_int_equal(syscall(SYS_pidfd_send_signal, proc.pidfd, SIGTERM, NULL, 0), 0);
    expect_exited(proc.pidfd, 7);
    assert_int_equal(cg_leaf_wait_empty(leaf, 10000000, &err), 0);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    assert_true(cgt_gone(cg_leaf_path(leaf)));
    close(out_fd);
    cg_leaf_free(leaf);
}

struct fd_setup {
    int listen_fds[2];
    const char *names[2];
    const char *envp[5];
    cg_rlimit rlimit;
};

static const char *const watchdog_pid[] = {"WATCHDOG_PID", NULL};

static void with_listen_fds(cg_spawn_spec *spec, void *data)
{
    struct fd_setup *setup = data;
    spec->listen_fds = setup->listen_fds;
    spec->n_listen_fds = 2;
    spec->listen_fdnames = setup->names;
    spec->pid_variables = watchdog_pid;
    spec->envp = setup->envp;
    spec->umask = 0027;
    spec->working_directory = "/";
    spec->rlimits = &setup->rlimit;
    spec->n_rlimits = 1;
}

static int count_open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 8192; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

static void listen_fds_arrive_at_3_and_nothing_leaks(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-2", NULL);
    /* An fd without CLOEXEC in the parent must not reach the child. */
    _cleanup_close_ int leaky = open("/dev/zero", O_RDONLY);
    assert_true(leaky >= 0);
    _cleanup_close_ int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    _cleanup_close_ int unix_sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(tcp, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(tcp, 8), 0);
    socklen_t len = sizeof(sin);
    assert_int_equal(getsockname(tcp, (struct sockaddr *)&sin, &len), 0);

    struct fd_setup setup = {
        .listen_fds = {tcp, unix_sock},
        .names = {"web", "admin"},
        .envp = {"CG_TEST_MARK=hello", "LISTEN_PID=1", "LISTEN_FDS=9", "WATCHDOG_PID=1", NULL},
        .rlimit = {.resource = RLIMIT_NOFILE, .limit = {512, 512}},
    };
    /* A daemon ignores SIGPIPE and blocks signals it reads from a signalfd;
     * the app must start with neither. */
    sigset_t usr2, saved_mask;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, &saved_mask);
    void (*saved_pipe)(int) = signal(SIGPIPE, SIG_IGN);

    int open_before = count_open_fds();
    cg_process proc;
    int out_fd;
    act_error err = {0};
    int r = cgt_spawn(leaf, "cg-probe", NULL, with_listen_fds, &setup, &proc, &out_fd, &err);
    signal(SIGPIPE, saved_pipe);
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    assert_int_equal(r, 0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
    char text[64];
    snprintf(text, sizeof(text), "%d", (int)proc.pid);
    expect_kv(out, "LISTEN_PID", text);
    expect_kv(out, "WATCHDOG_PID", text);
    expect_kv(out, "pid", text);
    expect_kv(out, "LISTEN_FDS", "2");
    expect_kv(out, "LISTEN_FDNAMES", "web:admin");
    expect_kv(out, "CG_TEST_MARK", "hello");
    expect_kv(out, "fds", "0 1 2 3 4");
    snprintf(text, sizeof(text), "%d", ntohs(sin.sin_port));
    expect_kv(out, "fd3port", text);
    expect_kv(out, "session_leader", "1");
    expect_kv(out, "umask", "0027");
    expect_kv(out, "cwd", "/");
    expect_kv(out, "nofile", "512");
    expect_kv(out, "sigblk", "0000000000000000");
    expect_kv(out, "sigign", "0000000000000000");
    expect_kv(out, "nnp", "0");
    expect_kv(out, "seccomp", "0");
    expect_exited(proc.pidfd, 0);
    close(out_fd);
    /* Nothing of the spawn stays open here: no pipe end, no window slot. */
    assert_int_equal(count_open_fds(), open_before);
    cg_leaf_free(leaf);
}

static void without_sockets(cg_spawn_spec *spec, void *data)
{
    static const char *const envp[] = {"LISTEN_FDS=3", "LISTEN_PID=99", "KEEP=1", NULL};
    spec->envp = envp;
    spec->pid_variables = data;
}

static void no_listen_fds_means_no_listen_env(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-3", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    assert_int_equal(cgt_spawn(leaf, "cg-probe", NULL, without_sockets, NULL, &proc, &out_fd, &err),
                     0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
    expect_kv(out, "LISTEN_FDS", "(unset)");
    expect_kv(out, "LISTEN_PID", "(unset)");
    expect_kv(out, "WATCHDOG_PID", "(unset)");
    expect_kv(out, "fds", "0 1 2");
    cgt_reap(proc.pidfd, NULL);
    close(out_fd);
    cg_leaf_free(leaf);
}

/* WATCHDOG_PID, like LISTEN_PID, is the child's own pid, which only the
 * child knows before its exec; it does not need sockets. */
static void a_pid_variable_gets_the_childs_pid(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-10", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    assert_int_equal(cgt_spawn(leaf, "cg-probe", NULL, without_sockets, (void *)watchdog_pid, &proc,
                               &out_fd, &err),
                     0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
    char text[32];
    snprintf(text, sizeof(text), "%d", (int)proc.pid);
    expect_kv(out, "WATCHDOG_PID", text);
    expect_kv(out, "LISTEN_PID", "(unset)");
    cgt_reap(proc.pidfd, NULL);
    close(out_fd);
    cg_leaf_free(leaf);
}

static cg_seccomp_program *compile(const char *profile, const char *const *allow,
                                   const char *const *deny)
{
    cg_seccomp_program *program = NULL;
    act_error err = {0};
    int r = cg_seccomp_compile(profile, allow, deny, &program, &err);
    if (r < 0)
        print_error("%s\n", err.message);
    assert_int_equal(r, 0);
    return program;
}

static void as_nobody_with_seccomp(cg_spawn_spec *spec, void *data)
{
    static const gid_t groups[] = {65534};
    spec->uid = 65534;
    spec->gid = 65534;
    spec->groups = groups;
    spec->n_groups = 1;
    spec->no_new_privs = true;
    spec->seccomp = data;
    spec->working_directory = "/";
}

static void credentials_no_new_privs_and_seccomp_apply(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-4", NULL);
    cg_seccomp_program *program = compile("default", NULL, NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    int r = cgt_spawn(leaf, "cg-probe", NULL, as_nobody_with_seccomp, program, &proc, &out_fd, &err);
    if (r < 0)
        print_error("%s\n", err.message);
    assert_int_equal(r, 0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
    expect_kv(out, "uid", "65534");
    expect_kv(out, "gid", "65534");
    expect_kv(out, "groups", "65534");
    expect_kv(out, "nnp", "1");
    expect_kv(out, "seccomp", "2");
    cgt_reap(proc.pidfd, NULL);
    close(out_fd);
    cg_seccomp_program_free(program);
    cg_leaf_free(leaf);
}

/* The capabilities a spawn keeps: all of them dropped, whoever the child
 * runs as, but for the ambient ones asked for. */
typedef struct caps_case {
    uint32_t uid;
    uint64_t ambient;
} caps_case;

static void with_dropped_capabilities(cg_spawn_spec *spec, void *data)
{
    const caps_case *c = data;
    spec->uid = c->uid;
    spec->gid = c->uid;
    spec->no_new_privs = true;
    spec->drop_capabilities = true;
    spec->ambient_capabilities = c->ambient;
    spec->working_directory = "/";
}

static void capabilities_are_dropped_but_the_ambient_ones(void **state)
{
    const caps_case cases[] = {
        {65534, 0},
        {0, 0},
        {65534, 1ULL << CAP_NET_BIND_SERVICE},
        {0, (1ULL << CAP_NET_BIND_SERVICE) | (1ULL << CAP_KILL)},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char leaf_name[16];
        snprintf(leaf_name, sizeof(leaf_name), "g-%zu", 20 + i);
        cg_leaf *leaf = cgt_leaf(*state, "web1", leaf_name, NULL);
        cg_process proc;
        int out_fd;
        act_error err = {0};
        int r = cgt_spawn(leaf, "cg-probe", NULL, with_dropped_capabilities, (void *)&cases[i],
                          &proc, &out_fd, &err);
        if (r < 0)
            print_error("%s\n", err.message);
        assert_int_equal(r, 0);
        _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
        char want[32], uid[16];
        snprintf(want, sizeof(want), "%016" PRIx64, cases[i].ambient);
        snprintf(uid, sizeof(uid), "%" PRIu32, cases[i].uid);
        expect_kv(out, "uid", uid);
        const char *sets[] = {"capinh", "capprm", "capeff", "capbnd", "capamb"};
        for (size_t s = 0; s < ARRAY_SIZE(sets); s++)
            expect_kv(out, sets[s], want);
        char bits[16];
        assert_true(cgt_value(out, "securebits", bits, sizeof(bits)));
        int value = atoi(bits);
        assert_true(value & SECBIT_NOROOT);
        assert_true(value & SECBIT_NOROOT_LOCKED);
        assert_true(value & SECBIT_NO_SETUID_FIXUP_LOCKED);
        assert_false(value & SECBIT_NO_SETUID_FIXUP);
        assert_true(value & SECBIT_KEEP_CAPS_LOCKED);
        assert_false(value & SECBIT_KEEP_CAPS);
        cgt_reap(proc.pidfd, NULL);
        close(out_fd);
        cg_leaf_free(leaf);
    }
}

/* with_dropped_capabilities, as root in a user namespace of its own. */
static void with_mapped_root_case(cg_spawn_spec *spec, void *data)
{
    with_dropped_capabilities(spec, data);
    spec->root_in_user_namespace = true;
}

/* Root in a user namespace of its own, mapped to uid and gid 65534. */
static void as_mapped_root(cg_spawn_spec *spec, void *data)
{
    (void)data;
    spec->uid = 65534;
    spec->gid = 65534;
    spec->root_in_user_namespace = true;
    spec->no_new_privs = true;
    spec->drop_capabilities = true;
    spec->working_directory = "/";
}

/* What the child of a root_in_user_namespace spawn reports: uid 0 to
 * itself, uid 65534 on the box (its map, and its status seen from here),
 * no capability, its securebits locked, and no signal to the box's root. */
static void expect_mapped_root(const char *out, pid_t pid)
{
    expect_kv(out, "uid", "0");
    expect_kv(out, "gid", "0");
    expect_kv(out, "uid_map", "0 65534 1");
    expect_kv(out, "signal_pid1", "EPERM");
    const char *sets[] = {"capinh", "capprm", "capeff", "capbnd", "capamb"};
    for (size_t i = 0; i < ARRAY_SIZE(sets); i++)
        expect_kv(out, sets[i], "0000000000000000");
    char bits[16];
    assert_true(cgt_value(out, "securebits", bits, sizeof(bits)));
    int value = atoi(bits);
    assert_true((value & SECBIT_NOROOT) && (value & SECBIT_NOROOT_LOCKED));
    assert_true(value & SECBIT_KEEP_CAPS_LOCKED);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    _cleanup_free_ char *status = NULL;
    size_t len = 0;
    act_error err = {0};
    assert_int_equal(act_read_file(AT_FDCWD, path, 1 << 16, &status, &len, &err), 0);
    assert_non_null(strstr(status, "\nUid:\t65534\t65534\t65534\t65534\n"));
    assert_non_null(strstr(status, "\nGid:\t65534\t65534\t65534\t65534\n"));
}

static void root_in_a_user_namespace_is_root_to_itself_alone(void **state)
{
    /* Spawned at once, and held, then released. */
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-40", NULL);
    const char *const args[] = {"0", "wait", NULL};
    cg_process proc;
    int out_fd;
    act_error err = {0};
    int r = cgt_spawn(leaf, "cg-probe", args, as_mapped_root, NULL, &proc, &out_fd, &err);
    if (r < 0)
        fail_msg("%s", err.message);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
    expect_mapped_root(out, proc.pid);
    /* The box's root may still signal it: the namespace is owned by uid
     * 65534, which the box's root outranks. */
    assert_int_equal(kill(proc.pid, SIGTERM), 0);
    cgt_reap(proc.pidfd, NULL);
    close(out_fd);
    cg_leaf_free(leaf);

    leaf = cgt_leaf(*state, "web1", "g-41", NULL);
    cg_held_spawn *held = NULL;
    if (cgt_hold(leaf, "cg-probe", args, as_mapped_root, NULL, &held, &out_fd, &err) < 0)
        fail_msg("cg_spawn_hold: %s", err.message);
    assert_int_equal(cg_held_release(held, &proc, &err), 0);
    _cleanup_free_ char *held_out = cgt_read_until(out_fd, "end\n", 10000);
    expect_mapped_root(held_out, proc.pid);
    assert_int_equal(kill(proc.pid, SIGTERM), 0);
    cgt_reap(proc.pidfd, NULL);
    close(out_fd);
    cg_leaf_free(leaf);
}

/* A spec that would map root to root, or keep capabilities that reach
 * nothing, is refused before any clone. */
static void root_in_a_user_namespace_refuses_what_it_cannot_be(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-42", NULL);
    const struct {
        uint32_t uid;
        uint64_t ambient;
    } bad[] = {{0, 0}, {65534, 1ULL << CAP_NET_BIND_SERVICE}};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        caps_case c = {.uid = bad[i].uid, .ambient = bad[i].ambient};
        cg_process proc;
        int out_fd = -1;
        act_error err = {0};
        int r = cgt_spawn(leaf, "cg-probe", NULL, with_mapped_root_case, &c, &proc, &out_fd, &err);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(err.message, "root in a user namespace needs a uid and gid"));
        if (out_fd >= 0)
            close(out_fd);
    }
    cg_leaf_free(leaf);
}

static void with_filter(cg_spawn_spec *spec, void *data)
{
    spec->no_new_privs = true;
    spec->seccomp = data;
}

static char *run_syscalls(cg_leaf *leaf, cg_seccomp_program *program)
{
    cg_process proc;
    int out_fd;
    act_error err = {0};
    int r = cgt_spawn(leaf, "cg-syscalls", NULL, with_filter, program, &proc, &out_fd, &err);
    if (r < 0)
        print_error("%s\n", err.message);
    assert_int_equal(r, 0);
    char *out = cgt_read_until(out_fd, "end\n", 10000);
    expect_exited(proc.pidfd, 0);
    close(out_fd);
    return out;
}

static void default_profile_denies_admin_calls_and_allows_server_calls(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-5", NULL);
    cg_seccomp_program *program = compile("default", NULL, NULL);
    _cleanup_free_ char *out = run_syscalls(leaf, program);
    const char *denied[] = {"mount",         "unshare", "ptrace", "reboot",        "bpf",
                            "clock_settime", "keyctl",  "chroot", "io_uring_setup"};
    for (size_t i = 0; i < ARRAY_SIZE(denied); i++)
        expect_kv(out, denied[i], "EPERM");
    const char *allowed[] = {"uname",  "getpid", "clock_gettime", "open", "socket",
                             "bind",   "listen", "fork",          "thread"};
    for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
        expect_kv(out, allowed[i], "ok");
    cg_seccomp_program_free(program);
    cg_leaf_free(leaf);
}

static void profile_allow_and_deny_lists_change_the_filter(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-6", NULL);
    const char *allow[] = {"unshare", NULL};
    const char *deny[] = {"uname", NULL};
    cg_seccomp_program *program = compile("default", allow, deny);
    _cleanup_free_ char *out = run_syscalls(leaf, program);
    expect_kv(out, "unshare", "ok");
    expect_kv(out, "uname", "EPERM");
    expect_kv(out, "mount", "EPERM");
    cg_seccomp_program_free(program);

    program = compile("none", NULL, deny);
    _cleanup_free_ char *out_none = run_syscalls(leaf, program);
    expect_kv(out_none, "uname", "EPERM");
    expect_kv(out_none, "mount", "other"); /* not filtered: ENOENT for the missing target */
    cg_seccomp_program_free(program);
    cg_leaf_free(leaf);
}

static void seccomp_compile_refuses_bad_input(void **state)
{
    (void)state;
    cg_seccomp_program *program = NULL;
    act_error err = {0};
    const char *unknown[] = {"no_such_call", NULL};
    assert_int_equal(cg_seccomp_compile("default", NULL, unknown, &program, &err), -EINVAL);
    assert_non_null(strstr(err.message, "no_such_call"));
    const char *both[] = {"uname", NULL};
    assert_int_equal(cg_seccomp_compile("default", both, both, &program, &err), -EINVAL);
    assert_non_null(strstr(err.message, "both allowed and denied"));
    assert_int_equal(cg_seccomp_compile("strict", NULL, NULL, &program, &err), -EINVAL);
    assert_non_null(strstr(err.message, "\"strict\""));
    assert_null(program);
    assert_int_equal(cg_seccomp_compile("none", NULL, NULL, &program, &err), 0);
    assert_null(program);
}

/* Files that must not run: each failure comes back from cg_spawn itself. */
static void exec_failures_reach_the_caller(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-7", NULL);
    char dir[] = "/tmp/cg-exec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    _cleanup_close_ int probe = cgt_open_app("cg-probe");
    char head[64];
    assert_int_equal(pread(probe, head, sizeof(head), 0), (ssize_t)sizeof(head));
    struct {
        const char *name;
        const void *content;
        size_t len;
        mode_t mode;
        int expected;
    } cases[] = {
        {"missing-interpreter", "#!/nonexistent/interpreter\n", 27, 0755, ENOENT},
        {"not-executable", head, sizeof(head), 0644, EACCES},
        {"truncated", head, sizeof(head), 0755, ENOEXEC},
        {"garbage", "hello\n", 6, 0755, ENOEXEC},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, cases[i].name);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, cases[i].mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, cases[i].content, cases[i].len), (ssize_t)cases[i].len);
        assert_int_equal(fchmod(fd, cases[i].mode), 0);
        close(fd);
        _cleanup_close_ int exec_fd = open(path, O_RDONLY | O_CLOEXEC);
        const char *argv[] = {cases[i].name, NULL};
        cg_spawn_spec spec;
        cg_spawn_spec_init(&spec);
        spec.exec_fd = exec_fd;
        spec.argv = argv;
        spec.method = cgt_spawn_method();
        cg_process proc = {.pid = -1, .pidfd = -1};
        act_error err = {0};
        int r = cgt_cg_spawn(leaf, &spec, &proc, &err);
        if (r != -cases[i].expected)
            print_error("%s: got %d (%s), expected -%d\n", cases[i].name, r, err.message,
                        cases[i].expected);
        assert_int_equal(r, -cases[i].expected);
        assert_non_null(strstr(err.message, "cannot execute"));
        assert_non_null(strstr(err.message, path));
        assert_non_null(strstr(err.message, strerror(cases[i].expected)));
        assert_int_equal(proc.pidfd, -1);
        /* The failed child is already reaped. */
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(cg_leaf_wait_empty(leaf, 10000000, &err), 0);
        unlink(path);
    }
    rmdir(dir);
    cg_leaf_free(leaf);
}

/* A new executable file at path holding text. */
static void write_script(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* An operator's helper may be a "#!" script: run from its fd, it needs the
 * fd to survive the exec (the interpreter reads /dev/fd/N). Without
 * exec_fd_survives the interpreter cannot open it. */
static void script_runs_from_its_fd_when_the_fd_survives(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-8", NULL);
    char dir[] = "/tmp/cg-script-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char script[128];
    snprintf(script, sizeof(script), "%s/restore.sh", dir);
    write_script(script, "#!/bin/sh\nexit 42\n");

    for (int survives = 0; survives <= 1; survives++) {
        _cleanup_close_ int exec_fd = open(script, O_RDONLY | O_CLOEXEC);
        const char *argv[] = {"restore.sh", NULL};
        cg_spawn_spec spec;
        cg_spawn_spec_init(&spec);
        spec.exec_fd = exec_fd;
        spec.exec_fd_survives = survives;
        spec.argv = argv;
        spec.method = cgt_spawn_method();
        cg_process proc = {.pid = -1, .pidfd = -1};
        act_error err = {0};
        int r = cgt_cg_spawn(leaf, &spec, &proc, &err);
        if (!survives) {
            /* The kernel cannot hand the interpreter a closed fd. */
            assert_int_equal(r, -ENOENT);
            continue;
        }
        assert_int_equal(r, 0);
        expect_exited(proc.pidfd, 42);
        close(proc.pidfd);
    }
    unlink(script);
    rmdir(dir);
    act_error err = {0};
    assert_int_equal(cg_leaf_wait_empty(leaf, 10000000, &err), 0);
    cg_leaf_free(leaf);
}

/* exec_path: a script run by its path sees it as $0; a path that names
 * another file than the verified fd (or none) fails, naming the step. */
static void script_runs_by_its_path_only_when_it_names_the_verified_file(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-9", NULL);
    char dir[] = "/tmp/cg-script-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char script[128], other[128];
    snprintf(script, sizeof(script), "%s/run.sh", dir);
    snprintf(other, sizeof(other), "%s/other.sh", dir);
    const char *text = "#!/bin/sh\n[ \"$0\" = \"$1\" ] && exit 42\nexit 1\n";
    write_script(script, text);
    write_script(other, text);
    for (int named_other = 0; named_other <= 1; named_other++) {
        _cleanup_close_ int exec_fd = open(script, O_RDONLY | O_CLOEXEC);
        const char *argv[] = {"run.sh", script, NULL};
        cg_spawn_spec spec;
        cg_spawn_spec_init(&spec);
        spec.exec_fd = exec_fd;
        spec.exec_path = named_other ? other : script;
        spec.argv = argv;
        spec.method = cgt_spawn_method();
        cg_process proc = {.pid = -1, .pidfd = -1};
        act_error err = {0};
        int r = cgt_cg_spawn(leaf, &spec, &proc, &err);
        if (named_other) {
            assert_int_equal(r, -ESTALE);
            assert_non_null(strstr(err.message, "by its path"));
            continue;
        }
        assert_int_equal(r, 0);
        expect_exited(proc.pidfd, 42); /* $0 was the script's path */
        close(proc.pidfd);
    }
    unlink(script);
    unlink(other);
    rmdir(dir);
    act_error err = {0};
    assert_int_equal(cg_leaf_wait_empty(leaf, 10000000, &err), 0);
    cg_leaf_free(leaf);
}

static void in_missing_directory(cg_spawn_spec *spec, void *data)
{
    spec->working_directory = "/nonexistent-cg-dir";
}

static void child_step_failure_names_the_step(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-8", NULL);
    cg_process proc;
    act_error err = {0};
    int r = cgt_spawn(leaf, "cg-probe", NULL, in_missing_directory, NULL, &proc, NULL, &err);
    assert_int_equal(r, -ENOENT);
    assert_non_null(strstr(err.message, "working directory /nonexistent-cg-dir"));
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    cg_leaf_free(leaf);
}

static void spawn_refuses_a_bad_spec_before_forking(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-9", NULL);
    const char *argv[] = {"x", NULL};
    cg_process proc;
    act_error err = {0};
    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.argv = argv;
    assert_int_equal(cgt_cg_spawn(leaf, &spec, &proc, &err), -EBADF);
    assert_non_null(strstr(err.message, "exec fd -1"));

    _cleanup_close_ int exec_fd = cgt_open_app("cg-probe");
    spec.exec_fd = exec_fd;
    int fds[] = {0};
    const char *names[] = {"a:b"};
    spec.listen_fds = fds;
    spec.n_listen_fds = 1;
    spec.listen_fdnames = names;
    assert_int_equal(cgt_cg_spawn(leaf, &spec, &proc, &err), -EINVAL);
    assert_non_null(strstr(err.message, "a:b"));

    spec.n_listen_fds = 0;
    static const char *const with_equals[] = {"A=B", NULL};
    static const char *const too_many[] = {"A", "B", "C", "D", "E", NULL};
    const char *const *bad_pid_variables[] = {with_equals, too_many};
    for (size_t i = 0; i < ARRAY_SIZE(bad_pid_variables); i++) {
        spec.pid_variables = bad_pid_variables[i];
        assert_int_equal(cgt_cg_spawn(leaf, &spec, &proc, &err), -EINVAL);
        assert_non_null(strstr(err.message, "pid variable"));
    }
    spec.pid_variables = NULL;

    spec.uid = 1000;
    assert_int_equal(cgt_cg_spawn(leaf, &spec, &proc, &err), -EINVAL);
    assert_non_null(strstr(err.message, "without a gid"));
    spec.uid = CG_ID_UNSET;

    /* A process that joins another's namespaces stays in the box's
     * network: a network of its own as well is a contradiction. */
    spec.join_mount_ns_fd = exec_fd;
    spec.private_network = true;
    assert_int_equal(cgt_cg_spawn(leaf, &spec, &proc, &err), -EINVAL);
    assert_non_null(strstr(err.message, "stays in the box's network"));
    spec.join_mount_ns_fd = -1;
    spec.private_network = false;
    bool populated = true;
    assert_int_equal(cg_leaf_populated(leaf, &populated, &err), 0);
    assert_false(populated);
    cg_leaf_free(leaf);
}

/* Spawns /bin/sh -c script in leaf with the tweaks of spec set by the
 * caller; returns its exit status (or -errno of the spawn). */
static int run_shell(cg_leaf *leaf, const char *script, cg_spawn_spec *spec, cg_process *out)
{
    _cleanup_close_ int exec_fd = open("/bin/sh", O_RDONLY | O_CLOEXEC);
    assert_true(exec_fd >= 0);
    const char *argv[] = {"sh", "-c", script, NULL};
    spec->exec_fd = exec_fd;
    spec->argv = argv;
    spec->method = cgt_spawn_method();
    cg_process proc = {.pid = -1, .pidfd = -1};
    act_error err = {0};
    int r = cgt_cg_spawn(leaf, spec, &proc, &err);
    if (r < 0) {
        print_error("%s\n", err.message);
        return r;
    }
    if (out)
        *out = proc;
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

/* A process in a mount namespace of its own, with a tmpfs on dir holding a
 * file only that namespace sees; its pidfd, and its pid in *pid. */
static int namespace_holder(const char *dir, pid_t *pid)
{
    int ready[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char marker[256];
        snprintf(marker, sizeof(marker), "%s/only-here", dir);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", dir, "tmpfs", 0, "size=64k") < 0)
            _exit(1);
        int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(ready[1], "x", 1) != 1)
            _exit(2);
        for (;;)
            pause();
    }
    close(ready[1]);
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    *pid = child;
    int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
    assert_true(pidfd >= 0);
    return pidfd;
}

/* A probe sees what its generation sees: the child joins another process's
 * mount namespace before it resolves a path. */
static void child_joins_the_mount_namespace_it_is_given(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-12", NULL);
    char dir[] = "/tmp/cg-mntns-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t holder = 0;
    int pidfd = namespace_holder(dir, &holder);
    char script[300];
    snprintf(script, sizeof(script), "test -e %s/only-here", dir);

    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    assert_int_equal(run_shell(leaf, script, &spec, NULL), 1); /* ours: not there */
    cg_spawn_spec_init(&spec);
    spec.join_mount_ns_fd = pidfd;
    cg_process proc;
    assert_int_equal(run_shell(leaf, script, &spec, &proc), 0); /* theirs: there */

    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    siginfo_t info;
    waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED);
    close(pidfd);
    rmdir(dir);
    act_error err = {0};
    assert_int_equal(cg_leaf_wait_empty(leaf, 10000000, &err), 0);
    cg_leaf_free(leaf);
}

#define JOURNAL_HEADER "web1\n\n6\n1\n0\n0\n0\n"

/* Reads fd to EOF (bounded by a timeout). */
static char *read_all(int fd)
{
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    size_t size = 4096, used = 0;
    char *text = calloc(1, size);
    ssize_t n;
    while (used + 1 < size && (n = read(fd, text + used, size - 1 - used)) > 0)
        used += (size_t)n;
    return text;
}

/* The child connects its own journal stream as the user it runs as, so the
 * peer journald sees is the child, never the spawner; where there is no
 * journal, its output goes where stdout_fd says. */
static void child_connects_its_own_journal_stream(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-13", NULL);
    char dir[] = "/tmp/cg-journal-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof(address.sun_path), "%s/stdout", dir);
    const char *path = address.sun_path;
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(listener, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(chmod(path, 0666), 0);
    assert_int_equal(listen(listener, 8), 0);
    int fallback[2];
    assert_int_equal(pipe2(fallback, O_CLOEXEC), 0);

    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.uid = 65534;
    spec.gid = 65534;
    spec.working_directory = "/";
    spec.stdout_fd = fallback[1];
    spec.stderr_fd = fallback[1];
    spec.journal_socket = path;
    spec.journal_header = JOURNAL_HEADER;
    cg_process proc;
    assert_int_equal(run_shell(leaf, "echo to-the-journal; echo also >&2", &spec, &proc), 0);
    int stream = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(stream >= 0);
    struct ucred peer;
    socklen_t len = sizeof(peer);
    assert_int_equal(getsockopt(stream, SOL_SOCKET, SO_PEERCRED, &peer, &len), 0);
    assert_int_equal(peer.uid, 65534);
    assert_int_equal(peer.pid, proc.pid);
    _cleanup_free_ char *got = read_all(stream);
    close(stream);
    assert_string_equal(got, JOURNAL_HEADER "to-the-journal\nalso\n");

    /* journal_stderr_only: stdout stays stdout_fd (a helper's answer). */
    int answer[2];
    assert_int_equal(pipe2(answer, O_CLOEXEC), 0);
    spec.stdout_fd = answer[1];
    spec.journal_stderr_only = true;
    assert_int_equal(run_shell(leaf, "echo the-answer; echo to-the-journal >&2", &spec, &proc), 0);
    close(answer[1]);
    stream = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(stream >= 0);
    _cleanup_free_ char *logged = read_all(stream);
    close(stream);
    _cleanup_free_ char *answered = read_all(answer[0]);
    close(answer[0]);
    assert_string_equal(logged, JOURNAL_HEADER "to-the-journal\n");
    assert_string_equal(answered, "the-answer\n");

    /* No journal there: the fallback gets it. */
    unlink(path);
    cg_spawn_spec_init(&spec);
    spec.stdout_fd = fallback[1];
    spec.stderr_fd = fallback[1];
    spec.journal_socket = path;
    spec.journal_header = JOURNAL_HEADER;
    assert_int_equal(run_shell(leaf, "echo to-the-fallback", &spec, NULL), 0);
    close(fallback[1]);
    _cleanup_free_ char *fell = read_all(fallback[0]);
    close(fallback[0]);
    assert_string_equal(fell, "to-the-fallback\n");
    close(listener);
    rmdir(dir);
    act_error err = {0};
    assert_int_equal(cg_leaf_wait_empty(leaf, 10000000, &err), 0);
    cg_leaf_free(leaf);
}

/* ---- held spawns (cg_spawn_hold) ---------------------------------------- */

static void in_directory(cg_spawn_spec *spec, void *data)
{
    spec->working_directory = data;
}

/* Holds cg-probe (exiting with exit_code) in leaf, its stdout's read end in
 * *out_read; in working_directory when not NULL, which the caller may free
 * as soon as this returns. */
static cg_held_spawn *hold_probe(cg_leaf *leaf, const char *exit_code,
                                 char *working_directory, int *out_read)
{
    const char *args[] = {exit_code, NULL};
    cg_held_spawn *held = NULL;
    act_error err = {0};
    if (cgt_hold(leaf, "cg-probe", args, working_directory ? in_directory : NULL,
                 working_directory, &held, out_read, &err) < 0)
        fail_msg("cg_spawn_hold: %s", err.message);
    return held;
}

/* Waits up to 10 s for held's child to sit in the leaf, blocked in its
 * wait for the release. */
static void wait_until_held(cg_leaf *leaf, const cg_held_spawn *held)
{
    uint64_t deadline = act_now_usec() + 10000000;
    pid_t pid = cg_held_pid(held);
    while (!(cgt_pid_in_cgroup(cg_leaf_path(leaf), pid) && cgt_blocked_in_read(pid))) {
        if (act_now_usec() > deadline)
            fail_msg("held child %d never reached its hold in the leaf", (int)pid);
        usleep(1000);
    }
}

static void held_child_waits_for_its_release_then_execs(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-20", NULL);
    int out_read;
    cg_held_spawn *held = hold_probe(leaf, "5", NULL, &out_read);
    act_error err = {0};
    wait_until_held(leaf, held);
    /* Held: in the leaf, but nothing of the app has run. */
    struct pollfd nothing_yet = {.fd = out_read, .events = POLLIN};
    assert_int_equal(poll(&nothing_yet, 1, 0), 0);
    pid_t pid = cg_held_pid(held);

    cg_process proc;
    assert_int_equal(cg_held_release(held, &proc, &err), 0);
    assert_int_equal(proc.pid, pid);
    _cleanup_free_ char *out = cgt_read_until(out_read, "end\n", 10000);
    char pid_text[32];
    snprintf(pid_text, sizeof(pid_text), "%d", (int)pid);
    expect_kv(out, "pid", pid_text);
    expect_exited(proc.pidfd, 5);
    close(out_read);
    assert_int_equal(cg_leaf_wait_empty(leaf, 10000000, &err), 0);
    cg_leaf_free(leaf);
}

static void abandoned_held_child_is_gone_and_its_leaf_empty(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-21", NULL);
    int out_read;
    cg_held_spawn *held = hold_probe(leaf, "0", NULL, &out_read);
    act_error err = {0};
    wait_until_held(leaf, held);
    pid_t pid = cg_held_pid(held);
    cg_held_abandon(held);
    /* Reaped by the abandon: no child of ours is left, the leaf is empty
     * at once, and the app never wrote a byte. */
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(kill(pid, 0), -1);
    bool populated = true;
    assert_int_equal(cg_leaf_populated(leaf, &populated, &err), 0);
    assert_false(populated);
    _cleanup_free_ char *out = cgt_read_until(out_read, "end\n", 1000);
    assert_string_equal(out, "");
    close(out_read);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
}

static void held_child_failure_is_told_at_release_from_a_spec_long_gone(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-22", NULL);
    /* The hold copies what it needs: the spec's memory goes before the
     * release, which still names the directory. */
    char *directory = strdup("/nonexistent-held-dir");
    assert_non_null(directory);
    int out_read;
    cg_held_spawn *held = hold_probe(leaf, "0", directory, &out_read);
    memset(directory, 'x', strlen(directory));
    free(directory);
    act_error err = {0};
    cg_process proc;
    assert_int_equal(cg_held_release(held, &proc, &err), -ENOENT);
    assert_non_null(strstr(err.message, "working directory /nonexistent-held-dir"));
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    close(out_read);
    cg_leaf_free(leaf);
}

int main(void)
{
    int r = cgt_check_can_run("cgroup spawn");
    if (r != 0)
        return r;
#define T(f) cmocka_unit_test_setup_teardown(f, cgt_setup_root, cgt_teardown_root)
    const struct CMUnitTest tests[] = {
        T(spawn_joins_leaf_and_pidfd_reports_exit),
        T(listen_fds_arrive_at_3_and_nothing_leaks),
        T(no_listen_fds_means_no_listen_env),
        T(a_pid_variable_gets_the_childs_pid),
        T(credentials_no_new_privs_and_seccomp_apply),
        T(capabilities_are_dropped_but_the_ambient_ones),
        T(root_in_a_user_namespace_is_root_to_itself_alone),
        T(root_in_a_user_namespace_refuses_what_it_cannot_be),
        T(default_profile_denies_admin_calls_and_allows_server_calls),
        T(profile_allow_and_deny_lists_change_the_filter),
        T(seccomp_compile_refuses_bad_input),
        T(exec_failures_reach_the_caller),
        T(script_runs_from_its_fd_when_the_fd_survives),
        T(script_runs_by_its_path_only_when_it_names_the_verified_file),
        T(child_step_failure_names_the_step),
        T(spawn_refuses_a_bad_spec_before_forking),
        T(child_joins_the_mount_namespace_it_is_given),
        T(child_connects_its_own_journal_stream),
        T(held_child_waits_for_its_release_then_execs),
        T(abandoned_held_child_is_gone_and_its_leaf_empty),
        T(held_child_failure_is_told_at_release_from_a_spec_long_gone),
    };
    if (cgt_use_fd_window() < 0)
        return 1;
    char name[80];
    snprintf(name, sizeof(name), "cgroup spawn (%s)", cgt_spawn_method_name());
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
