/* See harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/clock.h"

#ifndef DH_ACTIVATORD
#error "DH_ACTIVATORD must name the activatord executable"
#endif
#ifndef DH_E2E_APP
#error "DH_E2E_APP must name the act-e2e-app executable"
#endif

extern char **environ;

/* How long the daemon may take to say READY=1, and to exit after SIGTERM.
 * Both are far above what a healthy run needs (well under a second); they
 * only bound a broken one. */
#define START_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 30000

static void sleep_ms(long ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
        ;
}

static uint64_t now_ms(void)
{
    return act_now_usec() / 1000;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    if (!f)
        fail_msg("cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    if (fclose(f) != 0)
        fail_msg("cannot write %s: %s", path, strerror(errno));
}

char *dh_read_text(const char *path)
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

/* ---- can we run ----------------------------------------------------------- */

int dh_check_can_run(const char *suite, dh_store_kind kind)
{
    if (geteuid() != 0) {
        printf("SKIP %s: activatord's end-to-end tests need root to create cgroups and run "
               "apps in them (run the tests as root)\n",
               suite);
        return DH_SKIP;
    }
    cg_root *root = NULL;
    act_error err = {0};
    int r = cg_root_create_throwaway("act-e2e-probe", &root, &err);
    if (r == -ENOENT) {
        printf("SKIP %s: no cgroup2 hierarchy here: %s\n", suite, err.message);
        return DH_SKIP;
    }
    if (r < 0) {
        printf("FAIL %s: cannot create a throwaway cgroup: %s\n", suite, err.message);
        return 1;
    }
    if (cg_root_destroy_throwaway(root, &err) < 0) {
        printf("FAIL %s: cannot remove a throwaway cgroup: %s\n", suite, err.message);
        return 1;
    }
    if (kind == DH_STORE_ETCD && !etcd_harness_available()) {
        printf("SKIP %s: %s is not installed (Debian package etcd-server)\n", suite,
               ETCD_HARNESS_BINARY);
        return DH_SKIP;
    }
    return 0;
}

/* ---- setup and teardown --------------------------------------------------- */

static void write_daemon_conf(dh_daemon *d, const char *extra_conf)
{
    char text[16384];
    snprintf(text, sizeof(text),
             "# written by the activatord end-to-end harness\n"
             "[Activator]\n"
             "Box=" DH_BOX "\n"
             "Store=%s\n"
             "StateDirectory=%s\n"
             "RuntimeDirectory=%s\n"
             "HostsDirectory=%s\n"
             "CgroupRoot=%s\n"
             "MetricsListen=no\n"
             "%s",
             d->store_url, d->state_dir, d->runtime_dir, d->hosts_dir, d->cgroup_path,
             extra_conf ? extra_conf : "");
    write_file(d->config_path, text);
}

void dh_setup(dh_daemon *d, dh_store_kind kind, const char *extra_conf)
{
    memset(d, 0, sizeof(*d));
    d->store_kind = kind;
    d->pidfd = -1;
    d->notify_fd = -1;
    d->notify_stop[0] = d->notify_stop[1] = -1;
    pthread_mutex_init(&d->notify_lock, NULL);
    snprintf(d->dir, sizeof(d->dir), "/tmp/act-e2e-XXXXXX");
    if (!mkdtemp(d->dir))
        fail_msg("mkdtemp: %s", strerror(errno));
    snprintf(d->config_path, sizeof(d->config_path), "%s/activatord.conf", d->dir);
    snprintf(d->state_dir, sizeof(d->state_dir), "%s/state", d->dir);
    snprintf(d->runtime_dir, sizeof(d->runtime_dir), "%s/run", d->dir);
    snprintf(d->hosts_dir, sizeof(d->hosts_dir), "%s/hosts", d->dir);
    snprintf(d->log_path, sizeof(d->log_path), "%s/activatord.log", d->dir);
    snprintf(d->notify_path, sizeof(d->notify_path), "%s/notify.sock", d->dir);
    snprintf(d->control_url, sizeof(d->control_url), "ipc://%s/control.ipc", d->runtime_dir);
    snprintf(d->events_url, sizeof(d->events_url), "ipc://%s/events.ipc", d->runtime_dir);
    if (mkdir(d->hosts_dir, 0755) < 0)
        fail_msg("mkdir %s: %s", d->hosts_dir, strerror(errno));

    act_error err = {0};
    if (cg_root_create_throwaway("act-e2e", &d->cgroups, &err) < 0)
        fail_msg("cannot create a throwaway cgroup root: %s", err.message);
    snprintf(d->cgroup_path, sizeof(d->cgroup_path), "%s", cg_root_path(d->cgroups));

    if (kind == DH_STORE_ETCD) {
        if (etcd_harness_start(&d->etcd, &err) < 0)
            fail_msg("cannot start etcd: %s", err.message);
        d->etcd_started = true;
        /* A prefix of our own, so nothing else in this etcd can collide. */
        snprintf(d->store_url, sizeof(d->store_url), "%s/e2e-%d", d->etcd.url_prefix,
                 (int)getpid());
    } else {
        snprintf(d->store_url, sizeof(d->store_url), "dir://%s/claims", d->state_dir);
    }
    if (claims_store_open(d->store_url, NULL, &d->store, &err) < 0)
        fail_msg("cannot open the claim store %s: %s", d->store_url, err.message);

    write_daemon_conf(d, extra_conf);
    dh_write_host(d, DH_BEACON_HOST, "[Host]\nExec=act-e2e-app\n");
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void stop_notify_thread(dh_daemon *d)
{
    if (d->notify_thread_running) {
        char stop = 1;
        (void)!write(d->notify_stop[1], &stop, 1);
        pthread_join(d->notify_thread, NULL);
        d->notify_thread_running = false;
    }
    for (int i = 0; i < 2; i++) {
        if (d->notify_stop[i] >= 0)
            close(d->notify_stop[i]);
        d->notify_stop[i] = -1;
    }
    if (d->notify_fd >= 0)
        close(d->notify_fd);
    d->notify_fd = -1;
    unlink(d->notify_path);
}

/* Waits for the daemon to exit; returns its status or -1 on timeout. */
static int wait_exit(dh_daemon *d, int timeout_ms)
{
    struct pollfd pfd = {.fd = d->pidfd, .events = POLLIN};
    int r;
    do
        r = poll(&pfd, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return -1;
    siginfo_t info = {0};
    if (waitid(P_PIDFD, (id_t)d->pidfd, &info, WEXITED) < 0)
        return -1;
    close(d->pidfd);
    d->pidfd = -1;
    d->pid = 0;
    return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

int dh_teardown(dh_daemon *d)
{
    int result = 0;
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        if (wait_exit(d, STOP_TIMEOUT_MS) < 0) {
            kill(d->pid, SIGKILL);
            wait_exit(d, STOP_TIMEOUT_MS);
        }
    }
    stop_notify_thread(d);
    if (d->sub_open)
        nng_close(d->sub);
    d->sub_open = false;
    free(d->events);
    d->events = NULL;
    claims_store_free(d->store);
    d->store = NULL;
    if (d->cgroups) {
        act_error err = {0};
        if (cg_root_destroy_throwaway(d->cgroups, &err) < 0) {
            print_error("the throwaway cgroup root was not removed whole: %s\n", err.message);
            result = -1;
        }
        d->cgroups = NULL;
    }
    if (d->etcd_started)
        etcd_harness_destroy(&d->etcd);
    d->etcd_started = false;
    if (d->dir[0])
        nftw(d->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    d->dir[0] = '\0';
    pthread_mutex_destroy(&d->notify_lock);
    return result;
}

int dh_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail_msg("socket: %s", strerror(errno));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) < 0)
        fail_msg("cannot find a free port: %s", strerror(errno));
    close(fd);
    return ntohs(addr.sin_port);
}

void dh_write_host(dh_daemon *d, const char *host, const char *fmt, ...)
{
    char text[8192], path[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    snprintf(path, sizeof(path), "%s/%s.conf", d->hosts_dir, host);
    write_file(path, text);
}

static void marker_path(dh_daemon *d, const char *host, char *out, size_t size)
{
    snprintf(out, size, "%s/marker-%s", d->dir, host);
}

void dh_write_app_host(dh_daemon *d, const char *host, int port, const char *app_args,
                       const char *extra_host_lines)
{
    char marker[PATH_MAX];
    marker_path(d, host, marker, sizeof(marker));
    const char *extra = extra_host_lines ? extra_host_lines : "";
    dh_write_host(d, host,
                  "[Host]\n"
                  "Exec=act-e2e-app %s\n"
                  "Environment=E2E_MARKER=%s\n"
                  "%s"
                  "StopTimeoutSec=1\n"
                  "%s"
                  "[Listen]\n"
                  "ListenStream=127.0.0.1:%d\n",
                  app_args ? app_args : "", marker,
                  extra && strstr(extra, "ReadyTimeoutSec=") ? "" : "ReadyTimeoutSec=5\n", extra,
                  port);
}

void dh_stage(dh_daemon *d, const char *host, const char *version, bool promote,
              rel_identity *identity)
{
    char releases[PATH_MAX];
    snprintf(releases, sizeof(releases), "%s/releases", d->state_dir);
    rel_store *store = NULL;
    act_error err = {0};
    if (rel_store_open(releases, &store, &err) < 0)
        fail_msg("rel_store_open %s: %s", releases, err.message);
    rel_identity staged;
    int r = rel_stage(store, host, version, DH_E2E_APP, NULL, &staged, &err);
    if (r == 0 && promote)
        r = rel_promote(store, host, version, &err);
    rel_store_free(store);
    if (r < 0)
        fail_msg("staging %s/%s: %s", host, version, err.message);
    if (identity)
        *identity = staged;
}

void dh_staged_exec_path(dh_daemon *d, const char *host, const char *version, char *out,
                         size_t size)
{
    const char *base = strrchr(DH_E2E_APP, '/');
    snprintf(out, size, "%s/releases/%s/%s/%s", d->state_dir, host, version,
             base ? base + 1 : DH_E2E_APP);
}

/* ---- the daemon's notify socket ------------------------------------------- */

static void handle_notify_message(dh_daemon *d, char *text, bool with_fds)
{
    pthread_mutex_lock(&d->notify_lock);
    char *saved = NULL;
    for (char *line = strtok_r(text, "\n", &saved); line; line = strtok_r(NULL, "\n", &saved)) {
        if (with_fds && strncmp(line, "FDNAME=", 7) == 0) {
            size_t used = strlen(d->fd_names);
            snprintf(d->fd_names + used, sizeof(d->fd_names) - used, "%s%s", used ? " " : "",
                     line + 7);
        } else if (strcmp(line, "READY=1") == 0)
            d->ready_seen = true;
        else if (strcmp(line, "STOPPING=1") == 0)
            d->stopping_seen = true;
        else if (strncmp(line, "STATUS=", 7) == 0)
            snprintf(d->last_status, sizeof(d->last_status), "%s", line + 7);
    }
    pthread_mutex_unlock(&d->notify_lock);
}

/* Reads one datagram; every fd it carries (FDSTORE=1) is closed, since the
 * harness is not a file descriptor store. Returns false when none waited. */
static bool read_notify(dh_daemon *d)
{
    char text[4096];
    char control[CMSG_SPACE(sizeof(int) * 253)];
    struct iovec iov = {.iov_base = text, .iov_len = sizeof(text) - 1};
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control,
        .msg_controllen = sizeof(control),
    };
    ssize_t n = recvmsg(d->notify_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return false;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int fds[253];
        memcpy(fds, CMSG_DATA(cmsg), count * sizeof(int));
        for (size_t i = 0; i < count; i++)
            close(fds[i]);
        pthread_mutex_lock(&d->notify_lock);
        d->fds_received += (unsigned)count;
        pthread_mutex_unlock(&d->notify_lock);
    }
    text[n] = '\0';
    handle_notify_message(d, text, CMSG_FIRSTHDR(&msg) != NULL);
    return true;
}

static void *notify_thread(void *arg)
{
    dh_daemon *d = arg;
    for (;;) {
        struct pollfd pfds[2] = {
            {.fd = d->notify_fd, .events = POLLIN},
            {.fd = d->notify_stop[0], .events = POLLIN},
        };
        if (poll(pfds, 2, -1) < 0 && errno != EINTR)
            break;
        if (pfds[0].revents & POLLIN)
            while (read_notify(d))
                ;
        if (pfds[1].revents)
            break;
    }
    /* What arrived before the stop is still read, so no fd stays queued. */
    while (read_notify(d))
        ;
    return NULL;
}

static void open_notify_socket(dh_daemon *d)
{
    d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (d->notify_fd < 0)
        fail_msg("notify socket: %s", strerror(errno));
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(d->notify_path) >= sizeof(addr.sun_path))
        fail_msg("notify socket path too long: %s", d->notify_path);
    memcpy(addr.sun_path, d->notify_path, strlen(d->notify_path) + 1);
    unlink(d->notify_path);
    if (bind(d->notify_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
        fail_msg("bind %s: %s", d->notify_path, strerror(errno));
    int one = 1;
    setsockopt(d->notify_fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
    if (pipe2(d->notify_stop, O_CLOEXEC) < 0)
        fail_msg("pipe2: %s", strerror(errno));
    d->ready_seen = d->stopping_seen = false;
    if (pthread_create(&d->notify_thread, NULL, notify_thread, d) != 0)
        fail_msg("cannot start the notify thread");
    d->notify_thread_running = true;
}

static bool notify_flag(dh_daemon *d, const bool *flag)
{
    pthread_mutex_lock(&d->notify_lock);
    bool value = *flag;
    pthread_mutex_unlock(&d->notify_lock);
    return value;
}

bool dh_notify_status_wait(dh_daemon *d, const char *text, int timeout_ms, char *last,
                           size_t size)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        pthread_mutex_lock(&d->notify_lock);
        bool found = strstr(d->last_status, text) != NULL;
        if (last)
            snprintf(last, size, "%s", d->last_status);
        pthread_mutex_unlock(&d->notify_lock);
        if (found)
            return true;
        if (now_ms() >= deadline)
            return false;
        sleep_ms(10);
    }
}

unsigned dh_notify_stored_fds(dh_daemon *d, char *names, size_t size)
{
    pthread_mutex_lock(&d->notify_lock);
    unsigned count = d->fds_received;
    snprintf(names, size, "%s", d->fd_names);
    pthread_mutex_unlock(&d->notify_lock);
    return count;
}

/* ---- start and stop ------------------------------------------------------- */

static bool env_is_ours(const char *entry)
{
    /* What systemd or an outer shell may have set that would confuse the
     * daemon: it must see our notify socket, no inherited fds, and log to
     * stderr (our log file), not to the journal. */
    static const char *const drop[] = {"NOTIFY_SOCKET=", "JOURNAL_STREAM=", "LISTEN_FDS=",
                                       "LISTEN_PID=", "LISTEN_FDNAMES=", "WATCHDOG_USEC=",
                                       "WATCHDOG_PID=", "INVOCATION_ID=", NULL};
    for (const char *const *p = drop; *p; p++)
        if (strncmp(entry, *p, strlen(*p)) == 0)
            return false;
    return true;
}

void dh_dump_log(dh_daemon *d)
{
    char *log = dh_read_text(d->log_path);
    if (!log) {
        print_error("(no daemon log at %s)\n", d->log_path);
        return;
    }
    /* The tail: the part that explains a failure. */
    size_t len = strlen(log);
    const char *start = log;
    if (len > 12000) {
        start = log + len - 12000;
        const char *newline = strchr(start, '\n');
        if (newline)
            start = newline + 1;
    }
    /* Straight to stderr: cmocka's print_error cuts long messages. */
    fprintf(stderr, "---- activatord log (%s) ----\n%s---- end of log ----\n", d->log_path,
            start);
    fflush(stderr);
    free(log);
}

bool dh_log_wait(dh_daemon *d, const char *text, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *log = dh_read_text(d->log_path);
        bool found = log && strstr(log, text);
        free(log);
        if (found)
            return true;
        if (now_ms() >= deadline)
            return false;
        sleep_ms(20);
    }
}

