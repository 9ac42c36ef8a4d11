/* The self-healing IPC listener of ipc_heal.h.
 * Written by hand: NNG 1.5.2 (Debian 12) wedges a listener whose client hangs up mid-handshake.
 * NNG 1.6.0 fixed that hang-up path (Debian 13 ships 1.10.1), which would remove this file. */
#include "activator/control/ipc_heal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "activator/control/nng_errno.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

/* One listener of the socket, and how many pipes it delivered are joined. */
typedef struct heal_listener {
    nng_listener listener;
    int id;
    unsigned pipes;
    uint64_t retired_usec; /* 0: the current one, which the socket file leads to */
    /* The probe that retired it, while the listener has not read its SP
     * header yet (see close_read_probe), or -1. */
    int probe_fd;
} heal_listener;

struct ipc_heal {
    ipc_heal_options options;
    const char *path; /* in options.url, after "ipc://" */
    /* Taken by NNG threads to count pipes, by the loop to add and retire
     * listeners. Never held across an NNG call that can run a callback. */
    pthread_mutex_t lock;
    heal_listener *listeners;
    size_t n_listeners, cap_listeners;
    bool listening;      /* one of listeners is current */
    struct stat current; /* the socket file the current listener made */
    unsigned serial;     /* of the temporary names, never reused */
    /* The prober's thread, and how it is told to stop. */
    pthread_t prober;
    bool prober_running;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
    bool stopping;
    int probe_fd;           /* the probe's connection, or -1 */
    atomic_bool probe_seen; /* set by an NNG thread when the probe's pipe joined */
    bool failing;           /* listening again failed; said once until it works */
    pid_t pid;
};

int ipc_heal_new(const ipc_heal_options *options, ipc_heal **out, act_error *err)
{
    if (strncmp(options->url, "ipc://", 6) != 0)
        return act_error_set(err, EINVAL, "%s=%s is not an ipc:// URL", options->what,
                             options->url);
    ipc_heal *heal = calloc(1, sizeof(*heal));
    if (!heal)
        return act_error_set(err, ENOMEM, "out of memory for %s=%s", options->what, options->url);
    heal->options = *options;
    heal->path = options->url + 6;
    heal->pid = getpid();
    heal->probe_fd = -1;
    pthread_mutex_init(&heal->lock, NULL);
    pthread_mutex_init(&heal->stop_lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&heal->stop_cond, &attr);
    pthread_condattr_destroy(&attr);
    atomic_init(&heal->probe_seen, false);
    *out = heal;
    return 0;
}

static heal_listener *find_listener(ipc_heal *heal, int id)
{
    for (size_t i = 0; i < heal->n_listeners; i++)
        if (heal->listeners[i].id == id)
            return &heal->listeners[i];
    return NULL;
}

/* Whether something listens on path now (another daemon on the same file). */
static bool someone_listens(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(addr.sun_path))
        return false;
    memcpy(addr.sun_path, path, strlen(path));
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0;
}

/* A new listener, current from now on. It listens on a name of its own
 * beside the socket file, gets the file's mode, owner and ACL there, and is
 * renamed over the file: a client finds either the old listener or the new
 * one, never no file and never a file it should not open. Listening on the
 * path itself would not do: NNG unlinks a listener's path when it closes,
 * and a listener that made the file is closed only once its pipes are gone
 * (ipc_heal.h), long after its successor made the file anew. */
