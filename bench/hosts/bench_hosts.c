/* bench-hosts: what 10,000 configured, parked hosts cost activatord, against
 * a 10-host daemon measured in the same run.
 *
 * Two daemons, each in its own temp dir and throwaway cgroup root: "small"
 * with 10 hosts and "big" with 10,000. Every host runs act-notify-echo and
 * listens on its own unix socket in the daemon's temp dir (unix sockets, not
 * 10,000 TCP ports, so the run cannot collide with ports other programs or
 * the ephemeral range use). Both daemons get a DynamicUserRange= wide enough
 * for 10,000 dynamic users (systemd's default range holds 4,336).
 *
 * ROUNDS rounds; in each, both daemons are started, alternately, each time a
 * fresh daemon in a fresh temp dir:
 *   - start-up: fork+exec of activatord to its READY=1 on NOTIFY_SOCKET, which
 *     covers reading every host file, giving every host its dynamic user, and
 *     binding and storing every socket; and the CPU time it used to get there
 *     (informational: on a busy box the wall time includes waiting for a CPU);
 *   - memory: VmRSS of /proc/<pid>/status once the daemon has settled,
 *     per host = (RSS_big - RSS_small) / (10,000 - 10);
 * then one host of each (the same name, staged the same) is woken cold WAKES
 * times, the two daemons interleaved, parked in between:
 *   - wake latency from connect() on its socket to the echo of one byte.
 * Each round prints its p50 and p99 (of WAKES wakes: a p99 that is not just
 * the slowest wake) and their ratios big/small; the result is the median of
 * the rounds' ratios, printed with their spread (min-max).
 * Targets: <= 4 KiB per host; start-up <= 50 us per extra host; wake p50
 * ratio big/small <= 1.1, p99 ratio <= 1.5. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/wake/bench_daemon.h"
#include "common/clock.h"

#ifndef ACT_NOTIFY_ECHO
#error "ACT_NOTIFY_ECHO must name the act-notify-echo executable"
#endif

#define BENCH "bench-hosts"
#define SMALL 10
#define BIG 10000
#define ROUNDS 3
#define WAKES 300
#define WARMUP 5
#define SETTLE_MS 500
#define TARGET_KIB_PER_HOST 4.0
#define TARGET_STARTUP_USEC_PER_HOST 50.0
#define TARGET_WAKE_RATIO 1.1
#define TARGET_WAKE_P99_RATIO 1.5
/* 10,000 dynamic users, in a range of the bench's own. */
#define DYNAMIC_USERS "DynamicUserRange=200000-299999\n"
#define WOKEN "h00000"

typedef struct fleet {
    const char *label;
    unsigned n_hosts;
    dd_daemon d;
    bool set_up;
    char woken_address[128];
    bd_samples startup_usec, startup_cpu_usec, rss_kib;
    bd_samples wake_usec; /* this round's */
    double wake_p50[ROUNDS], wake_p99[ROUNDS];
} fleet;

static int write_hosts(fleet *f, act_error *err)
{
    char sockets[100];
    snprintf(sockets, sizeof(sockets), "%s/s", f->d.dir);
    if (mkdir(sockets, 0755) < 0)
        return act_error_set(err, errno, "mkdir %s: %s", sockets, strerror(errno));
    for (unsigned i = 0; i < f->n_hosts; i++) {
        char name[16];
        snprintf(name, sizeof(name), "h%05u", i);
        /* IdleTimeoutSec=0: the benchmark parks the woken host itself. */
        int r = dd_write_host(&f->d, name, err,
                              "[Host]\n"
                              "Exec=act-notify-echo\n"
                              "IdleTimeoutSec=0\n"
                              "StopTimeoutSec=2\n"
                              "ReadyTimeoutSec=10\n"
                              "[Listen]\n"
                              "ListenStream=%s/%s\n",
                              sockets, name);
        if (r < 0)
            return r;
    }
    snprintf(f->woken_address, sizeof(f->woken_address), "%s/" WOKEN, sockets);
    return 0;
}

/* The CPU time (user + system) pid has used, from /proc/<pid>/stat: on a
 * busy box the wall time to READY=1 includes waiting for a CPU, this does not. */
