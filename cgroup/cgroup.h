/* The process layer: cgroup leaves per generation, spawning into them, and
 * killing them with proof that nothing is left.
 *
 * Layout under the activator's cgroup root (docs/formats.md):
 *   <root>/supervisor            the daemon itself, when the root is "auto"
 *   <root>/log-keeper            the daemon's log keeper (cg_root_place_process)
 *   <root>/hosts/<host>/<leaf>   one leaf per generation ("g-7") or helper ("restore-7")
 *
 * Processes only ever live in leaves, so every inner node may carry enabled
 * controllers (cgroup v2's "no internal processes" rule). On a hybrid host the
 * limits that v2 cannot enforce go to the v1 controllers (memory, pids, cpu)
 * through libcgroup, in the same path relative to each v1 mount, and spawned
 * processes join those v1 groups before they exec.
 *
 * Everything here is usable from a single-threaded event loop (sd-event): the
 * pidfd of a spawned process and the leaf's events fd are pollable, and the
 * checks behind them never block. The *_blocking and *_wait helpers block and
 * exist for tests and the CLI.
 *
 * Objects are not thread-safe; one thread owns them. A cg_leaf borrows its
 * cg_root, which must outlive it. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "common/cleanup.h"
#include "common/error.h"

typedef struct cg_root cg_root;
typedef struct cg_leaf cg_leaf;
typedef struct cg_seccomp_program cg_seccomp_program;
typedef struct cg_fs_view cg_fs_view;

/* ---- the root of the activator's subtree ---- */

/* Opens (creating what is missing) the activator's cgroup subtree and its
 * "hosts" node, and enables every controller the root offers down to the
 * host nodes so leaves can carry limits.
 *
 * path_or_auto:
 *   "auto"   the process's own cgroup, which systemd's Delegate=yes hands to
 *            the daemon. The caller moves itself into "<own>/supervisor"
 *            first, because a cgroup that holds processes cannot enable
 *            controllers for its children. A process already in a
 *            "supervisor" leaf (a second open) uses the parent. Refused when
 *            the process sits in the cgroup2 root: that is the whole machine.
 *   "/sys/fs/cgroup/activator"  an absolute path under the cgroup2 mount,
 *   "activator.slice/activator" or a path relative to that mount.
 * The cgroup2 mount and the v1 controller mounts are found in
 * /proc/self/mountinfo, never assumed. */
int cg_root_open(const char *path_or_auto, cg_root **out, act_error *err);

/* Creates a fresh, uniquely named root below the caller's own cgroup
 * ("<own>/<label>-<pid>-<random>") for tests and benchmarks, so they never
 * touch a cgroup they did not create. */
int cg_root_create_throwaway(const char *label, cg_root **out, act_error *err);

/* Removes a root made by cg_root_create_throwaway and everything below it in
 * the v2 and v1 hierarchies: populated leaves are killed with proof first,
 * then every directory is removed bottom-up. Fails with -EPERM for a root
 * that was opened rather than created, because its subtree is not ours to
 * delete. Frees root in every case; returns -EBUSY when something stayed. */
int cg_root_destroy_throwaway(cg_root *root, act_error *err);

/* Frees the handle; the cgroups stay (generations outlive the daemon). */
void cg_root_free(cg_root *root);
DEFINE_TRIVIAL_CLEANUP_FUNC(cg_root *, cg_root_free)

/* Moves process pid into <root>/<node>, a leaf of the root's own beside
 * hosts/ and supervisor/ (made when missing): for a process of the daemon's
 * that outlives it as the generations do, and dies with the root (the log
 * keeper). Its v1 groups stay the caller's. */
int cg_root_place_process(cg_root *root, const char *node, pid_t pid, act_error *err);
/* Removes <root>/<node>; fails with -EBUSY while a process is in it. */
int cg_root_remove_node(cg_root *root, const char *node, act_error *err);

/* The root's absolute v2 path, for logs and operators. */
const char *cg_root_path(const cg_root *root);
/* Where the cgroup2 hierarchy is mounted (from /proc/self/mountinfo): its
 * top's files (memory.pressure) are the whole box's. */
const char *cg_root_v2_mount(const cg_root *root);

/* ---- limits ---- */

/* Resource limits of a leaf; 0 leaves a limit unset. A set limit that this
 * host cannot enforce (no v2 controller enabled and no v1 hierarchy for it)
 * fails the leaf's creation instead of being dropped silently. MemoryHigh has
 * no v1 equivalent and therefore needs the v2 memory controller. */