static int listen_new(ipc_heal *heal, act_error *err)
{
    const ipc_heal_options *o = &heal->options;
    char url[sizeof(((struct sockaddr_un *)0)->sun_path) + 6];
    int n = snprintf(url, sizeof(url), "%s.h%u", o->url, ++heal->serial);
    if (n < 0 || (size_t)n >= sizeof(url))
        return act_error_set(err, ENAMETOOLONG,
                             "%s=%s: the path is too long; a socket path has at most %zu "
                             "characters and the daemon needs %d more beside it",
                             o->what, o->url, sizeof(url) - 7, n - (int)strlen(o->url));
    const char *temporary = url + 6;
    (void)unlink(temporary); /* one of ours, left by a daemon that crashed */

    nng_listener listener;
    int rv = nng_listener_create(&listener, o->socket, url);
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv), "%s=%s: %s", o->what, o->url,
                             nng_strerror(rv));
    rv = nng_listener_set_int(listener, NNG_OPT_IPC_PERMISSIONS, o->mode);
    if (rv != 0) {
        nng_listener_close(listener);
        return act_error_set(err, ctrl_nng_errno(rv), "%s=%s: setting mode %o: %s", o->what,
                             o->url, (unsigned)o->mode, nng_strerror(rv));
    }
    /* Known before it starts: its pipes are counted from the first. */
    pthread_mutex_lock(&heal->lock);
    bool added = false;
    if (heal->n_listeners == heal->cap_listeners) {
        size_t cap = heal->cap_listeners ? 2 * heal->cap_listeners : 4;
        heal_listener *grown = realloc(heal->listeners, cap * sizeof(*grown));
        if (grown) {
            heal->listeners = grown;
            heal->cap_listeners = cap;
        }
    }
    if (heal->n_listeners < heal->cap_listeners) {
        heal->listeners[heal->n_listeners++] =
            (heal_listener){.listener = listener, .id = nng_listener_id(listener), .probe_fd = -1};
        added = true;
    }
    pthread_mutex_unlock(&heal->lock);
    if (!added) {
        nng_listener_close(listener);
        return act_error_set(err, ENOMEM, "%s=%s: out of memory", o->what, o->url);
    }

    int r = 0;
    rv = nng_listener_start(listener, 0);
    if (rv != 0)
        r = act_error_set(err, ctrl_nng_errno(rv),
                          "%s=%s: listening on %s: %s; check the directory exists and is "
                          "writable",
                          o->what, o->url, temporary, nng_strerror(rv));
    if (r == 0 && (r = ctrl_ipc_socket_grant(url, o->access, err)) < 0)
        act_error_prefix(err, "%s=%s", o->what, o->url);
    if (r == 0 && rename(temporary, heal->path) < 0)
        r = act_error_set(err, errno, "%s=%s: renaming %s over it: %s", o->what, o->url,
                          temporary, strerror(errno));
    if (r == 0 && stat(heal->path, &heal->current) < 0)
        r = act_error_set(err, errno, "%s=%s: %s", o->what, o->url, strerror(errno));
    if (r < 0) {
        pthread_mutex_lock(&heal->lock);
        heal->listeners[--heal->n_listeners] = (heal_listener){0};
        pthread_mutex_unlock(&heal->lock);
        nng_listener_close(listener); /* unlinks the temporary name, if there */
        return r;
    }
    heal->listening = true;
    return 0;
}

/* Closes a probe connection if the listener has read the SP header it sent
 * (nothing of it is left unread: SIOCOUTQ of a unix stream socket counts
 * what the peer has not read yet), and says whether it did. Closing it
 * earlier would be a client hanging up mid-handshake: it would wedge the
 * listener, and with it every connection the listener has accepted but not
 * yet delivered. That is how a listener that was only slow to deliver the
 * probe (a loaded machine) could strand a client that connected in the same
 * instant, for good. */
static bool close_read_probe(int *fd)
{
    int unread = 0;
    if (*fd < 0)
        return true;
    if (ioctl(*fd, SIOCOUTQ, &unread) == 0 && unread > 0)
        return false;
    close(*fd);
    *fd = -1;
    return true;
}

/* Prober thread: closes every retired listener whose pipes are all gone, and
 * whose probe was read, and that was retired long enough ago for a connect
 * that found it before the rename to have joined. Its close unlinks only its
 * own temporary name. */
