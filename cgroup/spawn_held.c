/* A held spawn (cgroup.h: cg_spawn_hold): the child is cloned with its own
 * copy of our memory, so the daemon goes on at once and nothing the spec
 * points to has to outlive this call, and it waits on a pipe just before
 * its filter and its exec. What a failure report needs (the view's paths,
 * the working directory, the executable's name) is copied here. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/spawn_internal.h"
#include "common/cleanup.h"

struct cg_held_spawn {
    cg_leaf *leaf;
    pid_t pid;
    int pidfd;
    int hold_write;  /* a byte lets the child exec; closing it ends the child */
    int report_read; /* the child's report pipe */
    struct cg_spawn_facts facts;
    struct cg_view_op *view_ops; /* facts.view_ops, with their paths, in one block */
    char exec_name[PATH_MAX];
    char working_directory[PATH_MAX];
};

/* ops with their paths copied after them, in one allocation. */
static struct cg_view_op *copy_view_ops(const struct cg_view_op *ops, size_t n)
{
    size_t bytes = n * sizeof(*ops);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(ops[i].path) + 1;
    struct cg_view_op *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return NULL;
    char *text = (char *)(copy + n);
    for (size_t i = 0; i < n; i++) {
        copy[i] = ops[i];
        size_t len = strlen(ops[i].path) + 1;
        memcpy(text, ops[i].path, len);
        copy[i].path = text;
        text += len;
    }
    return copy;
}

static void held_free(cg_held_spawn *held)
{
    if (held->pidfd >= 0)
        close(held->pidfd);
    if (held->hold_write >= 0)
        close(held->hold_write);
    if (held->report_read >= 0)
        close(held->report_read);
    free(held->view_ops);
    free(held);
}

int cg_spawn_hold(cg_leaf *leaf, const cg_spawn_spec *spec, cg_held_spawn **out, act_error *err)
{
    _cleanup_(cg_spawn_setup_clear) struct cg_spawn_setup setup;
    int r = cg_spawn_setup_make(leaf, spec, &setup, err);
    if (r < 0)
        return r;
    cg_held_spawn *held = calloc(1, sizeof(*held));
    if (!held)
        return act_error_set(err, ENOMEM, "out of memory");
    *held = (cg_held_spawn){.leaf = leaf, .pidfd = -1, .hold_write = -1, .report_read = -1};
    held->facts = cg_spawn_facts_of(spec, &setup.plan);
    if (setup.plan.n_view_ops &&
        !(held->view_ops = copy_view_ops(setup.plan.view_ops, setup.plan.n_view_ops))) {
        held_free(held);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    held->facts.view_ops = held->view_ops;
    cg_spawn_describe_fd(spec->exec_fd, held->exec_name, sizeof(held->exec_name));
    held->facts.exec_name = held->exec_name;
    if (spec->working_directory) {
        snprintf(held->working_directory, sizeof(held->working_directory), "%s",
                 spec->working_directory);
        held->facts.working_directory = held->working_directory;
    }

    int hold_pipe[2];
    if (pipe2(hold_pipe, O_CLOEXEC) < 0) {
        held_free(held);
        return act_error_set(err, errno, "cannot create the hold pipe: %s", strerror(errno));
    }
    held->hold_write = hold_pipe[1];
    setup.plan.hold_fd = hold_pipe[0];
    /* Our memory is copied, never shared: we go on while the child works. */
    cg_spawn_method method = spec->method == CG_SPAWN_AUTO ? CG_SPAWN_CLONE3_COPY : spec->method;
    held->pid = cg_spawn_clone(leaf, &setup.plan, method, &held->pidfd, err);
    close(hold_pipe[0]);
    if (held->pid < 0) {
        r = held->pid;
        held_free(held);
        return r;
    }
    held->report_read = TAKE_FD(setup.report_read);
    *out = held;
    return 0;
}

int cg_held_release(cg_held_spawn *held, cg_process *out, act_error *err)
{
    /* EPIPE when the child already failed: its report says why. */
    ssize_t n;
    while ((n = write(held->hold_write, "x", 1)) < 0 && errno == EINTR)
        ;
    close(TAKE_FD(held->hold_write));
    int r = cg_spawn_await_exec(held->leaf, held->report_read, held->pidfd, &held->facts, err);
    if (r == 0) {
        out->pid = held->pid;
        out->pidfd = TAKE_FD(held->pidfd);
    }
    held_free(held);
    return r;
}

pid_t cg_held_pid(const cg_held_spawn *held)
{
    return held->pid;
}

void cg_held_abandon(cg_held_spawn *held)
{
    if (!held)
        return;
    syscall(SYS_pidfd_send_signal, held->pidfd, SIGKILL, NULL, 0);
    close(TAKE_FD(held->hold_write));
    siginfo_t info;
    while (waitid(P_PIDFD, (id_t)held->pidfd, &info, WEXITED) < 0 && errno == EINTR)
        ;
    held_free(held);
}