typedef struct cg_limits {
    uint64_t memory_max;        /* bytes: memory.max / v1 memory.limit_in_bytes */
    uint64_t memory_high;       /* bytes: memory.high (v2 only) */
    uint64_t pids_max;          /* tasks: pids.max */
    uint32_t cpu_quota_percent; /* 200 = two CPUs: cpu.max / v1 cfs_quota_us */
    uint32_t cpu_weight;        /* 1..10000, 100 is the default: cpu.weight / v1 cpu.shares */
} cg_limits;

/* Whether this host can enforce limits: every set limit has a v2 controller
 * enabled for leaves or a v1 hierarchy, MemoryHigh has the v2 memory
 * controller, and the values are in range. What cg_leaf_create and
 * cg_leaf_set_limits check first, for a caller that must know before it
 * changes anything. */
int cg_limits_check(const cg_root *root, const cg_limits *limits, act_error *err);

/* Whether the set limits all go to v2 controllers, which a process joins as
 * it is cloned (CLONE_INTO_CGROUP) at no cost. A limit that goes to a v1
 * hierarchy instead (a hybrid host) is joined by the child writing its pid
 * before it execs: a migration, for which the kernel waits out an RCU grace
 * period (several milliseconds) unless the hierarchies are mounted with
 * favordynmods. */
bool cg_limits_free_at_spawn(const cg_root *root, const cg_limits *limits);

/* ---- leaves ---- */

/* Creates <root>/hosts/<host>/<leaf_name> in v2 (and its v1 mirrors on a
 * hybrid host) with limits (NULL: none). Both names must pass act_name_check,
 * because they become path components. An existing leaf is refused with
 * -EEXIST: a generation number names one start only. On failure nothing is
 * left behind. */
int cg_leaf_create(cg_root *root, const char *host, const char *leaf_name,
                   const cg_limits *limits, cg_leaf **out, act_error *err);

/* Opens an existing leaf without touching its limits: the base of recovery
 * after a daemon restart, whose generations kept running. */
int cg_leaf_open(cg_root *root, const char *host, const char *leaf_name, cg_leaf **out,
                 act_error *err);

/* Rewrites a running leaf's limits, as systemctl set-property does: each
 * limit is written, an unset one (0) as the cgroup's default, so that a
 * limit taken out of the configuration is lifted. The v2 files where the
 * controller is enabled for leaves; on a hybrid host the v1 mirrors through
 * libcgroup, and a mirror the leaf lacks (v1 cpu is made only for a cpu
 * limit) is made and the leaf's processes moved into it. Checked as
 * cg_leaf_create checks first. A write the kernel refuses (a v1
 * memory.limit_in_bytes below what the leaf uses) fails with the limits
 * written before it left in place. */
int cg_leaf_set_limits(cg_leaf *leaf, const cg_limits *limits, act_error *err);

/* The leaf's absolute v2 path, and its path in the v1 hierarchy of
 * controller ("memory", "pids", "cpu") or NULL when that controller is not
 * handled through v1 for this root. */
const char *cg_leaf_path(const cg_leaf *leaf);
/* The leaf's path relative to the cgroup2 mount, without a leading '/':
 * what /proc/<pid>/cgroup shows (after "0::/") for a process inside it. */
const char *cg_leaf_relative_path(const cg_leaf *leaf);
const char *cg_leaf_v1_path(const cg_leaf *leaf, const char *controller);
const char *cg_leaf_host(const cg_leaf *leaf);
const char *cg_leaf_name(const cg_leaf *leaf);

/* Removes the leaf's directories (v2 and v1), then the host node when this
 * was its last leaf. Fails with -EBUSY while processes remain: kill with
 * proof first; the handle then stays fully usable. After a successful
 * removal only the name and path getters and cg_leaf_free remain. */
int cg_leaf_remove(cg_leaf *leaf, act_error *err);

/* Frees the handle; the cgroup itself stays. */
void cg_leaf_free(cg_leaf *leaf);
DEFINE_TRIVIAL_CLEANUP_FUNC(cg_leaf *, cg_leaf_free)

/* ---- spawning ---- */

/* One setrlimit the child applies before exec. */
typedef struct cg_rlimit {
    int resource; /* RLIMIT_NOFILE, ... */
    struct rlimit limit;
} cg_rlimit;

#define CG_ID_UNSET ((uint32_t)-1)