static void subscribe(dh_daemon *d);

void dh_start(dh_daemon *d, const char *const *extra_env)
{
    open_notify_socket(d);

    size_t n_env = 0, n_extra = 0;
    while (environ[n_env])
        n_env++;
    while (extra_env && extra_env[n_extra])
        n_extra++;
    char **envp = calloc(n_env + n_extra + 2, sizeof(char *));
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
    char *const argv[] = {(char *)DH_ACTIVATORD, (char *)"--verbose", (char *)"--config",
                          d->config_path, NULL};

    int log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0)
        fail_msg("open %s: %s", d->log_path, strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: NNG threads live in the
         * parent. A test that dies stops its daemon cleanly. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(126);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    close(log_fd);
    free(envp);
    d->pid = pid;
    d->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (d->pidfd < 0)
        fail_msg("pidfd_open: %s", strerror(errno));

    uint64_t deadline = now_ms() + START_TIMEOUT_MS;
    while (!notify_flag(d, &d->ready_seen)) {
        struct pollfd pfd = {.fd = d->pidfd, .events = POLLIN};
        if (poll(&pfd, 1, 10) > 0) {
            int status = wait_exit(d, 0);
            dh_dump_log(d);
            fail_msg("activatord exited with status %d before READY=1", status);
        }
        if (now_ms() > deadline) {
            dh_dump_log(d);
            fail_msg("activatord did not send READY=1 within %d ms", START_TIMEOUT_MS);
        }
    }
    subscribe(d);
}

