/* The log keeper's loop (log_keeper.h): pipes drained into their hosts'
 * files, one daemon connection at a time. */
#include "activator/log_keeper/log_keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "activator/log_keeper/protocol.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/names.h"

#define LOG_FILE "output.log"
#define LOG_ROTATED "output.log.1"
/* One read of a pipe: a host that floods its output gets this much written
 * per turn of the loop, as does every other host beside it. */
#define DRAIN_CHUNK 65536
/* What a mark drains of its host's pipes first, at most: a flooding host's
 * lines may then land after its mark, never a mark wait for the flood. */
#define MARK_DRAIN_MAX (4 * DRAIN_CHUNK)
/* A keeper no daemon ever connected to (the daemon died while starting
 * it) holds nothing and goes. */
#define FIRST_CONNECTION_USEC (30 * 1000 * 1000ull)
/* A daemon that takes longer than this to read what the keeper holds is
 * disconnected; it connects again. */
#define SEND_TIMEOUT_SEC 5

typedef struct keeper keeper;

/* A host's output file, shared by every pipe of the host (one per
 * generation, and one per start of the daemon that adopted it). */
typedef struct host_file {
    struct host_file *next;
    char host[ACT_NAME_MAX + 1];
    int dirfd; /* <state>/hosts/<host>/log */
    int fd;    /* output.log, O_APPEND; -1 after a failed rotation */
    uint64_t size;
    uint64_t max_bytes;
    unsigned pipes;
    bool write_failed; /* said once, until a write succeeds again */
} host_file;

typedef struct drained_pipe {
    struct drained_pipe *next;
    keeper *keeper;
    uint64_t ino;
    int fd;
    host_file *file;
    sd_event_source *source;
} drained_pipe;

struct keeper {
    sd_event *loop;
    sd_event_source *listen_source;
    int connection; /* the daemon's; -1: none */
    sd_event_source *connection_source;
    bool ever_connected;
    host_file *files;
    drained_pipe *pipes;
    size_t n_pipes;
    char buffer[DRAIN_CHUNK];
};

static void maybe_exit(keeper *k)
{
    if (k->connection < 0 && k->n_pipes == 0)
        sd_event_exit(k->loop, 0);
}

/* ---- the files ----------------------------------------------------------- */

static int open_output(host_file *file)
{
    int fd = openat(file->dirfd, LOG_FILE,
                    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0)
        return -errno;
    struct stat st;
    file->size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    file->fd = fd;
    return 0;
}

/* output.log becomes output.log.1 (the one before is gone) and a fresh
 * output.log is begun. Only the keeper writes the file, so nothing is lost
 * or misplaced on the way. */
static void rotate(host_file *file)
{
    if (renameat(file->dirfd, LOG_FILE, file->dirfd, LOG_ROTATED) < 0)
        act_log(LOG_WARNING, "log keeper: host %s: cannot rotate %s: %s", file->host, LOG_FILE,
                strerror(errno));
    close(file->fd);
    file->fd = -1;
    int r = open_output(file);
    if (r < 0)
        act_log(LOG_WARNING, "log keeper: host %s: cannot open a new %s: %s; its output is "
                             "dropped until the next try",
                file->host, LOG_FILE, strerror(-r));
}

static void file_write(host_file *file, const char *data, size_t len)
{
    if (file->fd < 0 && open_output(file) < 0)
        return;
    int r = act_write_all(file->fd, data, len);
    if (r < 0) {
        if (!file->write_failed)
            act_log(LOG_WARNING, "log keeper: host %s: cannot write %s: %s; its output is "
                                 "dropped while this lasts",
                    file->host, LOG_FILE, strerror(-r));
        file->write_failed = true;
        return;
    }
    file->write_failed = false;
    file->size += len;
    if (file->size >= file->max_bytes)
        rotate(file);
}

static host_file *file_find(keeper *k, const char *host)
{
    for (host_file *file = k->files; file; file = file->next)
        if (strcmp(file->host, host) == 0)
            return file;
    return NULL;
}

/* Takes dirfd. */
static host_file *file_get(keeper *k, const char *host, int dirfd, uint64_t max_bytes)
{
    host_file *file = file_find(k, host);
    if (file) {
        close(dirfd);
        file->max_bytes = max_bytes;
        return file;
    }
    file = calloc(1, sizeof(*file));
    if (!file) {
        close(dirfd);
        return NULL;
    }
    snprintf(file->host, sizeof(file->host), "%.*s", ACT_NAME_MAX, host);
    file->dirfd = dirfd;
    file->fd = -1;
    file->max_bytes = max_bytes;
    int r = open_output(file);
    if (r < 0)
        act_log(LOG_WARNING, "log keeper: host %s: cannot open %s: %s", host, LOG_FILE,
                strerror(-r));
    file->next = k->files;
    k->files = file;
    return file;
}

static void file_release(keeper *k, host_file *file)
{
    if (--file->pipes)
        return;
    for (host_file **at = &k->files; *at; at = &(*at)->next)
        if (*at == file) {
            *at = file->next;
            break;
        }
    if (file->fd >= 0)
        close(file->fd);
    close(file->dirfd);
    free(file);
}

