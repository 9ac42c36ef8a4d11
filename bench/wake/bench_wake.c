/* bench-wake: cold-wake latency through activatord against the same app
 * started directly, in the same run.
 *
 * activatord: a host running act-notify-echo on 127.0.0.1, parked. One wake
 * is measured from connect() on its socket to the first byte of the echo of
 * one byte sent at once; then the host is parked through the control socket
 * (not timed) and the next wake starts from parked again.
 *
 * Baseline: the benchmark binds its own socket once, and for each run
 * fork+execs the same act-notify-echo with that socket as LISTEN_FDS (as
 * systemd would pass it), connects, sends one byte and times the echo; the
 * app is stopped between runs. So the ratio is the activator's cost on top
 * of starting the app, on the same machine at the same moment: the two are
 * interleaved run by run so that noise hits both alike.
 *
 * The daemon's events (waking, admitted, exec, serving, wall-clock stamped)
 * split each wake into where its time went. A wake makes one durable
 * write before its exec (the claim CAS, on the dir store a write in place
 * into the claim file and its fdatasync; a second, the build state, only
 * when the build changed; the generation record is written without fsync),
 * so the cost of one such write in the same directory, measured between the
 * runs, is printed too: it is the floor the design sets on a disk. Targets:
 * ratio <= 1.2 and at most 0.5 ms added to the direct start's p50 (a ratio
 * alone moves with the machine's start time).
 *
 * Busy box: then the same cold wakes again while another host of the same
 * daemon has a large build (ACT_BENCH_BUSY_MIB, 512 MiB by default; 0 skips
 * it) staged and promoted over and over through the control socket
 * (busy_builds.h). The hashing of whole builds must not stall the wakes:
 * target p99 busy <= 2x the quiet p99 of the same run. Where a busy wake's
 * tail goes is printed beside it (each part's quantile, quiet and busy),
 * and what one claim write in place costs between the busy wakes: the
 * build work's own writes and deletions are what the disk's flush waits
 * for.
 *
 * Frozen: two more hosts of the same app with ParkMode=freeze, one with
 * ThawCheck=cached and one with ThawCheck=claim (one read of the dir://
 * claim store before the thaw). Each run freezes them through the control
 * socket (not timed) and measures connect -> first byte of the echo, which
 * thaws them, interleaved with the cold wakes and the direct starts.
 * Targets: frozen (cached) p50 <= 1 ms and <= 0.1x the direct start's p50.
 * The memory a frozen host keeps (its leaf's memory.current, its process's
 * RSS) is printed too.
 *
 * With ACT_BENCH_STORE=etcd, all of it runs on a real single-member etcd on
 * loopback instead of the dir:// store. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "activator/listen/listen.h"
#include "bench/wake/bench_daemon.h"
#include "bench/wake/busy_builds.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "tests/claims/etcd_harness.h"

#ifndef ACT_NOTIFY_ECHO
#error "ACT_NOTIFY_ECHO must name the act-notify-echo executable"
#endif

#define BENCH "bench-wake"
#define WAKES 200
#define WARMUP 5
#define TARGET 1.2
#define ADDED_TARGET_USEC 500.0
#define HOST "echo"
#define BIG_HOST "big"
#define BUSY_WAKES 100
#define BUSY_TARGET 2.0
#define FROZEN_CACHED "frozen-cached"
#define FROZEN_CLAIM "frozen-claim"
#define FROZEN_TARGET_USEC 1000.0
#define FROZEN_TARGET_RATIO 0.1

extern char **environ;

typedef struct direct_app {
    int listen_fd;
    char address[64];
    char **envp;
    char pid_env[32]; /* "LISTEN_PID=" and room for the child's pid */
} direct_app;

/* The environment of a directly started app: ours without anything that
 * names another process's sockets, plus LISTEN_FDS=1 and LISTEN_PID (filled
 * in by the child, which alone knows its pid). */
