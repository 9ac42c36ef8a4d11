/* See bench_daemon.h. */
#include "bench/wake/bench_daemon.h"

#include <errno.h>
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
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/req.h>

#include "activator/listen/listen.h"
#include "common/cleanup.h"
#include "common/clock.h"

#ifndef BD_ACTIVATORD
#error "BD_ACTIVATORD must name the activatord executable"
#endif

extern char **environ;

void bd_sleep_ms(long ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
        ;
}

int bd_check_can_run(const char *bench)
{
    if (geteuid() != 0) {
        fprintf(stderr,
                "%s: cannot run: it needs root to create cgroups and run activatord (run it as "
                "root, e.g. sudo scripts/bench.sh)\n",
                bench);
        return 77;
    }
    cg_root *root = NULL;
    act_error err = {0};
    int r = cg_root_create_throwaway("act-bench-probe", &root, &err);
    if (r < 0) {
        fprintf(stderr, "%s: cannot run: %s\n", bench,
                r == -ENOENT ? "no cgroup2 hierarchy on this machine (mount cgroup2)"
                             : err.message);
        return r == -ENOENT ? 77 : 1;
    }
    if (cg_root_destroy_throwaway(root, &err) < 0) {
        fprintf(stderr, "%s: cannot run: removing a throwaway cgroup: %s\n", bench, err.message);
        return 1;
    }
    return 0;
}

/* ---- files ------------------------------------------------------------------- */

const char *bd_base_dir(void)
{
    const char *base = getenv("ACT_BENCH_DIR");
    return base && base[0] == '/' && strlen(base) < 24 ? base : "/tmp";
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

int bd_setup(bd_daemon *d, const char *label, const char *extra_conf, act_error *err)
{
    memset(d, 0, sizeof(*d));
    d->pidfd = d->notify_fd = -1;
    d->notify_stop[0] = d->notify_stop[1] = -1;
    pthread_mutex_init(&d->notify_lock, NULL);
    snprintf(d->dir, sizeof(d->dir), "%s/act-bench-%s-XXXXXX", bd_base_dir(), label);
    if (!mkdtemp(d->dir)) {
        d->dir[0] = '\0';
        return act_error_set(err, errno, "mkdtemp: %s", strerror(errno));
    }
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
    int r = cg_root_create_throwaway("act-bench", &d->cgroups, err);
    if (r < 0)
        return act_error_prefix(err, "cannot create a throwaway cgroup root");

    char text[8192];
    snprintf(text, sizeof(text),
             "# written by an activator benchmark\n"
             "[Activator]\n"
             "Box=" BD_BOX "\n"
             "Store=dir://%s/claims\n"
             "StateDirectory=%s\n"
             "RuntimeDirectory=%s\n"
             "HostsDirectory=%s\n"
             "CgroupRoot=%s\n"
             "MetricsListen=no\n"
             "%s",
             d->state_dir, d->state_dir, d->runtime_dir, d->hosts_dir, cg_root_path(d->cgroups),
             extra_conf ? extra_conf : "");
    return write_text(d->config_path, text, err);
}

int bd_write_host(bd_daemon *d, const char *host, act_error *err, const char *fmt, ...)
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

/* ---- the notify socket ---------------------------------------------------------- */

static void handle_notify(bd_daemon *d, char *text, uint64_t now)
{
    char *saved = NULL;
    pthread_mutex_lock(&d->notify_lock);
    for (char *line = strtok_r(text, "\n", &saved); line; line = strtok_r(NULL, "\n", &saved)) {
        if (strcmp(line, "READY=1") == 0 && !d->ready_usec)
            d->ready_usec = now;
        else if (strcmp(line, "STOPPING=1") == 0)
            d->stopping_seen = true;
    }
    pthread_mutex_unlock(&d->notify_lock);
}

/* One datagram; the fds of FDSTORE=1 messages are closed at once, since the
 * benchmark is no fd store. Returns false when none waited. */
static bool read_notify(bd_daemon *d)
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
    uint64_t now = act_now_usec();
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int fds[253];
        memcpy(fds, CMSG_DATA(cmsg), count * sizeof(int));
        for (size_t i = 0; i < count; i++)
            close(fds[i]);
        pthread_mutex_lock(&d->notify_lock);
        d->stored_fds += (unsigned)count;
        pthread_mutex_unlock(&d->notify_lock);
    }
    text[n] = '\0';
    handle_notify(d, text, now);
    return true;
}

