#include "activator/probe/probe.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/split-argv.h"
#include "common/text.h"
#include "common/strv.h"

extern char **environ;

struct probe_run {
    sd_event *loop;
    const probe_spec *spec;
    probe_runner runner;      /* spawn NULL: posix_spawn here */
    uint64_t deadline_usec; /* CLOCK_MONOTONIC */
    uint64_t interval_usec;
    bool one_try;           /* the interval is no shorter than the timeout */
    probe_done done;
    void *userdata;
    sd_event_source *timer;   /* next try, or the deadline while a try runs */
    sd_event_source *attempt; /* the connect's socket or the command's pidfd */
    int attempt_fd;
    char last_failure[256];
};

void probe_spec_clear(probe_spec *spec)
{
    assert(spec);
    act_strv_free(spec->argv);
    spec->argv = NULL;
}

/* "PATH ARGS" in the grammar of every command line (common/split-argv.h). */
static int split_command(const char *text, const char *where, char ***out, act_error *err)
{
    char **argv = NULL;
    int r = act_split_argv(text, &argv, err);
    if (r < 0)
        return act_error_prefix(err, "%s: exec:", where);
    if (!argv[0] || argv[0][0] != '/') {
        act_strv_free(argv);
        char shown[ACT_TEXT_SHOW_MAX];
        return act_error_set(err, EINVAL, "%s: exec: needs an absolute program path, got \"%s\"",
                             where, act_text_show(text, shown, sizeof(shown)));
    }
    *out = argv;
    return 0;
}

int probe_parse(const char *text, const char *where, probe_spec *out, act_error *err)
{
    assert(text);
    assert(where);
    assert(out);
    probe_spec spec = {0};
    if (strcmp(text, "notify") == 0) {
        spec.kind = PROBE_NOTIFY;
    } else if (strncmp(text, "tcp:", 4) == 0 || strncmp(text, "unix:", 5) == 0) {
        bool is_unix = text[0] == 'u';
        const char *target = text + (is_unix ? 5 : 4);
        if (is_unix != (target[0] == '/'))
            return act_error_set(err, EINVAL, "%s: \"%s\": use tcp:ADDR:PORT or unix:/ABSOLUTE/PATH",
                                 where, text);
        int r = lsn_parse(target, where, &spec.address, err);
        if (r < 0)
            return r;
        spec.kind = PROBE_CONNECT;
    } else if (strncmp(text, "exec:", 5) == 0) {
        int r = split_command(text + 5, where, &spec.argv, err);
        if (r < 0)
            return r;
        spec.kind = PROBE_EXEC;
    } else {
        return act_error_set(err, EINVAL,
                             "%s: \"%s\" is not one of notify, tcp:ADDR:PORT, unix:PATH, exec:PATH "
                             "ARGS",
                             where, text);
    }
    *out = spec;
    return 0;
}

static void end_attempt(probe_run *probe)
{
    probe->attempt = sd_event_source_disable_unref(probe->attempt);
    if (probe->attempt_fd >= 0 && probe->spec->kind == PROBE_EXEC) {
        /* A command still running when the probe ends is killed and reaped
         * here, so no probe ever leaves a zombie or a stray process. */
        siginfo_t info = {0};
        if (waitid(P_PIDFD, (id_t)probe->attempt_fd, &info, WEXITED | WNOHANG) == 0 &&
            info.si_pid == 0) {
            syscall(SYS_pidfd_send_signal, probe->attempt_fd, SIGKILL, NULL, 0);
            waitid(P_PIDFD, (id_t)probe->attempt_fd, &info, WEXITED);
        }
    }
    if (probe->attempt_fd >= 0)
        close(probe->attempt_fd);
    probe->attempt_fd = -1;
}

static void finish(probe_run *probe, bool ok)
{
    end_attempt(probe);
    probe->timer = sd_event_source_disable_unref(probe->timer);
    probe->done(probe, ok, ok ? NULL : probe->last_failure, probe->userdata);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata);

/* After a failed try: the next one after the interval, or give up when the
 * deadline comes first. */
static void schedule_retry(probe_run *probe)
{
    end_attempt(probe);
    uint64_t now = act_loop_now_usec(probe->loop);
    if (probe->one_try || now >= probe->deadline_usec) {
        finish(probe, false);
        return;
    }
    uint64_t next = now + probe->interval_usec;
    if (next > probe->deadline_usec)
        next = probe->deadline_usec;
    probe->timer = sd_event_source_disable_unref(probe->timer);
    if (sd_event_add_time(probe->loop, &probe->timer, CLOCK_MONOTONIC, next, 0, on_timer, probe) <
        0)
        finish(probe, false);
}

static int on_connect_ready(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    probe_run *probe = userdata;
    int error = 0;
    socklen_t len = sizeof(error);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
        error = errno;
    if (error == 0) {
        finish(probe, true);
        return 0;
    }
    snprintf(probe->last_failure, sizeof(probe->last_failure), "connect failed: %s",
             strerror(error));
    schedule_retry(probe);
    return 0;
}

