/* The hostile-tenant scenario (hostile_check.h), step by step:
 *   1. both hosts answer, and the ordinary host's output is seen (else the
 *      close-stdio check could not tell anything);
 *   2. the one-shot attempts (GET /attack), with the targets from outside;
 *   3. the daemon's status latency in idle windows and in windows while the
 *      app floods its own notify socket, alternately: the flood succeeded
 *      if the p99 of the flooded windows is more than twice the idle one's;
 *   4. the fork bomb: it forks until the cap refuses it, however long that
 *      takes (it succeeded if it made PidsMax= - 1 children, one process
 *      more than the cap allows with the app and the bomb itself), and
 *      while it sits at its cap the box is judged: that succeeded if the
 *      ordinary host, the daemon or this process's own fork failed;
 *   5. the app shuts its stdout and stderr down: that succeeded if the
 *      ordinary host's output stops arriving;
 * and all along, a client asks the ordinary host every 100 ms. */
#include "hostile_check.h"

#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_probe.h"
#include "latency.h"
#include "targets.h"

/* Pace of the status requests: a hundred a second gives a thousand samples
 * per ten-second window, so p99 is the tenth worst, not the worst. */
#define STATUS_PERIOD_MS 10
#define STATUS_TIMEOUT_MS 2000
/* Idle and flooded windows, alternately: three of each, so that a burst
 * of the box's own noise in one window moves the pooled p99 little. */
#define FLOOD_ROUNDS 3
/* A flood stalls the daemon when status p99 while flooded is more than
 * twice its idle p99 and more than this above it. The margin is what the
 * scheduler alone moves a p99 on a loaded two-core box: beside a CPU hog,
 * idle windows measured p99 2-9 ms and flooded ones 2-9 ms, while a loop
 * stalled by the flood (a close() that lingers, a read per message that
 * blocks) answers tens of milliseconds to seconds late. */
#define FLOOD_STALL_MARGIN_USEC 10000

extern char **environ;

typedef struct run {
    const hostile_setup *setup;
    hostile_outcome *outcome;
    FILE *out;
} run;

static void say(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->out, fmt, ap);
    va_end(ap);
    fputc('\n', r->out);
    fflush(r->out);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* One attempt decided here, from what the test saw. */
static void verdict(run *r, const char *name, bool succeeded, const char *detail)
{
    r->outcome->tried++;
    if (succeeded) {
        r->outcome->succeeded++;
        size_t len = strlen(r->outcome->succeeded_names);
        snprintf(r->outcome->succeeded_names + len, sizeof(r->outcome->succeeded_names) - len,
                 "%s%s", len ? " " : "", name);
    }
    say(r, "attempt %s %s - %s", name, succeeded ? "succeeded" : "failed", detail);
}

static void problem(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(run *r, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    r->outcome->problems++;
    say(r, "PROBLEM %s", text);
}

/* Counts and prints the lines of the app's report (report.h) from body. */
static void take_report(run *r, const char *body)
{
    const char *line = body;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char text[2048];
        snprintf(text, sizeof(text), "%.*s", (int)(len < sizeof(text) - 1 ? len : sizeof(text) - 1),
                 line);
        char kind[16], name[1500], result[16];
        if (sscanf(text, "%15s %1499s %15s", kind, name, result) == 3) {
            if (strcmp(kind, "attempt") == 0) {
                r->outcome->tried++;
                if (strcmp(result, "succeeded") == 0) {
                    r->outcome->succeeded++;
                    size_t used = strlen(r->outcome->succeeded_names);
                    snprintf(r->outcome->succeeded_names + used,
                             sizeof(r->outcome->succeeded_names) - used, "%s%s", used ? " " : "",
                             name);
                }
            } else if (strcmp(kind, "untried") == 0) {
                r->outcome->untried++;
            } else if (strcmp(kind, "control") == 0 && strcmp(result, "ok") != 0) {
                r->outcome->controls_failed++;
            }
        }
        say(r, "%s", text);
        line = end ? end + 1 : NULL;
    }
}

