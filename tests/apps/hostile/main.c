/* act-hostile: a tenant's app that tries, from inside a host, everything a
 * host must not be able to do, for the isolation test (tests/isolation).
 * It takes its listening sockets the systemd way (LISTEN_FDS) or from
 * --listen, says READY=1 and then does what each HTTP request asks:
 *
 *   GET /                       "act-hostile pid=P uid=U gid=G"
 *   GET /attack?KEY=VALUE&...   every one-shot attempt (attempts.h), against
 *                               the targets given: other-pid=, read=, list=,
 *                               write=, create-in=, connect=, notify=,
 *                               cgroup= (paths percent-encoded, keys repeat)
 *   GET /flood?ms=N             floods its own NOTIFY_SOCKET for N ms
 *   GET /linger?sec=N           pushes a socket lingering N s over it
 *   GET /forkbomb?max=M&within=W&hold=H
 *                               a fork bomb: forks until refused (the cap) or
 *                               M processes, giving up after W ms with
 *                               neither; at the cap it keeps trying until
 *                               /forkbomb-stop, or for H ms
 *   GET /forkbomb-stop          lets the fork bomb go
 *   GET /close-stdio            shuts down and closes its stdout and stderr
 *   GET /results                every line reported so far (report.h)
 *
 * The one-shot attempts answer when they are done; the flood and the bomb
 * run in children and report when they end, so /results is polled. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activator/listen/listen.h"
#include "attempts.h"
#include "jobs.h"
#include "report.h"

#define MAX_LISTEN 16
#define MAX_JOBS 16
#define REQUEST_MAX 16384

/* Built with the project's sanitizers, this app runs under the host's
 * seccomp filter, which denies ptrace; LeakSanitizer needs it at exit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

typedef struct job {
    pid_t pid;
    const char *what;
    int fd; /* the read end of its report pipe; -1 once it closed */
    char pending[4096];
    size_t n_pending;
} job;

static job jobs[MAX_JOBS];

/* The connection being answered: a job's child must not keep it open, or
 * the client would wait for an end that never comes. */
static int serving_fd = -1;

/* ---- requests ---- */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void percent_decode(char *s)
{
    char *out = s;
    for (char *in = s; *in; in++) {
        int hi, lo;
        if (*in == '%' && (hi = hex_digit(in[1])) >= 0 && (lo = hex_digit(in[2])) >= 0) {
            *out++ = (char)(hi * 16 + lo);
            in += 2;
        } else {
            *out++ = *in == '+' ? ' ' : *in;
        }
    }
    *out = '\0';
}

static void add_target(target_list *list, const char *value)
{
    if (list->n < ATTEMPT_MAX_TARGETS)
        list->paths[list->n++] = value;
}

/* Fills targets from query, which it cuts up in place. */
static void parse_targets(char *query, attack_targets *targets)
{
    for (char *save = NULL, *pair = strtok_r(query, "&", &save); pair;
         pair = strtok_r(NULL, "&", &save)) {
        char *value = strchr(pair, '=');
        if (!value)
            continue;
        *value++ = '\0';
        percent_decode(pair);
        percent_decode(value);
        if (strcmp(pair, "other-pid") == 0)
            targets->other_pid = (pid_t)atoi(value);
        else if (strcmp(pair, "read") == 0)
            add_target(&targets->read, value);
        else if (strcmp(pair, "list") == 0)
            add_target(&targets->list, value);
        else if (strcmp(pair, "write") == 0)
            add_target(&targets->write, value);
        else if (strcmp(pair, "create-in") == 0)
            add_target(&targets->create_in, value);
        else if (strcmp(pair, "connect") == 0)
            add_target(&targets->connect, value);
        else if (strcmp(pair, "notify") == 0)
            add_target(&targets->notify, value);
        else if (strcmp(pair, "cgroup") == 0)
            add_target(&targets->cgroup, value);
    }
}

static long query_number(const char *query, const char *key, long fallback)
{
    size_t n = strlen(key);
    for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL)
        if (strncmp(p, key, n) == 0 && p[n] == '=')
            return strtol(p + n + 1, NULL, 10);
    return fallback;
}

/* ---- jobs ---- */