/* What a spawned process gets. Everything is copied or prepared in the
 * parent before clone3, because the child may only run async-signal-safe
 * code until it execs (no malloc, no stdio, no libseccomp, no NNG).
 * Fill it with cg_spawn_spec_init first, which sets the defaults noted. */
/* How cg_spawn makes the process. CG_SPAWN_AUTO takes the first that works:
 * clone3 sharing our memory until the exec (x86-64), clone3 copying it, and
 * fork + cgroup.procs + pidfd_open on kernels that refuse CLONE_INTO_CGROUP.
 * The others force one path, so tests can run each on any machine. */
typedef enum cg_spawn_method {
    CG_SPAWN_AUTO = 0,
    CG_SPAWN_CLONE3_COPY,
    CG_SPAWN_FORK,
} cg_spawn_method;

/* The most pid_variables one spawn takes. */
#define CG_PID_VARIABLES_MAX 4

typedef struct cg_spawn_spec {
    int exec_fd;              /* opened, verified executable; run with execveat(AT_EMPTY_PATH) */
    /* Keep exec_fd open in the exec'd program. Needed to run a "#!" script
     * from an fd (the interpreter opens it as /dev/fd/N), at the cost of that
     * one read-only fd leaking into the program. Operator-installed helpers
     * (ExecRestore=) may be scripts; staged builds are run without it. */
    bool exec_fd_survives;
    /* With exec_fd: run the program by this path instead, once the path is
     * found, just before the exec, to name exec_fd's very file (device and
     * inode): a "#!" script then has its own path as $0 and finds its
     * build's files beside it, while what runs is still what was verified.
     * The path must be reachable in the process's view. NULL: execveat. */
    const char *exec_path;
    const char *const *argv;  /* argv[0] required, NULL-terminated */
    const char *const *envp;  /* NULL-terminated or NULL; LISTEN_* entries are replaced */
    int stdout_fd;            /* -1 (default): /dev/null */
    int stderr_fd;            /* -1 (default): /dev/null */
    const int *listen_fds;    /* become fds 3.. in order, with LISTEN_FDS/LISTEN_PID */
    size_t n_listen_fds;
    const char *const *listen_fdnames; /* n_listen_fds names or NULL; joined with ':' */
    /* Names of variables whose value is the child's own pid, as LISTEN_PID's
     * is ("WATCHDOG_PID"): nobody knows that pid before the clone, so the
     * child writes it. NULL-terminated, at most CG_PID_VARIABLES_MAX, or
     * NULL; envp entries with these names are replaced. */
    const char *const *pid_variables;
    uint32_t uid, gid;        /* CG_ID_UNSET (default): keep ours */
    const gid_t *groups;      /* supplementary groups, applied when gid is set */
    size_t n_groups;
    const char *working_directory; /* NULL: stay where the daemon is */
    mode_t umask;             /* default 0022 */
    const cg_rlimit *rlimits;
    size_t n_rlimits;
    /* No capabilities: bounding, inheritable, permitted, effective and
     * ambient sets cleared but for ambient_capabilities (1 << CAP_*, kept
     * across the uid change and raised as ambient, so the program starts
     * with exactly those), and the securebits locked so that uid 0 gets
     * nothing from an exec (SECBIT_NOROOT) and no uid change or keep-caps
     * switch can bring any back. Needs CAP_SETPCAP (a root parent). */
    bool drop_capabilities;
    uint64_t ambient_capabilities;
    /* Root only in a user namespace of its own: the child takes gid and
     * uid (neither 0) on the box, then makes a new user namespace that maps
     * its uid 0 to uid and its gid 0 to gid, one id each, and becomes 0
     * there. It is root to itself, but the kernel checks its signals,
     * files and /proc writes against uid, so it reaches nothing of the
     * box's root. Capabilities in that namespace reach nothing of the box,
     * so ambient_capabilities must be 0; drop_capabilities is required.
     * The filesystem view, IPC and network namespaces are made first,
     * owned by the box's root, which the process cannot undo. */
    bool root_in_user_namespace;
    bool no_new_privs;        /* PR_SET_NO_NEW_PRIVS; required for seccomp with a non-root uid */
    const cg_seccomp_program *seccomp; /* NULL: no filter */
    /* A pidfd (or nsfd) of a process whose mount namespace the child joins
     * (setns CLONE_NEWNS) right after it joins the leaf, before anything
     * that resolves a path: how a probe or helper sees the files its
     * generation sees. -1 (default): stay in ours. */
    int join_mount_ns_fd;
    /* An IPC namespace of its own (SysV shared memory, semaphores and
     * message queues, POSIX message queues), which the kernel frees with
     * everything in it when its last process ends; with join_mount_ns_fd,
     * that process's IPC namespace is joined as well (the pidfd names
     * both). false: the daemon's. */
    bool private_ipc;
    /* A network namespace of its own with only loopback, up: no route out
     * and no abstract unix socket of the box's; the sockets passed in
     * (listen_fds) still serve, being the box's. Not with join_mount_ns_fd
     * (a probe stays in the box's network, where the host's sockets are). */
    bool private_network;
    /* A journald stream for stdout and stderr, connected by the child
     * itself once it runs as uid (so journald records the child's pid,
     * uid and cgroup, never ours): the stream socket's path
     * ("/run/systemd/journal/stdout") and the header of its protocol
     * (identifier, unit, priority, level prefix and forwarding lines).
     * When the connect fails (journald gone, its backlog full: the connect
     * never waits) stdout_fd and stderr_fd stay as they are. NULL: none. */
    const char *journal_socket;
    const char *journal_header;
    /* With journal_socket: the stream takes stderr only, and stdout stays
     * stdout_fd (a helper's answer, read by the daemon). */
    bool journal_stderr_only;
    /* The filesystem the process sees (see cg_fs_view_new); NULL: the
     * daemon's own. fs_passed: with a view, paths beneath its hidden
     * directories that this one process still reaches as they are (its
     * notify socket), NULL-terminated or NULL. Not with join_mount_ns_fd:
     * a process gets a view of its own or joins another's. */
    const cg_fs_view *fs_view;
    const char *const *fs_passed;
    /* With a view, paths beneath its hidden directories that this one
     * process may read but never write, whatever the box allows (the
     * build it runs: a "#!" interpreter or libraries inside the build are
     * opened by path). NULL-terminated or NULL. */
    const char *const *fs_read_only;
    /* Tests only: force a slower path that is otherwise taken only where
     * the fast one is missing (see cg_spawn_method). */
    cg_spawn_method method;
} cg_spawn_spec;

