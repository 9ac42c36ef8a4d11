/* act-testapp: the demo and test app. A small HTTP/1.0 server that takes its
 * listening sockets the systemd way (LISTEN_FDS, through sd_listen_fds, so it
 * runs unchanged under systemd or activatord) or from --listen, says READY=1
 * on NOTIFY_SOCKET, and answers every request with
 *   demo version=V generation=G pid=P
 * On SIGTERM it stops accepting, finishes the requests in flight and exits 0.
 *
 * Flags that make it misbehave on purpose, for the daemon's tests:
 *   --never-ready            never send READY=1 (still serves)
 *   --ready-delay-ms N       wait N ms before accepting and READY=1
 *   --exit-after-ready CODE  exit with CODE right after READY=1
 *   --crash-after-ms N       die of SIGSEGV N ms after start (no core dump)
 *   --exit-immediately CODE  exit with CODE before doing anything
 *   --ignore-sigterm         carry on after SIGTERM (only SIGKILL stops it)
 *   --slow-response-ms N     answer each request N ms after it arrived
 *
 * With WATCHDOG_USEC and WATCHDOG_PID naming it (sd_watchdog_enabled), it
 * sends WATCHDOG=1 every third of that period once ready, and:
 *   --watchdog-stop-after N      sends only N of them, then hangs on serving
 *   --watchdog-trigger-after-ms N  sends WATCHDOG=trigger N ms after ready
 *   --stopping-after-ms N        N ms after ready, says STOPPING=1 and stops
 *                                accepting, then waits for SIGTERM to exit
 *   --health-listen ADDR:PORT    a socket of its own for tcp health checks:
 *                                each connection on it is one check, accepted
 *                                and closed
 *   --health-fail-after N        closes that socket after N checks, so the
 *                                next ones are refused
 *   --log-requests               prints each request's line on stdout, so a
 *                                test can tell its output still arrives
 *
 *   --isolation-report       before anything else, tries what a tenant must
 *                            not do and writes the results to
 *                            $STATE_DIRECTORY/isolation-report
 * With --counter it keeps state: each request adds one to the number in
 * $STATE_DIRECTORY/counter (written temp + rename) and the answer ends in
 * counter=N, so a test sees the state survive a checkpoint and restore.
 * And to probe its isolation (tries.h), before anything else:
 *   --try ACTION       one attempt, repeatable, run in order
 *   --tries-from PATH  more, one per line of PATH (a host file's lines are
 *                      too short for many)
 *   --try-out PATH     where the results go (default stdout); a relative
 *                      PATH is in the working directory, the state directory
 *                      under activatord
 *   --tries-only       exit 0 once the tries are reported */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activator/listen/listen.h"
#include "tests/apps/isolation-report.h"
#include "tries.h"

#define MAX_LISTEN 16
#define MAX_TRIES 64
#define REQUEST_MAX 8192

typedef struct conn {
    int fd;
    size_t got; /* request bytes read */
    char request[REQUEST_MAX];
    uint64_t respond_at; /* 0 while still reading; then when to start writing */
    char *response;      /* malloc'd once the request is complete */
    size_t response_len;
    size_t sent;
} conn;

typedef struct options {
    const char *version;
    bool never_ready;
    long ready_delay_ms;
    int exit_after_ready; /* -1: no */
    long crash_after_ms;  /* -1: no */
    bool ignore_sigterm;
    long slow_response_ms;
    long watchdog_stop_after;       /* -1: never */
    long watchdog_trigger_after_ms; /* -1: never */
    long stopping_after_ms;         /* -1: never */
    const char *health_listen;
    long health_fail_after; /* -1: never */
    bool log_requests;
    bool counter;           /* --counter: count requests in $STATE_DIRECTORY/counter */
} options;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: act-testapp [--listen ADDR:PORT|PATH]... [--version V] [--never-ready]\n"
                 "       [--ready-delay-ms N] [--exit-after-ready CODE] [--crash-after-ms N]\n"
                 "       [--exit-immediately CODE] [--ignore-sigterm] [--slow-response-ms N]\n"
                 "       [--watchdog-stop-after N] [--watchdog-trigger-after-ms N]\n"
                 "       [--stopping-after-ms N] [--health-listen ADDR:PORT]\n"
                 "       [--health-fail-after N] [--isolation-report] [--counter]\n"
                 "       [--try ACTION]... [--tries-from PATH]\n"
                 "       [--try-out PATH] [--tries-only] [--log-requests]\n"
                 "Without --listen, the sockets come from LISTEN_FDS (systemd socket "
                 "activation).\n");
}