int dh_stop(dh_daemon *d)
{
    if (d->pid <= 0)
        fail_msg("dh_stop: the daemon is not running");
    kill(d->pid, SIGTERM);
    int status = wait_exit(d, STOP_TIMEOUT_MS);
    if (status < 0) {
        dh_dump_log(d);
        kill(d->pid, SIGKILL);
        wait_exit(d, STOP_TIMEOUT_MS);
        fail_msg("activatord did not exit within %d ms of SIGTERM", STOP_TIMEOUT_MS);
    }
    stop_notify_thread(d);
    return status;
}

/* Every cgroup directory below the root, relative to it, except "hosts"
 * itself; and whether any holds a process. */
typedef struct tree_walk {
    size_t root_len;
    char leftovers[2048];
    size_t used;
    bool populated;
} tree_walk;

static tree_walk *current_walk;

static int walk_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    tree_walk *walk = current_walk;
    if (flag != FTW_D && flag != FTW_DP)
        return 0;
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
    char *text = dh_read_text(procs);
    if (text && text[0])
        walk->populated = true;
    free(text);
    const char *relative = path + walk->root_len;
    if (*relative == '/')
        relative++;
    if (*relative && strcmp(relative, "hosts") != 0 && walk->used < sizeof(walk->leftovers) - 1)
        walk->used += (size_t)snprintf(walk->leftovers + walk->used,
                                       sizeof(walk->leftovers) - walk->used, " %s", relative);
    return 0;
}