static void close_idle_retired(ipc_heal *heal, uint64_t now)
{
    nng_listener idle[8];
    size_t n_idle = 0;
    pthread_mutex_lock(&heal->lock);
    for (size_t i = 0; i < heal->n_listeners && n_idle < ARRAY_SIZE(idle);) {
        heal_listener *l = &heal->listeners[i];
        if (l->retired_usec && close_read_probe(&l->probe_fd) && l->pipes == 0 &&
            now - l->retired_usec >= IPC_HEAL_PERIOD_USEC - IPC_HEAL_TIMEOUT_USEC) {
            idle[n_idle++] = l->listener;
            *l = heal->listeners[--heal->n_listeners];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&heal->lock);
    for (size_t i = 0; i < n_idle; i++)
        nng_listener_close(idle[i]);
}

/* Prober thread: a probe got no pipe through. The current listener retires
 * (its pipes stay joined, and their requests are answered) and a new one
 * takes the socket file over. */
static void listen_again(ipc_heal *heal)
{
    const ipc_heal_options *o = &heal->options;
    uint64_t now = act_now_usec();
    pthread_mutex_lock(&heal->lock);
    for (size_t i = 0; i < heal->n_listeners; i++)
        if (!heal->listeners[i].retired_usec) {
            heal->listeners[i].retired_usec = now;
            heal->listeners[i].probe_fd = heal->probe_fd; /* closed once read */
            heal->probe_fd = -1;
        }
    pthread_mutex_unlock(&heal->lock);
    if (heal->probe_fd >= 0) { /* no current listener to hand it to */
        close(heal->probe_fd);
        heal->probe_fd = -1;
    }
    heal->listening = false;

    act_error err = {0};
    int r = listen_new(heal, &err);
    if (r < 0) {
        if (!heal->failing)
            act_log(LOG_ERR, "%s=%s: a probe connection never reached the socket and listening "
                             "again failed: %s; retrying every %llu s",
                    o->what, o->url, err.message, IPC_HEAL_PERIOD_USEC / 1000000);
        heal->failing = true;
        return;
    }
    if (heal->failing)
        act_log(LOG_NOTICE, "%s=%s: listening again", o->what, o->url);
    else
        act_log(LOG_WARNING,
                "%s=%s: a probe connection did not reach the socket within %llu ms (the NNG "
                "1.5.2 IPC listener wedge); listening again on the same path, connections "
                "already made are kept",
                o->what, o->url, IPC_HEAL_TIMEOUT_USEC / 1000);
    heal->failing = false;
}

/* The probe is a plain connection that sends the SP header of the peer
 * protocol and nothing else, not an NNG socket: NNG 1.5.2 can hang for good
 * in nng_close of a socket whose dialer is still at work, and a prober that
 * hangs heals nothing and holds up the daemon's stop. Non-blocking: a unix
 * socket connects at once or not at all, and 8 bytes always fit. */
static void start_probe(ipc_heal *heal)
{
    atomic_store(&heal->probe_seen, false);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(heal->path) >= sizeof(addr.sun_path))
        return;
    memcpy(addr.sun_path, heal->path, strlen(heal->path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return; /* out of resources: the next period tries again */
    const uint8_t header[8] = {0, 'S', 'P', 0, (uint8_t)(heal->options.peer_protocol >> 8),
                               (uint8_t)heal->options.peer_protocol, 0, 0};
    /* A refused or failed connect is judged like a probe that did not get
     * through: the socket file is gone or nothing listens behind it. */
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
        (void)!write(fd, header, sizeof(header));
    heal->probe_fd = fd;
}

/* Closed once it got through: it finished the header exchange, so its close
 * is an ordinary hang-up. One that did not is handed to the listener that
 * retires (listen_again). */
static void stop_probe(ipc_heal *heal)
{
    if (heal->probe_fd < 0)
        return;
    close(heal->probe_fd);
    heal->probe_fd = -1;
}

/* Sleeps usec unless told to stop; true when told. */
static bool sleep_or_stop(ipc_heal *heal, uint64_t usec)
{
    struct timespec until = act_monotonic_after(usec);
    pthread_mutex_lock(&heal->stop_lock);
    while (!heal->stopping && pthread_cond_timedwait(&heal->stop_cond, &heal->stop_lock,
                                                     &until) != ETIMEDOUT)
        ;
    bool stopping = heal->stopping;
    pthread_mutex_unlock(&heal->stop_lock);
    return stopping;
}

/* The prober's own thread: closing and opening a listener waits for NNG's
 * threads, which the daemon's loop must never do. Only the healer's state
 * is touched here. */
static void *run_prober(void *arg)
{
    ipc_heal *heal = arg;
    while (!sleep_or_stop(heal, IPC_HEAL_PERIOD_USEC - IPC_HEAL_TIMEOUT_USEC)) {
        close_idle_retired(heal, act_now_usec());
        if (!heal->listening)
            listen_again(heal);
        start_probe(heal);
        bool probed = heal->probe_fd >= 0;
        bool stopping = sleep_or_stop(heal, IPC_HEAL_TIMEOUT_USEC);
        bool seen = atomic_load(&heal->probe_seen);
        if (seen || stopping)
            stop_probe(heal);
        if (stopping)
            break;
        if (probed && !seen)
            listen_again(heal);
    }
    return NULL;
}

int ipc_heal_listen(ipc_heal *heal, bool probe, act_error *err)
{
    /* The rename would take the file from a daemon that listens on it. */
    if (someone_listens(heal->path))
        return act_error_set(err, EADDRINUSE,
                             "%s=%s: another process listens on it; check no other activatord "
                             "uses it",
                             heal->options.what, heal->options.url);
    int r = listen_new(heal, err);
    if (r < 0 || !probe)
        return r;
    r = pthread_create(&heal->prober, NULL, run_prober, heal);
    if (r != 0)
        return act_error_set(err, r, "%s=%s: starting the listener probe: %s", heal->options.what,
                             heal->options.url, strerror(r));
    heal->prober_running = true;
    return 0;
}

void ipc_heal_stop(ipc_heal *heal)
{
    if (!heal || !heal->prober_running)
        return;
    pthread_mutex_lock(&heal->stop_lock);
    heal->stopping = true;
    pthread_cond_signal(&heal->stop_cond);
    pthread_mutex_unlock(&heal->stop_lock);
    pthread_join(heal->prober, NULL);
    heal->prober_running = false;
}

static int listener_of(nng_pipe pipe)
{
    return nng_listener_id(nng_pipe_listener(pipe));
}

bool ipc_heal_note_pipe(ipc_heal *heal, nng_pipe pipe)
{
    if (!heal)
        return false;
    int id = listener_of(pipe);
    pthread_mutex_lock(&heal->lock);
    heal_listener *l = find_listener(heal, id);
    /* A retired listener's probe that arrives late proves nothing of the
     * current listener's. */
    bool current = l && !l->retired_usec;
    if (l)
        l->pipes++;
    pthread_mutex_unlock(&heal->lock);
    uint64_t pid;
    if (!l || nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_PID, &pid) != 0 ||
        pid != (uint64_t)heal->pid)
        return false;
    if (current)
        atomic_store(&heal->probe_seen, true);
    return true;
}

void ipc_heal_note_pipe_gone(ipc_heal *heal, nng_pipe pipe)
{
    if (!heal)
        return;
    int id = listener_of(pipe);
    pthread_mutex_lock(&heal->lock);
    heal_listener *l = find_listener(heal, id);
    if (l && l->pipes > 0)
        l->pipes--;
    pthread_mutex_unlock(&heal->lock);
}

void ipc_heal_free(ipc_heal *heal)
{
    if (!heal)
        return;
    ipc_heal_stop(heal);
    /* No listener unlinks the socket file (each made a temporary name): it
     * goes here, if it is still the one the current listener made. */
    struct stat st;
    if (heal->listening && stat(heal->path, &st) == 0 && st.st_dev == heal->current.st_dev &&
        st.st_ino == heal->current.st_ino)
        (void)unlink(heal->path);
    for (size_t i = 0; i < heal->n_listeners; i++)
        if (heal->listeners[i].probe_fd >= 0)
            close(heal->listeners[i].probe_fd);
    pthread_mutex_destroy(&heal->lock);
    pthread_mutex_destroy(&heal->stop_lock);
    pthread_cond_destroy(&heal->stop_cond);
    free(heal->listeners);
    free(heal);
}
