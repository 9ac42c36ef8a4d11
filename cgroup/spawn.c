/* Spawning into a leaf: the parent side. Everything the child needs is
 * prepared here (see spawn_internal.h), then clone3 puts the child straight
 * into the leaf with a pidfd (sharing our memory until its exec where the
 * CPU allows), and a CLOEXEC pipe tells us whether the exec happened or
 * which step failed with which errno. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/seccomp_internal.h"
#include "cgroup/spawn_internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"

/* More listening sockets than this is a configuration mistake. */
#define CG_LISTEN_FDS_MAX 1024
/* systemd's limit on one fd name. */
#define CG_FDNAME_MAX 255
#define LISTEN_PID_PREFIX "LISTEN_PID="
/* The longest name of a pid variable. */
#define CG_PID_VARIABLE_NAME_MAX 64
/* A pid's digits and their NUL: 20 digits hold any 64-bit number. */
#define PID_DIGITS_ROOM 21

void cg_spawn_spec_init(cg_spawn_spec *spec)
{
    assert(spec);
    memset(spec, 0, sizeof(*spec));
    spec->exec_fd = -1;
    spec->stdout_fd = -1;
    spec->stderr_fd = -1;
    spec->uid = CG_ID_UNSET;
    spec->gid = CG_ID_UNSET;
    spec->umask = 0022;
    spec->join_mount_ns_fd = -1;
}

static bool fd_is_open(int fd)
{
    return fd >= 0 && fcntl(fd, F_GETFD) >= 0;
}

static int check_fdname(const char *name, size_t index, act_error *err)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > CG_FDNAME_MAX)
        return act_error_set(err, EINVAL,
                             "listen fd name %zu is empty or longer than %d characters; give "
                             "each socket a short name",
                             index, CG_FDNAME_MAX);
    for (const char *p = name; *p; p++)
        if (*p == ':' || *p < 0x21 || *p > 0x7e)
            return act_error_set(err, EINVAL,
                                 "listen fd name \"%.64s\" has a ':' or a character outside "
                                 "printable ASCII; rename it",
                                 name);
    return 0;
}

static size_t count_pid_variables(const cg_spawn_spec *spec)
{
    size_t n = 0;
    while (spec->pid_variables && spec->pid_variables[n])
        n++;
    return n;
}

static int check_pid_variables(const cg_spawn_spec *spec, act_error *err)
{
    size_t n = count_pid_variables(spec);
    if (n > CG_PID_VARIABLES_MAX)
        return act_error_set(err, EINVAL, "%zu pid variables is more than %d", n,
                             CG_PID_VARIABLES_MAX);
    for (size_t i = 0; i < n; i++) {
        const char *name = spec->pid_variables[i];
        if (!name[0] || strlen(name) > CG_PID_VARIABLE_NAME_MAX || strchr(name, '='))
            return act_error_set(err, EINVAL,
                                 "pid variable \"%.64s\" is empty, longer than %d characters "
                                 "or has a '='",
                                 name, CG_PID_VARIABLE_NAME_MAX);
    }
    return 0;
}

