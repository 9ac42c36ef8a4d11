/* The daemon's link to the box's log keeper (log_keeper_link.h). */
#include "activator/daemon/generations/log_keeper_link.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "activator/log_keeper/protocol.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/names.h"

#define RETRY_FIRST_USEC (100 * 1000ull)
#define RETRY_MAX_USEC (5 * 1000 * 1000ull)
/* A keeper that lived this long was no crash loop: the next is started at
 * once. */
#define HEALTHY_USEC (10 * 1000 * 1000ull)
#define EXIT_WAIT_MS 1000
/* What a running keeper holds comes at once: it is a list of datagrams. */
#define HELLO_WAIT_USEC (2 * 1000 * 1000ull)

extern char **environ;

/* A pipe the keeper drains, as the daemon holds it: its read end and its
 * host's log directory, to hand to a keeper that has not got it. */
typedef struct kept_pipe {
    uint64_t ino;
    int read_fd;
    int dir_fd;
    uint64_t max_bytes;
    bool sent; /* the connected keeper has it */
    char host[ACT_NAME_MAX + 1];
} kept_pipe;

struct ad_log_keeper {
    ad_daemon *daemon;
    char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int connection; /* -1: none */
    sd_event_source *connection_source;
    uint64_t connected_usec;
    int pidfd; /* the connected keeper's; -1: unknown */
    sd_event_source *reap_source; /* the keeper this daemon started, until reaped */
    int child_pidfd;
    kept_pipe *pipes;
    size_t n_pipes, cap_pipes;
    sd_event_source *retry_timer;
    uint64_t retry_usec;
    bool disabled; /* a test build asked for none */
};

static uint64_t now_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void pipe_close(kept_pipe *pipe)
{
    close(pipe->read_fd);
    close(pipe->dir_fd);
}

static kept_pipe *pipe_find(ad_log_keeper *lk, uint64_t ino)
{
    for (size_t i = 0; i < lk->n_pipes; i++)
        if (lk->pipes[i].ino == ino)
            return &lk->pipes[i];
    return NULL;
}

/* Takes read_fd and dir_fd, even when it fails. */
static int pipe_add(ad_log_keeper *lk, uint64_t ino, int read_fd, int dir_fd, uint64_t max_bytes,
                    const char *host, bool sent)
{
    if (lk->n_pipes == lk->cap_pipes) {
        size_t cap = lk->cap_pipes ? 2 * lk->cap_pipes : 16;
        kept_pipe *pipes = reallocarray(lk->pipes, cap, sizeof(*pipes));
        if (!pipes) {
            close(read_fd);
            close(dir_fd);
            return -ENOMEM;
        }
        lk->pipes = pipes;
        lk->cap_pipes = cap;
    }
    kept_pipe *pipe = &lk->pipes[lk->n_pipes++];
    *pipe = (kept_pipe){
        .ino = ino, .read_fd = read_fd, .dir_fd = dir_fd, .max_bytes = max_bytes, .sent = sent};
    snprintf(pipe->host, sizeof(pipe->host), "%.*s", ACT_NAME_MAX, host);
    return 0;
}

static void pipe_remove(ad_log_keeper *lk, kept_pipe *pipe)
{
    pipe_close(pipe);
    *pipe = lk->pipes[--lk->n_pipes];
}

/* ---- the connection ------------------------------------------------------ */

static void connection_lost(ad_log_keeper *lk, const char *why);

/* Hands the connected keeper every pipe it has not got, until its socket
 * is full; then waits for it to take more. */