static bool pid_gone(pid_t pid)
{
    /* The daemon is gone, so its apps were re-parented and are reaped by
     * init; a zombie may linger for an instant. */
    for (int i = 0; i < 250; i++) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        sleep_ms(20);
    }
    return false;
}

static void check_marked_pids_gone(dh_daemon *d)
{
    DIR *dir = opendir(d->dir);
    if (!dir)
        fail_msg("opendir %s: %s", d->dir, strerror(errno));
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (strncmp(entry->d_name, "marker-", 7) != 0)
            continue;
        pid_t pids[64];
        size_t n = dh_marker_pids(d, entry->d_name + 7, pids, 64);
        for (size_t i = 0; i < n; i++)
            DH_CHECK(d, pid_gone(pids[i]), "host %s: app pid %d still runs after the daemon exited",
                     entry->d_name + 7, (int)pids[i]);
    }
    closedir(dir);
}

void dh_stop_and_check_clean(dh_daemon *d)
{
    int status = dh_stop(d);
    DH_CHECK(d, status == 0, "activatord exited with status %d after SIGTERM, expected 0", status);
    DH_CHECK(d, d->stopping_seen, "activatord exited without sending STOPPING=1");

    tree_walk walk = {.root_len = strlen(d->cgroup_path)};
    current_walk = &walk;
    nftw(d->cgroup_path, walk_entry, 16, FTW_PHYS);
    current_walk = NULL;
    DH_CHECK(d, !walk.populated, "a process is left in the cgroup subtree %s", d->cgroup_path);
    DH_CHECK(d, walk.used == 0, "cgroups left under %s after a clean stop:%s", d->cgroup_path,
             walk.leftovers);
    check_marked_pids_gone(d);
}

