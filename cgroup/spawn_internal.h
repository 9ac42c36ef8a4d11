/* The plan a spawned child carries out between clone3 and exec. The parent
 * prepares every byte of it; the child only reads it and makes syscalls. */
#pragma once

#include <assert.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "cgroup/internal.h"

enum cg_child_step {
    CG_STEP_JOIN_V1 = 1,
    CG_STEP_JOIN_V2,
    CG_STEP_JOIN_MOUNT_NS,
    CG_STEP_IPC_NS,
    CG_STEP_NET_NS,
    CG_STEP_SETSID,
    CG_STEP_FDS,
    CG_STEP_SIGNALS,
    CG_STEP_RLIMIT,
    CG_STEP_FS_VIEW,
    CG_STEP_SETGROUPS,
    CG_STEP_SETGID,
    CG_STEP_SETUID,
    CG_STEP_USER_NS,
    CG_STEP_CAP_BOUNDING,
    CG_STEP_CAPS,
    CG_STEP_CHDIR,
    CG_STEP_NO_NEW_PRIVS,
    CG_STEP_SECCOMP,
    CG_STEP_EXEC_PATH,
    CG_STEP_EXEC,
};

/* What a failed child writes to the report pipe before it exits. */
struct cg_child_report {
    int32_t step;
    int32_t error;
    int32_t detail; /* CG_STEP_FS_VIEW: the view step that failed (see below) */
};

/* The child writes the report with one write() and the parent reads it back
 * as bytes: no padding may hide in it, and a pipe write of at most PIPE_BUF
 * bytes arrives whole. */
static_assert(sizeof(struct cg_child_report) == 3 * sizeof(int32_t),
              "cg_child_report has padding");
static_assert(sizeof(struct cg_child_report) <= PIPE_BUF,
              "cg_child_report does not fit one atomic pipe write");

/* One mount step of a filesystem view: fs_view.c prepares them in the
 * order the child takes them, fs_view_child.c takes them. */
enum cg_view_kind {
    /* Ties on one path go in this order, so a hidden directory or a
     * private tmpfs ends on top of a kept path of the same name. */
    CG_VIEW_KEEP,  /* bind back the tree cloned before anything changed */
    CG_VIEW_TMPFS, /* a fresh writable tmpfs: a private /tmp */
    CG_VIEW_HIDE,  /* an empty tmpfs, read-only once what is kept beneath it is in place */
    CG_VIEW_PROC,  /* a fresh /proc showing only the processes we may ptrace, its
                      kernel settings read-only */
    CG_VIEW_DEV,   /* a fresh /dev holding only the harmless devices, read-only once
                      what is mounted beneath it is in place */
};

/* The ops a view adds of its own, beside the paths it is given: /tmp,
 * /var/tmp, /dev/shm, /proc and /dev. */
#define CG_FS_VIEW_OWN_OPS 5

struct cg_view_op {
    const char *path;
    uint8_t kind;
    bool if_present;  /* a missing path (or KEEP source) is skipped, not a failure */
    bool make_target; /* beneath a tmpfs of this view: create the mount point and its parents */
    bool read_only;   /* KEEP: the clone is made read-only before it is attached */
    const char *options; /* TMPFS: the mount's data ("mode=01777,size=...") */
};

/* cg_child_report.detail for the view steps that are not one op. */
enum {
    CG_VIEW_FAILED_UNSHARE = -1,
    CG_VIEW_FAILED_PRIVATE = -2,
    CG_VIEW_FAILED_READ_ONLY = -3,
};

/* The ops of view with fs_passed and fs_read_only merged in, in the child's order: the
 * view's own array when nothing is passed (*owned NULL), else a malloc'd
 * one in *owned. fs_view.c. */
int cg_fs_view_plan(const cg_fs_view *view, const char *const *passed,
                    const char *const *read_only, const struct cg_view_op **ops, size_t *n_ops, struct cg_view_op **owned,
                    act_error *err);

/* What op is, for an error message: "a hidden directory". */
const char *cg_view_op_sentence(const struct cg_view_op *op);

/* Makes the mount namespace and takes every op; 0, or an errno with the
 * failed op's index (or a CG_VIEW_FAILED_*) in *failed. fs_view_child.c. */
int cg_child_enter_view(const struct cg_view_op *ops, size_t n_ops, int32_t *failed);