static int direct_app_init(direct_app *app, act_error *err)
{
    int port = dd_free_port(err);
    if (port < 0)
        return port;
    snprintf(app->address, sizeof(app->address), "127.0.0.1:%d", port);
    lsn_address address;
    int r = lsn_parse(app->address, "baseline socket", &address, err);
    if (r < 0)
        return r;
    app->listen_fd = lsn_bind(&address, SOMAXCONN, err);
    if (app->listen_fd < 0)
        return app->listen_fd;
    size_t n_env = 0;
    while (environ[n_env])
        n_env++;
    app->envp = calloc(n_env + 3, sizeof(char *));
    if (!app->envp)
        return act_error_set(err, ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "LISTEN_", 7) != 0 &&
            strncmp(environ[i], "NOTIFY_SOCKET=", 14) != 0)
            app->envp[n++] = environ[i];
    app->envp[n++] = (char *)"LISTEN_FDS=1";
    app->envp[n++] = app->pid_env;
    app->envp[n] = NULL;
    return 0;
}

/* Async-signal-safe: the child writes its own pid into LISTEN_PID=. */
static void format_pid_env(char *out, pid_t pid)
{
    static const char prefix[] = "LISTEN_PID=";
    memcpy(out, prefix, sizeof(prefix) - 1);
    char digits[16];
    int n = 0;
    do
        digits[n++] = (char)('0' + pid % 10);
    while ((pid /= 10) > 0);
    char *p = out + sizeof(prefix) - 1;
    while (n > 0)
        *p++ = digits[--n];
    *p = '\0';
}

/* One baseline run: spawn, echo, stop. Returns the spawn-to-echo time. */
static int direct_once(direct_app *app, double *usec, act_error *err)
{
    char *const argv[] = {(char *)"act-notify-echo", NULL};
    uint64_t start = act_now_usec();
    pid_t pid = fork();
    if (pid < 0)
        return act_error_set(err, errno, "fork: %s", strerror(errno));
    if (pid == 0) {
        format_pid_env(app->pid_env, getpid());
        if (app->listen_fd == 3)
            fcntl(3, F_SETFD, 0);
        else if (dup2(app->listen_fd, 3) < 0)
            _exit(126);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(ACT_NOTIFY_ECHO, argv, app->envp);
        _exit(127);
    }
    int r = bd_echo_once(app->address, 10000, err);
    uint64_t end = act_now_usec();
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    if (r < 0)
        return act_error_prefix(err, "direct start of act-notify-echo");
    *usec = (double)(end - start);
    return 0;
}

/* Where one daemon wake spent its time, from the daemon's own events. */
typedef struct wake_marks {
    uint64_t waking, admitted, exec, serving;
} wake_marks;

static void mark_event(const dd_event *event, void *userdata)
{
    wake_marks *marks = userdata;
    if (strcmp(event->host, HOST) != 0)
        return;
    if (strcmp(event->name, "waking") == 0)
        marks->waking = event->time_usec;
    else if (strcmp(event->name, "admitted") == 0)
        marks->admitted = event->time_usec;
    else if (strcmp(event->name, "exec") == 0)
        marks->exec = event->time_usec;
    else if (strcmp(event->name, "serving") == 0)
        marks->serving = event->time_usec;
}

typedef struct breakdown {
    bd_samples to_waking, to_admitted, to_exec, to_first_byte, to_serving;
} breakdown;

static void breakdown_free(breakdown *parts)
{
    bd_samples_free(&parts->to_waking);
    bd_samples_free(&parts->to_admitted);
    bd_samples_free(&parts->to_exec);
    bd_samples_free(&parts->to_first_byte);
    bd_samples_free(&parts->to_serving);
}

/* One line of a breakdown at quantile q: which part of a wake a tail is in. */
static void print_breakdown(const char *what, breakdown *parts, double q)
{
    printf("    %s p%.0f: connect -> waking %.0f us, waking -> admitted %.0f us,\n"
           "      admitted -> exec %.0f us, exec -> first byte %.0f us\n",
           what, q * 100, bd_samples_quantile(&parts->to_waking, q),
           bd_samples_quantile(&parts->to_admitted, q), bd_samples_quantile(&parts->to_exec, q),
           bd_samples_quantile(&parts->to_first_byte, q));
}

