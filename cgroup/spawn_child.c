/* The spawned child, between clone3 (or fork) and execveat.
 *
 * Only async-signal-safe code runs here: raw syscalls on memory the parent
 * prepared. No malloc, no stdio, no libseccomp, no NNG, and not even libc
 * wrappers that consult thread state (after a raw clone3, libc's idea of our
 * thread id is the parent's), so every call is syscall().
 *
 * The child may be sharing the parent's memory (CLONE_VM) on a stack of its
 * own, so it writes nothing but its stack, fd_scratch and the pid digits
 * (LISTEN_PID and the like), and no sanitizer instrumentation runs here
 * (CG_CHILD_CODE): its bookkeeping would outlive the borrowed stack. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup/spawn_internal.h"

#define KERNEL_SIGSET_BYTES 8
#define KERNEL_NSIG 64

/* The kernel's signal set as rt_sigaction and rt_sigprocmask take it: an
 * array of longs, KERNEL_SIGSET_BYTES long, whatever the size of a long. */
typedef unsigned long kernel_sigset[KERNEL_SIGSET_BYTES / sizeof(unsigned long)];

/* The kernel's struct sigaction for rt_sigaction on x86-64 and most other
 * architectures: handler, flags, restorer, mask. */
struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    kernel_sigset mask;
};

/* rt_sigaction reads this layout field by field; padding or a short mask
 * would hand it garbage. */
static_assert(offsetof(struct kernel_sigaction, flags) == sizeof(void (*)(int)),
              "kernel_sigaction: padding after handler");
static_assert(offsetof(struct kernel_sigaction, restorer) ==
                  offsetof(struct kernel_sigaction, flags) + sizeof(unsigned long),
              "kernel_sigaction: padding after flags");
static_assert(offsetof(struct kernel_sigaction, mask) ==
                  offsetof(struct kernel_sigaction, restorer) + sizeof(void (*)(void)),
              "kernel_sigaction: padding after restorer");
static_assert(sizeof(kernel_sigset) == KERNEL_SIGSET_BYTES, "kernel_sigset is not the kernel's");
static_assert(KERNEL_NSIG == 8 * KERNEL_SIGSET_BYTES, "KERNEL_NSIG and the set size disagree");

CG_CHILD_CODE _Noreturn static void fail_at(int report_fd, enum cg_child_step step, int error,
                                           int32_t detail)
{
    struct cg_child_report report = {.step = step, .error = error ? error : EIO,
                                      .detail = detail};
    syscall(SYS_write, report_fd, &report, sizeof(report));
    for (;;)
        syscall(SYS_exit_group, 127);
}

CG_CHILD_CODE _Noreturn static void fail(int report_fd, enum cg_child_step step, int error)
{
    fail_at(report_fd, step, error, 0);
}

CG_CHILD_CODE static int write_zero(int fd)
{
    return syscall(SYS_write, fd, "0", 1) == 1 ? 0 : errno;
}

/* Closes every fd from floor up but the three in keep (-1: none): a held
 * child copied the daemon's whole table, and closing it here, before the
 * hold, keeps the exec that follows the release from closing thousands. */
CG_CHILD_CODE static void close_all_but(int floor, const int keep[3])
{
    int sorted[3] = {keep[0], keep[1], keep[2]};
    for (int i = 1; i < 3; i++)
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    int next = floor;
    for (int i = 0; i < 3; i++) {
        if (sorted[i] < next)
            continue;
        if (sorted[i] > next)
            syscall(SYS_close_range, (unsigned)next, (unsigned)sorted[i] - 1, 0);
        next = sorted[i] + 1;
    }
    syscall(SYS_close_range, (unsigned)next, ~0U, 0);
}

/* Moves the wanted fds to 0..n-1 and marks everything else close-on-exec
 * (closes it, for a held child). Sources are first copied above n, so that
 * placing one never overwrites another that still has to be placed. */