static void start_job(const char *what, void (*run)(int out_fd, long a, long b, long c), long a,
                      long b, long c, char *reply, size_t size)
{
    size_t slot = 0;
    while (slot < MAX_JOBS && jobs[slot].pid)
        slot++;
    int pipe_fds[2];
    if (slot == MAX_JOBS || pipe2(pipe_fds, O_CLOEXEC) < 0) {
        report_untried(what, "no room for another job");
        snprintf(reply, size, "cannot start %s\n", what);
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        report_untried(what, "fork failed");
        snprintf(reply, size, "cannot start %s: fork failed\n", what);
        return;
    }
    if (pid == 0) {
        close(pipe_fds[0]);
        close(serving_fd);
        run(pipe_fds[1], a, b, c);
        _exit(0);
    }
    close(pipe_fds[1]);
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    jobs[slot] = (job){.pid = pid, .what = what, .fd = pipe_fds[0]};
    snprintf(reply, size, "started %s pid=%d\n", what, (int)pid);
}

static void run_flood(int out_fd, long ms, long unused, long unused_too)
{
    (void)unused;
    (void)unused_too;
    job_flood(out_fd, ms);
}

static void run_linger(int out_fd, long sec, long unused, long unused_too)
{
    (void)unused;
    (void)unused_too;
    job_linger(out_fd, sec);
}

static void run_forkbomb(int out_fd, long max, long within_ms, long hold_ms)
{
    job_forkbomb(out_fd, max, within_ms, hold_ms);
}

/* Tells the running job what (its pid, not yet reaped) to end with sig. */
static void signal_job(const char *what, int sig, char *reply, size_t size)
{
    for (size_t i = 0; i < MAX_JOBS; i++)
        if (jobs[i].pid && strcmp(jobs[i].what, what) == 0 && kill(jobs[i].pid, sig) == 0) {
            snprintf(reply, size, "signalled %s pid=%d\n", what, (int)jobs[i].pid);
            return;
        }
    snprintf(reply, size, "no %s runs\n", what);
}

/* Reads what each job wrote, reports its complete lines, and reaps it. */
static void collect_jobs(void)
{
    for (size_t i = 0; i < MAX_JOBS; i++) {
        job *j = &jobs[i];
        if (!j->pid)
            continue;
        while (j->fd >= 0) {
            ssize_t got =
                read(j->fd, j->pending + j->n_pending, sizeof(j->pending) - 1 - j->n_pending);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                if (got == 0) {
                    close(j->fd);
                    j->fd = -1;
                }
                break;
            }
            j->n_pending += (size_t)got;
            j->pending[j->n_pending] = '\0';
            char *newline;
            while ((newline = strchr(j->pending, '\n'))) {
                *newline = '\0';
                report_line(j->pending);
                size_t rest = j->n_pending - (size_t)(newline + 1 - j->pending);
                memmove(j->pending, newline + 1, rest + 1);
                j->n_pending = rest;
            }
            if (j->n_pending == sizeof(j->pending) - 1)
                j->n_pending = 0;
        }
        if (j->fd < 0 && waitpid(j->pid, NULL, WNOHANG) != 0)
            *j = (job){0};
    }
}

/* ---- stdout and stderr ---- */

/* Under a supervisor that gives every app one shared stream, shutting the
 * socket down ends it for every app; closing only our own fds is harmless,
 * so both are tried. */
static void close_stdio(char *reply, size_t size)
{
    int out = shutdown(STDOUT_FILENO, SHUT_RDWR) < 0 ? errno : 0;
    int err = shutdown(STDERR_FILENO, SHUT_RDWR) < 0 ? errno : 0;
    close(STDOUT_FILENO);
    close(STDERR_FILENO);
    /* Keep 1 and 2 from being handed to a later socket of ours. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0 && null != STDOUT_FILENO)
        dup2(null, STDOUT_FILENO);
    if (null >= 0 && null != STDERR_FILENO)
        dup2(null, STDERR_FILENO);
    report_note("close-stdio", "shutdown(stdout) %s, shutdown(stderr) %s, both closed",
                out ? report_errno_name(out) : "ok", err ? report_errno_name(err) : "ok");
    snprintf(reply, size, "closed\n");
}

/* ---- the server ---- */

static void write_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

static void respond(int fd, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     len);
    write_all(fd, head, (size_t)n);
    write_all(fd, body, len);
}