/* ---- the pipes ----------------------------------------------------------- */

static void send_to_daemon(keeper *k, const char *text, const int *fds, size_t n_fds);

static void pipe_end(drained_pipe *pipe)
{
    keeper *k = pipe->keeper;
    for (drained_pipe **at = &k->pipes; *at; at = &(*at)->next)
        if (*at == pipe) {
            *at = pipe->next;
            break;
        }
    k->n_pipes--;
    char text[64];
    snprintf(text, sizeof(text), "ended %" PRIu64, pipe->ino);
    send_to_daemon(k, text, NULL, 0);
    sd_event_source_disable_unref(pipe->source);
    close(pipe->fd);
    file_release(k, pipe->file);
    free(pipe);
    maybe_exit(k);
}

/* One read of the pipe into its file: bytes read, 0 at its end (every
 * writer closed it), -EAGAIN when it is empty. */
static ssize_t drain_once(drained_pipe *pipe)
{
    keeper *k = pipe->keeper;
    ssize_t n;
    do
        n = read(pipe->fd, k->buffer, sizeof(k->buffer));
    while (n < 0 && errno == EINTR);
    if (n > 0)
        file_write(pipe->file, k->buffer, (size_t)n);
    return n < 0 ? -errno : n;
}

static int on_pipe(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    drained_pipe *pipe = userdata;
    ssize_t n = drain_once(pipe);
    if (n == 0 || (n < 0 && n != -EAGAIN))
        pipe_end(pipe);
    return 0;
}

static drained_pipe *pipe_find(keeper *k, uint64_t ino)
{
    for (drained_pipe *pipe = k->pipes; pipe; pipe = pipe->next)
        if (pipe->ino == ino)
            return pipe;
    return NULL;
}

/* "add INO MAX HOST" with the pipe and the log directory. */
static void on_add(keeper *k, const char *args, int *fds, size_t n_fds)
{
    uint64_t ino, max_bytes;
    char host[ACT_NAME_MAX + 2];
    struct stat st;
    if (n_fds != 2 || sscanf(args, "%" SCNu64 " %" SCNu64 " %65s", &ino, &max_bytes, host) != 3 ||
        !act_name_is_valid(host) || fstat(fds[0], &st) < 0 || !S_ISFIFO(st.st_mode) ||
        (uint64_t)st.st_ino != ino || max_bytes == 0) {
        act_log(LOG_WARNING, "log keeper: refused \"add %s\" with %zu descriptors", args, n_fds);
        for (size_t i = 0; i < n_fds; i++)
            close(fds[i]);
        return;
    }
    if (pipe_find(k, ino)) {
        /* Ours already: a daemon handing back what it got from us. */
        close(fds[0]);
        close(fds[1]);
        return;
    }
    drained_pipe *pipe = calloc(1, sizeof(*pipe));
    host_file *file = pipe ? file_get(k, host, fds[1], max_bytes) : (close(fds[1]), NULL);
    int flags = fcntl(fds[0], F_GETFL);
    if (!file || flags < 0 || fcntl(fds[0], F_SETFL, flags | O_NONBLOCK) < 0 ||
        sd_event_add_io(k->loop, &pipe->source, fds[0], EPOLLIN, on_pipe, pipe) < 0) {
        act_log(LOG_ERR, "log keeper: host %s: cannot drain its pipe; its writers block once it "
                         "is full",
                host);
        if (file)
            file->pipes++, file_release(k, file);
        close(fds[0]);
        free(pipe);
        return;
    }
    *pipe = (drained_pipe){.next = k->pipes, .keeper = k, .ino = ino, .fd = fds[0],
                           .file = file, .source = pipe->source};
    file->pipes++;
    k->pipes = pipe;
    k->n_pipes++;
}