static long number_arg(const char *flag, const char *text)
{
    char *end = NULL;
    errno = 0;
    long value = text ? strtol(text, &end, 10) : -1;
    if (!text || errno || *end || value < 0) {
        fprintf(stderr, "act-testapp: %s needs a non-negative number\n", flag);
        exit(2);
    }
    return value;
}

static int bind_listen(const char *spec)
{
    lsn_address address;
    act_error err = {0};
    if (lsn_parse(spec, "--listen", &address, &err) < 0) {
        fprintf(stderr, "act-testapp: %s\n", err.message);
        exit(2);
    }
    int fd = lsn_bind(&address, SOMAXCONN, &err);
    if (fd < 0) {
        fprintf(stderr, "act-testapp: %s\n", err.message);
        exit(1);
    }
    return fd;
}

/* A crash that a supervisor sees as death by signal, without a core dump
 * slowing the test down or cluttering the machine. */
static void crash(void)
{
    prctl(PR_SET_DUMPABLE, 0);
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    _exit(139);
}

static bool request_complete(const conn *c)
{
    return memmem(c->request, c->got, "\r\n\r\n", 4) || memmem(c->request, c->got, "\n\n", 2) ||
           c->got == REQUEST_MAX;
}

/* The next value of $STATE_DIRECTORY/counter, written back; -1 on error. */
static long next_count(void)
{
    const char *dir = getenv("STATE_DIRECTORY");
    if (!dir)
        return -1;
    char path[4096], temp[4200];
    snprintf(path, sizeof(path), "%s/counter", dir);
    snprintf(temp, sizeof(temp), "%s.tmp", path);
    long count = 0;
    FILE *f = fopen(path, "re");
    if (f) {
        if (fscanf(f, "%ld", &count) != 1)
            count = 0;
        fclose(f);
    }
    count++;
    f = fopen(temp, "we");
    if (!f)
        return -1;
    fprintf(f, "%ld\n", count);
    if (fclose(f) != 0 || rename(temp, path) < 0)
        return -1;
    return count;
}

static void prepare_response(conn *c, const options *opt, const char *generation)
{
    if (opt->log_requests) {
        size_t line = strcspn(c->request, "\r\n");
        printf("act-testapp: %.*s\n", (int)(line < c->got ? line : c->got), c->request);
        fflush(stdout);
    }
    char body[256];
    char counter[32] = "";
    if (opt->counter)
        snprintf(counter, sizeof(counter), " counter=%ld", next_count());
    int body_len = snprintf(body, sizeof(body), "demo version=%s generation=%s pid=%d%s\n",
                            opt->version, generation, (int)getpid(), counter);
    int len = asprintf(&c->response,
                       "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                       "Connection: close\r\n\r\n%s",
                       body_len, body);
    if (len < 0) {
        c->response = NULL;
        c->response_len = 0;
        return;
    }
    c->response_len = (size_t)len;
    c->respond_at = now_ms() + (uint64_t)opt->slow_response_ms;
    if (c->respond_at == 0)
        c->respond_at = 1;
}

/* Lowers *timeout (ms, -1 for none) so that poll returns by at. */
static void wake_by(int64_t *timeout, uint64_t now, uint64_t at)
{
    int64_t wait = at > now ? (int64_t)(at - now) : 0;
    if (*timeout < 0 || wait < *timeout)
        *timeout = wait;
}