static int check_spec(const cg_spawn_spec *spec, act_error *err)
{
    if (!fd_is_open(spec->exec_fd))
        return act_error_set(err, EBADF,
                             "exec fd %d is not an open file; open and verify the executable "
                             "first",
                             spec->exec_fd);
    if (!spec->argv || !spec->argv[0])
        return act_error_set(err, EINVAL, "argv is empty; argv[0] is required");
    if ((spec->stdout_fd >= 0 && !fd_is_open(spec->stdout_fd)) ||
        (spec->stderr_fd >= 0 && !fd_is_open(spec->stderr_fd)))
        return act_error_set(err, EBADF, "stdout fd %d or stderr fd %d is not open",
                             spec->stdout_fd, spec->stderr_fd);
    if (spec->n_listen_fds > CG_LISTEN_FDS_MAX)
        return act_error_set(err, EINVAL, "%zu listening sockets is more than %d",
                             spec->n_listen_fds, CG_LISTEN_FDS_MAX);
    for (size_t i = 0; i < spec->n_listen_fds; i++) {
        if (!fd_is_open(spec->listen_fds[i]))
            return act_error_set(err, EBADF, "listen fd %zu (%d) is not open", i,
                                 spec->listen_fds[i]);
        int r = spec->listen_fdnames ? check_fdname(spec->listen_fdnames[i], i, err) : 0;
        if (r < 0)
            return r;
    }
    if (spec->uid != CG_ID_UNSET && spec->gid == CG_ID_UNSET)
        return act_error_set(err, EINVAL,
                             "uid %" PRIu32 " is set without a gid; set the gid too, or the "
                             "process would keep our groups",
                             spec->uid);
    if (spec->n_groups && spec->gid == CG_ID_UNSET)
        return act_error_set(err, EINVAL, "supplementary groups need a gid to be set as well");
    if (spec->private_network && spec->join_mount_ns_fd >= 0)
        return act_error_set(err, EINVAL,
                             "a network namespace of its own and a mount namespace to join are "
                             "both set; a process that joins another's stays in the box's "
                             "network");
    if (spec->fs_view && spec->join_mount_ns_fd >= 0)
        return act_error_set(err, EINVAL,
                             "a filesystem view and a mount namespace to join are both set; a "
                             "process either gets a view of its own or joins another's");
    if (spec->root_in_user_namespace &&
        (spec->uid == CG_ID_UNSET || spec->uid == 0 || spec->gid == 0 || !spec->drop_capabilities ||
         spec->ambient_capabilities))
        return act_error_set(err, EINVAL,
                             "root in a user namespace needs a uid and gid other than 0 to map "
                             "it to, and every capability dropped (one kept there would reach "
                             "nothing of the box)");
    int r = check_pid_variables(spec, err);
    if (r < 0)
        return r;
    if (spec->seccomp && !spec->no_new_privs && spec->uid != CG_ID_UNSET && spec->uid != 0)
        return act_error_set(err, EINVAL,
                             "a seccomp filter for uid %" PRIu32 " needs no_new_privs; enable it",
                             spec->uid);
    return 0;
}

static bool entry_named(const char *entry, const char *name)
{
    size_t len = strlen(name);
    return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

/* Whether entry is one of ours, which replaces whatever the caller set. */
static bool is_spawn_variable(const cg_spawn_spec *spec, const char *entry)
{
    if (entry_named(entry, "LISTEN_FDS") || entry_named(entry, "LISTEN_PID") ||
        entry_named(entry, "LISTEN_FDNAMES"))
        return true;
    for (size_t i = 0; spec->pid_variables && spec->pid_variables[i]; i++)
        if (entry_named(entry, spec->pid_variables[i]))
            return true;
    return false;
}

/* Appends "NAME=" and 20 blank digits that the child fills with its own pid,
 * since nobody knows that pid before clone returns. */
static char *add_pid_variable(char *text, const char *name, struct cg_child_plan *plan)
{
    text += sprintf(text, "%s=", name);
    plan->pid_digits[plan->n_pid_digits++] = text;
    return text + PID_DIGITS_ROOM;
}

/* The environment the child execs with, all in one allocation owned by
 * *block: the caller's entries minus stale LISTEN_* and pid variable ones,
 * then ours. */
static int build_env(const cg_spawn_spec *spec, struct cg_child_plan *plan, void **block,
                     size_t *block_size, act_error *err)
{
    size_t n_env = 0, names_len = 0, n_pid_variables = count_pid_variables(spec);
    for (size_t i = 0; spec->envp && spec->envp[i]; i++)
        n_env++;
    for (size_t i = 0; spec->listen_fdnames && i < spec->n_listen_fds; i++)
        names_len += strlen(spec->listen_fdnames[i]) + 1;

    size_t strings = 32 + sizeof(LISTEN_PID_PREFIX) + PID_DIGITS_ROOM + 16 + names_len + 1 +
                     n_pid_variables * (CG_PID_VARIABLE_NAME_MAX + 1 + PID_DIGITS_ROOM);
    size_t table = (n_env + 4 + n_pid_variables) * sizeof(char *);
    char *mem = calloc(1, table + strings);
    if (!mem)
        return act_error_set(err, ENOMEM, "out of memory");
    *block_size = table + strings;
    char **envp = (char **)mem;
    char *text = mem + table;
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++)
        if (!is_spawn_variable(spec, spec->envp[i]))
            envp[k++] = (char *)spec->envp[i];
    plan->n_pid_digits = 0;
    for (size_t i = 0; i < n_pid_variables; i++) {
        envp[k++] = text;
        text = add_pid_variable(text, spec->pid_variables[i], plan);
    }
    if (spec->n_listen_fds > 0) {
        envp[k++] = text;
        text += sprintf(text, "LISTEN_FDS=%zu", spec->n_listen_fds) + 1;
        envp[k++] = text;
        text = add_pid_variable(text, "LISTEN_PID", plan);
        if (spec->listen_fdnames) {
            envp[k++] = text;
            text += sprintf(text, "LISTEN_FDNAMES=");
            for (size_t i = 0; i < spec->n_listen_fds; i++)
                text += sprintf(text, "%s%s", i ? ":" : "", spec->listen_fdnames[i]);
            text++;
        }
    }
    envp[k] = NULL;
    plan->envp = envp;
    *block = mem;
    return 0;
}