static void *notify_thread(void *arg)
{
    bd_daemon *d = arg;
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
    while (read_notify(d))
        ;
    return NULL;
}

static int notify_open(bd_daemon *d, act_error *err)
{
    d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (d->notify_fd < 0)
        return act_error_set(err, errno, "notify socket: %s", strerror(errno));
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(d->notify_path) >= sizeof(addr.sun_path))
        return act_error_set(err, ENAMETOOLONG, "notify socket path too long: %s", d->notify_path);
    memcpy(addr.sun_path, d->notify_path, strlen(d->notify_path) + 1);
    unlink(d->notify_path);
    if (bind(d->notify_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
        return act_error_set(err, errno, "bind %s: %s", d->notify_path, strerror(errno));
    /* The daemon sends one FDSTORE=1 datagram per socket at start-up: a deep
     * receive buffer keeps it from waiting on this reader. */
    int size = 4 * 1024 * 1024;
    setsockopt(d->notify_fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
    if (pipe2(d->notify_stop, O_CLOEXEC) < 0)
        return act_error_set(err, errno, "pipe2: %s", strerror(errno));
    d->ready_usec = 0;
    d->stopping_seen = false;
    if (pthread_create(&d->notify_thread, NULL, notify_thread, d) != 0)
        return act_error_set(err, EAGAIN, "cannot start the notify reader thread");
    d->notify_thread_running = true;
    return 0;
}

static void notify_close(bd_daemon *d)
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

static uint64_t ready_at(bd_daemon *d)
{
    pthread_mutex_lock(&d->notify_lock);
    uint64_t ready = d->ready_usec;
    pthread_mutex_unlock(&d->notify_lock);
    return ready;
}

/* ---- start and stop ------------------------------------------------------------- */

int bd_raise_nofile(rlim_t want, rlim_t need, act_error *err)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) < 0)
        return act_error_set(err, errno, "getrlimit: %s", strerror(errno));
    if (limit.rlim_max < want) {
        /* Raising the hard limit needs CAP_SYS_RESOURCE, which a container's
         * root may lack: then the hard limit we have must do. */
        struct rlimit wanted = {want, want};
        if (setrlimit(RLIMIT_NOFILE, &wanted) == 0)
            return 0;
    }
    if (limit.rlim_max < need)
        return act_error_set(err, EMFILE,
                             "RLIMIT_NOFILE hard limit is %lu and cannot be raised, but the "
                             "daemon needs %lu fds; raise it (ulimit -Hn, LimitNOFILE=) and rerun",
                             (unsigned long)limit.rlim_max, (unsigned long)need);
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
        return act_error_set(err, errno, "setrlimit RLIMIT_NOFILE: %s", strerror(errno));
    return 0;
}

/* What an outer systemd or shell may have set that would confuse the daemon:
 * it must see our notify socket and no inherited fds. */
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

static int wait_exit(bd_daemon *d, int timeout_ms)
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
    return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

static int events_subscribe(bd_daemon *d, act_error *err)
{
    int rv = nng_sub0_open(&d->sub);
    if (rv != 0)
        return act_error_set(err, EIO, "nng_sub0_open: %s", nng_strerror(rv));
    d->sub_open = true;
    nng_socket_set(d->sub, NNG_OPT_SUB_SUBSCRIBE, "", 0);
    nng_socket_set_int(d->sub, NNG_OPT_RECVBUF, 8192);
    rv = nng_dial(d->sub, d->events_url, NULL, 0);
    if (rv != 0)
        return act_error_set(err, EIO, "cannot subscribe to %s: %s", d->events_url,
                             nng_strerror(rv));
    return 0;
}