/* ---- control -------------------------------------------------------------- */

int dh_request_raw(const char *url, const void *body, size_t len, int timeout_ms, char **reply)
{
    nng_socket req;
    int rv = nng_req0_open(&req);
    if (rv != 0)
        return rv;
    /* One send only: a resend would run a wake twice. */
    nng_socket_set_ms(req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(req, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_size(req, NNG_OPT_RECVMAXSZ, 4 * 1024 * 1024);
    rv = nng_dial(req, url, NULL, 0);
    if (rv == 0)
        rv = nng_send(req, (void *)body, len, 0);
    nng_msg *msg = NULL;
    if (rv == 0)
        rv = nng_recvmsg(req, &msg, 0);
    if (rv == 0) {
        *reply = strndup(nng_msg_body(msg), nng_msg_len(msg));
        nng_msg_free(msg);
    }
    nng_close(req);
    return rv;
}

static json_object *request_text(dh_daemon *d, int timeout_ms, const char *body)
{
    char *text = NULL;
    int rv = dh_request_raw(d->control_url, body, strlen(body), timeout_ms, &text);
    DH_CHECK(d, rv == 0, "request %s to %s: %s", body, d->control_url, nng_strerror(rv));
    json_object *reply = json_tokener_parse(text);
    DH_CHECK(d, reply && json_object_is_type(reply, json_type_object),
             "request %s: the reply is not a JSON object: %s", body, text);
    free(text);
    return reply;
}

json_object *dh_request(dh_daemon *d, int timeout_ms, const char *fmt, ...)
{
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    return request_text(d, timeout_ms, body);
}

struct dh_async {
    pthread_t thread;
    char url[160];
    char body[4096];
    int timeout_ms;
    int rv;
    char *reply;
};

static void *async_request(void *arg)
{
    dh_async *async = arg;
    async->rv =
        dh_request_raw(async->url, async->body, strlen(async->body), async->timeout_ms,
                       &async->reply);
    return NULL;
}

dh_async *dh_request_start(dh_daemon *d, int timeout_ms, const char *fmt, ...)
{
    dh_async *async = calloc(1, sizeof(*async));
    assert_non_null(async);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(async->body, sizeof(async->body), fmt, ap);
    va_end(ap);
    snprintf(async->url, sizeof(async->url), "%s", d->control_url);
    async->timeout_ms = timeout_ms;
    if (pthread_create(&async->thread, NULL, async_request, async) != 0)
        fail_msg("cannot start the request thread");
    return async;
}

json_object *dh_request_finish(dh_daemon *d, dh_async *async)
{
    pthread_join(async->thread, NULL);
    int rv = async->rv;
    char *text = async->reply;
    char body[4096];
    snprintf(body, sizeof(body), "%s", async->body);
    free(async);
    DH_CHECK(d, rv == 0, "request %s: %s", body, nng_strerror(rv));
    json_object *reply = json_tokener_parse(text);
    DH_CHECK(d, reply && json_object_is_type(reply, json_type_object),
             "request %s: the reply is not a JSON object: %s", body, text);
    free(text);
    return reply;
}

bool dh_reply_ok(json_object *reply)
{
    json_object *ok = NULL;
    return json_object_object_get_ex(reply, "ok", &ok) && json_object_get_boolean(ok);
}

const char *dh_reply_code(json_object *reply)
{
    if (dh_reply_ok(reply))
        return "ok";
    json_object *error = NULL;
    if (!json_object_object_get_ex(reply, "error", &error))
        return "(no error object)";
    const char *code = dh_json_str(error, "code");
    return code[0] ? code : "(no code)";
}

json_object *dh_reply_result(json_object *reply)
{
    json_object *result = NULL;
    json_object_object_get_ex(reply, "result", &result);
    return result;
}

json_object *dh_status(dh_daemon *d, const char *host)
{
    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"status\",\"host\":\"%s\"}", host);
    DH_CHECK(d, dh_reply_ok(reply), "status %s: %s", host, json_object_to_json_string(reply));
    json_object *result = json_object_get(dh_reply_result(reply));
    json_object_put(reply);
    return result;
}

bool dh_wait_state(dh_daemon *d, const char *host, const char *state, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        json_object *status = dh_status(d, host);
        bool reached = strcmp(dh_json_str(status, "state"), state) == 0;
        json_object_put(status);
        if (reached)
            return true;
        if (now_ms() >= deadline)
            return false;
        sleep_ms(20);
    }
}

