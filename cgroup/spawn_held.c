/* A held spawn (cgroup.h: cg_spawn_hold). The child is cloned as cg_spawn
 * clones it, borrowing our memory until its exec (clone3 with CLONE_VM |
 * CLONE_VFORK, which suspends only the calling thread), but from a thread
 * of its own: that thread waits out the hold, the caller goes on at once.
 * Copying our memory instead costs more than the child's whole setup (a
 * millisecond for a daemon of 17 MB here), and sharing it without the
 * vfork would let the child write the caller's errno.
 *
 * Since the child reads its plan while the caller goes on, everything the
 * plan points to is copied here into one block the held spawn owns, kept
 * until the spawner thread is joined: the child has exec'd or exited by
 * then. The words a failure report needs are copied too. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/spawn_internal.h"
#include "common/cleanup.h"

struct cg_held_spawn {
    cg_leaf *leaf;
    struct cg_spawn_setup setup; /* the plan, and what it owns */
    char *copies;                /* everything else the plan points to */
    cg_spawn_method method;
    pthread_t spawner;
    pid_t announced_pid;         /* written by the kernel at the clone */
    bool spawner_done;           /* set by the spawner as it returns */
    /* The spawner's result, read once it is joined. */
    pid_t pid;
    int pidfd;
    act_error clone_err;
    int hold_write; /* a byte lets the child exec; its end makes the child exit */
    struct cg_spawn_facts facts;
    char exec_name[PATH_MAX];
};

/* ---- the plan's own copies ------------------------------------------------ */

typedef struct copier {
    char *at;      /* NULL while sizing */
    size_t needed; /* bytes, sizing and copying alike */
} copier;

static void *copy_bytes(copier *c, const void *src, size_t n)
{
    size_t align = alignof(max_align_t);
    size_t start = (c->needed + align - 1) / align * align;
    c->needed = start + n;
    if (!c->at)
        return NULL;
    void *dst = c->at + start;
    if (n)
        memcpy(dst, src, n);
    return dst;
}

static const char *copy_string(copier *c, const char *s)
{
    return s ? copy_bytes(c, s, strlen(s) + 1) : NULL;
}

static char *const *copy_strv(copier *c, char *const *strv, const char *keep_lo,
                              const char *keep_hi)
{
    if (!strv)
        return NULL;
    size_t n = 0;
    while (strv[n])
        n++;
    char **copy = copy_bytes(c, strv, (n + 1) * sizeof(*strv));
    for (size_t i = 0; i < n; i++) {
        /* Entries inside [keep_lo, keep_hi) are the setup's own (the
         * environment's LISTEN_* and pid entries, which the child fills). */
        bool own = strv[i] >= keep_lo && strv[i] < keep_hi;
        const char *s = own ? strv[i] : copy_string(c, strv[i]);
        if (copy)
            copy[i] = (char *)s;
    }
    return copy;
}

/* Points plan at copies of everything it points to but the setup's own
 * memory; sizes first (c->at NULL), then copies. */
static void copy_plan(copier *c, struct cg_child_plan *plan, const struct cg_spawn_setup *setup)
{
    const char *env_lo = setup->env_block, *env_hi = env_lo + setup->env_bytes;
    char *const *argv = copy_strv(c, plan->argv, NULL, NULL);
    char *const *envp = copy_strv(c, plan->envp, env_lo, env_hi);
    const cg_rlimit *rlimits = copy_bytes(c, plan->rlimits, plan->n_rlimits * sizeof(cg_rlimit));
    const gid_t *groups = copy_bytes(c, plan->groups, plan->n_groups * sizeof(gid_t));
    struct cg_view_op *ops =
        copy_bytes(c, plan->view_ops, plan->n_view_ops * sizeof(struct cg_view_op));
    for (size_t i = 0; i < plan->n_view_ops; i++) {
        const char *path = copy_string(c, plan->view_ops[i].path);
        if (ops)
            ops[i].path = path;
    }
    const char *working_directory = copy_string(c, plan->working_directory);
    const char *exec_path = copy_string(c, plan->exec_path);
    const char *journal_header = copy_bytes(c, plan->journal_header, plan->journal_header_len);
    struct sock_fprog *seccomp = NULL;
    const struct sock_filter *filter = NULL;
    if (plan->seccomp) {
        seccomp = copy_bytes(c, plan->seccomp, sizeof(*plan->seccomp));
        filter = copy_bytes(c, plan->seccomp->filter,
                            plan->seccomp->len * sizeof(struct sock_filter));
    }
    if (!c->at)
        return;
    plan->argv = argv;
    plan->envp = envp;
    plan->rlimits = rlimits;
    plan->groups = groups;
    plan->view_ops = ops;
    plan->working_directory = working_directory;
    plan->exec_path = exec_path;
    plan->journal_header = journal_header;
    if (seccomp) {
        seccomp->filter = (struct sock_filter *)filter;
        plan->seccomp = seccomp;
    }
    /* The environment's pid digits point into the setup's block, which
     * stays where it is. */
}

/* ---- the spawner thread ---------------------------------------------------- */