static int daemon_once(dd_daemon *d, const char *address, double *usec, breakdown *parts,
                       act_error *err)
{
    dd_events_drain(d);
    uint64_t wall = act_wallclock_usec();
    uint64_t start = act_now_usec();
    int r = bd_echo_once(address, 10000, err);
    uint64_t end = act_now_usec();
    if (r < 0)
        return act_error_prefix(err, "wake of parked host " HOST " through activatord");
    *usec = (double)(end - start);

    wake_marks marks = {0};
    dd_event_wait(d, HOST, "serving", 10000, mark_event, &marks, NULL);
    uint64_t first_byte = wall + (end - start);
    if (parts && marks.waking && marks.admitted && marks.exec && marks.serving &&
        marks.waking >= wall) {
        bd_samples_add(&parts->to_waking, (double)(marks.waking - wall));
        bd_samples_add(&parts->to_admitted, (double)(marks.admitted - marks.waking));
        bd_samples_add(&parts->to_exec, (double)(marks.exec - marks.admitted));
        bd_samples_add(&parts->to_first_byte, (double)first_byte - (double)marks.exec);
        bd_samples_add(&parts->to_serving, (double)marks.serving - (double)first_byte);
    }

    r = dd_request(d, 10000, NULL, err, "{\"v\":1,\"op\":\"park\",\"host\":\"" HOST "\"}");
    if (r == 0)
        r = dd_wait_state(d, HOST, "parked", 10000, 1, err);
    return r;
}

/* Until host's claim says phase (its write-back of the freeze landed), so a
 * thaw is measured against a host at rest, as after a real idle spell, and
 * not behind a claim write the freeze itself just started. */
static int wait_claim_phase(dd_daemon *d, const char *host, const char *phase, act_error *err)
{
    for (int i = 0; i < 5000; i++) {
        json_object *result = NULL, *body = NULL, *op = NULL, *value = NULL;
        int r = dd_request(d, 10000, &result, err,
                           "{\"v\":1,\"op\":\"claim.show\",\"host\":\"%s\"}", host);
        if (r < 0)
            return r;
        bool there = json_object_object_get_ex(result, "claim", &body) &&
                     json_object_object_get_ex(body, "op", &op) &&
                     json_object_object_get_ex(op, "phase", &value) &&
                     strcmp(json_object_get_string(value), phase) == 0;
        json_object_put(result);
        if (there)
            return 0;
        usleep(1000); /* not timed: the benchmark waits for a quiet host */
    }
    return act_error_set(err, ETIME, "host %s's claim never said %s", host, phase);
}

/* One frozen run: freeze host (not timed), then connect, echo: the thaw. */
static int frozen_once(dd_daemon *d, const char *host, const char *address, double *usec,
                       double *serving_usec, act_error *err)
{
    dd_events_drain(d);
    int r = dd_request(d, 10000, NULL, err, "{\"v\":1,\"op\":\"freeze\",\"host\":\"%s\"}", host);
    if (r == 0 && !dd_event_wait(d, host, "frozen", 10000, NULL, NULL, NULL))
        r = act_error_set(err, ETIME, "host %s did not freeze", host);
    if (r == 0)
        r = wait_claim_phase(d, host, "frozen", err);
    if (r < 0)
        return r;
    uint64_t start = act_now_usec();
    r = bd_echo_once(address, 10000, err);
    uint64_t end = act_now_usec();
    if (r < 0)
        return act_error_prefix(err, "thaw of frozen host %s", host);
    *usec = (double)(end - start);
    /* The same echo once more, thawed: what the app and the kernel take
     * with no thaw at all (after a pause, so the thaw's own bookkeeping on
     * the loop is done). */
    usleep(2000);
    start = act_now_usec();
    r = bd_echo_once(address, 10000, err);
    end = act_now_usec();
    if (r < 0)
        return act_error_prefix(err, "an echo of thawed host %s", host);
    *serving_usec = (double)(end - start);
    return 0;
}