int bd_start(bd_daemon *d, int timeout_ms, act_error *err)
{
    int r = notify_open(d, err);
    if (r < 0)
        return r;
    size_t n_env = 0;
    while (environ[n_env])
        n_env++;
    _cleanup_free_ char **envp = calloc(n_env + 2, sizeof(char *));
    if (!envp)
        return act_error_set(err, ENOMEM, "out of memory");
    char notify_env[PATH_MAX];
    snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", d->notify_path);
    size_t n = 0;
    for (size_t i = 0; i < n_env; i++)
        if (env_is_ours(environ[i]))
            envp[n++] = environ[i];
    envp[n++] = notify_env;
    envp[n] = NULL;
    /* ACT_BENCH_VERBOSE=1 logs every pipeline step, to see where a wake waits. */
    const char *verbose = getenv("ACT_BENCH_VERBOSE");
    char *const argv[] = {(char *)BD_ACTIVATORD, (char *)"--config", d->config_path,
                          verbose && *verbose ? (char *)"--verbose" : NULL, NULL};

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
         * parent. A benchmark that dies stops its daemon cleanly. */
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
    d->pid = pid;
    d->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (d->pidfd < 0)
        return act_error_set(err, errno, "pidfd_open: %s", strerror(errno));

    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    while (!ready_at(d)) {
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
    return events_subscribe(d, err);
}

uint64_t bd_startup_usec(const bd_daemon *d)
{
    return d->ready_usec > d->exec_usec ? d->ready_usec - d->exec_usec : 0;
}

int bd_stop(bd_daemon *d, int timeout_ms, act_error *err)
{
    if (d->sub_open)
        nng_close(d->sub);
    d->sub_open = false;
    if (d->pid <= 0)
        return act_error_set(err, ESRCH, "the daemon is not running");
    kill(d->pid, SIGTERM);
    int status = wait_exit(d, timeout_ms);
    if (status < 0) {
        kill(d->pid, SIGKILL);
        wait_exit(d, 10000);
        notify_close(d);
        return act_error_set(err, ETIMEDOUT, "activatord did not exit within %d ms of SIGTERM",
                             timeout_ms);
    }
    notify_close(d);
    return status;
}

int bd_teardown(bd_daemon *d, act_error *err)
{
    int result = 0;
    if (d->pid > 0) {
        act_error ignored = {0};
        if (bd_stop(d, 30000, &ignored) < 0)
            result = act_error_set(err, ETIMEDOUT, "%s", ignored.message);
    }
    notify_close(d);
    if (d->sub_open)
        nng_close(d->sub);
    d->sub_open = false;
    if (d->cgroups) {
        act_error cg_err = {0};
        if (cg_root_destroy_throwaway(d->cgroups, &cg_err) < 0)
            result = act_error_set(
                err, EBUSY, "the throwaway cgroup root was not removed whole: %s", cg_err.message);
        d->cgroups = NULL;
    }
    if (d->dir[0] && getenv("ACT_BENCH_KEEP"))
        fprintf(stderr, "ACT_BENCH_KEEP: kept %s\n", d->dir);
    else if (d->dir[0])
        nftw(d->dir, remove_entry, 64, FTW_DEPTH | FTW_PHYS);
    d->dir[0] = '\0';
    pthread_mutex_destroy(&d->notify_lock);
    return result;
}

long bd_rss_kib(const bd_daemon *d)
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

void bd_dump_log(const bd_daemon *d)
{
    FILE *f = fopen(d->log_path, "re");
    if (!f) {
        fprintf(stderr, "(no daemon log at %s)\n", d->log_path);
        return;
    }
    /* The tail: the part that explains a failure. */
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 8000 ? size - 8000 : 0, SEEK_SET);
    fprintf(stderr, "---- activatord log (%s), last lines ----\n", d->log_path);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fprintf(stderr, "---- end of log ----\n");
    fclose(f);
}