const char *dh_json_str(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &value) ||
        !json_object_is_type(value, json_type_string))
        return "";
    return json_object_get_string(value);
}

uint64_t dh_json_u64(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &value) ||
        !json_object_is_type(value, json_type_int))
        return 0;
    return json_object_get_uint64(value);
}

/* ---- events --------------------------------------------------------------- */

static void copy_json_string(json_object *obj, const char *key, char *out, size_t size)
{
    snprintf(out, size, "%s", dh_json_str(obj, key));
}

static void record_event(dh_daemon *d, const char *data, size_t len)
{
    const char *space = memchr(data, ' ', len);
    DH_CHECK(d, space, "an event without a space between topic and JSON: %.*s", (int)len, data);
    char *json_text = strndup(space + 1, len - (size_t)(space + 1 - data));
    json_object *obj = json_tokener_parse(json_text);
    DH_CHECK(d, obj, "an event whose JSON does not parse: %.*s", (int)len, data);
    free(json_text);
    if (d->n_events == d->cap_events) {
        d->cap_events = d->cap_events ? d->cap_events * 2 : 64;
        d->events = realloc(d->events, d->cap_events * sizeof(*d->events));
        assert_non_null(d->events);
    }
    dh_event *event = &d->events[d->n_events++];
    memset(event, 0, sizeof(*event));
    event->seq = dh_json_u64(obj, "seq");
    event->time_usec = dh_json_u64(obj, "time_usec");
    event->generation = dh_json_u64(obj, "generation");
    event->pid = (int64_t)dh_json_u64(obj, "pid");
    copy_json_string(obj, "event", event->name, sizeof(event->name));
    copy_json_string(obj, "host", event->host, sizeof(event->host));
    copy_json_string(obj, "box", event->box, sizeof(event->box));
    copy_json_string(obj, "version", event->version, sizeof(event->version));
    copy_json_string(obj, "reason", event->reason, sizeof(event->reason));
    /* The topic must say the same as the body: host.<host>.<event>. */
    char topic[160];
    snprintf(topic, sizeof(topic), "host.%s.%s", event->host, event->name);
    DH_CHECK(d, strlen(topic) == (size_t)(space - data) && memcmp(topic, data, strlen(topic)) == 0,
             "event topic %.*s does not match its body %s", (int)(space - data), data,
             json_object_to_json_string(obj));
    json_object_put(obj);
}