/* What a frozen tiny host keeps: its leaf's memory and its process's RSS. */
static void print_frozen_memory(dd_daemon *d, const char *host)
{
    act_error err = {0};
    dd_events_drain(d);
    if (dd_request(d, 10000, NULL, &err, "{\"v\":1,\"op\":\"freeze\",\"host\":\"%s\"}", host) < 0 ||
        !dd_event_wait(d, host, "frozen", 10000, NULL, NULL, NULL)) {
        printf("  (host %s could not be frozen to measure it: %s)\n", host, err.message);
        return;
    }
    json_object *status = NULL;
    if (dd_request(d, 10000, &status, &err, "{\"v\":1,\"op\":\"status\",\"host\":\"%s\"}", host) <
        0) {
        printf("  (status of %s: %s)\n", host, err.message);
        return;
    }
    uint64_t memory = dd_json_u64(status, "memory_current");
    uint64_t pid = dd_json_u64(status, "pid");
    json_object_put(status);
    char path[64], line[256];
    unsigned long rss_kib = 0;
    snprintf(path, sizeof(path), "/proc/%llu/status", (unsigned long long)pid);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %lu kB", &rss_kib) == 1)
            break;
    if (f)
        fclose(f);
    printf("  a frozen act-notify-echo keeps: its leaf's memory.current %.1f KiB, its process's "
           "RSS %lu KiB\n",
           (double)memory / 1024.0, rss_kib);
}

/* One write in place of a claim's size into a whole 8 KiB file, then its
 * fdatasync, as the dir store's compare-and-swap makes it, in the daemon's
 * state directory. */
static int durable_write_once(dd_daemon *d, double *usec, act_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/bench-durable-write", d->state_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return act_error_set(err, errno, "open %s: %s", path, strerror(errno));
    static char page[8192];
    struct stat st;
    /* Made whole once, as a claim file is: the writes allocate nothing. */
    if (fstat(fd, &st) == 0 && st.st_size != sizeof(page) &&
        (pwrite(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page) || fsync(fd) < 0)) {
        close(fd);
        return act_error_set(err, errno, "write %s: %s", path, strerror(errno));
    }
    static unsigned turn;
    memset(page, 'a' + (int)(turn % 26), 300);
    uint64_t start = act_now_usec();
    int r = pwrite(fd, page, 300, (off_t)(turn++ % 2) * 4096) == 300 && fdatasync(fd) == 0
                ? 0
                : act_error_set(err, errno, "write %s: %s", path, strerror(errno));
    *usec = (double)(act_now_usec() - start);
    close(fd);
    return r;
}

/* The echo host, and the big host whose builds the busy box stages (never
 * woken), on one daemon. */
static size_t busy_mib(void);

/* The busy box's registry, when docker-registry, skopeo and umoci are
 * installed (the busy box then pulls too). */
static reg_harness busy_registry;

static int start_daemon(dd_daemon *d, char *address, size_t size, char *cached_address,
                        char *claim_address, act_error *err)
{
    char conf[128] = "";
    act_error registry_err = {0};
    if (busy_mib() && reg_harness_available() && system("command -v umoci >/dev/null") == 0 &&
        reg_harness_start(&busy_registry, false, false, &registry_err) == 0)
        snprintf(conf, sizeof(conf), "RegistryInsecure=%s\n", busy_registry.address);
    else if (registry_err.message[0])
        fprintf(stderr, BENCH ": no registry for the busy box (%s)\n", registry_err.message);
    int r = bd_setup(d, "wake", conf, err);
    int port = r < 0 ? r : dd_free_port(err);
    int big_port = port < 0 ? port : dd_free_port(err);
    int cached_port = big_port < 0 ? big_port : dd_free_port(err);
    int claim_port = cached_port < 0 ? cached_port : dd_free_port(err);
    if (claim_port < 0)
        return claim_port;
    snprintf(address, size, "127.0.0.1:%d", port);
    snprintf(cached_address, size, "127.0.0.1:%d", cached_port);
    snprintf(claim_address, size, "127.0.0.1:%d", claim_port);
    for (int i = 0; i < 2; i++)
        if ((r = dd_write_host(d, i == 0 ? FROZEN_CACHED : FROZEN_CLAIM, err,
                               "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\n"
                               "StopTimeoutSec=2\nReadyTimeoutSec=10\nParkMode=freeze\n"
                               "ThawCheck=%s\n[Listen]\nListenStream=%s\n"
                               /* a limit, so that a hybrid host keeps the
                                * leaf's memory stats (in a v1 mirror) */
                               "[Limits]\nMemoryMax=1G\n",
                               i == 0 ? "cached" : "claim",
                               i == 0 ? cached_address : claim_address)) < 0)
            return r;
    if ((r = dd_write_host(d, HOST, err,
                           "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\nStopTimeoutSec=2\n"
                           "ReadyTimeoutSec=10\n[Listen]\nListenStream=%s\n",
                           address)) < 0 ||
        (r = dd_write_host(d, BIG_HOST, err,
                           "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\n"
                           "[Listen]\nListenStream=127.0.0.1:%d\n",
                           big_port)) < 0)
        return r;
    return dd_start(d, 30000, NULL, err);
}

