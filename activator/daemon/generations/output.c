/* A generation's stdout and stderr: a journald stream of its own, or the
 * host's log file, rotated by size. See generations/output.h for why. */
#include "activator/daemon/generations/output.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/daemon/generations/log_keeper_link.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/names.h"
#include "common/offload.h"

#define JOURNAL_STDOUT_SOCKET "/run/systemd/journal/stdout"
#define LOG_DIRECTORY "log"
#define LOG_FILE "output.log"
#define LOG_ROTATED "output.log.1"
#define LOG_ROTATING "output.log.1.tmp"
/* How often the file's size is looked at: a host writing faster than
 * HostLogMaxSize= a second overshoots it by that much, no more. */
#define ROTATE_CHECK_USEC (1000 * 1000ull)

typedef struct rotation rotation;

struct ad_host_log {
    ad_host *host;
    int dirfd;  /* <state>/hosts/<host>/log */
    int fd;     /* the keeper's pipe (its write end), or output.log, O_APPEND */
    bool kept;  /* fd is the keeper's pipe */
    char *journal_header; /* NULL: no journald */
    sd_event_source *timer;
    rotation *rotating; /* the check off the loop, while it runs */
};

/* One check (and rotation) on a background worker, with fds of its own:
 * the log may be freed before it ends, which only detaches it. */
struct rotation {
    ad_host_log *log; /* NULL once the log was freed */
    int dirfd, fd;
    uint64_t max_bytes;
    int result;
    act_error err;
    char host[ACT_NAME_MAX + 1];
};

/* Under journald when our own stderr is a journal stream (systemd says so
 * through JOURNAL_STREAM) and its stdout socket is there to connect to. */
static bool under_journald(void)
{
    return act_log_stderr_is_journal() && access(JOURNAL_STDOUT_SOCKET, W_OK) == 0;
}

bool ad_host_output_kept(void)
{
    return !under_journald();
}

/* Copies at most limit bytes of from, starting at offset; a hole there is
 * skipped to the next data, and a file that holds none after offset copies
 * nothing. */
static int copy_tail(int from, off_t offset, int to, uint64_t limit)
{
    off_t data = lseek(from, offset, SEEK_DATA);
    if (data < 0)
        return errno == ENXIO ? 0 : -errno;
    uint64_t copied = 0;
    while (copied < limit) {
        ssize_t n = copy_file_range(from, &data, to, NULL, limit - copied, 0);
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        copied += (uint64_t)n;
    }
    return 0;
}

