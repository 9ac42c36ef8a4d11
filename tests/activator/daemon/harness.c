/* See harness.h. */
#include "harness.h"
#include "harness_internal.h"

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

void dh_sleep_ms(long ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
        ;
}

uint64_t dh_now_ms(void)
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
             "%s"
             "%s",
             d->store_url, d->state_dir, d->runtime_dir, d->hosts_dir, d->cgroup_path,
             /* No metrics server unless a test asks for one on its own port. */
             extra_conf && strstr(extra_conf, "MetricsListen=") ? "" : "MetricsListen=no\n",
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
    dh_notify_close(d);
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

void dh_write_app_host(dh_daemon *d, const char *host, int port, const char *app_args,
                       const char *extra_host_lines)
{
    char marker[PATH_MAX];
    dh_marker_path(d, host, marker, sizeof(marker));
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

/* ---- start and stop ------------------------------------------------------- */

static bool env_is_ours(const char *entry)
{
    /* What systemd or an outer shell may have set that would confuse the
     * daemon: it must see our notify socket, no inherited fds, and log to
     * stderr (our log file), not to the journal. */
    static const char *const drop[] = {
        "NOTIFY_SOCKET=", "JOURNAL_STREAM=", "LISTEN_FDS=",    "LISTEN_PID=", "LISTEN_FDNAMES=",
        "WATCHDOG_USEC=", "WATCHDOG_PID=",   "INVOCATION_ID=", NULL};
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
    fprintf(stderr, "---- activatord log (%s) ----\n%s---- end of log ----\n", d->log_path, start);
    fflush(stderr);
    free(log);
}

bool dh_log_wait(dh_daemon *d, const char *text, int timeout_ms)
{
    uint64_t deadline = dh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *log = dh_read_text(d->log_path);
        bool found = log && strstr(log, text);
        free(log);
        if (found)
            return true;
        if (dh_now_ms() >= deadline)
            return false;
        dh_sleep_ms(20);
    }
}

void dh_start(dh_daemon *d, const char *const *extra_env)
{
    dh_notify_open(d);

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

    uint64_t deadline = dh_now_ms() + START_TIMEOUT_MS;
    while (!dh_notify_ready(d)) {
        struct pollfd pfd = {.fd = d->pidfd, .events = POLLIN};
        if (poll(&pfd, 1, 10) > 0) {
            int status = wait_exit(d, 0);
            dh_dump_log(d);
            fail_msg("activatord exited with status %d before READY=1", status);
        }
        if (dh_now_ms() > deadline) {
            dh_dump_log(d);
            fail_msg("activatord did not send READY=1 within %d ms", START_TIMEOUT_MS);
        }
    }
    dh_events_subscribe(d);
}

int dh_fixture_setup(void **state)
{
    *state = calloc(1, sizeof(dh_daemon));
    return *state ? 0 : -1;
}

int dh_fixture_teardown(void **state)
{
    int r = dh_teardown(*state);
    free(*state);
    return r;
}

int dh_kill(dh_daemon *d)
{
    if (d->pid <= 0)
        fail_msg("dh_kill: the daemon is not running");
    kill(d->pid, SIGKILL);
    int status = wait_exit(d, STOP_TIMEOUT_MS);
    dh_notify_close(d);
    /* The next daemon numbers its events from 1 again. */
    if (d->sub_open)
        nng_close(d->sub);
    d->sub_open = false;
    d->n_events = 0;
    d->mark = 0;
    return status;
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
    dh_notify_close(d);
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

bool dh_pid_gone(pid_t pid)
{
    /* The daemon is gone, so its apps were re-parented and are reaped by
     * init; a zombie may linger for an instant. */
    for (int i = 0; i < 250; i++) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        dh_sleep_ms(20);
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
            DH_CHECK(d, dh_pid_gone(pids[i]), "host %s: app pid %d still runs after the daemon exited",
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
