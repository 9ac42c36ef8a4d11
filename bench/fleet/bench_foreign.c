/* bench-foreign: what the rest of a fleet costs one box. One real activatord
 * with 10 hosts on a real etcd, started on a prefix that holds only its own
 * hosts ("alone") and on one that also holds N claims of other boxes' hosts
 * ("beside", N = 100,000 unless $BENCH_FOREIGN_CLAIMS says otherwise), in
 * the same run, alternately, ROUNDS times each:
 *   - start-up: fork+exec to READY=1 (the layout check and the box's list),
 *     and the CPU it took;
 *   - memory: VmRSS once settled;
 *   - a heal: etcd restarted, until a cold wake of one of its hosts is
 *     answered (the wake needs the store to admit it), and the CPU it took;
 *   - foreign writes: the other boxes rewrite 1,000 of their claims a
 *     second for WRITE_SEC seconds; the daemon's CPU meanwhile, in
 *     microseconds of CPU per second.
 * The foreign claims are planted and rewritten by raw txns that write what
 * this project's store writes (the claim under <prefix>/<host> and its copy
 * under the index of the box it names), so the planting takes seconds.
 * Prints each round, then the medians of the rounds with their spread and
 * the ratio beside/alone with the absolute difference. Targets (issue 25):
 * start-up, RSS and heal within 1.5x; CPU under foreign writes under 0.2 %
 * of a core (2,000 us of CPU a second). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/fleet/seed_claims.h"
#include "bench/wake/bench_daemon.h"
#include "claims/claims.h"
#include "common/clock.h"
#include "tests/claims/etcd_harness.h"

#ifndef ACT_NOTIFY_ECHO
#error "ACT_NOTIFY_ECHO must name the act-notify-echo executable"
#endif

#define BENCH "bench-foreign"
#define HOSTS 10
#define ROUNDS 3
#define FOREIGN_DEFAULT 100000u
#define FOREIGN_BOXES 100
#define WRITE_RATE 1000
#define WRITE_SEC 10
#define SETTLE_MS 500
#define WOKEN "h00"

static etcd_harness etcd;

typedef struct variant {
    const char *label;
    char prefix[32];
    unsigned foreign;
    bd_samples startup_usec, startup_cpu_usec, rss_kib, heal_usec, heal_cpu_usec, write_cpu;
} variant;

/* The CPU time of every thread of pid in microseconds, from each
 * thread's schedstat (nanoseconds: /proc/<pid>/stat counts 10 ms ticks,
 * too coarse for a daemon that uses a few milliseconds a second). */
static long cpu_usec(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *tasks = opendir(path);
    if (!tasks)
        return -errno;
    unsigned long long total_ns = 0;
    struct dirent *entry;
    while ((entry = readdir(tasks))) {
        if (entry->d_name[0] == '.')
            continue;
        char stat_path[sizeof(path) + 256 + 16];
        snprintf(stat_path, sizeof(stat_path), "%s/%s/schedstat", path, entry->d_name);
        FILE *f = fopen(stat_path, "re");
        unsigned long long ns = 0;
        if (f && fscanf(f, "%llu", &ns) == 1)
            total_ns += ns;
        if (f)
            fclose(f);
    }
    closedir(tasks);
    return (long)(total_ns / 1000);
}

/* Writes foreign claims [from, from + n) of prefix, each assigned to one of
 * FOREIGN_BOXES other boxes, with session as given (a rewrite changes it). */
static int write_foreign(const char *prefix, unsigned from, unsigned n, uint64_t session,
                         act_error *err)
{
    enum { CHUNK = 1024 };
    claim *chunk = calloc(CHUNK, sizeof(*chunk));
    if (!chunk)
        return act_error_set(err, ENOMEM, "writing foreign claims: out of memory");
    int r = 0;
    for (unsigned base = from; base < from + n && r == 0; base += CHUNK) {
        unsigned count = from + n - base < CHUNK ? from + n - base : CHUNK;
        for (unsigned i = 0; i < count; i++) {
            claim *c = &chunk[i];
            *c = (claim){0};
            snprintf(c->host, sizeof(c->host), "f%06u", base + i);
            snprintf(c->op.id, sizeof(c->op.id), "bench");
            c->op.kind = CLAIM_OP_SERVING;
            snprintf(c->op.phase, sizeof(c->op.phase), "assigned");
            snprintf(c->op.exec, sizeof(c->op.exec), "other-%u", (base + i) % FOREIGN_BOXES);
            snprintf(c->holder.box, sizeof(c->holder.box), "other-%u", (base + i) % FOREIGN_BOXES);
            snprintf(c->holder.incarnation, sizeof(c->holder.incarnation), "bench");
            c->holder.session = session;
        }
        r = seed_claims_write(&etcd, prefix, chunk, count, err);
    }
    free(chunk);
    return r;
}