/* "mark HOST TEXT": after what the host's pipes hold now. */
static void on_mark(keeper *k, const char *args)
{
    char host[ACT_NAME_MAX + 2];
    int at = 0;
    if (sscanf(args, "%65s %n", host, &at) != 1 || !at)
        return;
    host_file *file = file_find(k, host);
    if (!file)
        return;
    for (drained_pipe *pipe = k->pipes; pipe; pipe = pipe->next) {
        if (pipe->file != file)
            continue;
        for (size_t drained = 0; drained < MARK_DRAIN_MAX; drained += DRAIN_CHUNK)
            if (drain_once(pipe) <= 0)
                break;
    }
    char line[LK_MESSAGE_MAX + 64];
    int len = snprintf(line, sizeof(line), "-- activatord: host %s, %s --\n", host, args + at);
    file_write(file, line, (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
}

/* ---- the daemon's connection --------------------------------------------- */

static void connection_close(keeper *k)
{
    if (k->connection < 0)
        return;
    k->connection_source = sd_event_source_disable_unref(k->connection_source);
    close(k->connection);
    k->connection = -1;
}

static void send_to_daemon(keeper *k, const char *text, const int *fds, size_t n_fds)
{
    if (k->connection < 0)
        return;
    int r = lk_send(k->connection, text, fds, n_fds, 0);
    if (r < 0) {
        act_log(LOG_WARNING, "log keeper: the daemon's connection failed (%s); waiting for the "
                             "next",
                strerror(-r));
        connection_close(k);
        /* The end of the connection will not be read now: a keeper that
         * holds no pipe goes here, as it would on that end. */
        maybe_exit(k);
    }
}

static int on_connection(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    keeper *k = userdata;
    char text[LK_MESSAGE_MAX];
    int fds[LK_FDS_MAX];
    size_t n_fds;
    ssize_t n = lk_receive(fd, text, sizeof(text), fds, LK_FDS_MAX, &n_fds);
    if (n == -EAGAIN)
        return 0;
    if (n == -EBADMSG) {
        act_log(LOG_WARNING, "log keeper: refused a message too long or with too many "
                             "descriptors");
        return 0;
    }
    if (n <= 0) {
        connection_close(k);
        maybe_exit(k);
        return 0;
    }
    if (strncmp(text, "add ", 4) == 0)
        on_add(k, text + 4, fds, n_fds);
    else {
        for (size_t i = 0; i < n_fds; i++)
            close(fds[i]);
        uint64_t bound;
        if (strncmp(text, "mark ", 5) == 0)
            on_mark(k, text + 5);
        else if (sscanf(text, "bound %" SCNu64, &bound) == 1 && bound > 0)
            for (host_file *file = k->files; file; file = file->next)
                file->max_bytes = bound;
        else
            act_log(LOG_WARNING, "log keeper: unknown message \"%.40s\"", text);
    }
    return 0;
}

/* A daemon connects: the last one wins (the one before is gone or going),
 * and gets a copy of every pipe kept. */
static int on_listen(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    keeper *k = userdata;
    int connection = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    if (connection < 0)
        return 0;
    struct ucred peer;
    socklen_t len = sizeof(peer);
    if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 || peer.uid != 0) {
        close(connection);
        return 0;
    }
    connection_close(k);
    struct timeval timeout = {.tv_sec = SEND_TIMEOUT_SEC};
    setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    if (sd_event_add_io(k->loop, &k->connection_source, connection, EPOLLIN, on_connection, k) <
        0) {
        close(connection);
        return 0;
    }
    k->connection = connection;
    k->ever_connected = true;
    char text[LK_MESSAGE_MAX];
    for (drained_pipe *pipe = k->pipes; pipe && k->connection >= 0; pipe = pipe->next) {
        snprintf(text, sizeof(text), "held %" PRIu64 " %s", pipe->ino, pipe->file->host);
        send_to_daemon(k, text, (int[]){pipe->fd, pipe->file->dirfd}, 2);
    }
    /* Last: the daemon knows it holds every pipe once this comes. */
    snprintf(text, sizeof(text), "hello %d", (int)getpid());
    send_to_daemon(k, text, NULL, 0);
    return 0;
}

/* The keeper needs no privilege: it writes into directories of root's that
 * the daemon hands it open, as their owner. So it holds no capability (none
 * to gain back by an exec either): a flaw in it, fed by what tenants write,
 * is worth no more than uid 0 without capabilities inside fds it holds. */
static int give_up_privileges(void)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    for (unsigned long cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL) /* past the kernel's last capability */
                break;
            return -errno;
        }
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {0};
    return syscall(SYS_capset, &header, none) < 0 ? -errno : 0;
}

static int on_first_connection_due(sd_event_source *source, uint64_t usec, void *userdata)
{
    keeper *k = userdata;
    if (!k->ever_connected)
        maybe_exit(k);
    return 0;
}

int lk_keeper_main(int listen_fd)
{
    /* Nothing of the daemon's but the socket: its other descriptors
     * (the listening sockets of hosts) are not the keeper's to hold. */
    close_range(LK_LISTEN_FD + 1, ~0u, 0);
    signal(SIGPIPE, SIG_IGN);
    int dropped = give_up_privileges();
    if (dropped < 0)
        act_log(LOG_WARNING, "log keeper: cannot give up its capabilities: %s", strerror(-dropped));
    _cleanup_free_ keeper *k = calloc(1, sizeof(*k));
    if (!k)
        return 1;
    k->connection = -1;
    int r = sd_event_new(&k->loop);
    if (r >= 0)
        r = sd_event_add_io(k->loop, &k->listen_source, listen_fd, EPOLLIN, on_listen, k);
    if (r >= 0)
        r = sd_event_add_time_relative(k->loop, NULL, CLOCK_MONOTONIC, FIRST_CONNECTION_USEC, 0,
                                       on_first_connection_due, k);
    if (r >= 0)
        r = sd_event_loop(k->loop);
    if (r < 0)
        act_log(LOG_ERR, "log keeper: %s", strerror(-r));
    while (k->pipes)
        pipe_end(k->pipes);
    connection_close(k);
    sd_event_source_disable_unref(k->listen_source);
    close(listen_fd);
    sd_event_unref(k->loop);
    return r < 0 ? 1 : 0;
}