struct cg_child_plan {
    int v1_procs_fds[CG_CONTROLLER_COUNT]; /* -1: none */
    int v2_procs_fd;      /* fork fallback only: the child moves itself; else -1 */
    const int *fd_sources; /* become fds 0..n_fds-1: stdin, stdout, stderr, listen fds */
    int *fd_scratch;      /* n_fds ints the child may write (its copy of the memory) */
    size_t n_fds;
    int exec_fd;
    int join_mount_ns_fd; /* -1: none; see cg_spawn_spec */
    bool journal_stderr_only; /* see cg_spawn_spec */
    bool private_ipc;     /* see cg_spawn_spec */
    bool private_network; /* see cg_spawn_spec */
    bool exec_fd_survives; /* left open across exec, for a #! script run from it */
    const char *exec_path; /* see cg_spawn_spec */
    int report_fd;        /* write end of the CLOEXEC report pipe */
    /* -1, or the read end of a pipe the child waits on just before its
     * seccomp filter and exec (cg_spawn_hold): a byte lets it go on, the
     * pipe's end makes it exit. */
    int hold_fd;
    /* NULL, or where the kernel writes the child's pid at the clone, for a
     * caller that learns it before the clone returns (a held child's). */
    pid_t *announce_pid;
    /* > 0: the child shares our fd table (CLONE_FILES) and unshares it
     * first, keeping only the fds below this number (see spawn_fds.c). */
    int unshare_fds_below;
    char *const *argv;
    char *const *envp;
    /* Inside envp's "LISTEN_PID=" and pid_variables entries, each with room
     * for 20 digits, which the child fills with its pid. */
    char *pid_digits[CG_PID_VARIABLES_MAX + 1];
    size_t n_pid_digits;
    const cg_rlimit *rlimits;
    size_t n_rlimits;
    const struct cg_view_op *view_ops; /* n_view_ops > 0: a mount namespace of its own */
    size_t n_view_ops;
    bool set_gid;
    gid_t gid;
    const gid_t *groups;
    size_t n_groups;
    bool set_uid;
    uid_t uid;
    bool drop_capabilities;
    uint64_t ambient_capabilities; /* 1 << CAP_*: what survives the drop */
    /* See cg_spawn_spec.root_in_user_namespace: the maps to write, "0 <id>
     * 1", made ready by the parent (the child cannot format). */
    bool root_in_user_namespace;
    char uid_map[32];
    char gid_map[32];
    const char *working_directory;
    mode_t umask;
    bool no_new_privs;
    const struct sock_fprog *seccomp;
    /* See cg_spawn_spec.journal_*: the address and header, ready to send. */
    bool journal;
    struct sockaddr_un journal_address;
    const char *journal_header;
    size_t journal_header_len;
};

/* What a spawn prepares for its child (spawn.c): the plan and what it
 * points into, owned until the child has exec'd, or, for a held child
 * (spawn_held.c, memory copied at the clone), until the clone. */
struct cg_spawn_setup {
    struct cg_child_plan plan;
    int null_fd;
    int *fd_sources;             /* 2 * plan.n_fds: the sources, then the child's scratch */
    void *env_block;             /* plan.envp and its strings */
    size_t env_bytes;
    struct cg_view_op *view_ops; /* merged view ops when the view needed them, else NULL */
    int report_read;             /* the CLOEXEC report pipe */
    int report_write;
};

/* Checks spec and prepares everything the child needs (fds, environment,
 * view, report pipe). On failure what was made is in setup, for clear. */
int cg_spawn_setup_make(cg_leaf *leaf, const cg_spawn_spec *spec, struct cg_spawn_setup *setup,
                        act_error *err);
void cg_spawn_setup_clear(struct cg_spawn_setup *setup);

/* Clones the child into leaf the way method says, with every signal
 * blocked around it; the pid, with its pidfd in *pidfd, or a negative
 * errno with err set. */
pid_t cg_spawn_clone(cg_leaf *leaf, struct cg_child_plan *plan, cg_spawn_method method,
                     int *pidfd, act_error *err);

/* What a failed child's report is explained with: the spec's words. */
struct cg_spawn_facts {
    int exec_fd;
    const char *exec_name; /* NULL: read it from exec_fd */
    const char *working_directory;
    uint32_t uid, gid;
    const struct cg_view_op *view_ops;
    size_t n_view_ops;
};
struct cg_spawn_facts cg_spawn_facts_of(const cg_spawn_spec *spec,
                                        const struct cg_child_plan *plan);
void cg_spawn_describe_fd(int fd, char *buf, size_t size);

/* Waits for the child's exec (its report pipe's end, with the write end
 * closed here): 0; or its failure, reaped, as an error naming the step. */
int cg_spawn_await_exec(cg_leaf *leaf, int report_read, int pidfd,
                        const struct cg_spawn_facts *facts, act_error *err);

/* The fd window (spawn_fds.c). enter dups needed[0..n) into the window's
 * slots, writes the slot numbers to mapped and returns the window's highest
 * fd, with the window held; or returns -1 (no window, too small, or busy),
 * and then the spawn copies the whole table. leave puts the placeholders
 * back into the first used slots and releases the window. */
int cg_fd_window_enter(const int *needed, size_t n, int *mapped);
void cg_fd_window_leave(size_t used);

/* Code that runs in the child: it may be sharing the parent's memory on a
 * borrowed stack, where sanitizer bookkeeping (shadow memory, handlers)
 * must not run. */
#define CG_CHILD_CODE __attribute__((no_sanitize("address", "undefined", "thread")))

/* Runs the plan and execs; on failure reports the step and errno through
 * report_fd and exits 127. Async-signal-safe: raw syscalls only. */
_Noreturn void cg_child_run(const struct cg_child_plan *plan);