CG_CHILD_CODE static int place_fds(const struct cg_child_plan *plan, int *report_fd, int *exec_fd,
                                   int *hold_fd)
{
    int floor = (int)plan->n_fds;
    int moved = (int)syscall(SYS_fcntl, *report_fd, F_DUPFD_CLOEXEC, floor);
    if (moved < 0)
        return errno;
    *report_fd = moved;
    moved = (int)syscall(SYS_fcntl, *exec_fd, F_DUPFD_CLOEXEC, floor);
    if (moved < 0)
        return errno;
    *exec_fd = moved;
    if (*hold_fd >= 0) {
        moved = (int)syscall(SYS_fcntl, *hold_fd, F_DUPFD_CLOEXEC, floor);
        if (moved < 0)
            return errno;
        *hold_fd = moved;
    }
    for (size_t i = 0; i < plan->n_fds; i++) {
        plan->fd_scratch[i] = (int)syscall(SYS_fcntl, plan->fd_sources[i], F_DUPFD_CLOEXEC, floor);
        if (plan->fd_scratch[i] < 0)
            return errno;
    }
    for (size_t i = 0; i < plan->n_fds; i++)
        if (syscall(SYS_dup3, plan->fd_scratch[i], (int)i, 0) < 0)
            return errno;
    if (*hold_fd >= 0) {
        close_all_but(floor, (const int[3]){*report_fd, *exec_fd, *hold_fd});
        return 0;
    }
    if (syscall(SYS_close_range, (unsigned)floor, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        /* Kernels before 5.11: mark them one by one. */
        for (int fd = floor; fd < 65536; fd++)
            syscall(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
    }
    return 0;
}

/* stdout and stderr to a journald stream of our own, connected as the
 * user we run as. Best effort: any failure keeps what place_fds put there. */
CG_CHILD_CODE static void connect_journal(const struct cg_child_plan *plan)
{
    int fd = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;
    /* Non-blocking: a journald with a full backlog says EAGAIN at once
     * rather than holding the spawn (and, sharing our memory, the daemon). */
    if (syscall(SYS_connect, fd, &plan->journal_address, sizeof(plan->journal_address)) < 0 ||
        syscall(SYS_fcntl, fd, F_SETFL, 0) < 0 ||
        syscall(SYS_write, fd, plan->journal_header, plan->journal_header_len) !=
            (long)plan->journal_header_len) {
        syscall(SYS_close, fd);
        return;
    }
    syscall(SYS_shutdown, fd, SHUT_RD);
    if (plan->journal_stderr_only || syscall(SYS_dup3, fd, STDOUT_FILENO, 0) >= 0)
        syscall(SYS_dup3, fd, STDERR_FILENO, 0);
    syscall(SYS_close, fd);
}

/* A network namespace of our own, its loopback brought up (a new
 * namespace has it down, and an app that talks to itself over 127.0.0.1
 * would find nothing). */
CG_CHILD_CODE static int enter_private_network(void)
{
    if (syscall(SYS_unshare, CLONE_NEWNET) < 0)
        return errno;
    int fd = (int)syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    struct ifreq ifr = {.ifr_name = "lo"};
    int e = 0;
    if (syscall(SYS_ioctl, fd, SIOCGIFFLAGS, &ifr) < 0) {
        e = errno;
    } else {
        ifr.ifr_flags |= IFF_UP;
        if (syscall(SYS_ioctl, fd, SIOCSIFFLAGS, &ifr) < 0)
            e = errno;
    }
    syscall(SYS_close, fd);
    return e;
}

/* Handlers vanish at exec anyway, but an ignored signal (the daemon ignores
 * SIGPIPE) would stay ignored in the app. */
CG_CHILD_CODE static void reset_signal_dispositions(void)
{
    struct kernel_sigaction dfl = {.handler = SIG_DFL};
    for (int sig = 1; sig <= KERNEL_NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, KERNEL_SIGSET_BYTES);
}

CG_CHILD_CODE static void format_pid(char *digits, long pid)
{
    char reversed[24];
    int n = 0;
    do {
        reversed[n++] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid > 0 && n < 20);
    for (int i = 0; i < n; i++)
        digits[i] = reversed[n - 1 - i];
    digits[n] = '\0';
}

/* While still privileged (the uid change needs CAP_SETUID): the bounding
 * set keeps only what is asked for, no ambient capability is inherited
 * from us, and the securebits are set and locked: an exec gives uid 0
 * nothing (NOROOT), the app can never switch off the capability fixup of
 * a uid change (NO_SETUID_FIXUP stays off) nor turn keep-caps on, and
 * without capabilities to keep it can never raise an ambient one. Keep-caps
 * is on only for our own uid change when some are kept (exec clears it). */
CG_CHILD_CODE static int drop_bounding_and_lock(uint64_t keep)
{
    for (unsigned long cap = 0; cap < 64; cap++) {
        if (keep & (1ULL << cap))
            continue;
        if (syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL) /* past the kernel's last capability */
                break;
            return errno;
        }
    }
    if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
        errno != EINVAL)
        return errno;
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                         SECBIT_KEEP_CAPS_LOCKED;
    bits |=
        keep ? SECBIT_KEEP_CAPS : SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (syscall(SYS_prctl, PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
        return errno;
    return 0;
}

/* After the uid change: exactly keep in the permitted, effective and
 * inheritable sets, and raised as ambient so that the exec hands them on
 * (with NOROOT and no file capabilities, ambient is all an exec keeps). */
CG_CHILD_CODE static int settle_capabilities(uint64_t keep)
{
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {0};
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
        uint32_t word = (uint32_t)(keep >> (32 * i));
        data[i].effective = data[i].permitted = data[i].inheritable = word;
    }
    if (syscall(SYS_capset, &header, data) < 0)
        return errno;
    for (unsigned long cap = 0; cap < 64; cap++)
        if ((keep & (1ULL << cap)) &&
            syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
            return errno;
    return 0;
}

/* Writes text to one of our own /proc/self files. */
CG_CHILD_CODE static int write_own_proc_file(const char *path, const char *text)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    size_t len = 0;
    while (text[len])
        len++;
    int e = syscall(SYS_write, fd, text, len) == (long)len ? 0 : (errno ? errno : EIO);
    syscall(SYS_close, fd);
    return e;
}

/* Root in a user namespace of our own, mapped to plan->uid and plan->gid
 * (cg_spawn_spec.root_in_user_namespace); from real root, the view made.
 *
 * The namespace is made with plan->uid as effective uid: its owner is
 * then that uid, not the box's root, and its maps may name that uid and
 * gid alone, which a process may write for itself. Three things of the
 * old credentials are kept until the maps are written:
 * - the saved uid 0, and with it the permitted set, so that CAP_SYS_ADMIN
 *   is in effect at the unshare (a box may allow user namespaces only to
 *   privileged processes, as Debian's sysctl and Ubuntu's AppArmor do);
 * - the filesystem uid 0: the uid change left us non-dumpable, which makes
 *   the box's root the owner of our /proc/self files, and only their
 *   owner may open the maps for writing.
 * setresuid(0) within the namespace then drops both for good. The
 * capabilities the namespace gave us are dropped after this, as for any
 * host (drop_bounding_and_lock and settle_capabilities, which the new
 * namespace's fresh bounding set and securebits need anyway). */
CG_CHILD_CODE static int become_root_in_user_namespace(const struct cg_child_plan *plan)
{
    if (syscall(SYS_setgroups, plan->n_groups, plan->groups) < 0 ||
        syscall(SYS_setresgid, plan->gid, plan->gid, plan->gid) < 0 ||
        syscall(SYS_setresuid, plan->uid, plan->uid, 0) < 0)
        return errno;
    syscall(SYS_setfsuid, 0); /* returns the old fsuid, never an error */
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {0};
    data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective = data[CAP_TO_INDEX(CAP_SYS_ADMIN)].permitted =
        CAP_TO_MASK(CAP_SYS_ADMIN);
    if (syscall(SYS_capset, &header, data) < 0 || syscall(SYS_unshare, CLONE_NEWUSER) < 0)
        return errno;
    int e;
    if ((e = write_own_proc_file("/proc/self/setgroups", "deny")) != 0 ||
        (e = write_own_proc_file("/proc/self/uid_map", plan->uid_map)) != 0 ||
        (e = write_own_proc_file("/proc/self/gid_map", plan->gid_map)) != 0)
        return e;
    if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
        return errno;
    return 0;
}

/* Joins the generation's cgroups and, for a probe, its mount namespace. */
CG_CHILD_CODE static void join_groups(const struct cg_child_plan *plan, int report_fd)
{
    int e;
    /* Join the v1 groups before anything else, so every page and task the
     * child makes from here on is charged where its limits are. */
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        if (plan->v1_procs_fds[c] >= 0 && (e = write_zero(plan->v1_procs_fds[c])) != 0)
            fail(report_fd, CG_STEP_JOIN_V1, e);
    if (plan->v2_procs_fd >= 0 && (e = write_zero(plan->v2_procs_fd)) != 0)
        fail(report_fd, CG_STEP_JOIN_V2, e);
    /* Another process's mount namespace (a probe joins its generation's),
     * and its IPC namespace where it has its own, in one call through the
     * pidfd: before any path is resolved, while we are still privileged. */
    if (plan->join_mount_ns_fd >= 0) {
        if (syscall(SYS_setns, plan->join_mount_ns_fd,
                    CLONE_NEWNS | (plan->private_ipc ? CLONE_NEWIPC : 0)) < 0)
            fail(report_fd, CG_STEP_JOIN_MOUNT_NS, errno);
    } else if (plan->private_ipc && syscall(SYS_unshare, CLONE_NEWIPC) < 0) {
        fail(report_fd, CG_STEP_IPC_NS, errno);
    }
    if (plan->private_network && (e = enter_private_network()) != 0)
        fail(report_fd, CG_STEP_NET_NS, e);
}

/* A session and an fd table of the child's own, with only the fds the
 * plan names, at their places (the three fds move with them). */
CG_CHILD_CODE static void own_session_and_fds(const struct cg_child_plan *plan, int *report_fd,
                                              int *exec_fd, int *hold_fd)
{
    int e;
    /* Sharing the parent's fd table: take a copy of only its low part (the
     * window holds everything we need), before touching any fd. */
    if (plan->unshare_fds_below > 0 &&
        syscall(SYS_close_range, (unsigned)plan->unshare_fds_below, ~0U, CLOSE_RANGE_UNSHARE) < 0 &&
        syscall(SYS_unshare, CLONE_FILES) < 0) /* kernels before 5.9: a full copy */
        fail(*report_fd, CG_STEP_FDS, errno);

    if (syscall(SYS_setsid) < 0)
        fail(*report_fd, CG_STEP_SETSID, errno);
    if ((e = place_fds(plan, report_fd, exec_fd, hold_fd)) != 0)
        fail(*report_fd, CG_STEP_FDS, e);
    /* The kernel hands a #! interpreter the script as /dev/fd/N, so N must
     * survive the exec. */
    if (plan->exec_fd_survives && syscall(SYS_fcntl, *exec_fd, F_SETFD, 0) < 0)
        fail(*report_fd, CG_STEP_FDS, errno);
}

/* The child's own pid into the places the plan left for it, and its
 * resource limits. */
CG_CHILD_CODE static void set_pid_and_limits(const struct cg_child_plan *plan, int report_fd)
{
    long pid = syscall(SYS_getpid);
    for (size_t i = 0; i < plan->n_pid_digits; i++)
        format_pid(plan->pid_digits[i], pid);

    for (size_t i = 0; i < plan->n_rlimits; i++)
        if (syscall(SYS_prlimit64, 0, plan->rlimits[i].resource, &plan->rlimits[i].limit, NULL) <
            0)
            fail(report_fd, CG_STEP_RLIMIT, errno);
}

/* The filesystem view, then the credentials: groups, gid, uid and what is
 * left of the capabilities. */
CG_CHILD_CODE static void enter_view_and_credentials(const struct cg_child_plan *plan,
                                                     int report_fd)
{
    int e;
    /* The view needs CAP_SYS_ADMIN, so it comes before the credentials
     * change; the working directory after it, so it is the view's. */
    int32_t view_failed = 0;
    if (plan->n_view_ops &&
        (e = cg_child_enter_view(plan->view_ops, plan->n_view_ops, &view_failed)) != 0)
        fail_at(report_fd, CG_STEP_FS_VIEW, e, view_failed);
    if (plan->root_in_user_namespace) {
        if ((e = become_root_in_user_namespace(plan)) != 0)
            fail(report_fd, CG_STEP_USER_NS, e);
        if ((e = drop_bounding_and_lock(0)) != 0)
            fail(report_fd, CG_STEP_CAP_BOUNDING, e);
        if ((e = settle_capabilities(0)) != 0)
            fail(report_fd, CG_STEP_CAPS, e);
        return;
    }
    if (plan->drop_capabilities && (e = drop_bounding_and_lock(plan->ambient_capabilities)) != 0)
        fail(report_fd, CG_STEP_CAP_BOUNDING, e);
    if (plan->set_gid) {
        if (syscall(SYS_setgroups, plan->n_groups, plan->groups) < 0)
            fail(report_fd, CG_STEP_SETGROUPS, errno);
        if (syscall(SYS_setresgid, plan->gid, plan->gid, plan->gid) < 0)
            fail(report_fd, CG_STEP_SETGID, errno);
    }
    if (plan->set_uid && syscall(SYS_setresuid, plan->uid, plan->uid, plan->uid) < 0)
        fail(report_fd, CG_STEP_SETUID, errno);
    if (plan->drop_capabilities && (e = settle_capabilities(plan->ambient_capabilities)) != 0)
        fail(report_fd, CG_STEP_CAPS, e);
}

/* The journal as stdout and stderr, the working directory and the umask. */
CG_CHILD_CODE static void set_surroundings(const struct cg_child_plan *plan, int report_fd)
{
    if (plan->journal)
        connect_journal(plan);
    if (plan->working_directory && syscall(SYS_chdir, plan->working_directory) < 0)
        fail(report_fd, CG_STEP_CHDIR, errno);
    syscall(SYS_umask, plan->umask);
}

/* A held child waits here, everything that could be made ahead made, for
 * the byte that lets it exec; the pipe's end (the spawn abandoned, or the
 * daemon gone) ends it instead. Before the filter: read is a call it may
 * refuse. */
CG_CHILD_CODE static void wait_for_go(int hold_fd)
{
    if (hold_fd < 0)
        return;
    char go = 0;
    long n;
    while ((n = syscall(SYS_read, hold_fd, &go, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        for (;;)
            syscall(SYS_exit_group, 0);
    syscall(SYS_close, hold_fd);
}

/* No new privileges, the system call filter, and no signal blocked. */
CG_CHILD_CODE static void lock_down(const struct cg_child_plan *plan, int report_fd)
{
    if (plan->no_new_privs && syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        fail(report_fd, CG_STEP_NO_NEW_PRIVS, errno);
    if (plan->seccomp &&
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, plan->seccomp) < 0)
        fail(report_fd, CG_STEP_SECCOMP, errno);

    /* The parent blocked every signal around clone; the app starts with none
     * blocked, as any freshly started program expects. */
    kernel_sigset empty_mask = {0};
    if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, empty_mask, NULL, KERNEL_SIGSET_BYTES) < 0)
        fail(report_fd, CG_STEP_SIGNALS, errno);
}

/* The path names the very file of exec_fd (its device and inode), as the
 * process sees it, or the spawn fails: run by path, what runs is still
 * what was verified. Before the filter, which may not allow statx. */
CG_CHILD_CODE static void check_exec_path(const char *path, int exec_fd, int report_fd)
{
    struct statx verified, named;
    if (syscall(SYS_statx, exec_fd, "", AT_EMPTY_PATH, STATX_INO, &verified) < 0 ||
        syscall(SYS_statx, AT_FDCWD, path, 0, STATX_INO, &named) < 0)
        fail(report_fd, CG_STEP_EXEC_PATH, errno);
    if (verified.stx_ino != named.stx_ino || verified.stx_dev_major != named.stx_dev_major ||
        verified.stx_dev_minor != named.stx_dev_minor)
        fail(report_fd, CG_STEP_EXEC_PATH, ESTALE);
}

CG_CHILD_CODE _Noreturn void cg_child_run(const struct cg_child_plan *plan)
{
    int report_fd = plan->report_fd;
    int exec_fd = plan->exec_fd;
    int hold_fd = plan->hold_fd;

    join_groups(plan, report_fd);
    own_session_and_fds(plan, &report_fd, &exec_fd, &hold_fd);
    reset_signal_dispositions();
    set_pid_and_limits(plan, report_fd);
    enter_view_and_credentials(plan, report_fd);
    set_surroundings(plan, report_fd);
    wait_for_go(hold_fd);
    if (plan->exec_path)
        check_exec_path(plan->exec_path, exec_fd, report_fd);
    lock_down(plan, report_fd);

    if (plan->exec_path)
        syscall(SYS_execve, plan->exec_path, plan->argv, plan->envp);
    else
        syscall(SYS_execveat, exec_fd, "", plan->argv, plan->envp, AT_EMPTY_PATH);
    fail(report_fd, CG_STEP_EXEC, errno);
}