static bool starts_with_any(const char *line, const char *const *prefixes)
{
    for (size_t i = 0; prefixes[i]; i++)
        if (strncmp(line, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* Polls the app's /results until the nth line (from 1) starting with one of
 * prefixes (NULL-terminated) shows up; returns that line (malloc'd) or NULL
 * once timeout_ms passed. */
static char *wait_result_any(run *r, const char *const *prefixes, int nth, int timeout_ms)
{
    static char body[512 * 1024];
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int seen = nth;
        if (http_get(r->setup->hostile_port, "/results", body, sizeof(body), 5000) >= 0) {
            for (char *line = body; line && *line;) {
                char *end = strchr(line, '\n');
                if (end)
                    *end = '\0';
                if (starts_with_any(line, prefixes) && --seen == 0)
                    return strdup(line);
                line = end ? end + 1 : NULL;
            }
        }
        if (now_ms() >= deadline)
            return NULL;
        sleep_ms(250);
    }
}

/* The same for lines starting with prefix_a or prefix_b (may be NULL). */
static char *wait_result_after(run *r, const char *prefix_a, const char *prefix_b, int nth,
                               int timeout_ms)
{
    const char *prefixes[] = {prefix_a, prefix_b, NULL};
    return wait_result_any(r, prefixes, nth, timeout_ms);
}

static bool get_ok(int port, const char *path, char *body, size_t size)
{
    return http_get(port, path, body, size, 5000) >= 0;
}

/* Whether this process can still fork and run /bin/true: a box a fork bomb
 * took could not. */
static bool box_can_fork(void)
{
    pid_t pid;
    char *argv[] = {"/bin/true", NULL};
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
        return false;
    int status;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The box this runs on may be shared with other work, whose load would
 * decide a p99 on its own. Each session has a scheduler autogroup of its own
 * (the daemon's, and each host's: generations start in new sessions), so
 * raising all four alike keeps the daemon and the tenants competing as
 * equals, as in production, and lets the rest of the box count for less. */
static void raise_priority(run *r, pid_t hostile_pid, pid_t other_pid, pid_t daemon_pid)
{
    pid_t pids[] = {getpid(), daemon_pid, hostile_pid, other_pid};
    const char *names[] = {"the test", "the daemon", "the hostile host", "the ordinary host"};
    char failed[256] = "";
    for (size_t i = 0; i < sizeof(pids) / sizeof(pids[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/autogroup", (int)pids[i]);
        FILE *f = pids[i] > 0 ? fopen(path, "we") : NULL;
        bool ok = f && fputs("-10", f) >= 0;
        if (f && fclose(f) != 0)
            ok = false;
        if (!ok) {
            size_t len = strlen(failed);
            snprintf(failed + len, sizeof(failed) - len, "%s%s", len ? ", " : "", names[i]);
        }
    }
    if (failed[0])
        say(r, "priority: autogroups at nice -10, except %s (left as they were)", failed);
    else
        say(r, "priority: the autogroups of the test, the daemon and both hosts at nice -10");
}

static bool step_start(run *r, pid_t *other_pid)
{
    const hostile_setup *s = r->setup;
    char body[512];
    if (!get_ok(s->ordinary_port, "/", body, sizeof(body))) {
        problem(r, "the ordinary host %s does not answer on port %d", s->ordinary_host,
                s->ordinary_port);
        return false;
    }
    *other_pid = http_answer_pid(body);
    if (!get_ok(s->hostile_port, "/", body, sizeof(body))) {
        problem(r, "the hostile host %s does not answer on port %d", s->hostile_host,
                s->hostile_port);
        return false;
    }
    say(r, "hostile host %s: %s", s->hostile_host, strtok(body, "\n"));
    say(r, "ordinary host %s: pid %d", s->ordinary_host, (int)*other_pid);
    raise_priority(r, http_answer_pid(body), *other_pid, targets_parent_of(*other_pid));
    char marker[64];
    snprintf(marker, sizeof(marker), "/hostile-log-before-%d", (int)getpid());
    if (!get_ok(s->ordinary_port, marker, body, sizeof(body)) ||
        !s->log_has(marker + 1, 10000, s->userdata)) {
        problem(r,
                "the ordinary host's output (%s) never arrived, so close-stdio cannot be "
                "judged",
                marker + 1);
        return false;
    }
    return true;
}

static void step_attack(run *r, pid_t other_pid)
{
    static char path[16384], body[512 * 1024];
    char why[512];
    if (targets_build(r->setup, other_pid, path, sizeof(path), why, sizeof(why)) < 0) {
        problem(r, "cannot name the targets: %s", why);
        return;
    }
    int n = http_get(r->setup->hostile_port, path, body, sizeof(body), 60000);
    if (n < 0) {
        problem(r, "GET /attack on the hostile host: %s", strerror(-n));
        return;
    }
    take_report(r, body);
}

/* One window of status requests, appended to pool (may be NULL); prints
 * the window's own numbers into stats. */
static bool measure_into(run *r, const char *what, int ms, latency_samples *pool,
                         latency_stats *stats)
{
    latency_samples window = {0};
    int rv =
        latency_measure(r->setup->control_url, ms, STATUS_PERIOD_MS, STATUS_TIMEOUT_MS, &window);
    if (rv < 0) {
        problem(r, "cannot measure status latency %s: %s", what, window.first_failure);
        latency_samples_free(&window);
        return false;
    }
    if (pool) {
        uint64_t *grown = realloc(pool->usec, (pool->n + window.n) * sizeof(*grown));
        if (grown) {
            memcpy(grown + pool->n, window.usec, window.n * sizeof(*grown));
            pool->usec = grown;
            pool->n += window.n;
            pool->cap = pool->n;
            if (!pool->failed && window.failed)
                snprintf(pool->first_failure, sizeof(pool->first_failure), "%s",
                         window.first_failure);
            pool->failed += window.failed;
        }
    }
    latency_stats_of(&window, stats);
    latency_samples_free(&window);
    char text[256];
    latency_format(stats, text, sizeof(text));
    say(r, "latency status %s: %s%s%s", what, text, stats->failed ? "; first failure: " : "",
        stats->failed ? stats->first_failure : "");
    return true;
}

static bool measure(run *r, const char *what, int ms, latency_stats *stats)
{
    return measure_into(r, what, ms, NULL, stats);
}

static bool flood_once(run *r, int round, latency_samples *flooded)
{
    const hostile_setup *s = r->setup;
    char path[64], body[512], what[64];
    snprintf(path, sizeof(path), "/flood?ms=%d", s->flood_ms);
    if (!get_ok(s->hostile_port, path, body, sizeof(body))) {
        problem(r, "GET %s on the hostile host failed", path);
        return false;
    }
    latency_stats stats;
    snprintf(what, sizeof(what), "during notify flood %d", round);
    if (!measure_into(r, what, s->flood_ms, flooded, &stats))
        return false;
    char *note = wait_result_after(r, "note notify-flood", "untried notify-flood", round, 10000);
    if (!note) {
        r->outcome->untried++;
        say(r, "untried notify-flood - the app never said how its flood %d went", round);
        return false;
    }
    take_report(r, note);
    free(note);
    return true;
}

/* Idle and flooded windows alternate, so that the box's own noise (other
 * work on it comes and goes) falls on both alike; each flood lasts the
 * whole flood_ms, and p99 is taken over every window of a kind pooled. */
static void step_flood(run *r)
{
    const hostile_setup *s = r->setup;
    latency_samples idle = {0}, flooded = {0};
    bool ok = true;
    for (int round = 1; round <= FLOOD_ROUNDS && ok; round++) {
        latency_stats stats;
        char what[32];
        snprintf(what, sizeof(what), "idle %d", round);
        ok = measure_into(r, what, s->flood_ms, &idle, &stats) && flood_once(r, round, &flooded);
    }
    if (ok) {
        latency_stats idle_stats, flood_stats;
        latency_stats_of(&idle, &idle_stats);
        latency_stats_of(&flooded, &flood_stats);
        char idle_text[256], flood_text[256], detail[640];
        latency_format(&idle_stats, idle_text, sizeof(idle_text));
        latency_format(&flood_stats, flood_text, sizeof(flood_text));
        say(r, "latency status idle, pooled: %s", idle_text);
        say(r, "latency status flooded, pooled: %s", flood_text);
        snprintf(detail, sizeof(detail),
                 "status p99 %.2f ms flooded, %.2f ms idle: %.2fx (a stall is over 2x and "
                 "over %d ms more); %zu failed",
                 (double)flood_stats.p99_usec / 1000, (double)idle_stats.p99_usec / 1000,
                 idle_stats.p99_usec ? (double)flood_stats.p99_usec / (double)idle_stats.p99_usec
                                     : 0.0,
                 FLOOD_STALL_MARGIN_USEC / 1000, flood_stats.failed);
        bool stalled = flood_stats.p99_usec > 2 * idle_stats.p99_usec &&
                       flood_stats.p99_usec > idle_stats.p99_usec + FLOOD_STALL_MARGIN_USEC;
        verdict(r, "notify-flood", flood_stats.failed > 0 || stalled, detail);
    }
    latency_samples_free(&idle);
    latency_samples_free(&flooded);
}

/* A socket whose close lingers LINGER_SEC, pushed over the app's notify
 * socket: the daemon keeps no fd of a tenant's, and its close of this one
 * must not make the loop wait. Status is asked all along the linger; the
 * attempt succeeded when a status request failed or took over
 * LINGER_STALL_MS (a loop that waited out the linger answers after it). */
#define LINGER_SEC 5
#define LINGER_STALL_MS 2000
static void step_linger(run *r)
{
    const hostile_setup *s = r->setup;
    char path[64], body[512];
    snprintf(path, sizeof(path), "/linger?sec=%d", LINGER_SEC);
    if (!get_ok(s->hostile_port, path, body, sizeof(body))) {
        problem(r, "GET %s on the hostile host failed", path);
        return;
    }
    latency_stats stats;
    if (!measure(r, "while a pushed socket lingers", LINGER_SEC * 1000, &stats))
        return;
    char *note = wait_result_after(r, "note notify-linger", "untried notify-linger", 1,
                                   (LINGER_SEC + 10) * 1000);
    if (!note) {
        r->outcome->untried++;
        say(r, "untried notify-linger - the app never said how its push went");
        return;
    }
    take_report(r, note);
    free(note);
    char detail[256];
    snprintf(detail, sizeof(detail),
             "status max %.2f ms while it lingered (a stall is over %d ms); %zu failed",
             (double)stats.max_usec / 1000, LINGER_STALL_MS, stats.failed);
    verdict(r, "notify-linger",
            stats.failed > 0 || stats.max_usec > (uint64_t)LINGER_STALL_MS * 1000, detail);
}

/* The bomb forks until its cap refuses it, however long this box takes to
 * get there (up to BOMB_WITHIN_MS, past which it ends untried), and says so
 * the moment it is refused; the box is judged while it sits at its cap,
 * then it is let go. */
#define BOMB_WITHIN_MS 120000
#define BOMB_AT_CAP_MS 5000
static void step_forkbomb(run *r, const http_prober *prober)
{
    const hostile_setup *s = r->setup;
    unsigned failed_before = atomic_load(&prober->failed);
    char path[128], body[512];
    /* The host's cgroup holds the app and the bomb besides the bomb's
     * children: PidsMax= - 1 children are one process more than the cap
     * allows, so making them means the cap did not hold. */
    snprintf(path, sizeof(path), "/forkbomb?max=%ld&within=%d&hold=%d", s->pids_max - 1,
             BOMB_WITHIN_MS, BOMB_WITHIN_MS);
    if (!get_ok(s->hostile_port, path, body, sizeof(body))) {
        problem(r, "GET %s on the hostile host failed", path);
        return;
    }
    const char *ends[] = {"attempt forkbomb", "untried forkbomb", NULL};
    const char *at_cap_or_ends[] = {"note forkbomb", "attempt forkbomb", "untried forkbomb", NULL};
    char *note = wait_result_any(r, at_cap_or_ends, 1, BOMB_WITHIN_MS + 15000);
    bool at_cap = note && strncmp(note, "note forkbomb", strlen("note forkbomb")) == 0;
    bool forked = true;
    latency_stats during = {0};
    if (at_cap) {
        say(r, "%s", note);
        forked = box_can_fork();
        if (!measure(r, "during the fork bomb, at its cap", BOMB_AT_CAP_MS, &during))
            during.failed = 1;
        if (!get_ok(s->hostile_port, "/forkbomb-stop", body, sizeof(body)))
            problem(r, "GET /forkbomb-stop on the hostile host failed");
    }
    /* The bomb's own line: at the cap, once it let go; else the one found. */
    char *line = at_cap ? wait_result_any(r, ends, 1, 60000) : note;
    if (at_cap)
        free(note);
    if (!line) {
        r->outcome->untried++;
        say(r, "untried forkbomb - the app never said how its fork bomb went");
    } else {
        take_report(r, line);
        free(line);
    }
    if (!at_cap) {
        /* Without a cap reached there was no bomb at its cap to judge the
         * box under (the attempt above says whether it got through). */
        r->outcome->untried++;
        say(r, "untried forkbomb-box - the bomb never reached its cap");
        return;
    }
    unsigned failed = atomic_load(&prober->failed) - failed_before;
    char detail[256];
    snprintf(detail, sizeof(detail),
             "during the bomb: this test %s fork, the ordinary host failed %u requests, "
             "the daemon failed %zu status requests",
             forked ? "could" : "could NOT", failed, during.failed);
    verdict(r, "forkbomb-box", !forked || failed > 0 || during.failed > 0, detail);
}

static void step_close_stdio(run *r)
{
    const hostile_setup *s = r->setup;
    char body[512];
    if (!get_ok(s->hostile_port, "/close-stdio", body, sizeof(body))) {
        problem(r, "GET /close-stdio on the hostile host failed");
        return;
    }
    char marker[64];
    snprintf(marker, sizeof(marker), "/hostile-log-after-%d", (int)getpid());
    if (!get_ok(s->ordinary_port, marker, body, sizeof(body))) {
        problem(r, "the ordinary host does not answer %s", marker);
        return;
    }
    bool arrived = s->log_has(marker + 1, 10000, s->userdata);
    verdict(r, "close-stdio", !arrived,
            arrived ? "the ordinary host's output still arrives"
                    : "the ordinary host's output no longer arrives");
    char *note = wait_result_after(r, "note close-stdio", NULL, 1, 2000);
    if (note) {
        say(r, "%s", note);
        free(note);
    }
}

int hostile_run(const hostile_setup *s, hostile_outcome *outcome, FILE *out)
{
    memset(outcome, 0, sizeof(*outcome));
    run r = {.setup = s, .outcome = outcome, .out = out};
    pid_t other_pid = 0;
    if (!step_start(&r, &other_pid))
        return 1;
    http_prober prober;
    if (http_prober_start(&prober, s->ordinary_port, 100) < 0) {
        problem(&r, "cannot start the ordinary host's client");
        return 1;
    }
    step_attack(&r, other_pid);
    step_flood(&r);
    step_linger(&r);
    step_forkbomb(&r, &prober);
    step_close_stdio(&r);
    http_prober_stop(&prober);

    say(&r, "the ordinary host answered %u requests and failed %u%s%s",
        atomic_load(&prober.answered), atomic_load(&prober.failed),
        atomic_load(&prober.failed) ? "; the first: " : "", prober.first_failure);
    if (atomic_load(&prober.failed))
        problem(&r, "the ordinary host stopped serving");
    latency_stats after;
    if (measure(&r, "after", 2000, &after) && after.failed)
        problem(&r, "the daemon stopped answering status");

    say(&r, "%u tried, %u succeeded", outcome->tried, outcome->succeeded);
    if (outcome->succeeded)
        say(&r, "succeeded: %s", outcome->succeeded_names);
    if (outcome->untried)
        say(&r, "%u could not be tried (see the untried lines)", outcome->untried);
    if (outcome->controls_failed)
        say(&r,
            "%u controls failed: the app could not do what any app must, so its failed "
            "attempts prove nothing",
            outcome->controls_failed);
    return outcome->succeeded || outcome->untried || outcome->controls_failed || outcome->problems
               ? 1
               : 0;
}