static const char *step_sentence(enum cg_child_step step)
{
    switch (step) {
    case CG_STEP_JOIN_V1: return "cannot join the leaf's cgroup v1 groups";
    case CG_STEP_JOIN_V2: return "cannot move into the leaf through cgroup.procs";
    case CG_STEP_JOIN_MOUNT_NS: return "cannot join the mount namespace it was to run in";
    case CG_STEP_IPC_NS:
        return "cannot make an IPC namespace of its own";
    case CG_STEP_NET_NS:
        return "cannot make a network namespace of its own with loopback up";
    case CG_STEP_SETSID: return "cannot start a new session";
    case CG_STEP_FDS: return "cannot set up its file descriptors";
    case CG_STEP_SIGNALS: return "cannot reset its signal mask";
    case CG_STEP_RLIMIT: return "cannot apply a resource limit (rlimit)";
    case CG_STEP_FS_VIEW: return "cannot set up its filesystem view";
    case CG_STEP_SETGROUPS: return "cannot set the supplementary groups";
    case CG_STEP_SETGID: return "cannot switch group id";
    case CG_STEP_SETUID: return "cannot switch user id";
    case CG_STEP_USER_NS:
        return "cannot become root in a user namespace of its own (are user namespaces "
               "disabled, user.max_user_namespaces 0?)";
    case CG_STEP_CAP_BOUNDING: return "cannot drop its bounding set and lock its securebits";
    case CG_STEP_CAPS: return "cannot set its capabilities (AmbientCapabilities=)";
    case CG_STEP_CHDIR: return "cannot change to the working directory";
    case CG_STEP_NO_NEW_PRIVS: return "cannot set no_new_privs";
    case CG_STEP_SECCOMP: return "cannot load the seccomp filter";
    case CG_STEP_EXEC_PATH:
        return "cannot run the verified file by its path (the path names another file, or "
               "none, in the process's view)";
    case CG_STEP_EXEC: return "cannot execute";
    }
    return "failed at an unknown step";
}

/* The file behind exec_fd, for error messages only. */
void cg_spawn_describe_fd(int fd, char *buf, size_t size)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, size - 1);
    if (n < 0)
        n = snprintf(buf, size, "fd %d", fd);
    buf[n] = '\0';
}

/* Which step of the view failed, and what would fix it. */
static void describe_view_failure(const struct cg_child_report *report,
                                  const struct cg_view_op *ops, size_t n_ops, char *detail,
                                  size_t size, const char **hint)
{
    if (report->detail == CG_VIEW_FAILED_UNSHARE)
        snprintf(detail, size, "(a mount namespace of its own)");
    else if (report->detail == CG_VIEW_FAILED_PRIVATE)
        snprintf(detail, size, "(making its mounts private)");
    else if (report->detail == CG_VIEW_FAILED_READ_ONLY)
        snprintf(detail, size, "(making / read-only)");
    else if (report->detail >= 0 && (size_t)report->detail < n_ops)
        snprintf(detail, size, "at %s (%s)", ops[report->detail].path,
                 cg_view_op_sentence(&ops[report->detail]));
    if (report->error == ENOSYS)
        *hint = "; the view needs Linux 5.12 or later (mount_setattr)";
    else if (report->detail >= 0 && report->error == ENOENT)
        *hint = "; create it, or stop asking for it";
    else if (report->detail >= 0 && (report->error == ELOOP || report->error == EXDEV))
        *hint = "; a symlink is on the way there, which a view never follows: name the real "
                "path";
}