void cg_spawn_spec_init(cg_spawn_spec *spec);

/* A spawned process. The caller owns pidfd: poll it (readable on exit),
 * reap with waitid(P_PIDFD), signal with pidfd_send_signal, close it. */
typedef struct cg_process {
    pid_t pid;
    int pidfd;
} cg_process;

/* Starts spec's executable inside leaf: clone3(CLONE_PIDFD |
 * CLONE_INTO_CGROUP), or fork + cgroup.procs + pidfd_open when the kernel
 * refuses that; on a hybrid host the child joins the leaf's v1 groups before
 * anything else. Returns once the child has exec'd or failed: a failure in
 * the child (exec of a missing, non-executable or truncated file, chdir,
 * setuid, seccomp, ...) comes back here through a CLOEXEC pipe as that step's
 * errno with a sentence naming it, and the failed child is already reaped.
 * No PR_SET_PDEATHSIG: a generation must outlive a daemon restart. */
int cg_spawn(cg_leaf *leaf, const cg_spawn_spec *spec, cg_process *out, act_error *err);

/* A child made ready to run and held just before its exec: cg_spawn_hold
 * clones it into leaf (from a thread of its own, which the child borrows
 * our memory from until its exec) and returns once the child has its copy
 * of our fds, while the child joins the leaf's groups, makes its
 * filesystem view, drops its credentials and connects its output, then
 * waits. Only its
 * seccomp filter and the exec are left for cg_held_release, so a caller
 * that must check something first (that the claim is still ours) starts
 * the child beside that check and pays only the exec after it. A failure
 * of the child before the hold is reported by cg_held_release, as
 * cg_spawn reports it. cg_held_abandon kills and reaps the child (it ran
 * nothing but our code). Either frees held. */
typedef struct cg_held_spawn cg_held_spawn;
int cg_spawn_hold(cg_leaf *leaf, const cg_spawn_spec *spec, cg_held_spawn **out, act_error *err);
int cg_held_release(cg_held_spawn *held, cg_process *out, act_error *err);
void cg_held_abandon(cg_held_spawn *held);
/* The held child's pid, for logs and tests. */
pid_t cg_held_pid(const cg_held_spawn *held);

/* For a process with many open fds (a daemon holding thousands of listening
 * sockets): reserves n low fd numbers, through which each spawn hands its
 * child what it needs, so the child copies only those instead of our whole
 * fd table (a cost per open fd, paid at the clone and again at the exec).
 * Call it early, while fd numbers are low; spawns needing more than n fds,
 * or made while another thread spawns, copy the table as without it. */