static int set_up_daemon(dd_daemon *d, variant *v, act_error *err)
{
    char dir[64], store[128];
    snprintf(dir, sizeof(dir), "%s/act-bench-%s", bd_base_dir(), v->label);
    snprintf(store, sizeof(store), "%s%s", etcd.url_prefix, v->prefix);
    dd_options options = {
        .dir_prefix = dir, .cgroup_name = "act-bench", .box = BD_BOX, .store_url = store};
    int r = dd_setup(d, &options, err);
    if (r < 0)
        return r;
    d->own_session = true;
    d->keep_dir = getenv("ACT_BENCH_KEEP") != NULL;
    char sockets[PATH_MAX];
    snprintf(sockets, sizeof(sockets), "%s/s", d->dir);
    if (mkdir(sockets, 0755) < 0)
        return act_error_set(err, errno, "mkdir %s: %s", sockets, strerror(errno));
    for (unsigned i = 0; i < HOSTS; i++) {
        char name[8];
        snprintf(name, sizeof(name), "h%02u", i);
        if ((r = dd_write_host(d, name, err,
                               "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\n"
                               "StopTimeoutSec=2\n[Listen]\nListenStream=%s/%s\n",
                               sockets, name)) < 0)
            return r;
    }
    return 0;
}

static int wake_and_park(dd_daemon *d, int timeout_ms, act_error *err)
{
    char address[PATH_MAX + 8];
    snprintf(address, sizeof(address), "%s/s/" WOKEN, d->dir);
    int r = bd_echo_once(address, timeout_ms, err);
    if (r == 0)
        r = dd_request(d, 10000, NULL, err, "{\"v\":1,\"op\":\"park\",\"host\":\"" WOKEN "\"}");
    if (r == 0)
        r = dd_wait_state(d, WOKEN, "parked", 10000, 1, err);
    return r;
}

static int measure(variant *v, act_error *err)
{
    dd_daemon d;
    int r = set_up_daemon(&d, v, err);
    if (r < 0)
        return r;
    if ((r = dd_start(&d, 120000, NULL, err)) < 0 ||
        (r = dd_stage(&d, WOKEN, "v1", ACT_NOTIFY_ECHO, true, err)) < 0)
        goto out;
    bd_samples_add(&v->startup_usec, (double)dd_startup_usec(&d));
    bd_samples_add(&v->startup_cpu_usec, (double)cpu_usec(d.pid));
    dd_sleep_ms(SETTLE_MS);
    bd_samples_add(&v->rss_kib, (double)dd_rss_kib(&d));
    /* A first wake, so the heal's is the same kind of wake. */
    if ((r = wake_and_park(&d, 10000, err)) < 0)
        goto out;

    long cpu_before = cpu_usec(d.pid);
    if ((r = etcd_harness_restart(&etcd, err)) < 0)
        goto out;
    uint64_t restarted = act_now_usec();
    for (int tries = 0; (r = wake_and_park(&d, 2000, err)) < 0 && tries < 100; tries++)
        dd_sleep_ms(20);
    if (r < 0)
        goto out;
    bd_samples_add(&v->heal_usec, (double)(act_now_usec() - restarted));
    bd_samples_add(&v->heal_cpu_usec, (double)(cpu_usec(d.pid) - cpu_before));

    /* The other boxes rewrite their claims, WRITE_RATE a second. */
    unsigned pool = v->foreign ? v->foreign : WRITE_RATE;
    char other[40];
    snprintf(other, sizeof(other), "%s", v->foreign ? v->prefix : "/bench-foreign-elsewhere");
    cpu_before = cpu_usec(d.pid);
    uint64_t start = act_now_usec();
    for (unsigned second = 0; second < WRITE_SEC; second++) {
        if ((r = write_foreign(other, (second * WRITE_RATE) % pool, WRITE_RATE, second + 2, err)) <
            0)
            goto out;
        uint64_t next = start + (uint64_t)(second + 1) * 1000000;
        uint64_t now = act_now_usec();
        if (now < next)
            dd_sleep_ms((long)((next - now) / 1000));
    }
    double seconds = (double)(act_now_usec() - start) / 1e6;
    bd_samples_add(&v->write_cpu, (double)(cpu_usec(d.pid) - cpu_before) / seconds);
out:;
    act_error teardown_err = {0};
    dd_teardown(&d, &teardown_err);
    return r;
}