int ad_host_log_rotate_if_needed(int log_dirfd, int fd, uint64_t max_bytes, act_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return act_error_set(err, errno, "cannot stat the log file: %s", strerror(errno));
    if ((uint64_t)st.st_size < max_bytes)
        return 0;
    _cleanup_close_ int from = openat(log_dirfd, LOG_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (from < 0)
        return act_error_set(err, errno, "cannot read %s to rotate it: %s", LOG_FILE,
                             strerror(errno));
    _cleanup_close_ int to = openat(log_dirfd, LOG_ROTATING,
                                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (to < 0)
        return act_error_set(err, errno, "cannot create %s: %s", LOG_ROTATING, strerror(errno));
    /* Copied, then emptied in place (logrotate's copytruncate): the host's
     * processes keep their fds, and lines written between the copy and the
     * truncation (a few microseconds) are lost, not misplaced. */
    off_t tail = st.st_size > (off_t)max_bytes ? st.st_size - (off_t)max_bytes : 0;
    int r = copy_tail(from, tail, to, max_bytes + 65536);
    if (r < 0 || renameat(log_dirfd, LOG_ROTATING, log_dirfd, LOG_ROTATED) < 0) {
        int saved = r < 0 ? -r : errno;
        unlinkat(log_dirfd, LOG_ROTATING, 0);
        return act_error_set(err, saved, "cannot rotate %s to %s: %s", LOG_FILE, LOG_ROTATED,
                             strerror(saved));
    }
    if (ftruncate(fd, 0) < 0)
        return act_error_set(err, errno, "cannot empty %s after rotating it: %s", LOG_FILE,
                             strerror(errno));
    return 1;
}

static void rotation_free(void *job)
{
    rotation *r = job;
    if (r->log)
        r->log->rotating = NULL;
    close(r->dirfd);
    close(r->fd);
    free(r);
}

static void rotate_work(void *job)
{
    rotation *r = job;
    r->result = ad_host_log_rotate_if_needed(r->dirfd, r->fd, r->max_bytes, &r->err);
}

static void rotate_done(void *job)
{
    rotation *r = job;
    if (r->result < 0)
        act_log(LOG_WARNING, "host %s: log file: %s", r->host, r->err.message);
    rotation_free(r);
}

/* Starts a check off the loop, unless one still runs: copying even a
 * bounded tail costs milliseconds the loop owes to every host. */
static void start_rotation(ad_host_log *log)
{
    if (log->rotating)
        return;
    rotation *r = calloc(1, sizeof(*r));
    if (!r)
        return;
    *r = (rotation){.log = log,
                    .dirfd = fcntl(log->dirfd, F_DUPFD_CLOEXEC, 3),
                    .fd = fcntl(log->fd, F_DUPFD_CLOEXEC, 3),
                    .max_bytes = log->host->daemon->config.host_log_max_bytes};
    snprintf(r->host, sizeof(r->host), "%s", log->host->name);
    act_error err = {0};
    if (r->dirfd < 0 || r->fd < 0 ||
        act_offload_submit_droppable(log->host->daemon->release_work,
                                     act_offload_lane(log->host->name), rotate_work, rotate_done,
                                     rotation_free, r, &err) < 0) {
        act_log(LOG_WARNING, "host %s: cannot check the log file's size: %s", log->host->name,
                err.message[0] ? err.message : strerror(errno));
        r->log = NULL;
        rotation_free(r);
        return;
    }
    log->rotating = r;
}

static int on_rotate_check(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_host_log *log = userdata;
    start_rotation(log);
    if (sd_event_source_set_time_relative(source, ROTATE_CHECK_USEC) < 0 ||
        sd_event_source_set_enabled(source, SD_EVENT_ONESHOT) < 0)
        act_log(LOG_ERR, "host %s: cannot watch the log file's size any more", log->host->name);
    return 0;
}

/* The stream protocol's header (journald-stream.c): identifier, unit (none:
 * journald takes it only from root), priority 6 (info), level prefix on (a
 * "<3>" line is an error), no forwarding to syslog, kmsg or console. */
static char *journal_header_for(const char *host)
{
    char *header = NULL;
    return asprintf(&header, "%s\n\n6\n1\n0\n0\n0\n", host) < 0 ? NULL : header;
}

int ad_host_log_open(ad_host *host, const char *whose, ad_host_log **out, act_error *err)
{
    assert(host && out);
    int host_dirfd = ad_host_dir(host, err);
    if (host_dirfd < 0)
        return host_dirfd;
    _cleanup_free_ ad_host_log *log = calloc(1, sizeof(*log));
    if (!log)
        return act_error_set(err, ENOMEM, "out of memory");
    *log = (ad_host_log){.host = host, .dirfd = -1, .fd = -1};
    /* Root's, 0750: the host's user never reaches its own log's path, so it
     * cannot swap the file for a link the daemon would then write through. */
    if (mkdirat(host_dirfd, LOG_DIRECTORY, 0750) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create the log directory: %s", strerror(errno));
    _cleanup_close_ int dirfd =
        openat(host_dirfd, LOG_DIRECTORY, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return act_error_set(err, errno, "cannot open the log directory: %s", strerror(errno));
    bool journald = under_journald();
    if (journald && !(log->journal_header = journal_header_for(host->name)))
        return act_error_set(err, ENOMEM, "out of memory");
    _cleanup_close_ int fd = -1;
    /* Under journald the file is only the fallback of a stream that cannot
     * be connected; otherwise the keeper's pipe, and the file when there is
     * no keeper (the host can then grow it; rotation bounds what that
     * costs). */
    if (!journald && ad_log_keeper_pipe(host->daemon, host->name, dirfd,
                                        host->daemon->config.host_log_max_bytes, &fd) == 0)
        log->kept = true;
    else if ((fd = openat(dirfd, LOG_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                          0640)) < 0) {
        int saved = errno;
        free(log->journal_header);
        return act_error_set(err, saved, "cannot open the log file %s/%s: %s", LOG_DIRECTORY,
                             LOG_FILE, strerror(saved));
    }
    int r = log->kept ? 0
                      : sd_event_add_time_relative(host->daemon->loop, &log->timer, CLOCK_MONOTONIC,
                                                   ROTATE_CHECK_USEC, ROTATE_CHECK_USEC / 4,
                                                   on_rotate_check, log);
    if (r < 0) {
        free(log->journal_header);
        return act_error_set(err, -r, "cannot watch the log file: %s", strerror(-r));
    }
    log->dirfd = TAKE_FD(dirfd);
    log->fd = TAKE_FD(fd);
    if (whose)
        ad_host_log_mark(log, whose);
    *out = TAKE_PTR(log);
    return 0;
}

void ad_host_log_mark(const ad_host_log *log, const char *whose)
{
    /* The journal tells each stream's start by itself. The keeper's pipe is
     * the host's too: a write there could wait for its reader. */
    if (!log || log->journal_header)
        return;
    if (log->kept)
        ad_log_keeper_mark(log->host->daemon, log->host->name, whose);
    else
        dprintf(log->fd, "-- activatord: host %s, %s --\n", log->host->name, whose);
}

int ad_host_log_fd(const ad_host_log *log)
{
    return log->fd;
}

const char *ad_host_log_journal_socket(const ad_host_log *log)
{
    return log->journal_header ? JOURNAL_STDOUT_SOCKET : NULL;
}

const char *ad_host_log_journal_header(const ad_host_log *log)
{
    return log->journal_header;
}

void ad_host_log_free(ad_host_log *log)
{
    if (!log)
        return;
    if (log->rotating)
        log->rotating->log = NULL;
    sd_event_source_disable_unref(log->timer);
    if (log->fd >= 0)
        close(log->fd);
    if (log->dirfd >= 0)
        close(log->dirfd);
    free(log->journal_header);
    free(log);
}