struct cg_spawn_facts cg_spawn_facts_of(const cg_spawn_spec *spec, const struct cg_child_plan *plan)
{
    return (struct cg_spawn_facts){
        .exec_fd = spec->exec_fd,
        .working_directory = spec->working_directory,
        .uid = spec->uid,
        .gid = spec->gid,
        .view_ops = plan->view_ops,
        .n_view_ops = plan->n_view_ops,
    };
}

static int report_failure(cg_leaf *leaf, const struct cg_spawn_facts *facts,
                          const struct cg_child_report *report, act_error *err)
{
    char detail[PATH_MAX + 64] = "";
    const char *hint = "";
    if (report->step == CG_STEP_FS_VIEW)
        describe_view_failure(report, facts->view_ops, facts->n_view_ops, detail, sizeof(detail),
                              &hint);
    else if (report->step == CG_STEP_EXEC && facts->exec_name)
        snprintf(detail, sizeof(detail), "%s", facts->exec_name);
    else if (report->step == CG_STEP_EXEC)
        cg_spawn_describe_fd(facts->exec_fd, detail, sizeof(detail));
    else if (report->step == CG_STEP_CHDIR && facts->working_directory)
        snprintf(detail, sizeof(detail), "%s", facts->working_directory);
    else if (report->step == CG_STEP_SETUID || report->step == CG_STEP_SETGID)
        snprintf(detail, sizeof(detail), "uid %" PRIu32 " gid %" PRIu32, facts->uid, facts->gid);
    if (report->step == CG_STEP_EXEC && report->error == ENOEXEC)
        hint = "; the file is not a complete executable for this machine (truncated?)";
    else if (report->step == CG_STEP_EXEC && report->error == EACCES)
        hint = "; the file is not executable (check its mode and mount options)";
    else if (report->step == CG_STEP_EXEC && report->error == ENOENT)
        hint = "; the file or its interpreter is missing";
    return act_error_set(err, report->error, "leaf %s: child %s%s%s: %s (errno %d)%s",
                         leaf->v2_path, step_sentence((enum cg_child_step)report->step),
                         detail[0] ? " " : "", detail, strerror(report->error), report->error,
                         hint);
}

/* .cgroup (CLONE_INTO_CGROUP) arrived with the second extension of
 * clone_args; a header without it would build a spawn that silently starts
 * the child outside the leaf. */
static_assert(sizeof(struct clone_args) >= CLONE_ARGS_SIZE_VER2,
              "struct clone_args lacks .cgroup (CLONE_ARGS_SIZE_VER2)");

/* Errors with which a kernel says "no clone3" or "no CLONE_INTO_CGROUP". */
static bool clone3_refused(int e)
{
    return e == ENOSYS || e == E2BIG || e == EINVAL || e == EOPNOTSUPP;
}

#if defined(__x86_64__)
long cg_clone3_vm(struct clone_args *args, size_t size, void (*fn)(void *), void *arg);

/* The child's stack while it shares our memory; its code needs little, and
 * a guard page below it turns an overflow into a fault, not corruption. */
#define CHILD_STACK_BYTES (128 * 1024)

/* What clone3_vm.S takes for granted on the C side: the stack top the
 * kernel switches to (base + page + CHILD_STACK_BYTES) keeps the ABI's
 * 16-byte alignment for the call into fn, and the syscall numbers it loads
 * by hand are this kernel's clone3 and exit_group. */
static_assert(CHILD_STACK_BYTES % 16 == 0, "the child's stack top must stay 16-byte aligned");
static_assert(SYS_clone3 == 435, "clone3_vm.S calls syscall 435 as clone3");
static_assert(SYS_exit_group == 231, "clone3_vm.S calls syscall 231 as exit_group");