int cg_spawn_reserve_fds(size_t n, act_error *err);

/* ---- the filesystem a spawned process sees ---- */

/* A mount namespace of the process's own, made in the child before it drops
 * privileges: the whole tree read-only (recursively, mount_setattr), a few
 * paths kept as the box has them, the daemon's directories hidden, private
 * temporary directories and a /proc that shows the process only the
 * processes it may ptrace. Needs Linux 5.12 (mount_setattr). */
typedef struct cg_fs_view_spec {
    /* Directories replaced by an empty read-only tmpfs: the daemon's state
     * and runtime directories, the releases, the claims. One beneath
     * another is covered by it; one missing at spawn has nothing to hide. */
    const char *const *hidden;
    /* Paths kept as the box has them: writable where the box's mount and
     * the file's mode allow, the only such places besides the private
     * temporary directories. One beneath a hidden directory is bound back
     * into it. A path missing at spawn fails the spawn, naming it; one in
     * writable_if_present is skipped. No symlink is followed on the way to
     * a kept path (its host may be able to write one there): a path with
     * one fails the spawn. Both NULL-terminated or NULL. */
    const char *const *writable;
    const char *const *writable_if_present;
    bool private_tmp;    /* a fresh tmpfs on /tmp, /var/tmp and /dev/shm */
    uint64_t tmp_size;   /* ... each at most this many bytes; 0: tmpfs's own default
                            (half the box's memory) */
    /* A fresh /proc with hidepid=invisible, and in it the kernel's settings
     * (/proc/sys, /proc/sysrq-trigger and the like) read-only: root without
     * capabilities owns them, so only the mount stops it writing them. */
    bool hide_processes;
    /* A fresh /dev with null, zero, full, random, urandom, tty, a pts of
     * its own and the usual symlinks; no disk, no other device. */
    bool private_dev;
} cg_fs_view_spec;

/* The most paths one view takes, all lists together (and fs_passed). */
#define CG_FS_VIEW_PATHS_MAX 128

/* Checks every path (absolute, no "." or ".." component, not "/", not
 * beneath /proc, at most CG_FS_VIEW_PATHS_MAX) and prepares the steps the
 * child takes, in the order that makes each mount land where it should
 * (a parent's before its children's). Errors name the path. */
int cg_fs_view_new(const cg_fs_view_spec *spec, cg_fs_view **out, act_error *err);
void cg_fs_view_free(cg_fs_view *view);
DEFINE_TRIVIAL_CLEANUP_FUNC(cg_fs_view *, cg_fs_view_free)

/* ---- seccomp ---- */

/* Compiles a filter in the parent with libseccomp into a BPF program the
 * child loads with the raw seccomp() syscall. Every list holds system call
 * names and systemd's groups ("@network-io"; systemd-analyze syscall-filter
 * lists them), with systemd's meaning.
 * profile "default": an allow-list, everything else refused with EPERM:
 *   systemd's @system-service without @keyring, io_uring (its operations
 *   would bypass the filter), unshare and setns; allow adds to it, deny
 *   takes off it.
 * profile "allow": the same from an empty allow-list.
 * profile "none": a deny-list: deny refused with EPERM, allow taken off it.
 * Namespaces follow unshare: where it is refused, clone() with a namespace
 * flag is refused too, and clone3 (whose flags BPF cannot read) gets ENOSYS
 * so libc falls back to clone. Unknown names and groups, and a name in both
 * lists, are refused. *out is NULL when the result filters nothing ("none"
 * without deny). */
int cg_seccomp_compile(const char *profile, const char *const *allow, const char *const *deny,
                       cg_seccomp_program **out, act_error *err);
/* Calls each with every system call of this architecture that name is, or
 * that the group name ("@process") holds. Returns -ENOENT for an unknown
 * group, -EINVAL for an unknown call, or what each returned (stopping at a
 * negative one). */
int cg_seccomp_expand(const char *name, int (*each)(const char *call, void *data), void *data);
void cg_seccomp_program_free(cg_seccomp_program *program);
DEFINE_TRIVIAL_CLEANUP_FUNC(cg_seccomp_program *, cg_seccomp_program_free)

/* ---- kill with proof, for an event loop ---- */

/* Starts killing every process in the leaf: cgroup.kill, or where the kernel
 * lacks it, freeze + SIGKILL each pid in cgroup.procs + thaw. Returns at
 * once; emptiness is proven by cgroup.events, see below. */