static int try_connect(probe_run *probe)
{
    const lsn_address *address = &probe->spec->address;
    int fd = socket(address->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    probe->attempt_fd = fd;
    if (connect(fd, &address->addr.sa, address->len) == 0) {
        finish(probe, true);
        return 0;
    }
    if (errno != EINPROGRESS) {
        snprintf(probe->last_failure, sizeof(probe->last_failure), "connect failed: %s",
                 strerror(errno));
        schedule_retry(probe);
        return 0;
    }
    return sd_event_add_io(probe->loop, &probe->attempt, fd, EPOLLOUT, on_connect_ready, probe);
}

static int on_command_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    probe_run *probe = userdata;
    siginfo_t info = {0};
    if (waitid(P_PIDFD, (id_t)fd, &info, WEXITED | WNOHANG) < 0 || info.si_pid == 0)
        return 0; /* spurious wake: not exited yet */
    if (info.si_code == CLD_EXITED && info.si_status == 0) {
        finish(probe, true);
        return 0;
    }
    snprintf(probe->last_failure, sizeof(probe->last_failure), "%s %s %d", probe->spec->argv[0],
             info.si_code == CLD_EXITED ? "exited with status" : "was killed by signal",
             info.si_status);
    schedule_retry(probe);
    return 0;
}

/* Through the owner's runner: the command is a child of ours all the same. */
static int try_command_with_runner(probe_run *probe)
{
    act_error err = {0};
    int fd = probe->runner.spawn(probe->spec->argv, probe->runner.userdata, &err);
    if (fd < 0) {
        /* The runner's sentence names the program already; cut to fit. */
        if (snprintf(probe->last_failure, sizeof(probe->last_failure), "%s", err.message) >=
            (int)sizeof(probe->last_failure))
            memcpy(probe->last_failure + sizeof(probe->last_failure) - 4, "...", 4);
        schedule_retry(probe);
        return 0;
    }
    probe->attempt_fd = fd;
    return sd_event_add_io(probe->loop, &probe->attempt, fd, EPOLLIN, on_command_exit, probe);
}

static int try_command(probe_run *probe)
{
    if (probe->runner.spawn)
        return try_command_with_runner(probe);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int r = posix_spawn(&pid, probe->spec->argv[0], &actions, NULL, probe->spec->argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (r != 0) {
        snprintf(probe->last_failure, sizeof(probe->last_failure), "cannot run %s: %s",
                 probe->spec->argv[0], strerror(r));
        schedule_retry(probe);
        return 0;
    }
    /* The child is ours and unreaped, so its pid cannot be reused before
     * pidfd_open. */
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
        r = -errno;
        waitpid(pid, NULL, 0);
        return r;
    }
    probe->attempt_fd = fd;
    /* Watched as a readable pidfd and reaped with waitid(P_PIDFD), as the
     * daemon's generations are, not through sd_event_add_child_pidfd: that
     * needs SIGCHLD blocked in every thread, NNG's and the workers' too. */
    return sd_event_add_io(probe->loop, &probe->attempt, fd, EPOLLIN, on_command_exit, probe);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    probe_run *probe = userdata;
    probe->timer = sd_event_source_disable_unref(probe->timer);
    if (probe->attempt) {
        /* The deadline passed while a try was still running. */
        snprintf(probe->last_failure + strlen(probe->last_failure),
                 sizeof(probe->last_failure) - strlen(probe->last_failure), "%s",
                 probe->last_failure[0] ? " (then timed out)" : "timed out");
        finish(probe, false);
        return 0;
    }
    int r = probe->spec->kind == PROBE_EXEC ? try_command(probe) : try_connect(probe);
    if (r < 0) {
        snprintf(probe->last_failure, sizeof(probe->last_failure), "probe failed: %s",
                 strerror(-r));
        finish(probe, false);
        return 0;
    }
    /* A try in flight is bounded by the deadline. */
    if (probe->attempt && !probe->timer)
        sd_event_add_time(probe->loop, &probe->timer, CLOCK_MONOTONIC, probe->deadline_usec, 0,
                          on_timer, probe);
    return 0;
}

int probe_start(sd_event *loop, const probe_spec *spec, const probe_runner *runner,
                uint64_t timeout_usec,
                uint64_t interval_usec, probe_done done, void *userdata, probe_run **out,
                act_error *err)
{
    assert(loop);
    assert(spec);
    assert(done);
    assert(out);
    if (spec->kind == PROBE_NOTIFY)
        return act_error_set(err, EINVAL, "notify readiness is not a probe");
    probe_run *probe = calloc(1, sizeof(*probe));
    if (!probe)
        return act_error_set(err, ENOMEM, "out of memory");
    uint64_t now = act_loop_now_usec(loop);
    *probe = (probe_run){
        .loop = loop,
        .spec = spec,
        .runner = runner ? *runner : (probe_runner){0},
        .deadline_usec = now + timeout_usec,
        .interval_usec = interval_usec ? interval_usec : 50000,
        .one_try = interval_usec >= timeout_usec,
        .done = done,
        .userdata = userdata,
        .attempt_fd = -1,
    };
    /* The first try runs from the loop, so `done` never fires before the
     * caller has stored the probe. */
    int r = sd_event_add_time(loop, &probe->timer, CLOCK_MONOTONIC, now, 0, on_timer, probe);
    if (r < 0) {
        free(probe);
        return act_error_set(err, -r, "cannot start probe: %s", strerror(-r));
    }
    *out = probe;
    return 0;
}

void probe_free(probe_run *probe)
{
    if (!probe)
        return;
    end_attempt(probe);
    sd_event_source_disable_unref(probe->timer);
    free(probe);
}