CG_CHILD_CODE static void child_entry(void *data)
{
    struct cg_child_plan *plan = data;
    /* The kernel wrote our pid into the caller's word before we ran: a
     * held spawn's caller sleeps on it rather than spin (spawn_held.c). */
    if (plan->announce_pid)
        syscall(SYS_futex, plan->announce_pid, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    cg_child_run(plan);
}

/* clone3 with CLONE_VM | CLONE_VFORK: the child borrows our address space
 * until its exec instead of getting a copy that the exec throws away. The
 * copy is most of a spawn's cost for a daemon with a large heap (it grows
 * with the number of hosts), and the exec's teardown of it is the rest. We
 * are suspended until the child has exec'd or exited, so nothing else of
 * ours runs on this thread meanwhile; the child touches only its own stack
 * and reads the plan. */
static pid_t clone_sharing_memory(cg_leaf *leaf, struct cg_child_plan *plan, int *pidfd,
                                  int *clone_errno)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t mapped = CHILD_STACK_BYTES + (size_t)page;
    char *base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                      -1, 0);
    if (base == MAP_FAILED) {
        *clone_errno = errno;
        return -1;
    }
    if (mprotect(base, (size_t)page, PROT_NONE) < 0) {
        *clone_errno = errno;
        munmap(base, mapped);
        return -1;
    }
    struct clone_args args = {
        .flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP |
                 (plan->unshare_fds_below > 0 ? CLONE_FILES : 0) |
                 (plan->announce_pid ? CLONE_PARENT_SETTID : 0),
        .pidfd = (uint64_t)(uintptr_t)pidfd,
        .parent_tid = (uint64_t)(uintptr_t)plan->announce_pid,
        .exit_signal = SIGCHLD,
        .stack = (uint64_t)(uintptr_t)(base + page),
        .stack_size = CHILD_STACK_BYTES,
        .cgroup = (uint64_t)leaf->dir_fd,
    };
    long pid = cg_clone3_vm(&args, sizeof(args), child_entry, plan);
    munmap(base, mapped);
    if (pid < 0) {
        *clone_errno = (int)-pid;
        return -1;
    }
    return (pid_t)pid;
}
#endif

static pid_t clone_copying_memory(cg_leaf *leaf, struct cg_child_plan *plan, int *pidfd,
                                  int *clone_errno)
{
    struct clone_args args = {
        .flags = CLONE_PIDFD | CLONE_INTO_CGROUP | (plan->announce_pid ? CLONE_PARENT_SETTID : 0),
        .pidfd = (uint64_t)(uintptr_t)pidfd,
        .parent_tid = (uint64_t)(uintptr_t)plan->announce_pid,
        .exit_signal = SIGCHLD,
        .cgroup = (uint64_t)leaf->dir_fd,
    };
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
    if (pid == 0)
        cg_child_run(plan);
    *clone_errno = errno;
    return pid;
}

/* Fork fallback: the child moves itself into the leaf before anything else,
 * so no code of the app ever runs outside it. */