void dh_events_pump(dh_daemon *d, int wait_ms)
{
    DH_CHECK(d, d->sub_open, "the event subscriber is not connected");
    uint64_t deadline = now_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
    bool got_one = false;
    for (;;) {
        nng_msg *msg = NULL;
        int rv = nng_recvmsg(d->sub, &msg, NNG_FLAG_NONBLOCK);
        if (rv == 0) {
            record_event(d, nng_msg_body(msg), nng_msg_len(msg));
            nng_msg_free(msg);
            got_one = true;
            continue;
        }
        DH_CHECK(d, rv == NNG_EAGAIN, "receiving events: %s", nng_strerror(rv));
        if (got_one || now_ms() >= deadline)
            return;
        sleep_ms(5);
    }
}

void dh_events_mark(dh_daemon *d)
{
    dh_events_pump(d, 0);
    d->mark = d->n_events ? d->events[d->n_events - 1].seq : 0;
}

static bool find_event(dh_daemon *d, const char *host, const char *name, dh_event *out)
{
    for (size_t i = 0; i < d->n_events; i++) {
        const dh_event *event = &d->events[i];
        if (event->seq > d->mark && strcmp(event->host, host) == 0 &&
            strcmp(event->name, name) == 0) {
            if (out)
                *out = *event;
            return true;
        }
    }
    return false;
}

bool dh_event_wait(dh_daemon *d, const char *host, const char *name, int timeout_ms,
                   dh_event *out)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (find_event(d, host, name, out))
            return true;
        uint64_t now = now_ms();
        if (now >= deadline)
            return false;
        dh_events_pump(d, (int)(deadline - now < 50 ? deadline - now : 50));
    }
}

size_t dh_events_count(dh_daemon *d, const char *host, const char *name)
{
    dh_events_pump(d, 0);
    size_t count = 0;
    for (size_t i = 0; i < d->n_events; i++)
        count += d->events[i].seq > d->mark && strcmp(d->events[i].host, host) == 0 &&
                 strcmp(d->events[i].name, name) == 0;
    return count;
}

/* PUB learns of a subscriber asynchronously, so the harness makes the
 * daemon publish (a claim.changed of the beacon host, which names another
 * box and so is never woken) until one such event arrives. */
static void subscribe(dh_daemon *d)
{
    int rv = nng_sub0_open(&d->sub);
    DH_CHECK(d, rv == 0, "nng_sub0_open: %s", nng_strerror(rv));
    d->sub_open = true;
    nng_socket_set(d->sub, NNG_OPT_SUB_SUBSCRIBE, "", 0);
    nng_socket_set_int(d->sub, NNG_OPT_RECVBUF, 8192);
    rv = nng_dial(d->sub, d->events_url, NULL, 0);
    DH_CHECK(d, rv == 0, "dial %s: %s", d->events_url, nng_strerror(rv));
    claim beacon;
    dh_claim_assigned(DH_BEACON_HOST, DH_OTHER_BOX, &beacon);
    for (int i = 0; i < 100; i++) {
        dh_claim_put(d, &beacon);
        if (dh_event_wait(d, DH_BEACON_HOST, "claim.changed", 100, NULL)) {
            dh_events_mark(d);
            return;
        }
    }
    dh_dump_log(d);
    fail_msg("the event subscriber never received the beacon's claim.changed");
}