static long cpu_usec(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    /* Fields after the command's closing parenthesis: utime and stime are
     * the 12th and 13th of them. */
    const char *p = strrchr(text, ')');
    unsigned long utime, stime;
    if (!p ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -EBADMSG;
    return (long)((utime + stime) * (1000000 / sysconf(_SC_CLK_TCK)));
}

/* One start: timed to READY=1, checked to serve every host, measured once
 * settled. The daemon is left running. */
static int start_and_measure(fleet *f, act_error *err)
{
    int r = dd_start(&f->d, 120000, NULL, err);
    if (r < 0)
        return act_error_prefix(err, "%s daemon (%u hosts)", f->label, f->n_hosts);
    bd_samples_add(&f->startup_usec, (double)dd_startup_usec(&f->d));
    /* Read at once: what the daemon did after READY=1 is a few ticks at most. */
    long cpu = cpu_usec(f->d.pid);
    if (cpu < 0)
        return act_error_set(err, (int)-cpu, "cannot read the CPU time of activatord pid %d",
                             (int)f->d.pid);
    bd_samples_add(&f->startup_cpu_usec, (double)cpu);
    json_object *stats = NULL;
    if ((r = dd_request(&f->d, 30000, &stats, err, "{\"v\":1,\"op\":\"stats\"}")) < 0)
        return r;
    json_object *hosts = NULL;
    int64_t served =
        json_object_object_get_ex(stats, "hosts", &hosts) ? json_object_get_int64(hosts) : -1;
    json_object_put(stats);
    if (served != (int64_t)f->n_hosts)
        return act_error_set(err, EPROTO,
                             "%s daemon serves %" PRId64 " hosts of the %u configured; see its log",
                             f->label, served, f->n_hosts);
    dd_sleep_ms(SETTLE_MS);
    long rss = dd_rss_kib(&f->d);
    if (rss < 0)
        return act_error_set(err, (int)-rss, "cannot read VmRSS of activatord pid %d",
                             (int)f->d.pid);
    bd_samples_add(&f->rss_kib, (double)rss);
    return 0;
}

static int wake_once(fleet *f, bool keep, act_error *err)
{
    uint64_t start = act_now_usec();
    int r = bd_echo_once(f->woken_address, 10000, err);
    uint64_t end = act_now_usec();
    if (r < 0)
        return act_error_prefix(err, "%s daemon: wake of " WOKEN, f->label);
    if (keep)
        bd_samples_add(&f->wake_usec, (double)(end - start));
    r = dd_request(&f->d, 10000, NULL, err, "{\"v\":1,\"op\":\"park\",\"host\":\"" WOKEN "\"}");
    if (r == 0)
        r = dd_wait_state(&f->d, WOKEN, "parked", 10000, 1, err);
    return r < 0 ? act_error_prefix(err, "%s daemon: parking " WOKEN, f->label) : 0;
}

static void print_fleet(fleet *f)
{
    double startup = bd_samples_quantile(&f->startup_usec, 0.5); /* sorts them */
    printf("  %-5s %5u hosts: start-up p50 %7.1f ms (rounds, sorted:", f->label, f->n_hosts,
           startup / 1000.0);
    for (size_t i = 0; i < f->startup_usec.n; i++)
        printf(" %.1f", f->startup_usec.values[i] / 1000.0);
    printf(" ms), VmRSS p50 %.0f KiB\n", bd_samples_quantile(&f->rss_kib, 0.5));
}

/* Fresh daemons, started alternately (which goes first alternates too). A
 * daemon restarted on the state and sockets of a stopped one has stalled
 * wakes here (see the report), and that is not what this benchmark
 * measures. */
static int start_round(fleet *fleets, int round, act_error *err)
{
    for (int i = 0; i < 2; i++) {
        fleet *f = &fleets[(round + i) % 2];
        int r;
        if (f->set_up) {
            f->set_up = false;
            if ((r = dd_teardown(&f->d, err)) < 0)
                return r;
        }
        if ((r = bd_setup(&f->d, f->label, DYNAMIC_USERS, err)) < 0)
            return r;
        f->set_up = true;
        if ((r = write_hosts(f, err)) < 0 || (r = start_and_measure(f, err)) < 0 ||
            (r = dd_stage(&f->d, WOKEN, "v1", ACT_NOTIFY_ECHO, true, err)) < 0)
            return r;
    }
    return 0;
}

/* WAKES cold wakes of each daemon's host, interleaved, after WARMUP each. */
static int wake_round(fleet *fleets, int round, act_error *err)
{
    for (int i = 0; i < 2; i++)
        fleets[i].wake_usec.n = 0;
    for (int i = 0; i < WARMUP + WAKES; i++)
        for (int j = 0; j < 2; j++) {
            int r = wake_once(&fleets[(i + j) % 2], i >= WARMUP, err);
            if (r < 0)
                return r;
        }
    for (int i = 0; i < 2; i++) {
        fleet *f = &fleets[i];
        f->wake_p50[round] = bd_samples_quantile(&f->wake_usec, 0.5);
        f->wake_p99[round] = bd_samples_quantile(&f->wake_usec, 0.99);
    }
    return 0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of the rounds' ratios, with their min and max. */
static double median_ratio(const double *big, const double *small, double *min, double *max)
{
    double ratios[ROUNDS];
    for (int i = 0; i < ROUNDS; i++)
        ratios[i] = big[i] / small[i];
    qsort(ratios, ROUNDS, sizeof(ratios[0]), compare_doubles);
    *min = ratios[0];
    *max = ratios[ROUNDS - 1];
    return ratios[ROUNDS / 2];
}

static int run(fleet *fleets, act_error *err)
{
    /* The big daemon holds one socket per host, and during start-up an fd in
     * flight to the notify socket for each (read and closed at once). */
    int r = bd_raise_nofile(4 * BIG + 4096, BIG + 1024, err);
    if (r < 0)
        return r;
    fleet *small = &fleets[0], *big = &fleets[1];
    printf(BENCH ": %u and %u parked hosts (act-notify-echo, one unix socket each), %d rounds "
                 "of a fresh start and %d cold wakes each, alternating; state in %s\n",
           SMALL, BIG, ROUNDS, WAKES, bd_base_dir());
    for (int round = 0; round < ROUNDS; round++) {
        if ((r = start_round(fleets, round, err)) < 0 || (r = wake_round(fleets, round, err)) < 0)
            return r;
        printf("  round %d: start-up %.1f / %.1f ms; wake p50 %.0f / %.0f us (%.2f), "
               "p99 %.0f / %.0f us (%.2f) [big / small (ratio)]\n",
               round + 1, big->startup_usec.values[round] / 1000.0,
               small->startup_usec.values[round] / 1000.0, big->wake_p50[round],
               small->wake_p50[round], big->wake_p50[round] / small->wake_p50[round],
               big->wake_p99[round], small->wake_p99[round],
               big->wake_p99[round] / small->wake_p99[round]);
    }
    print_fleet(small);
    print_fleet(big);
    double per_host =
        (bd_samples_quantile(&big->rss_kib, 0.5) - bd_samples_quantile(&small->rss_kib, 0.5)) /
        (double)(BIG - SMALL);
    double startup_per_host = (bd_samples_quantile(&big->startup_usec, 0.5) -
                               bd_samples_quantile(&small->startup_usec, 0.5)) /
                              (double)(BIG - SMALL);
    double min50, max50, min99, max99;
    double wake50 = median_ratio(big->wake_p50, small->wake_p50, &min50, &max50);
    double wake99 = median_ratio(big->wake_p99, small->wake_p99, &min99, &max99);
    printf("RSS per host = %.2f KiB (target <= %.0f KiB: %s)\n", per_host, TARGET_KIB_PER_HOST,
           per_host <= TARGET_KIB_PER_HOST ? "met" : "NOT met");
    double cpu_per_host = (bd_samples_quantile(&big->startup_cpu_usec, 0.5) -
                           bd_samples_quantile(&small->startup_cpu_usec, 0.5)) /
                          (double)(BIG - SMALL);
    printf("  start-up CPU (user + system) per extra host: %.1f us (rounds, big:", cpu_per_host);
    for (size_t i = 0; i < big->startup_cpu_usec.n; i++)
        printf(" %.0f", big->startup_cpu_usec.values[i] / 1000.0);
    printf(" ms)\n");
    printf("START-UP per host = %.1f us (target <= %.0f us: %s)\n", startup_per_host,
           TARGET_STARTUP_USEC_PER_HOST,
           startup_per_host <= TARGET_STARTUP_USEC_PER_HOST ? "met" : "NOT met");
    printf("RATIO start-up %u/%u hosts = %.1f\n", BIG, SMALL,
           bd_samples_quantile(&big->startup_usec, 0.5) /
               bd_samples_quantile(&small->startup_usec, 0.5));
    printf("  wake ratios big/small over the %d rounds: p50 median %.2f (%.2f-%.2f), p99 median "
           "%.2f (%.2f-%.2f)\n",
           ROUNDS, wake50, min50, max50, wake99, min99, max99);
    printf("RATIO p50 big/small = %.2f (target <= %.1f: %s)\n", wake50, TARGET_WAKE_RATIO,
           wake50 <= TARGET_WAKE_RATIO ? "met" : "NOT met");
    printf("RATIO p99 big/small = %.2f (target <= %.1f: %s)\n", wake99, TARGET_WAKE_P99_RATIO,
           wake99 <= TARGET_WAKE_P99_RATIO ? "met" : "NOT met");
    return 0;
}

int main(void)
{
    int can = bd_check_can_run(BENCH);
    if (can != 0)
        return can;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    fleet fleets[2] = {{.label = "small", .n_hosts = SMALL}, {.label = "big", .n_hosts = BIG}};
    act_error err = {0};
    int r = run(fleets, &err);
    if (r < 0)
        fprintf(stderr, BENCH ": %s\n", err.message);
    for (int i = 0; i < 2; i++) {
        fleet *f = &fleets[i];
        if (!f->set_up)
            continue;
        if (r < 0 && f->d.pid > 0)
            dd_dump_log(&f->d);
        act_error cleanup_err = {0};
        if (dd_teardown(&f->d, &cleanup_err) < 0) {
            fprintf(stderr, BENCH ": cleanup of the %s daemon: %s\n", f->label,
                    cleanup_err.message);
            r = r < 0 ? r : -EBUSY;
        }
        bd_samples_free(&f->startup_usec);
        bd_samples_free(&f->startup_cpu_usec);
        bd_samples_free(&f->rss_kib);
        bd_samples_free(&f->wake_usec);
    }
    return r < 0 ? 1 : 0;
}