static pid_t fork_then_join(cg_leaf *leaf, struct cg_child_plan *plan, int *pidfd,
                            int *v2_procs_fd, int *clone_errno)
{
    *v2_procs_fd = openat(leaf->dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (*v2_procs_fd < 0) {
        *clone_errno = errno;
        return -1;
    }
    plan->v2_procs_fd = *v2_procs_fd;
    pid_t pid = _Fork();
    if (pid == 0)
        cg_child_run(plan);
    *clone_errno = errno;
    if (pid > 0 && plan->announce_pid)
        __atomic_store_n(plan->announce_pid, pid, __ATOMIC_RELEASE);
    if (pid > 0) {
        /* Our unreaped child cannot be recycled, so this pidfd is its. */
        *pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (*pidfd < 0)
            *clone_errno = errno;
    }
    return pid;
}

static pid_t clone_into_leaf(cg_leaf *leaf, struct cg_child_plan *plan, cg_spawn_method method,
                             int *pidfd, int *v2_procs_fd, int *clone_errno)
{
    pid_t pid;
#if defined(__x86_64__)
    if (method == CG_SPAWN_AUTO) {
        pid = clone_sharing_memory(leaf, plan, pidfd, clone_errno);
        if (pid > 0 || !clone3_refused(*clone_errno))
            return pid;
    }
#endif
    if (method != CG_SPAWN_FORK) {
        pid = clone_copying_memory(leaf, plan, pidfd, clone_errno);
        if (pid > 0 || !clone3_refused(*clone_errno))
            return pid;
    }
    return fork_then_join(leaf, plan, pidfd, v2_procs_fd, clone_errno);
}

void cg_spawn_setup_clear(struct cg_spawn_setup *setup)
{
    if (setup->null_fd >= 0)
        close(setup->null_fd);
    if (setup->report_read >= 0)
        close(setup->report_read);
    if (setup->report_write >= 0)
        close(setup->report_write);
    free(setup->fd_sources);
    free(setup->env_block);
    free(setup->view_ops);
    memset(setup, 0, sizeof(*setup));
    setup->null_fd = setup->report_read = setup->report_write = -1;
}

int cg_spawn_setup_make(cg_leaf *leaf, const cg_spawn_spec *spec, struct cg_spawn_setup *setup,
                        act_error *err)
{
    memset(setup, 0, sizeof(*setup));
    setup->null_fd = setup->report_read = setup->report_write = -1;
    int r = check_spec(spec, err);
    if (r < 0)
        return act_error_prefix(err, "leaf %s: cannot spawn", leaf->v2_path);

    setup->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (setup->null_fd < 0)
        return act_error_set(err, errno, "cannot open /dev/null: %s", strerror(errno));
    size_t n_fds = 3 + spec->n_listen_fds;
    int *fd_sources = setup->fd_sources = calloc(2 * n_fds, sizeof(int));
    if (!fd_sources)
        return act_error_set(err, ENOMEM, "out of memory");
    fd_sources[0] = setup->null_fd;
    fd_sources[1] = spec->stdout_fd >= 0 ? spec->stdout_fd : setup->null_fd;
    fd_sources[2] = spec->stderr_fd >= 0 ? spec->stderr_fd : setup->null_fd;
    for (size_t i = 0; i < spec->n_listen_fds; i++)
        fd_sources[3 + i] = spec->listen_fds[i];

    struct cg_child_plan *plan = &setup->plan;
    *plan = (struct cg_child_plan){
        .v2_procs_fd = -1,
        .fd_sources = fd_sources,
        .fd_scratch = fd_sources + n_fds,
        .n_fds = n_fds,
        .exec_fd = spec->exec_fd,
        .join_mount_ns_fd = spec->join_mount_ns_fd,
        .private_ipc = spec->private_ipc,
        .private_network = spec->private_network,
        .journal_stderr_only = spec->journal_stderr_only,
        .exec_fd_survives = spec->exec_fd_survives,
        .exec_path = spec->exec_path,
        .hold_fd = -1,
        .argv = (char *const *)spec->argv,
        .rlimits = spec->rlimits,
        .n_rlimits = spec->n_rlimits,
        .set_gid = spec->gid != CG_ID_UNSET,
        .gid = spec->gid,
        .groups = spec->groups,
        .n_groups = spec->n_groups,
        .set_uid = spec->uid != CG_ID_UNSET,
        .uid = spec->uid,
        .drop_capabilities = spec->drop_capabilities,
        .ambient_capabilities = spec->drop_capabilities ? spec->ambient_capabilities : 0,
        .root_in_user_namespace = spec->root_in_user_namespace,
        .working_directory = spec->working_directory,
        .umask = spec->umask & 0777,
        .no_new_privs = spec->no_new_privs,
        .seccomp = spec->seccomp ? &spec->seccomp->fprog : NULL,
    };
    if (spec->root_in_user_namespace) {
        snprintf(plan->uid_map, sizeof(plan->uid_map), "0 %" PRIu32 " 1\n", spec->uid);
        snprintf(plan->gid_map, sizeof(plan->gid_map), "0 %" PRIu32 " 1\n", spec->gid);
    }
    if ((r = build_env(spec, plan, &setup->env_block, &setup->env_bytes, err)) < 0)
        return r;
    if (spec->journal_socket && spec->journal_header) {
        if (strlen(spec->journal_socket) >= sizeof(plan->journal_address.sun_path))
            return act_error_set(err, ENAMETOOLONG, "journal socket path %s is too long",
                                 spec->journal_socket);
        plan->journal = true;
        plan->journal_address.sun_family = AF_UNIX;
        memcpy(plan->journal_address.sun_path, spec->journal_socket,
               strlen(spec->journal_socket) + 1);
        plan->journal_header = spec->journal_header;
        plan->journal_header_len = strlen(spec->journal_header);
    }
    if (spec->fs_view &&
        (r = cg_fs_view_plan(spec->fs_view, spec->fs_passed, spec->fs_read_only, &plan->view_ops,
                             &plan->n_view_ops, &setup->view_ops, err)) < 0)
        return act_error_prefix(err, "leaf %s: cannot spawn", leaf->v2_path);
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        plan->v1_procs_fds[c] = leaf->v1_procs_fd[c];

    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) < 0)
        return act_error_set(err, errno, "cannot create the exec report pipe: %s",
                             strerror(errno));
    setup->report_read = pipe_fds[0];
    setup->report_write = pipe_fds[1];
    plan->report_fd = setup->report_write;
    return 0;
}