/* ---- control ---------------------------------------------------------------- */

/* One JSON value from len bytes that need not end in a NUL. */
static json_object *parse_json(const void *data, size_t len)
{
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return NULL;
    json_object *obj = json_tokener_parse_ex(tok, data, (int)len);
    json_tokener_free(tok);
    return obj;
}

int bd_request(bd_daemon *d, int timeout_ms, json_object **result, act_error *err, const char *fmt,
               ...)
{
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    if (result)
        *result = NULL;

    nng_socket req;
    int rv = nng_req0_open(&req);
    if (rv != 0)
        return act_error_set(err, EIO, "nng_req0_open: %s", nng_strerror(rv));
    /* One send only: a resend would run a wake or a swap twice. */
    nng_socket_set_ms(req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(req, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_size(req, NNG_OPT_RECVMAXSZ, 16 * 1024 * 1024);
    rv = nng_dial(req, d->control_url, NULL, 0);
    if (rv == 0)
        rv = nng_send(req, body, strlen(body), 0);
    nng_msg *msg = NULL;
    if (rv == 0)
        rv = nng_recvmsg(req, &msg, 0);
    if (rv != 0) {
        nng_close(req);
        return act_error_set(err, rv == NNG_ETIMEDOUT ? ETIMEDOUT : EIO, "request %s to %s: %s",
                             body, d->control_url, nng_strerror(rv));
    }
    json_object *reply = parse_json(nng_msg_body(msg), nng_msg_len(msg));
    nng_msg_free(msg);
    nng_close(req);
    if (!reply)
        return act_error_set(err, EBADMSG, "request %s: the reply is not JSON", body);
    json_object *ok = NULL, *error = NULL;
    if (!json_object_object_get_ex(reply, "ok", &ok) || !json_object_get_boolean(ok)) {
        json_object_object_get_ex(reply, "error", &error);
        int r = act_error_set(err, EPROTO, "request %s refused: %s: %s", body,
                              bd_json_str(error, "code"), bd_json_str(error, "message"));
        json_object_put(reply);
        return r;
    }
    json_object *found = NULL;
    if (result && json_object_object_get_ex(reply, "result", &found))
        *result = json_object_get(found);
    json_object_put(reply);
    return 0;
}

int bd_stage(bd_daemon *d, const char *host, const char *version, const char *path, bool promote,
             act_error *err)
{
    return bd_request(
        d, 60000, NULL, err,
        "{\"v\":1,\"op\":\"stage\",\"host\":\"%s\",\"version\":\"%s\",\"path\":\"%s\","
        "\"promote\":%s}",
        host, version, path, promote ? "true" : "false");
}

int bd_wait_state(bd_daemon *d, const char *host, const char *state, int timeout_ms, act_error *err)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    char last[32] = "";
    for (;;) {
        json_object *status = NULL;
        int r =
            bd_request(d, 10000, &status, err, "{\"v\":1,\"op\":\"status\",\"host\":\"%s\"}", host);
        if (r < 0)
            return r;
        snprintf(last, sizeof(last), "%s", bd_json_str(status, "state"));
        json_object_put(status);
        if (strcmp(last, state) == 0)
            return 0;
        if (act_now_usec() >= deadline)
            return act_error_set(err, ETIMEDOUT, "host %s is %s, not %s, after %d ms", host, last,
                                 state, timeout_ms);
        bd_sleep_ms(1);
    }
}

const char *bd_json_str(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &value) ||
        !json_object_is_type(value, json_type_string))
        return "";
    return json_object_get_string(value);
}

/* ---- events ----------------------------------------------------------------- */

static bool parse_event(const char *data, size_t len, bd_event *out)
{
    const char *space = memchr(data, ' ', len);
    if (!space)
        return false;
    json_object *obj = parse_json(space + 1, len - (size_t)(space + 1 - data));
    if (!obj)
        return false;
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", bd_json_str(obj, "event"));
    snprintf(out->host, sizeof(out->host), "%s", bd_json_str(obj, "host"));
    json_object *value = NULL;
    if (json_object_object_get_ex(obj, "time_usec", &value))
        out->time_usec = json_object_get_uint64(value);
    if (json_object_object_get_ex(obj, "generation", &value))
        out->generation = json_object_get_uint64(value);
    json_object_put(obj);
    return true;
}