/* Accepts and closes the connections waiting on the health socket *fd, each
 * one check that passed, counting them in *checks. With fail_after >= 0, the
 * check that makes it fail_after closes the listening socket (and sets *fd
 * to -1) before its own connection: the client sees its check end only once
 * the socket is gone, so its next connect is refused, never accepted into a
 * backlog no one reads. */
static void answer_health_checks(int *fd, long *checks, long fail_after)
{
    int conn_fd;
    while (*fd >= 0 && (conn_fd = accept4(*fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        ++*checks;
        if (fail_after >= 0 && *checks >= fail_after) {
            close(*fd);
            *fd = -1;
        }
        close(conn_fd);
    }
}

/* Ends the connection in *slot and frees the slot. */
static void close_conn(conn **slot)
{
    close((*slot)->fd);
    free((*slot)->response);
    free(*slot);
    *slot = NULL;
}

/* array (capacity *cap elements of size) with room for n, or NULL with
 * array untouched. Doubling: a burst of connections after a stall costs
 * each one O(1), where growing by one copied every connection so far at
 * each accept and could fall behind for good. */
static void *reserve(void *array, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return array;
    size_t grown_cap = *cap ? *cap : 16;
    while (grown_cap < n)
        grown_cap *= 2;
    void *grown = realloc(array, grown_cap * size);
    if (grown)
        *cap = grown_cap;
    return grown;
}

/* When the project is built with AddressSanitizer, this app is too. It runs
 * under the activator's seccomp profile, which denies ptrace, and
 * LeakSanitizer needs ptrace at exit: without this it would turn every clean
 * exit into status 1. Leaks are checked in the project's own tests. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

/* act-e2e-app (tests/activator/daemon/e2e-app.c) links this file in and
 * calls it by another name after its own prologue: a staged build must be
 * whole, because a generation's filesystem view does not show the build
 * tree, which may sit under /tmp. */
#ifndef ACT_TESTAPP_MAIN
#define ACT_TESTAPP_MAIN main
#endif
int ACT_TESTAPP_MAIN(int argc, char **argv);
int ACT_TESTAPP_MAIN(int argc, char **argv)
{
    options opt = {
        .exit_after_ready = -1,
        .crash_after_ms = -1,
        .watchdog_stop_after = -1,
        .watchdog_trigger_after_ms = -1,
        .stopping_after_ms = -1,
        .health_fail_after = -1,
    };
    int listen_fds[MAX_LISTEN];
    int n_listen = 0;
    uint64_t start_ms = now_ms();
    char *tries[MAX_TRIES];
    size_t n_tries = 0;
    const char *try_out = NULL;
    bool tries_only = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--listen") == 0 && next && n_listen < MAX_LISTEN) {
            listen_fds[n_listen++] = bind_listen(next);
            i++;
        } else if (strcmp(a, "--version") == 0 && next) {
            opt.version = next;
            i++;
        } else if (strcmp(a, "--never-ready") == 0) {
            opt.never_ready = true;
        } else if (strcmp(a, "--ready-delay-ms") == 0) {
            opt.ready_delay_ms = number_arg(a, next), i++;
        } else if (strcmp(a, "--exit-after-ready") == 0) {
            opt.exit_after_ready = (int)number_arg(a, next), i++;
        } else if (strcmp(a, "--crash-after-ms") == 0) {
            opt.crash_after_ms = number_arg(a, next), i++;
        } else if (strcmp(a, "--exit-immediately") == 0) {
            exit((int)number_arg(a, next));
        } else if (strcmp(a, "--ignore-sigterm") == 0) {
            opt.ignore_sigterm = true;
        } else if (strcmp(a, "--slow-response-ms") == 0) {
            opt.slow_response_ms = number_arg(a, next), i++;
        } else if (strcmp(a, "--watchdog-stop-after") == 0) {
            opt.watchdog_stop_after = number_arg(a, next), i++;
        } else if (strcmp(a, "--watchdog-trigger-after-ms") == 0) {
            opt.watchdog_trigger_after_ms = number_arg(a, next), i++;
        } else if (strcmp(a, "--stopping-after-ms") == 0) {
            opt.stopping_after_ms = number_arg(a, next), i++;
        } else if (strcmp(a, "--health-listen") == 0 && next) {
            opt.health_listen = next;
            i++;
        } else if (strcmp(a, "--health-fail-after") == 0) {
            opt.health_fail_after = number_arg(a, next), i++;
        } else if (strcmp(a, "--log-requests") == 0) {
            opt.log_requests = true;
        } else if (strcmp(a, "--isolation-report") == 0) {
            act_isolation_report();
        } else if (strcmp(a, "--counter") == 0) {
            opt.counter = true;
        } else if (strcmp(a, "--try") == 0 && next && n_tries < MAX_TRIES) {
            tries[n_tries++] = argv[++i];
        } else if (strcmp(a, "--tries-from") == 0 && next) {
            FILE *list = fopen(argv[++i], "re");
            if (!list) {
                fprintf(stderr, "act-testapp: cannot read %s: %s\n", argv[i], strerror(errno));
                return 1;
            }
            char line[4200];
            while (n_tries < MAX_TRIES && fgets(line, sizeof(line), list)) {
                line[strcspn(line, "\n")] = '\0';
                if (line[0] && !(tries[n_tries++] = strdup(line)))
                    return 1;
            }
            fclose(list);
        } else if (strcmp(a, "--try-out") == 0 && next) {
            try_out = argv[++i];
        } else if (strcmp(a, "--tries-only") == 0) {
            tries_only = true;
        } else if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "act-testapp: unknown or incomplete argument %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (n_tries || tries_only) {
        FILE *out = try_out ? fopen(try_out, "we") : stdout;
        if (!out) {
            fprintf(stderr, "act-testapp: cannot write %s: %s\n", try_out, strerror(errno));
            return 1;
        }
        act_tries_run(tries, n_tries, out);
        if (out != stdout)
            fclose(out);
        if (tries_only)
            return 0;
    }
    /* Under activatord, ACTIVATOR_VERSION names the staged build that runs, so
     * a swap shows in every answer without a build of its own per version. */
    if (!opt.version)
        opt.version = getenv("ACT_TESTAPP_VERSION");
    if (!opt.version)
        opt.version = getenv("ACTIVATOR_VERSION") ? getenv("ACTIVATOR_VERSION") : "unknown";
    const char *generation =
        getenv("ACTIVATOR_GENERATION") ? getenv("ACTIVATOR_GENERATION") : "none";

    if (n_listen == 0) {
        int n = sd_listen_fds(1);
        if (n < 0) {
            fprintf(stderr, "act-testapp: LISTEN_FDS: %s\n", strerror(-n));
            return 1;
        }
        for (int i = 0; i < n && n_listen < MAX_LISTEN; i++)
            listen_fds[n_listen++] = SD_LISTEN_FDS_START + i;
    }
    if (n_listen == 0) {
        fprintf(stderr, "act-testapp: no sockets: pass --listen ADDR:PORT or run under "
                        "socket activation (LISTEN_FDS)\n");
        return 2;
    }
    for (int i = 0; i < n_listen; i++) {
        int flags = fcntl(listen_fds[i], F_GETFL);
        fcntl(listen_fds[i], F_SETFL, flags | O_NONBLOCK);
        fcntl(listen_fds[i], F_SETFD, FD_CLOEXEC);
    }
    int health_fd = opt.health_listen ? bind_listen(opt.health_listen) : -1;
    if (health_fd >= 0)
        fcntl(health_fd, F_SETFL, fcntl(health_fd, F_GETFL) | O_NONBLOCK);
    long health_checks = 0;

    /* The systemd convention: WATCHDOG_PID must be ours, and a keep-alive
     * every half period is what a service sends; a third leaves room for a
     * loaded machine. */
    uint64_t watchdog_usec = 0, watchdog_every_ms = 0, next_keepalive = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0)
        watchdog_every_ms = watchdog_usec / 3000 ? watchdog_usec / 3000 : 1;
    long keepalives = 0;
    bool triggered = false, said_stopping = false;

    /* SIGTERM arrives through a signalfd so the loop handles it between
     * requests, never in the middle of one. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);

    /* Pointers, so growing the table moves 8 bytes a connection, not its
     * request buffer; NULL is a free slot. */
    conn **conns = NULL;
    size_t n_conns = 0, conns_cap = 0;
    struct pollfd *pfds = NULL;
    size_t *owner = NULL;
    size_t pfds_cap = 0, owner_cap = 0;
    bool ready = false, stopping = false;
    uint64_t ready_at = start_ms + (uint64_t)opt.ready_delay_ms;
    uint64_t became_ready = 0;

    for (;;) {
        uint64_t now = now_ms();
        if (opt.crash_after_ms >= 0 && now >= start_ms + (uint64_t)opt.crash_after_ms)
            crash();
        if (!ready && !stopping && now >= ready_at) {
            ready = true;
            if (!opt.never_ready)
                sd_notifyf(0, "READY=1\nSTATUS=serving version %s generation %s", opt.version,
                           generation);
            if (opt.exit_after_ready >= 0)
                exit(opt.exit_after_ready);
            became_ready = now;
        }
        bool keeps_alive = watchdog_every_ms &&
                           (opt.watchdog_stop_after < 0 || keepalives < opt.watchdog_stop_after);
        if (ready && !stopping && keeps_alive && now >= next_keepalive) {
            sd_notify(0, "WATCHDOG=1");
            keepalives++;
            next_keepalive = now + watchdog_every_ms;
        }
        uint64_t trigger_at = became_ready + (uint64_t)opt.watchdog_trigger_after_ms;
        if (ready && !triggered && opt.watchdog_trigger_after_ms >= 0 && now >= trigger_at) {
            sd_notify(0, "WATCHDOG=trigger");
            triggered = true;
        }
        uint64_t stopping_at = became_ready + (uint64_t)opt.stopping_after_ms;
        if (ready && !said_stopping && opt.stopping_after_ms >= 0 && now >= stopping_at) {
            /* As an app that decided to stop: no new clients from here on
             * (before it says so), and the exit waits for the SIGTERM its
             * supervisor sends. */
            for (int i = 0; i < n_listen; i++)
                close(listen_fds[i]);
            n_listen = 0;
            sd_notify(0, "STOPPING=1");
            said_stopping = true;
        }

        size_t active = 0;
        for (size_t i = 0; i < n_conns; i++)
            active += conns[i] != NULL;
        if (stopping && active == 0)
            break;

        /* poll set: signalfd, the health socket, listeners (while ready and
         * not stopping), conns. */
        size_t cap = 2 + (size_t)n_listen + n_conns;
        struct pollfd *grown_pfds = reserve(pfds, &pfds_cap, cap, sizeof(*pfds));
        if (grown_pfds)
            pfds = grown_pfds;
        size_t *grown_owner = reserve(owner, &owner_cap, cap, sizeof(*owner));
        if (grown_owner)
            owner = grown_owner;
        if (!grown_pfds || !grown_owner)
            return 1;
        size_t n_pfds = 0;
        pfds[n_pfds++] = (struct pollfd){.fd = sig_fd, .events = POLLIN};
        size_t health_slot = n_pfds;
        pfds[n_pfds++] = (struct pollfd){.fd = health_fd, .events = POLLIN};
        size_t first_listen = n_pfds;
        bool accepting = ready && !stopping;
        for (int i = 0; i < n_listen && accepting; i++)
            pfds[n_pfds++] = (struct pollfd){.fd = listen_fds[i], .events = POLLIN};
        size_t first_conn = n_pfds;
        int64_t timeout = -1;
        if (!ready)
            timeout = (int64_t)(ready_at - now);
        if (opt.crash_after_ms >= 0)
            wake_by(&timeout, now, start_ms + (uint64_t)opt.crash_after_ms);
        if (ready && !stopping && keeps_alive)
            wake_by(&timeout, now, next_keepalive);
        if (ready && !triggered && opt.watchdog_trigger_after_ms >= 0)
            wake_by(&timeout, now, trigger_at);
        if (ready && !said_stopping && opt.stopping_after_ms >= 0)
            wake_by(&timeout, now, stopping_at);
        for (size_t i = 0; i < n_conns; i++) {
            conn *c = conns[i];
            if (!c)
                continue;
            short events = 0;
            if (!c->response)
                events = POLLIN;
            else if (now >= c->respond_at)
                events = POLLOUT;
            else
                wake_by(&timeout, now, c->respond_at);
            owner[n_pfds] = i;
            pfds[n_pfds++] = (struct pollfd){.fd = c->fd, .events = events};
        }
        int r = poll(pfds, n_pfds, timeout > INT32_MAX ? INT32_MAX : (int)timeout);
        if (r < 0 && errno != EINTR)
            return 1;

        if (pfds[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
                if (opt.ignore_sigterm && si.ssi_signo == SIGTERM) {
                    fprintf(stderr, "act-testapp: ignoring SIGTERM as told\n");
                    continue;
                }
                stopping = true;
            }
            if (stopping) {
                sd_notify(0, "STOPPING=1");
                /* Our copies only: the daemon keeps its own, so new clients
                 * wait in the backlog for the next generation. */
                for (int i = 0; i < n_listen; i++)
                    close(listen_fds[i]);
                n_listen = 0;
            }
        }
        if (health_fd >= 0 && (pfds[health_slot].revents & POLLIN)) {
            answer_health_checks(&health_fd, &health_checks, opt.health_fail_after);
        }
        for (size_t p = first_listen; p < first_conn && !stopping; p++) {
            if (!(pfds[p].revents & POLLIN))
                continue;
            for (;;) {
                int fd = accept4(pfds[p].fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                    break;
                size_t slot = n_conns;
                for (size_t i = 0; i < n_conns; i++)
                    if (!conns[i]) {
                        slot = i;
                        break;
                    }
                conn **grown = reserve(conns, &conns_cap, n_conns + 1, sizeof(*conns));
                if (grown)
                    conns = grown;
                conn *c = grown ? calloc(1, sizeof(*c)) : NULL;
                if (!c) {
                    close(fd);
                    break;
                }
                if (slot == n_conns)
                    n_conns++;
                c->fd = fd;
                conns[slot] = c;
            }
        }
        for (size_t p = first_conn; p < n_pfds; p++) {
            conn **slot = &conns[owner[p]];
            conn *c = *slot;
            if (!c || !pfds[p].revents)
                continue;
            if (!c->response) {
                ssize_t got = read(c->fd, c->request + c->got, REQUEST_MAX - c->got);
                if (got > 0)
                    c->got += (size_t)got;
                if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                    /* The client went away before asking: nothing to answer. */
                    if (!(got == 0 && c->got > 0)) {
                        close_conn(slot);
                        continue;
                    }
                }
                if (request_complete(c) || got == 0)
                    prepare_response(c, &opt, generation);
                if (!c->response && c->got == REQUEST_MAX)
                    close_conn(slot);
            } else {
                ssize_t sent =
                    send(c->fd, c->response + c->sent, c->response_len - c->sent, MSG_NOSIGNAL);
                if (sent > 0)
                    c->sent += (size_t)sent;
                if ((sent < 0 && errno != EAGAIN && errno != EINTR) || c->sent == c->response_len)
                    close_conn(slot);
            }
        }
    }
    free(pfds);
    free(owner);
    free(conns);
    return 0;
}