static void flush(ad_log_keeper *lk)
{
    for (size_t i = 0; i < lk->n_pipes && lk->connection >= 0; i++) {
        kept_pipe *pipe = &lk->pipes[i];
        if (pipe->sent)
            continue;
        char text[LK_MESSAGE_MAX];
        snprintf(text, sizeof(text), "add %" PRIu64 " %" PRIu64 " %s", pipe->ino,
                 pipe->max_bytes, pipe->host);
        int r = lk_send(lk->connection, text, (int[]){pipe->read_fd, pipe->dir_fd}, 2,
                        MSG_DONTWAIT);
        if (r == -EAGAIN) {
            sd_event_source_set_io_events(lk->connection_source, EPOLLIN | EPOLLOUT);
            return;
        }
        if (r < 0) {
            connection_lost(lk, strerror(-r));
            return;
        }
        pipe->sent = true;
    }
    if (lk->connection_source)
        sd_event_source_set_io_events(lk->connection_source, EPOLLIN);
}

/* "held INO HOST" [read end, log directory], "ended INO", "hello PID";
 * whether it was the hello. */
static bool on_message(ad_log_keeper *lk, const char *text, int *fds, size_t n_fds)
{
    uint64_t ino;
    char host[ACT_NAME_MAX + 2];
    int pid;
    if (n_fds == 2 && sscanf(text, "held %" SCNu64 " %65s", &ino, host) == 2 &&
        act_name_is_valid(host)) {
        kept_pipe *pipe = pipe_find(lk, ino);
        if (pipe) {
            pipe->sent = true;
            close(fds[0]);
            close(fds[1]);
        } else if (pipe_add(lk, ino, fds[0], fds[1], lk->daemon->config.host_log_max_bytes, host,
                            true) < 0)
            act_log(LOG_WARNING, "log keeper: out of memory for a copy of host %s's pipe", host);
        return false;
    }
    for (size_t i = 0; i < n_fds; i++)
        close(fds[i]);
    if (sscanf(text, "ended %" SCNu64, &ino) == 1) {
        kept_pipe *pipe = pipe_find(lk, ino);
        if (pipe)
            pipe_remove(lk, pipe);
    } else if (sscanf(text, "hello %d", &pid) == 1 && pid > 0) {
        if (lk->pidfd >= 0)
            close(lk->pidfd);
        lk->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        return true;
    } else
        act_log(LOG_WARNING, "log keeper: unknown message \"%.40s\"", text);
    return false;
}

/* Takes one message the keeper sent, if one is there: RECEIVED (and
 * *hello whether it was the hello), NOTHING, or LOST (the connection ended,
 * and connection_lost ran). */
typedef enum { RECEIVED, NOTHING, LOST } receipt;

static receipt receive_one(ad_log_keeper *lk, bool *hello)
{
    char text[LK_MESSAGE_MAX];
    int fds[LK_FDS_MAX];
    size_t n_fds;
    ssize_t n = lk_receive(lk->connection, text, sizeof(text), fds, LK_FDS_MAX, &n_fds);
    if (n == -EAGAIN)
        return NOTHING;
    if (n == -EBADMSG) /* refused, its descriptors closed: the next may be fine */
        return RECEIVED;
    if (n <= 0) {
        connection_lost(lk, n == 0 ? "it exited" : strerror((int)-n));
        return LOST;
    }
    bool was_hello = on_message(lk, text, fds, n_fds);
    if (hello)
        *hello = was_hello;
    return RECEIVED;
}

static int on_connection(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_log_keeper *lk = userdata;
    if (revents & EPOLLOUT)
        flush(lk);
    for (int i = 0; i < 64 && lk->connection == fd; i++)
        if (receive_one(lk, NULL) != RECEIVED)
            break;
    return 0;
}

static int on_keeper_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_log_keeper *lk = userdata;
    siginfo_t info = {0};
    waitid(P_PIDFD, (id_t)fd, &info, WEXITED | WNOHANG);
    lk->reap_source = sd_event_source_disable_unref(lk->reap_source);
    close(TAKE_FD(lk->child_pidfd));
    return 0;
}

/* Starts a keeper on a fresh listening socket at socket_path, in the
 * cgroup root's log-keeper leaf. */