pid_t cg_spawn_clone(cg_leaf *leaf, struct cg_child_plan *plan, cg_spawn_method method,
                     int *pidfd, act_error *err)
{
    /* With every signal blocked, no handler of ours can run in the child
     * before it has reset them; the child unblocks right before exec. */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    _cleanup_close_ int v2_procs_fd = -1;
    int clone_errno = 0;
    pid_t pid = clone_into_leaf(leaf, plan, method, pidfd, &v2_procs_fd, &clone_errno);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (pid < 0)
        return act_error_set(err, clone_errno, "leaf %s: cannot create a process: %s%s",
                             leaf->v2_path, strerror(clone_errno),
                             clone_errno == EAGAIN ? " (the leaf's PidsMax may be reached)" : "");
    if (*pidfd < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return act_error_set(err, clone_errno, "leaf %s: cannot open a pidfd for pid %d: %s",
                             leaf->v2_path, (int)pid, strerror(clone_errno));
    }
    return pid;
}

int cg_spawn_await_exec(cg_leaf *leaf, int report_read, int pidfd,
                        const struct cg_spawn_facts *facts, act_error *err)
{
    struct cg_child_report report = {0};
    int got = (int)act_read_full(report_read, &report, sizeof(report));
    if (got == 0)
        return 0;
    /* The child failed before exec and exited 127; reap it now, its
     * failure is reported here and nowhere later. */
    siginfo_t info;
    waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED);
    if (got != (int)sizeof(report))
        return act_error_set(err, EIO, "leaf %s: child sent a malformed exec report",
                             leaf->v2_path);
    return report_failure(leaf, facts, &report, err);
}

int cg_spawn(cg_leaf *leaf, const cg_spawn_spec *spec, cg_process *out, act_error *err)
{
    assert(leaf);
    assert(spec);
    assert(out);
    _cleanup_(cg_spawn_setup_clear) struct cg_spawn_setup setup;
    int r = cg_spawn_setup_make(leaf, spec, &setup, err);
    if (r < 0)
        return r;
    struct cg_child_plan *plan = &setup.plan;

    /* What the child needs, through the fd window when we have one (see
     * spawn_fds.c): sources, then the exec fd, then the report pipe, then
     * the namespace to join. */
    size_t n_fds = plan->n_fds;
    size_t n_window = n_fds + 2 + (spec->join_mount_ns_fd >= 0);
    _cleanup_free_ int *window_fds = NULL;
    int window_highest = -1;
    if (spec->method == CG_SPAWN_AUTO && (window_fds = calloc(2 * n_window, sizeof(int)))) {
        memcpy(window_fds, setup.fd_sources, n_fds * sizeof(int));
        window_fds[n_fds] = spec->exec_fd;
        window_fds[n_fds + 1] = setup.report_write;
        if (spec->join_mount_ns_fd >= 0)
            window_fds[n_fds + 2] = spec->join_mount_ns_fd;
        window_highest = cg_fd_window_enter(window_fds, n_window, window_fds + n_window);
    }
    if (window_highest >= 0) {
        const int *mapped = window_fds + n_window;
        plan->fd_sources = mapped;
        plan->exec_fd = mapped[n_fds];
        plan->report_fd = mapped[n_fds + 1];
        if (spec->join_mount_ns_fd >= 0)
            plan->join_mount_ns_fd = mapped[n_fds + 2];
        plan->unshare_fds_below = window_highest + 1;
    }

    _cleanup_close_ int pidfd = -1;
    act_error clone_err = {0};
    pid_t pid = cg_spawn_clone(leaf, plan, spec->method, &pidfd, &clone_err);
    if (window_highest >= 0)
        cg_fd_window_leave(n_window);
    if (pid < 0) {
        *err = clone_err;
        return pid;
    }

    close(TAKE_FD(setup.report_write));
    struct cg_spawn_facts facts = cg_spawn_facts_of(spec, plan);
    r = cg_spawn_await_exec(leaf, setup.report_read, pidfd, &facts, err);
    if (r < 0)
        return r;
    out->pid = pid;
    out->pidfd = TAKE_FD(pidfd);
    return 0;
}