static void serve(int fd)
{
    /* The test's requests are one at a time; a stuck client must not hang
     * the app for good. */
    struct timeval timeout = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    static char request[REQUEST_MAX];
    size_t got = 0;
    while (got < sizeof(request) - 1 && !memmem(request, got, "\r\n\r\n", 4) &&
           !memmem(request, got, "\n\n", 2)) {
        ssize_t n = read(fd, request + got, sizeof(request) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    request[got] = '\0';
    char *path = strchr(request, ' ');
    char *end = path ? strchr(path + 1, ' ') : NULL;
    if (!path || !end) {
        respond(fd, "bad request\n", 12);
        return;
    }
    *end = '\0';
    path++;
    char *query = strchr(path, '?');
    if (query)
        *query++ = '\0';
    else
        query = end; /* "" */

    static char reply[1024];
    if (strcmp(path, "/attack") == 0) {
        static attack_targets targets;
        memset(&targets, 0, sizeof(targets));
        parse_targets(query, &targets);
        size_t before = report_length();
        attack(&targets);
        respond(fd, report_text() + before, report_length() - before);
        return;
    }
    if (strcmp(path, "/results") == 0) {
        collect_jobs();
        respond(fd, report_text(), report_length());
        return;
    }
    if (strcmp(path, "/flood") == 0)
        start_job("notify-flood", run_flood, query_number(query, "ms", 10000), 0, 0, reply,
                  sizeof(reply));
    else if (strcmp(path, "/linger") == 0)
        start_job("notify-linger", run_linger, query_number(query, "sec", 5), 0, 0, reply,
                  sizeof(reply));
    else if (strcmp(path, "/forkbomb") == 0)
        start_job("forkbomb", run_forkbomb, query_number(query, "max", 5000),
                  query_number(query, "within", 60000), query_number(query, "hold", 30000), reply,
                  sizeof(reply));
    else if (strcmp(path, "/forkbomb-stop") == 0)
        signal_job("forkbomb", SIGUSR1, reply, sizeof(reply));
    else if (strcmp(path, "/close-stdio") == 0)
        close_stdio(reply, sizeof(reply));
    else
        snprintf(reply, sizeof(reply), "act-hostile pid=%d uid=%d gid=%d\n", (int)getpid(),
                 (int)getuid(), (int)getgid());
    respond(fd, reply, strlen(reply));
}

static void on_sigterm(int sig)
{
    (void)sig;
    _exit(0);
}

int main(int argc, char **argv)
{
    int listen_fds[MAX_LISTEN];
    int n_listen = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc && n_listen < MAX_LISTEN) {
            lsn_address address;
            act_error err = {0};
            int fd = -1;
            if (lsn_parse(argv[++i], "--listen", &address, &err) == 0)
                fd = lsn_bind(&address, SOMAXCONN, &err);
            if (fd < 0) {
                fprintf(stderr, "act-hostile: %s\n", err.message);
                return 1;
            }
            listen_fds[n_listen++] = fd;
        } else {
            fprintf(stderr, "usage: act-hostile [--listen ADDR:PORT]...\n"
                            "Without --listen, the sockets come from LISTEN_FDS.\n");
            return 2;
        }
    }
    if (n_listen == 0) {
        int n = sd_listen_fds(1);
        for (int i = 0; i < n && n_listen < MAX_LISTEN; i++)
            listen_fds[n_listen++] = SD_LISTEN_FDS_START + i;
    }
    if (n_listen == 0) {
        fprintf(stderr, "act-hostile: no sockets: pass --listen or run under LISTEN_FDS\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_sigterm);
    sd_notify(0, "READY=1\nSTATUS=act-hostile waiting for the test");

    for (;;) {
        struct pollfd pfds[MAX_LISTEN];
        for (int i = 0; i < n_listen; i++)
            pfds[i] = (struct pollfd){.fd = listen_fds[i], .events = POLLIN};
        /* Wakes now and then to collect what the jobs wrote and reap them. */
        int r = poll(pfds, (nfds_t)n_listen, 200);
        collect_jobs();
        if (r <= 0)
            continue;
        for (int i = 0; i < n_listen; i++) {
            if (!(pfds[i].revents & POLLIN))
                continue;
            int fd = accept4(listen_fds[i], NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            serving_fd = fd;
            serve(fd);
            close(fd);
            serving_fd = -1;
        }
    }
}