static size_t busy_mib(void)
{
    const char *text = getenv("ACT_BENCH_BUSY_MIB");
    if (!text || !*text)
        return 512;
    char *end = NULL;
    unsigned long mib = strtoul(text, &end, 10);
    return *end || mib > 65536 ? 512 : (size_t)mib;
}

static void print_line(const char *what, bd_samples *samples)
{
    printf("  %-58s p50 %8.0f us  p99 %8.0f us\n", what, bd_samples_quantile(samples, 0.5),
           bd_samples_quantile(samples, 0.99));
}

/* The busy box: BUSY_WAKES cold wakes while big's builds are staged and
 * promoted; quiet holds the quiet run's daemon wakes. */
static int run_busy(dd_daemon *d, const char *address, bd_samples *quiet, breakdown *quiet_parts,
                    bd_samples *quiet_durable, act_error *err)
{
    busy_builds busy;
    size_t mib = busy_mib();
    int r =
        busy_builds_prepare(&busy, d, BIG_HOST, ACT_NOTIFY_ECHO, mib,
                            busy_registry.pid > 0 ? &busy_registry : NULL, "act-notify-echo", err);
    if (r < 0 || (r = busy_builds_start(&busy, err)) < 0)
        return r;
    bd_samples woken = {0}, durable = {0};
    breakdown parts = {0};
    unsigned overlapped = 0;
    for (int i = 0; i < BUSY_WAKES && r == 0; i++) {
        double usec = 0;
        bool during = atomic_load(&busy.in_flight);
        r = daemon_once(d, address, &usec, &parts, err);
        /* Counted only when build work was in flight at both ends. */
        if (r == 0 && during && atomic_load(&busy.in_flight))
            overlapped++;
        if (r == 0)
            bd_samples_add(&woken, usec);
        double durable_usec = 0;
        if (r == 0 && (r = durable_write_once(d, &durable_usec, err)) == 0)
            bd_samples_add(&durable, durable_usec);
    }
    unsigned begun = atomic_load(&busy.cycles_begun);
    int stopped = busy_builds_stop(&busy, r == 0 ? err : NULL);
    if (r == 0)
        r = stopped;
    if (r == 0) {
        printf(BENCH " busy box: %d cold wakes while host " BIG_HOST "'s %zu MiB build was "
                     "staged and promoted over and over\n"
                     "  (%u stage+promote cycles begun, %u done, %u of them pulls from a "
                     "registry; %u wakes began and ended with one in flight)\n",
               BUSY_WAKES, mib, begun, atomic_load(&busy.cycles_done),
               atomic_load(&busy.pulls_done), overlapped);
        print_line("daemon quiet (the run above)", quiet);
        print_line("daemon busy  (build work beside it)", &woken);
        printf("  where the tail goes (each part's own quantile, from the daemon's stamps):\n");
        print_breakdown("quiet", quiet_parts, 0.99);
        print_breakdown("busy ", &parts, 0.5);
        print_breakdown("busy ", &parts, 0.99);
        printf("    one claim write in place (pwrite, fdatasync): quiet p50 %.0f us p99 %.0f us, "
               "busy p50 %.0f us p99 %.0f us\n",
               bd_samples_quantile(quiet_durable, 0.5), bd_samples_quantile(quiet_durable, 0.99),
               bd_samples_quantile(&durable, 0.5), bd_samples_quantile(&durable, 0.99));
        double p99 = bd_samples_quantile(&woken, 0.99) / bd_samples_quantile(quiet, 0.99);
        printf("RATIO p99 busy/quiet = %.2f (target <= %.1f: %s)\n", p99, BUSY_TARGET,
               p99 <= BUSY_TARGET ? "met" : "NOT met");
    }
    bd_samples_free(&woken);
    bd_samples_free(&durable);
    breakdown_free(&parts);
    return r;
}