static void report(const char *what, const char *unit, bd_samples *alone, bd_samples *beside,
                   double target_ratio)
{
    double a = bd_samples_quantile(alone, 0.5), b = bd_samples_quantile(beside, 0.5);
    printf("  %-34s alone %10.1f %s  beside %10.1f %s (rounds %.1f-%.1f)  ratio %.2f, %+.1f %s",
           what, a, unit, b, unit, beside->values[0], beside->values[beside->n - 1],
           a > 0 ? b / a : 0, b - a, unit);
    if (target_ratio > 0)
        printf("  [target <= %.1fx]", target_ratio);
    printf("\n");
}

static int run(variant *variants, act_error *err)
{
    int r = etcd_harness_start(&etcd, err);
    if (r < 0)
        return r;
    variant *beside = &variants[1];
    uint64_t planting = act_now_usec();
    if ((r = write_foreign(beside->prefix, 0, beside->foreign, 1, err)) < 0)
        return r;
    printf(BENCH ": one daemon with %d hosts on a real etcd, alone and beside %u claims of %d "
                 "other boxes (planted in %.1f s), %d rounds each, alternating\n",
           HOSTS, beside->foreign, FOREIGN_BOXES, (double)(act_now_usec() - planting) / 1e6,
           ROUNDS);
    for (int round = 0; round < ROUNDS; round++)
        for (int i = 0; i < 2; i++) {
            variant *v = &variants[(round + i) % 2];
            if ((r = measure(v, err)) < 0)
                return act_error_prefix(err, "%s, round %d", v->label, round + 1);
            size_t k = v->startup_usec.n - 1;
            printf("  round %d %-6s start-up %.1f ms (cpu %.1f ms), RSS %.0f KiB, heal %.0f ms "
                   "(cpu %.1f ms), cpu under foreign writes %.0f us/s\n",
                   round + 1, v->label, v->startup_usec.values[k] / 1000.0,
                   v->startup_cpu_usec.values[k] / 1000.0, v->rss_kib.values[k],
                   v->heal_usec.values[k] / 1000.0, v->heal_cpu_usec.values[k] / 1000.0,
                   v->write_cpu.values[k]);
        }
    variant *alone = &variants[0];
    printf("medians of %d rounds:\n", ROUNDS);
    report("start-up (us)", "us", &alone->startup_usec, &beside->startup_usec, 1.5);
    report("start-up CPU (us)", "us", &alone->startup_cpu_usec, &beside->startup_cpu_usec, 0);
    report("RSS (KiB)", "KiB", &alone->rss_kib, &beside->rss_kib, 1.5);
    report("heal, restart to a wake (us)", "us", &alone->heal_usec, &beside->heal_usec, 1.5);
    report("heal CPU (us)", "us", &alone->heal_cpu_usec, &beside->heal_cpu_usec, 0);
    report("CPU under 1,000 foreign writes/s", "us/s", &alone->write_cpu, &beside->write_cpu, 0);
    double cpu = bd_samples_quantile(&beside->write_cpu, 0.5);
    printf("  beside: %.3f %% of a core under foreign writes [target < 0.2 %%]\n", cpu / 1e4);
    return 0;
}

int main(void)
{
    int r = bd_check_can_run(BENCH);
    if (!r)
        r = etcd_harness_require(BENCH);
    if (r)
        return r;
    const char *n = getenv("BENCH_FOREIGN_CLAIMS");
    variant variants[2] = {{.label = "alone"}, {.label = "beside"}};
    snprintf(variants[0].prefix, sizeof(variants[0].prefix), "/bench-alone");
    snprintf(variants[1].prefix, sizeof(variants[1].prefix), "/bench-beside");
    variants[1].foreign = n && atoi(n) > 0 ? (unsigned)atoi(n) : FOREIGN_DEFAULT;
    act_error err = {0};
    r = run(variants, &err);
    if (r < 0)
        fprintf(stderr, BENCH ": %s\n", err.message);
    etcd_harness_destroy(&etcd);
    return r < 0 ? 1 : 0;
}