static void wake_caller(cg_held_spawn *held)
{
    syscall(SYS_futex, &held->announced_pid, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Sleeps until the kernel has named the child's pid (the child wakes us as
 * it starts) or the spawner has returned. A spin here took a CPU from the
 * spawner thread it waits for: on a busy two-core box the wait grew from
 * about 0.1 ms to over 1 ms. The timeout only bounds a wake-up lost between
 * the spawner's "done" and our sleep on a word that stayed 0. */
static void wait_for_pid(cg_held_spawn *held)
{
    const struct timespec bound = {.tv_nsec = 1000 * 1000};
    while (!__atomic_load_n(&held->announced_pid, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&held->spawner_done, __ATOMIC_ACQUIRE))
        syscall(SYS_futex, &held->announced_pid, FUTEX_WAIT_PRIVATE, 0, &bound, NULL, 0);
}

static void *spawner_main(void *data)
{
    cg_held_spawn *held = data;
    /* Returns once the child has exec'd or exited (it shares our memory
     * until then), or at once on the paths that copy it. */
    held->pid = cg_spawn_clone(held->leaf, &held->setup.plan, held->method, &held->pidfd,
                               &held->clone_err);
    __atomic_store_n(&held->spawner_done, true, __ATOMIC_RELEASE);
    /* The paths that copy memory return here before the child runs far,
     * and a failed clone names no pid: either way, the caller wakes. */
    wake_caller(held);
    return NULL;
}

static void held_free(cg_held_spawn *held)
{
    if (held->pidfd >= 0)
        close(held->pidfd);
    if (held->hold_write >= 0)
        close(held->hold_write);
    if (held->setup.plan.hold_fd >= 0)
        close(held->setup.plan.hold_fd);
    cg_spawn_setup_clear(&held->setup);
    free(held->copies);
    free(held);
}

/* Waits for the spawner: the child has exec'd or exited (or was never
 * made). Our end of the report pipe closes, so that a read of it ends with
 * the child's exec. */
static void join_spawner(cg_held_spawn *held)
{
    pthread_join(held->spawner, NULL);
    if (held->setup.report_write >= 0)
        close(TAKE_FD(held->setup.report_write));
}

int cg_spawn_hold(cg_leaf *leaf, const cg_spawn_spec *spec, cg_held_spawn **out, act_error *err)
{
    cg_held_spawn *held = calloc(1, sizeof(*held));
    if (!held)
        return act_error_set(err, ENOMEM, "out of memory");
    held->leaf = leaf;
    held->pidfd = held->hold_write = -1;
    held->setup.plan.hold_fd = -1;
    int r = cg_spawn_setup_make(leaf, spec, &held->setup, err);
    if (r < 0) {
        held->setup.plan.hold_fd = -1;
        held_free(held);
        return r;
    }
    struct cg_child_plan *plan = &held->setup.plan;
    plan->hold_fd = -1;
    copier sizing = {0};
    copy_plan(&sizing, plan, &held->setup);
    if (!(held->copies = malloc(sizing.needed ? sizing.needed : 1))) {
        held_free(held);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    copier copying = {.at = held->copies};
    copy_plan(&copying, plan, &held->setup);

    held->facts = cg_spawn_facts_of(spec, plan);
    held->facts.working_directory = plan->working_directory; /* the copies' */
    held->facts.view_ops = plan->view_ops;
    cg_spawn_describe_fd(spec->exec_fd, held->exec_name, sizeof(held->exec_name));
    held->facts.exec_name = held->exec_name;

    int hold_pipe[2];
    if (pipe2(hold_pipe, O_CLOEXEC) < 0) {
        held_free(held);
        return act_error_set(err, errno, "cannot create the hold pipe: %s", strerror(errno));
    }
    plan->hold_fd = hold_pipe[0];
    held->hold_write = hold_pipe[1];
    plan->announce_pid = &held->announced_pid;
    held->method = spec->method;
    held->pid = -1;
    if ((r = pthread_create(&held->spawner, NULL, spawner_main, held)) != 0) {
        held_free(held);
        return act_error_set(err, r, "cannot start a thread to spawn from: %s", strerror(r));
    }
    /* The child has its copy of our fds once the kernel names its pid: the
     * caller may close or reuse them from then on. A clone that failed is
     * said now. */
    wait_for_pid(held);
    if (!__atomic_load_n(&held->announced_pid, __ATOMIC_ACQUIRE)) {
        join_spawner(held);
        *err = held->clone_err;
        r = held->pid < 0 ? held->pid : -EIO;
        held_free(held);
        return r;
    }
    *out = held;
    return 0;
}

pid_t cg_held_pid(const cg_held_spawn *held)
{
    return __atomic_load_n(&held->announced_pid, __ATOMIC_ACQUIRE);
}

int cg_held_release(cg_held_spawn *held, cg_process *out, act_error *err)
{
    /* EPIPE when the child already failed: its report says why. */
    while (write(held->hold_write, "x", 1) < 0 && errno == EINTR)
        ;
    join_spawner(held);
    int r = held->pid;
    if (r < 0) {
        *err = held->clone_err;
    } else {
        r = cg_spawn_await_exec(held->leaf, held->setup.report_read, held->pidfd, &held->facts,
                                err);
        if (r == 0) {
            out->pid = held->pid;
            out->pidfd = TAKE_FD(held->pidfd);
        }
    }
    held_free(held);
    return r;
}

void cg_held_abandon(cg_held_spawn *held)
{
    if (!held)
        return;
    /* The child, at its hold or on its way there, reads the pipe's end
     * and exits: it never ran anything but our code. */
    close(TAKE_FD(held->hold_write));
    join_spawner(held);
    if (held->pid > 0) {
        siginfo_t info;
        while (waitid(P_PIDFD, (id_t)held->pidfd, &info, WEXITED) < 0 && errno == EINTR)
            ;
    }
    held_free(held);
}