static int run(dd_daemon *d, act_error *err)
{
    char address[64], cached_address[64], claim_address[64];
    int r = start_daemon(d, address, sizeof(address), cached_address, claim_address, err);
    if (r < 0 || (r = dd_stage(d, HOST, "v1", ACT_NOTIFY_ECHO, true, err)) < 0 ||
        (r = dd_stage(d, FROZEN_CACHED, "v1", ACT_NOTIFY_ECHO, true, err)) < 0 ||
        (r = dd_stage(d, FROZEN_CLAIM, "v1", ACT_NOTIFY_ECHO, true, err)) < 0 ||
        (r = dd_wait_state(d, HOST, "parked", 10000, 1, err)) < 0)
        return r;
    /* The frozen hosts' generations start once, by a first connection. */
    if ((r = bd_echo_once(cached_address, 10000, err)) < 0 ||
        (r = bd_echo_once(claim_address, 10000, err)) < 0 ||
        (r = dd_wait_state(d, FROZEN_CACHED, "serving", 10000, 1, err)) < 0 ||
        (r = dd_wait_state(d, FROZEN_CLAIM, "serving", 10000, 1, err)) < 0)
        return r;

    direct_app app = {.listen_fd = -1};
    if ((r = direct_app_init(&app, err)) < 0)
        return r;

    bd_samples direct = {0}, woken = {0}, durable = {0}, thawed_cached = {0}, thawed_claim = {0},
               serving = {0};
    breakdown parts = {0};
    for (int i = 0; i < WARMUP + WAKES && r == 0; i++) {
        double direct_usec = 0, woken_usec = 0;
        bool keep = i >= WARMUP;
        /* Alternating which goes first cancels any effect of order. */
        if (i % 2 == 0) {
            r = direct_once(&app, &direct_usec, err);
            if (r == 0)
                r = daemon_once(d, address, &woken_usec, keep ? &parts : NULL, err);
        } else {
            r = daemon_once(d, address, &woken_usec, keep ? &parts : NULL, err);
            if (r == 0)
                r = direct_once(&app, &direct_usec, err);
        }
        double cached_usec = 0, claim_usec = 0, serving_usec = 0, ignored = 0;
        if (r == 0)
            r = frozen_once(d, FROZEN_CACHED, cached_address, &cached_usec, &serving_usec, err);
        if (r == 0)
            r = frozen_once(d, FROZEN_CLAIM, claim_address, &claim_usec, &ignored, err);
        if (r == 0 && keep) {
            bd_samples_add(&thawed_cached, cached_usec);
            bd_samples_add(&thawed_claim, claim_usec);
            bd_samples_add(&serving, serving_usec);
        }
        double durable_usec = 0;
        if (r == 0)
            r = durable_write_once(d, &durable_usec, err);
        if (r == 0 && keep) {
            bd_samples_add(&direct, direct_usec);
            bd_samples_add(&woken, woken_usec);
            bd_samples_add(&durable, durable_usec);
        }
    }
    if (r == 0) {
        printf(BENCH ": %d cold wakes of act-notify-echo through activatord, interleaved with "
                     "%d direct starts of the same app; state in %s\n",
               WAKES, WAKES, bd_base_dir());
        print_line("direct  (fork+exec with LISTEN_FDS, connect, 1-byte echo)", &direct);
        print_line("daemon  (connect on the parked host, 1-byte echo)", &woken);
        printf(
            "  where a daemon wake goes (medians of %zu wakes, from the daemon's event stamps):\n",
            parts.to_waking.n);
        printf(
            "    connect -> waking %.0f us, waking -> admitted %.0f us, admitted -> exec %.0f us,\n"
            "    exec -> first byte %.0f us; first byte -> serving (not in the latency) %.0f us\n",
            bd_samples_quantile(&parts.to_waking, 0.5),
            bd_samples_quantile(&parts.to_admitted, 0.5), bd_samples_quantile(&parts.to_exec, 0.5),
            bd_samples_quantile(&parts.to_first_byte, 0.5),
            bd_samples_quantile(&parts.to_serving, 0.5));
        printf("  one claim write in place (pwrite, fdatasync) in the state directory: p50 "
               "%.0f us;\n    a wake makes one before its exec (its admission), about %.0f%% of "
               "the direct start's p50\n",
               bd_samples_quantile(&durable, 0.5),
               100.0 * bd_samples_quantile(&durable, 0.5) / bd_samples_quantile(&direct, 0.5));
        double p50 = bd_samples_quantile(&woken, 0.5) / bd_samples_quantile(&direct, 0.5);
        double p99 = bd_samples_quantile(&woken, 0.99) / bd_samples_quantile(&direct, 0.99);
        printf("RATIO p50 daemon/direct = %.2f (target <= %.1f: %s)\n", p50, TARGET,
               p50 <= TARGET ? "met" : "NOT met");
        printf("RATIO p99 daemon/direct = %.2f (target <= %.1f: %s)\n", p99, TARGET,
               p99 <= TARGET ? "met" : "NOT met");
        double added = bd_samples_quantile(&woken, 0.5) - bd_samples_quantile(&direct, 0.5);
        printf("ADDED p50 daemon - direct = %.0f us (target <= %.0f us: %s)\n", added,
               ADDED_TARGET_USEC, added <= ADDED_TARGET_USEC ? "met" : "NOT met");
        printf(BENCH " frozen: %d thaws of each frozen host in the same run (ParkMode=freeze)\n",
               WAKES);
        print_line("frozen, ThawCheck=cached (connect, 1-byte echo)", &thawed_cached);
        print_line("frozen, ThawCheck=claim  (one claim read first)    ", &thawed_claim);
        print_line("serving, just thawed (the same echo, no thaw)", &serving);
        double cached_p50 = bd_samples_quantile(&thawed_cached, 0.5);
        double frozen_ratio = cached_p50 / bd_samples_quantile(&direct, 0.5);
        printf("FROZEN p50 cached = %.0f us (target <= %.0f us: %s)\n", cached_p50,
               FROZEN_TARGET_USEC, cached_p50 <= FROZEN_TARGET_USEC ? "met" : "NOT met");
        printf("RATIO p50 frozen(cached)/direct = %.3f (target <= %.1f: %s)\n", frozen_ratio,
               FROZEN_TARGET_RATIO, frozen_ratio <= FROZEN_TARGET_RATIO ? "met" : "NOT met");
        printf("RATIO p50 frozen(claim)/direct = %.3f\n",
               bd_samples_quantile(&thawed_claim, 0.5) / bd_samples_quantile(&direct, 0.5));
        print_frozen_memory(d, FROZEN_CACHED);
    }
    if (r == 0 && busy_mib())
        r = run_busy(d, address, &woken, &parts, &durable, err);
    bd_samples_free(&direct);
    bd_samples_free(&woken);
    bd_samples_free(&durable);
    bd_samples_free(&thawed_cached);
    bd_samples_free(&thawed_claim);
    bd_samples_free(&serving);
    breakdown_free(&parts);
    if (app.listen_fd >= 0)
        close(app.listen_fd);
    free(app.envp);
    return r;
}