/* ---- claims --------------------------------------------------------------- */

bool dh_claim_get(dh_daemon *d, const char *host, claim *out)
{
    act_error err = {0};
    int r = claims_read(d->store, host, out, &err);
    DH_CHECK(d, r >= 0, "reading the claim of %s: %s", host, err.message);
    return r == 1;
}

uint64_t dh_claim_put(dh_daemon *d, const claim *c)
{
    for (int i = 0; i < 20; i++) {
        claim current;
        uint64_t expected = dh_claim_get(d, c->host, &current) ? current.revision : 0;
        uint64_t revision = 0;
        act_error err = {0};
        int r = claims_cas(d->store, c->host, expected, c, &revision, NULL, &err);
        if (r == 0)
            return revision;
        DH_CHECK(d, r == CLAIMS_CHANGED, "writing the claim of %s: %s", c->host, err.message);
    }
    fail_msg("writing the claim of %s: it kept changing under the test", c->host);
    return 0;
}

void dh_claim_assigned(const char *host, const char *box, claim *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->host, sizeof(out->host), "%s", host);
    snprintf(out->op.id, sizeof(out->op.id), "e2e");
    out->op.kind = CLAIM_OP_SERVING;
    snprintf(out->op.phase, sizeof(out->op.phase), "assigned");
    snprintf(out->op.exec, sizeof(out->op.exec), "%s", box);
}

/* ---- observation ---------------------------------------------------------- */

int dh_http_get(int port, char *buf, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval timeout = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char request[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    size_t used = 0;
    ssize_t n;
    while (used < size - 1 && (n = recv(fd, buf + used, size - 1 - used, 0)) > 0)
        used += (size_t)n;
    close(fd);
    buf[used] = '\0';
    const char *body = strstr(buf, "\r\n\r\n");
    if (!body)
        return -EPROTO;
    body += 4;
    size_t body_len = strlen(body);
    memmove(buf, body, body_len + 1);
    return (int)body_len;
}

size_t dh_marker_pids(dh_daemon *d, const char *host, pid_t *pids, size_t max)
{
    char path[PATH_MAX];
    marker_path(d, host, path, sizeof(path));
    char *text = dh_read_text(path);
    if (!text)
        return 0;
    size_t n = 0;
    for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n"))
        pids[n++] = (pid_t)atoi(line);
    free(text);
    return n;
}

bool dh_marker_wait(dh_daemon *d, const char *host, size_t count, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    pid_t pids[64];
    while (dh_marker_pids(d, host, pids, 64) < count) {
        if (now_ms() >= deadline)
            return false;
        sleep_ms(10);
    }
    return true;
}

bool dh_leaf_exists(dh_daemon *d, const char *host, const char *leaf)
{
    char path[PATH_MAX + 160];
    snprintf(path, sizeof(path), "%s/hosts/%s/%s", d->cgroup_path, host, leaf);
    return access(path, F_OK) == 0;
}

static size_t count_subdirs(const char *path, bool dirs)
{
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (entry->d_name[0] != '.' && (!dirs || entry->d_type == DT_DIR))
            count++;
    closedir(dir);
    return count;
}

size_t dh_leaf_count(dh_daemon *d, const char *host)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", d->cgroup_path, host);
    return count_subdirs(path, true);
}

size_t dh_generation_records(dh_daemon *d, const char *host)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/%s/generations", d->state_dir, host);
    return count_subdirs(path, false);
}

int dh_run(char *const argv[], char *out, size_t out_size)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: NNG is not fork-safe. */
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    /* Read to the end even past out_size, so the child never blocks on a
     * full pipe; what does not fit is dropped. */
    size_t used = 0;
    char overflow[4096];
    for (;;) {
        bool room = used < out_size - 1;
        ssize_t n = room ? read(fds[0], out + used, out_size - 1 - used)
                         : read(fds[0], overflow, sizeof(overflow));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (room)
            used += (size_t)n;
    }
    out[used] = '\0';
    close(fds[0]);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}