static int keeper_start(ad_log_keeper *lk, act_error *err)
{
    _cleanup_close_ int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (listener < 0)
        return act_error_set(err, errno, "socket: %s", strerror(errno));
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof(address.sun_path), "%s", lk->socket_path);
    unlink(lk->socket_path);
    if (bind(listener, (struct sockaddr *)&address, sizeof(address)) < 0 ||
        chmod(lk->socket_path, 0600) < 0 || listen(listener, 16) < 0)
        return act_error_set(err, errno, "cannot listen on %s: %s", lk->socket_path,
                             strerror(errno));
    /* Above the keeper's fd 3, so that dup2 clears its close-on-exec. */
    _cleanup_close_ int high = fcntl(listener, F_DUPFD_CLOEXEC, LK_LISTEN_FD + 1);
    if (high < 0)
        return act_error_set(err, errno, "dup: %s", strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, high, LK_LISTEN_FD);
    posix_spawnattr_init(&attributes);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigfillset(&defaults);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"activatord", LK_ARGUMENT, NULL};
    pid_t pid;
    int r = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (r != 0)
        return act_error_set(err, r, "cannot start it: %s", strerror(r));
    act_error place_err = {0};
    if (cg_root_place_process(lk->daemon->cgroups, LK_CGROUP_NODE, pid, &place_err) < 0)
        act_log(LOG_WARNING, "log keeper: it runs in the daemon's cgroup: %s", place_err.message);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        if (lk->child_pidfd >= 0) {
            lk->reap_source = sd_event_source_disable_unref(lk->reap_source);
            close(lk->child_pidfd);
        }
        lk->child_pidfd = pidfd;
        sd_event_add_io(lk->daemon->loop, &lk->reap_source, pidfd, EPOLLIN, on_keeper_exit, lk);
    }
    act_log(LOG_INFO, "log keeper: started, pid %d", (int)pid);
    return 0;
}

static int try_connect(ad_log_keeper *lk)
{
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof(address.sun_path), "%s", lk->socket_path);
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0)
        return -errno;
    int r = sd_event_add_io(lk->daemon->loop, &lk->connection_source, fd, EPOLLIN,
                            on_connection, lk);
    if (r < 0)
        return r;
    lk->connection = TAKE_FD(fd);
    lk->connected_usec = now_usec();
    return 0;
}

/* Reads what the keeper a daemon before us left says on connecting, up to
 * its hello: before that, only the keeper holds the pipes of the
 * generations this daemon is about to adopt, and a keeper that died then
 * would take them along. */
static void take_what_it_holds(ad_log_keeper *lk)
{
    uint64_t deadline = now_usec() + HELLO_WAIT_USEC;
    bool hello = false;
    size_t held = lk->n_pipes;
    while (!hello && lk->connection >= 0) {
        uint64_t now = now_usec();
        struct pollfd readable = {.fd = lk->connection, .events = POLLIN};
        if (now >= deadline || poll(&readable, 1, (int)((deadline - now + 999) / 1000)) <= 0 ||
            receive_one(lk, &hello) == LOST)
            break;
    }
    if (hello)
        act_log(LOG_INFO, "log keeper: connected to the one running; it keeps %zu pipes",
                lk->n_pipes - held);
    else if (lk->connection >= 0)
        act_log(LOG_WARNING,
                "log keeper: connected to the one running, which did not say what "
                "it keeps within %llu ms; its pipes come when it does",
                HELLO_WAIT_USEC / 1000);
}

/* The keeper a daemon before us left, or a new one. At start, before the
 * loop runs, what a running keeper holds is taken at once; later the loop
 * takes it as it comes. */
static int connect_or_start(ad_log_keeper *lk, bool at_start, act_error *err)
{
    int r = try_connect(lk);
    if (r == 0) {
        if (at_start)
            take_what_it_holds(lk);
        else
            act_log(LOG_INFO, "log keeper: connected to the one running");
        return 0;
    }
    if (r != -ECONNREFUSED && r != -ENOENT)
        return act_error_set(err, -r, "cannot connect to %s: %s", lk->socket_path,
                             strerror(-r));
    if ((r = keeper_start(lk, err)) < 0)
        return r;
    if ((r = try_connect(lk)) < 0)
        return act_error_set(err, -r, "cannot connect to the keeper it started: %s",
                             strerror(-r));
    return 0;
}

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata);