int cg_leaf_kill_start(cg_leaf *leaf, act_error *err);

/* An fd (the leaf's cgroup.events) that signals CG_LEAF_EVENTS_POLL when the
 * leaf's populated or frozen state may have changed. Owned by the leaf;
 * register it with the event loop for CG_LEAF_EVENTS_POLL alone (it is
 * always readable, so POLLIN would fire at once) and call cg_leaf_populated
 * or cg_leaf_frozen when it fires. */
#define CG_LEAF_EVENTS_POLL POLLPRI
int cg_leaf_events_fd(cg_leaf *leaf, act_error *err);

/* Reads "populated" from cgroup.events without blocking. The read
 * acknowledges the change it sees, so a change after it always signals the
 * events fd again and an edge is never lost. */
int cg_leaf_populated(cg_leaf *leaf, bool *populated, act_error *err);

/* ---- the freezer (ParkMode=freeze) ---- */

/* Writes cgroup.freeze: 1 starts freezing every process of the leaf, 0 thaws
 * it. Freezing is not done when this returns: cg_leaf_frozen says when,
 * and the events fd above becomes readable when it changes. Processes
 * already frozen still die of cgroup.kill (cg_leaf_kill_start). */
int cg_leaf_freeze(cg_leaf *leaf, bool freeze, act_error *err);
/* Reads "frozen" from cgroup.events without blocking, draining the events
 * fd first as cg_leaf_populated does. -EOPNOTSUPP on a kernel without the
 * v2 freezer. */
int cg_leaf_frozen(cg_leaf *leaf, bool *frozen, act_error *err);

/* Blocking: waits for populated 0 through the events fd, bounded by
 * timeout_usec. Returns 0 when proven empty, -ETIMEDOUT when not proven
 * (with err saying so); never a sleep loop. */
int cg_leaf_wait_empty(cg_leaf *leaf, uint64_t timeout_usec, act_error *err);

/* Blocking: kill_start, then wait_empty. 0 = proven empty, -ETIMEDOUT = not
 * proven, other negative errno = could not even try. */
int cg_leaf_kill_and_wait(cg_leaf *leaf, uint64_t timeout_usec, act_error *err);

/* Blocking retire of a generation: SIGTERM to the main process through
 * pidfd_send_signal (pidfd -1: none known, e.g. after a restart), up to
 * grace_usec for it to exit, then kill with proof bounded by
 * kill_timeout_usec. Leftovers of a main process that exited in time are
 * killed at once, because nothing else would ever stop them. Returns as
 * cg_leaf_kill_and_wait. The caller still reaps its child through pidfd. */
int cg_retire_blocking(cg_leaf *leaf, int pidfd, uint64_t grace_usec, uint64_t kill_timeout_usec,
                       act_error *err);

/* Tests only: make cg_leaf_kill_start use the freeze + SIGKILL + thaw path
 * even where cgroup.kill exists. */
void cg_leaf_force_kill_fallback(cg_leaf *leaf, bool force);

/* ---- stats ---- */

typedef struct cg_stats {
    bool has_memory;          /* false when no memory accounting covers the leaf */
    uint64_t memory_current;  /* bytes: memory.current or v1 memory.usage_in_bytes */
    uint64_t oom_kills;       /* memory.events or v1 memory.oom_control "oom_kill" */
    bool has_pids;
    uint64_t pids_current;    /* pids.current */
    uint64_t cpu_usage_usec;  /* v2 cpu.stat usage_usec (the cgroup core always has it) */
} cg_stats;

int cg_leaf_stats(cg_leaf *leaf, cg_stats *stats, act_error *err);

/* ---- recovery ---- */

/* A process found in an existing leaf, with a pidfd proven to refer to it. */
typedef struct cg_found_process {
    pid_t pid;
    int pidfd; /* take it by setting -1; the rest are closed after the callback */
} cg_found_process;

/* Called once per leaf; a negative return stops the walk and is returned. */
typedef int (*cg_enumerate_fn)(const char *host, const char *leaf_name, cg_found_process *procs,
                               size_t n_procs, void *userdata);

/* Walks <root>/hosts/<host>/<leaf> (generations "g-N" and helper leaves),
 * opening a pidfd for each process in it. Directories whose names fail
 * act_name_is_valid are logged and skipped: we never created them. */
int cg_enumerate(cg_root *root, cg_enumerate_fn fn, void *userdata, act_error *err);