/* ACT_BENCH_STORE=etcd: the same run on a real single-member etcd on
 * loopback instead of the daemon's dir:// store, to see what the store
 * costs a wake (the breakdown's waking -> admitted is the claim's read and
 * compare-and-swap). */
static int use_etcd(etcd_harness *etcd, char *url, size_t size)
{
    const char *store = getenv("ACT_BENCH_STORE");
    if (!store || strcmp(store, "etcd") != 0)
        return 0;
    if (etcd_harness_require(BENCH) != 0)
        return 77;
    act_error err = {0};
    if (etcd_harness_start(etcd, &err) < 0) {
        fprintf(stderr, BENCH ": cannot start etcd: %s\n", err.message);
        return 1;
    }
    snprintf(url, size, "%s/bench-wake", etcd->url_prefix);
    bd_use_store(url);
    printf(BENCH ": on etcd (one member, loopback), %s\n", url);
    return 0;
}

int main(void)
{
    etcd_harness etcd = {0};
    char etcd_url[160];
    int r = use_etcd(&etcd, etcd_url, sizeof(etcd_url));
    if (r != 0)
        return r;
    r = bd_main(BENCH, run);
    reg_harness_stop(&busy_registry);
    if (etcd.pid > 0)
        etcd_harness_stop(&etcd);
    return r;
}
