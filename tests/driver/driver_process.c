/* The daemon's world and life: temp dir, cgroup root, configuration, and the
 * activatord process from fork+exec to its exit. */
#include "tests/driver/daemon_driver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/close_range.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"

#ifndef DD_ACTIVATORD
#error "DD_ACTIVATORD must name the activatord executable"
#endif

extern char **environ;

void dd_sleep_ms(long ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
        ;
}

uint64_t dd_now_ms(void)
{
    return act_now_usec() / 1000;
}

char *dd_read_text(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static int write_text(const char *path, const char *text, act_error *err)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return act_error_set(err, errno, "cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    if (fclose(f) != 0)
        return act_error_set(err, errno, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* A port found by binding port 0 and closing the socket would be free for
 * anyone (another test's etcd, a client's ephemeral port) until the daemon
 * binds it. So the socket stays bound, with SO_REUSEADDR and never
 * listening, until the process exits: Linux lets a second SO_REUSEADDR
 * socket bind the port and listen while no other socket on it listens
 * (activatord's listeners set SO_REUSEADDR, and so do NNG's for
 * MetricsListen= and ControlListen=), and keeps it from everyone else: a
 * bind without SO_REUSEADDR fails, and the kernel's choice of a port for
 * bind(port 0) or connect() skips a port that has a socket bound. */
int dd_free_port(act_error *err)
{
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return act_error_set(err, errno, "socket: %s", strerror(errno));
    int on = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) < 0)
        return act_error_set(err, errno, "cannot find a free port: %s", strerror(errno));
    /* Kept open on purpose, close-on-exec: see above. */
    (void)TAKE_FD(fd);
    return ntohs(addr.sin_port);
}

int dd_cgroups_usable(const char *cgroup_name, act_error *err)
{
    cg_root *root = NULL;
    int r = cg_root_create_throwaway(cgroup_name, &root, err);
    if (r < 0)
        return act_error_prefix(err, "cannot create a throwaway cgroup");
    r = cg_root_destroy_throwaway(root, err);
    if (r < 0)
        return act_error_prefix(err, "cannot remove a throwaway cgroup");
    return 0;
}

/* ---- setup and teardown ----------------------------------------------------- */

static int write_daemon_conf(dd_daemon *d, const dd_options *options, act_error *err)
{
    char store[PATH_MAX + 16];
    if (options->store_url)
        snprintf(store, sizeof(store), "%s", options->store_url);
    else
        snprintf(store, sizeof(store), "dir://%s/claims", d->state_dir);
    const char *extra = options->extra_conf ? options->extra_conf : "";
    /* The box's own user database is not a test's to write: a directory
     * of the test's, which publishes nothing until the test makes it. */
    char userdb[PATH_MAX + 40] = "";
    if (!strstr(extra, "UserDatabaseDirectory="))
        snprintf(userdb, sizeof(userdb), "UserDatabaseDirectory=%s/userdb\n", d->dir);
    char text[16384];
    snprintf(text, sizeof(text),
             "# written by the activatord driver (tests/driver)\n"
             "[Activator]\n"
             "Box=%s\n"
             "Store=%s\n"
             "StateDirectory=%s\n"
             "RuntimeDirectory=%s\n"
             "HostsDirectory=%s\n"
             "CgroupRoot=%s\n"
             "%s"
             "%s"
             "%s",
             options->box, store, d->state_dir, d->runtime_dir, d->hosts_dir, d->cgroup_path,
             userdb,
             /* No metrics server unless the caller asks for one on its own port. */
             strstr(extra, "MetricsListen=") ? "" : "MetricsListen=no\n", extra);
    return write_text(d->config_path, text, err);
}

int dd_setup(dd_daemon *d, const dd_options *options, act_error *err)
{
    memset(d, 0, sizeof(*d));
    d->set_up = true;
    d->pidfd = d->notify_fd = -1;
    d->notify_stop[0] = d->notify_stop[1] = -1;
    pthread_mutex_init(&d->notify_lock, NULL);
    if (strlen(options->dir_prefix) > 50)
        return act_error_set(err, ENAMETOOLONG,
                             "temp dir prefix %s is over 50 characters: the notify socket's "
                             "path would not fit; use a shorter one",
                             options->dir_prefix);
    snprintf(d->dir, sizeof(d->dir), "%s-XXXXXX", options->dir_prefix);
    if (!mkdtemp(d->dir)) {
        int saved = errno;
        char tried[64];
        snprintf(tried, sizeof(tried), "%s", d->dir);
        d->dir[0] = '\0';
        return act_error_set(err, saved, "mkdtemp %s: %s", tried, strerror(saved));
    }
    /* Hosts run as users of their own and pass through here to their state
     * directories and notify sockets, as through /var/lib/activator and
     * /run/activator (0755) on a real box; mkdtemp made it 0700. */
    if (chmod(d->dir, 0711) < 0)
        return act_error_set(err, errno, "chmod %s: %s", d->dir, strerror(errno));
    snprintf(d->config_path, sizeof(d->config_path), "%s/activatord.conf", d->dir);
    snprintf(d->state_dir, sizeof(d->state_dir), "%s/state", d->dir);
    snprintf(d->runtime_dir, sizeof(d->runtime_dir), "%s/run", d->dir);
    snprintf(d->hosts_dir, sizeof(d->hosts_dir), "%s/hosts", d->dir);
    snprintf(d->log_path, sizeof(d->log_path), "%s/activatord.log", d->dir);
    snprintf(d->notify_path, sizeof(d->notify_path), "%s/notify.sock", d->dir);
    snprintf(d->control_url, sizeof(d->control_url), "ipc://%s/control.ipc", d->runtime_dir);
    snprintf(d->events_url, sizeof(d->events_url), "ipc://%s/events.ipc", d->runtime_dir);
    if (mkdir(d->hosts_dir, 0755) < 0)
        return act_error_set(err, errno, "mkdir %s: %s", d->hosts_dir, strerror(errno));
    if (cg_root_create_throwaway(options->cgroup_name, &d->cgroups, err) < 0)
        return act_error_prefix(err, "cannot create a throwaway cgroup root");
    snprintf(d->cgroup_path, sizeof(d->cgroup_path), "%s", cg_root_path(d->cgroups));
    return write_daemon_conf(d, options, err);
}

int dd_write_host(dd_daemon *d, const char *host, act_error *err, const char *fmt, ...)
{
    char text[8192], path[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    snprintf(path, sizeof(path), "%s/%s.conf", d->hosts_dir, host);
    return write_text(path, text, err);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

int dd_teardown(dd_daemon *d, act_error *err)
{
    if (!d->set_up)
        return 0;
    int result = 0;
    if (d->pid > 0) {
        act_error stop_err = {0};
        if (dd_stop(d, 30000, &stop_err) < 0)
            result = act_error_set(err, ETIMEDOUT, "%s", stop_err.message);
    }
    dd_notify_close(d);
    dd_events_close(d);
    if (d->cgroups) {
        act_error cg_err = {0};
        if (cg_root_destroy_throwaway(d->cgroups, &cg_err) < 0)
            result = act_error_set(
                err, EBUSY, "the throwaway cgroup root was not removed whole: %s", cg_err.message);
        d->cgroups = NULL;
    }
    if (d->dir[0] && d->keep_dir)
        fprintf(stderr, "kept %s\n", d->dir);
    else if (d->dir[0])
        nftw(d->dir, remove_entry, 64, FTW_DEPTH | FTW_PHYS);
    d->dir[0] = '\0';
    pthread_mutex_destroy(&d->notify_lock);
    d->set_up = false;
    return result;
}

/* ---- start and stop ------------------------------------------------------------- */

/* What an outer systemd or shell may have set that would confuse the daemon:
 * it must see our notify socket, no inherited fds, and log to stderr (our log
 * file), not to the journal. */
static bool env_is_ours(const char *entry)
{
    static const char *const drop[] = {
        "NOTIFY_SOCKET=", "JOURNAL_STREAM=", "LISTEN_FDS=",    "LISTEN_PID=", "LISTEN_FDNAMES=",
        "WATCHDOG_USEC=", "WATCHDOG_PID=",   "INVOCATION_ID=", NULL};
    for (const char *const *p = drop; *p; p++)
        if (strncmp(entry, *p, strlen(*p)) == 0)
            return false;
    return true;
}

/* Waits up to timeout_ms for the daemon to exit; returns its status or a
 * negative errno (-ETIMEDOUT). */
static int wait_exit(dd_daemon *d, int timeout_ms)
{
    struct pollfd pfd = {.fd = d->pidfd, .events = POLLIN};
    int r;
    do
        r = poll(&pfd, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return -ETIMEDOUT;
    siginfo_t info = {0};
    if (waitid(P_PIDFD, (id_t)d->pidfd, &info, WEXITED) < 0)
        return -errno;
    close(d->pidfd);
    d->pidfd = -1;
    d->pid = 0;
    d->exit_status = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
    return d->exit_status;
}

static int spawn_daemon(dd_daemon *d, const char *const *extra_env, act_error *err)
{
    size_t n_env = 0, n_extra = 0;
    while (environ[n_env])
        n_env++;
    while (extra_env && extra_env[n_extra])
        n_extra++;
    _cleanup_free_ char **envp = calloc(n_env + n_extra + 2, sizeof(char *));
    if (!envp)
        return act_error_set(err, ENOMEM, "out of memory");
    char notify_env[PATH_MAX];
    snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", d->notify_path);
    size_t n = 0;
    for (size_t i = 0; i < n_env; i++)
        if (env_is_ours(environ[i]))
            envp[n++] = environ[i];
    for (size_t i = 0; i < n_extra; i++)
        envp[n++] = (char *)extra_env[i];
    envp[n++] = notify_env;
    envp[n] = NULL;
    char *const argv[] = {(char *)DD_ACTIVATORD, (char *)"--config", d->config_path,
                          d->verbose ? (char *)"--verbose" : NULL, NULL};

    int log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0)
        return act_error_set(err, errno, "open %s: %s", d->log_path, strerror(errno));
    pid_t parent = getpid();
    d->exec_usec = act_now_usec();
    pid_t pid = fork();
    if (pid < 0) {
        close(log_fd);
        return act_error_set(err, errno, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: NNG threads live in the
         * parent. A caller that dies stops its daemon cleanly. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(126);
        if (d->own_session)
            setsid();
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        /* Nothing else of the test's goes across the exec, as under
         * systemd: libcurl's sockets (a store client's, etcd_harness_post's)
         * are not close-on-exec, and a daemon started again mid-run would
         * hold the connections the test had open at that moment. */
        syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    close(log_fd);
    d->pid = pid;
    d->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (d->pidfd < 0)
        return act_error_set(err, errno, "pidfd_open: %s", strerror(errno));
    return 0;
}

int dd_start(dd_daemon *d, int timeout_ms, const char *const *extra_env, act_error *err)
{
    int r = dd_notify_open(d, err);
    if (r < 0)
        return r;
    if ((r = spawn_daemon(d, extra_env, err)) < 0)
        return r;
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    while (!dd_notify_ready_usec(d)) {
        struct pollfd pfd = {.fd = d->pidfd, .events = POLLIN};
        if (poll(&pfd, 1, 1) > 0) {
            int status = wait_exit(d, 0);
            return act_error_set(err, ECHILD,
                                 "activatord exited with status %d before READY=1 (log: %s)",
                                 status, d->log_path);
        }
        if (act_now_usec() > deadline)
            return act_error_set(err, ETIMEDOUT, "activatord did not send READY=1 within %d ms",
                                 timeout_ms);
    }
    return d->events_by_caller ? 0 : dd_events_connect(d, err);
}

uint64_t dd_startup_usec(const dd_daemon *d)
{
    return d->ready_usec > d->exec_usec ? d->ready_usec - d->exec_usec : 0;
}

int dd_stop(dd_daemon *d, int timeout_ms, act_error *err)
{
    if (d->pid <= 0)
        return act_error_set(err, ESRCH, "the daemon is not running");
    kill(d->pid, SIGTERM);
    int status = wait_exit(d, timeout_ms);
    if (status < 0) {
        kill(d->pid, SIGKILL);
        wait_exit(d, 10000);
        dd_notify_close(d);
        return act_error_set(err, ETIMEDOUT, "activatord did not exit within %d ms of SIGTERM",
                             timeout_ms);
    }
    dd_notify_close(d);
    return status;
}

int dd_hand_over(dd_daemon *d, int timeout_ms, act_error *err)
{
    if (d->pid <= 0)
        return act_error_set(err, ESRCH, "the daemon is not running");
    /* Closed while the daemon is alive, not while its exit tears the
     * connection down (see dd_events_connect). */
    dd_events_close(d);
    kill(d->pid, SIGUSR2);
    int status = wait_exit(d, timeout_ms);
    dd_notify_close(d);
    if (status < 0)
        return act_error_set(err, ETIMEDOUT, "activatord did not exit within %d ms of SIGUSR2",
                             timeout_ms);
    return status;
}

int dd_kill(dd_daemon *d, int timeout_ms, act_error *err)
{
    if (d->pid <= 0)
        return act_error_set(err, ESRCH, "the daemon is not running");
    dd_events_close(d); /* before the death, as dd_hand_over does */
    kill(d->pid, SIGKILL);
    int status = wait_exit(d, timeout_ms);
    dd_notify_close(d);
    if (status < 0)
        return act_error_set(err, -status, "activatord did not die within %d ms of SIGKILL",
                             timeout_ms);
    return status;
}

long dd_rss_kib(const dd_daemon *d)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    long rss = -ENOENT;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &rss) == 1)
            break;
    fclose(f);
    return rss;
}

void dd_dump_log(const dd_daemon *d)
{
    char *log = dd_read_text(d->log_path);
    if (!log) {
        fprintf(stderr, "(no daemon log at %s)\n", d->log_path);
        return;
    }
    /* The tail, from a line's start: the part that explains a failure. */
    size_t len = strlen(log);
    const char *start = log;
    if (len > 12000) {
        start = log + len - 12000;
        const char *newline = strchr(start, '\n');
        if (newline)
            start = newline + 1;
    }
    fprintf(stderr, "---- activatord log (%s) ----\n%s---- end of log ----\n", d->log_path, start);
    fflush(stderr);
    free(log);
}

bool dd_log_wait(const dd_daemon *d, const char *text, int timeout_ms)
{
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *log = dd_read_text(d->log_path);
        bool found = log && strstr(log, text);
        free(log);
        if (found)
            return true;
        if (dd_now_ms() >= deadline)
            return false;
        dd_sleep_ms(20);
    }
}