static void schedule_retry(ad_log_keeper *lk)
{
    lk->retry_usec = lk->retry_usec ? lk->retry_usec * 2 : RETRY_FIRST_USEC;
    if (lk->retry_usec > RETRY_MAX_USEC)
        lk->retry_usec = RETRY_MAX_USEC;
    lk->retry_timer = sd_event_source_disable_unref(lk->retry_timer);
    if (sd_event_add_time_relative(lk->daemon->loop, &lk->retry_timer, CLOCK_MONOTONIC,
                                   lk->retry_usec, 0, on_retry, lk) < 0)
        act_log(LOG_ERR, "log keeper: cannot schedule its restart; the hosts' output goes to "
                         "their files");
}

static void connection_lost(ad_log_keeper *lk, const char *why)
{
    if (lk->connection < 0)
        return;
    lk->connection_source = sd_event_source_disable_unref(lk->connection_source);
    close(TAKE_FD(lk->connection));
    if (lk->pidfd >= 0)
        close(TAKE_FD(lk->pidfd));
    for (size_t i = 0; i < lk->n_pipes; i++)
        lk->pipes[i].sent = false;
    if (now_usec() - lk->connected_usec >= HEALTHY_USEC)
        lk->retry_usec = 0;
    if (lk->daemon->stopping)
        return;
    act_log(LOG_WARNING, "log keeper: lost (%s); the hosts' new output files go to their "
                         "files until another runs, and it gets the %zu pipes kept",
            why, lk->n_pipes);
    schedule_retry(lk);
}

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_log_keeper *lk = userdata;
    lk->retry_timer = sd_event_source_disable_unref(lk->retry_timer);
    act_error err = {0};
    if (connect_or_start(lk, false, &err) < 0) {
        act_log(LOG_WARNING, "log keeper: %s; trying again", err.message);
        schedule_retry(lk);
        return 0;
    }
    flush(lk);
    return 0;
}

/* ---- the API ------------------------------------------------------------- */

int ad_log_keeper_open(ad_daemon *daemon, bool needed, act_error *err)
{
    if (!needed)
        return 0;
    ad_log_keeper *lk = calloc(1, sizeof(*lk));
    if (!lk)
        return act_error_set(err, ENOMEM, "out of memory");
    *lk = (ad_log_keeper){.daemon = daemon, .connection = -1, .pidfd = -1, .child_pidfd = -1};
    daemon->log_keeper = lk;
#ifdef ACTIVATOR_TEST_HOOKS
    const char *none = getenv("ACTIVATOR_TEST_NO_LOG_KEEPER");
    if (none && strcmp(none, "1") == 0) {
        act_log(LOG_WARNING, "log keeper: none (ACTIVATOR_TEST_NO_LOG_KEEPER=1): the hosts' "
                             "output goes to their files");
        lk->disabled = true;
        return 0;
    }
#endif
    int n = snprintf(lk->socket_path, sizeof(lk->socket_path), "%s/%s",
                     daemon->config.runtime_directory, LK_SOCKET_NAME);
    if (n < 0 || (size_t)n >= sizeof(lk->socket_path)) {
        act_log(LOG_WARNING, "log keeper: none: RuntimeDirectory=%s is too long for its "
                             "socket; the hosts' output goes to their files",
                daemon->config.runtime_directory);
        lk->disabled = true;
        return 0;
    }
    act_error start_err = {0};
    if (connect_or_start(lk, true, &start_err) < 0) {
        act_log(LOG_WARNING, "log keeper: %s; the hosts' output goes to their files until "
                             "one runs",
                start_err.message);
        schedule_retry(lk);
    }
    return 0;
}