void bd_events_drain(bd_daemon *d)
{
    nng_msg *msg = NULL;
    while (d->sub_open && nng_recvmsg(d->sub, &msg, NNG_FLAG_NONBLOCK) == 0)
        nng_msg_free(msg);
}

bool bd_event_wait(bd_daemon *d, const char *host, const char *name, int timeout_ms,
                   void (*seen)(const bd_event *event, void *userdata), void *userdata,
                   bd_event *out)
{
    if (!d->sub_open)
        return false;
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    for (;;) {
        uint64_t now = act_now_usec();
        if (now >= deadline)
            return false;
        nng_socket_set_ms(d->sub, NNG_OPT_RECVTIMEO, (nng_duration)((deadline - now) / 1000 + 1));
        nng_msg *msg = NULL;
        if (nng_recvmsg(d->sub, &msg, 0) != 0)
            return false;
        bd_event event;
        bool parsed = parse_event(nng_msg_body(msg), nng_msg_len(msg), &event);
        nng_msg_free(msg);
        if (!parsed)
            continue;
        if (seen)
            seen(&event, userdata);
        if (strcmp(event.host, host) == 0 && strcmp(event.name, name) == 0) {
            if (out)
                *out = event;
            return true;
        }
    }
}

/* ---- measuring ---------------------------------------------------------------- */

int bd_samples_add(bd_samples *samples, double value)
{
    if (samples->n == samples->cap) {
        size_t cap = samples->cap ? samples->cap * 2 : 256;
        double *grown = realloc(samples->values, cap * sizeof(double));
        if (!grown)
            return -ENOMEM;
        samples->values = grown;
        samples->cap = cap;
    }
    samples->values[samples->n++] = value;
    return 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bd_samples_quantile(bd_samples *samples, double q)
{
    if (!samples->n)
        return 0;
    qsort(samples->values, samples->n, sizeof(double), compare_double);
    /* Nearest rank: the smallest value with at least q of the samples at or
     * below it, so p99 of 300 samples is the 297th, not an interpolation. */
    size_t rank = (size_t)(q * (double)samples->n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > samples->n)
        rank = samples->n;
    return samples->values[rank - 1];
}

void bd_samples_free(bd_samples *samples)
{
    free(samples->values);
    *samples = (bd_samples){0};
}

int bd_echo_once(const char *address, int timeout_ms, act_error *err)
{
    act_listen_address target;
    int r = act_listen_parse(address, "echo target", &target, err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = socket(target.addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return act_error_set(err, errno, "socket: %s", strerror(errno));
    if (connect(fd, &target.addr.sa, target.len) < 0)
        return act_error_set(err, errno, "connect %s: %s", address, strerror(errno));
    char byte = 'x';
    if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1)
        return act_error_set(err, errno, "send to %s: %s", address, strerror(errno));
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int ready;
    do
        ready = poll(&pfd, 1, timeout_ms);
    while (ready < 0 && errno == EINTR);
    if (ready <= 0)
        return act_error_set(err, ETIMEDOUT, "%s: no echo within %d ms", address, timeout_ms);
    char back = 0;
    ssize_t got = recv(fd, &back, 1, 0);
    if (got != 1 || back != byte)
        return act_error_set(err, got < 0 ? errno : ECONNRESET, "%s: %s", address,
                             got < 0 ? strerror(errno) : "closed without echoing");
    return 0;
}

int bd_free_port(act_error *err)
{
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return act_error_set(err, errno, "socket: %s", strerror(errno));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) < 0)
        return act_error_set(err, errno, "cannot find a free port: %s", strerror(errno));
    return ntohs(addr.sin_port);
}