int ad_log_keeper_pipe(ad_daemon *daemon, const char *host, int dir_fd, uint64_t max_bytes,
                       int *write_fd)
{
    ad_log_keeper *lk = daemon->log_keeper;
    if (!lk || lk->connection < 0)
        return -ENOTCONN;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    struct stat st;
    int dir_copy = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
    if (dir_copy < 0 || fstat(fds[0], &st) < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        if (dir_copy >= 0)
            close(dir_copy);
        return -saved;
    }
    int r = pipe_add(lk, (uint64_t)st.st_ino, fds[0], dir_copy, max_bytes, host, false);
    if (r < 0) {
        close(fds[1]);
        return r;
    }
    flush(lk);
    *write_fd = fds[1];
    return 0;
}

void ad_log_keeper_mark(ad_daemon *daemon, const char *host, const char *text)
{
    ad_log_keeper *lk = daemon->log_keeper;
    if (!lk || lk->connection < 0)
        return;
    char message[LK_MESSAGE_MAX];
    snprintf(message, sizeof(message), "mark %s %s", host, text);
    /* Dropped when the keeper's socket is full: a mark is worth no wait. */
    lk_send(lk->connection, message, NULL, 0, MSG_DONTWAIT);
}

void ad_log_keeper_set_bound(ad_daemon *daemon, uint64_t max_bytes)
{
    ad_log_keeper *lk = daemon->log_keeper;
    if (!lk)
        return;
    for (size_t i = 0; i < lk->n_pipes; i++)
        lk->pipes[i].max_bytes = max_bytes;
    if (lk->connection < 0)
        return;
    char message[LK_MESSAGE_MAX];
    snprintf(message, sizeof(message), "bound %" PRIu64, max_bytes);
    if (lk_send(lk->connection, message, NULL, 0, MSG_DONTWAIT) < 0)
        act_log(LOG_WARNING,
                "log keeper: cannot tell it HostLogMaxSize=%" PRIu64
                "; it applies to the hosts' next generations",
                max_bytes);
}

void ad_log_keeper_close(ad_daemon *daemon, bool wait_for_exit)
{
    ad_log_keeper *lk = TAKE_PTR(daemon->log_keeper);
    if (!lk)
        return;
    lk->retry_timer = sd_event_source_disable_unref(lk->retry_timer);
    lk->connection_source = sd_event_source_disable_unref(lk->connection_source);
    if (lk->connection >= 0)
        close(lk->connection);
    for (size_t i = 0; i < lk->n_pipes; i++)
        pipe_close(&lk->pipes[i]);
    free(lk->pipes);
    int pidfd = lk->pidfd;
    /* Every writer is gone after a clean stop: the keeper drains what the
     * pipes still hold, sees no daemon, and exits; its leaf goes after it.
     * A keeper this daemon started and stopped before its hello came is
     * waited for by the pidfd of the child; with neither, it was reaped
     * already (or never started). */
    int exit_fd = pidfd >= 0 ? pidfd : lk->child_pidfd;
    if (wait_for_exit) {
        struct pollfd exited = {.fd = exit_fd, .events = POLLIN};
        if (exit_fd < 0 || poll(&exited, 1, EXIT_WAIT_MS) == 1) {
            act_error err = {0};
            if (lk->child_pidfd >= 0)
                waitid(P_PIDFD, (id_t)lk->child_pidfd, &(siginfo_t){0}, WEXITED | WNOHANG);
            if (cg_root_remove_node(daemon->cgroups, LK_CGROUP_NODE, &err) < 0)
                act_log(LOG_WARNING, "log keeper: %s", err.message);
        } else
            act_log(LOG_NOTICE, "log keeper: still draining after %d ms; left running",
                    EXIT_WAIT_MS);
    }
    if (pidfd >= 0)
        close(pidfd);
    lk->reap_source = sd_event_source_disable_unref(lk->reap_source);
    if (lk->child_pidfd >= 0)
        close(lk->child_pidfd);
    free(lk);
}
