/* bench-failover: how soon a dead box's failover hosts serve elsewhere.
 * Three real activatord boxes on one real etcd (BoxLeaseSec=2s, so
 * FailoverGraceSec= defaults to the 500 ms margin); HOSTS echo servers
 * with Failover=yes serve on box-1. Per run, box-1's power is cut (its
 * daemon SIGKILLed, then every process of its cgroup root at once) and the
 * clock runs until every host answers on box-2 or box-3, as a client
 * routed by the claim would find it. Then box-1 starts again and the hosts
 * are assigned back to it: that reassignment, every host retired where it
 * was and woken on box-1 (the same work without the death to notice), is
 * the baseline measured in the same run.
 *
 * Prints, over RUNS runs: the time to all serving (p50, p99, spread), what
 * it is beyond the lease and the grace (the figure the target is on:
 * p99 <= 2 s for 20 hosts), the reassignment's p50 and the ratio of the
 * overhead to it, and how the hosts spread over the two survivors.
 *
 *   bench-failover [runs]    default: 20 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/wake/bench_daemon.h"
#include "claims/claims.h"
#include "common/clock.h"
#include "tests/claims/etcd_harness.h"

#define BENCH "bench-failover"
#define BOXES 3
#define HOSTS 20
#define LEASE_USEC (2 * 1000000ull)
#define GRACE_USEC (500 * 1000ull)

typedef struct fleet {
    etcd_harness etcd;
    bool etcd_started;
    char url[256];
    dd_daemon boxes[BOXES];
    claim_store *store;
    int ports[HOSTS];
} fleet;

static const char *box_name(int i)
{
    static const char *const names[BOXES] = {"box-1", "box-2", "box-3"};
    return names[i];
}

static void host_name(int h, char *out, size_t size)
{
    snprintf(out, size, "fo-%02d", h);
}

static int setup_box(fleet *fl, int i, act_error *err)
{
    dd_daemon *d = &fl->boxes[i];
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s/act-bench-failover", bd_base_dir());
    dd_options options = {.dir_prefix = prefix,
                          .cgroup_name = "act-bench-failover",
                          .box = box_name(i),
                          .store_url = fl->url,
                          .extra_conf = "BoxLeaseSec=2\n"};
    int r = dd_setup(d, &options, err);
    for (int h = 0; h < HOSTS && r >= 0; h++) {
        char host[16];
        host_name(h, host, sizeof(host));
        r = dd_write_host(d, host, err,
                          "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\nStopTimeoutSec=2\n"
                          "Failover=yes\n[Listen]\nListenStream=127.0.0.%d:%d\n",
                          i + 2, fl->ports[h]);
    }
    if (r < 0 || (r = dd_start(d, 30000, NULL, err)) < 0)
        return r;
    for (int h = 0; h < HOSTS && r >= 0; h++) {
        char host[16];
        host_name(h, host, sizeof(host));
        r = dd_stage(d, host, "v1", ACT_NOTIFY_ECHO, true, err);
    }
    return r;
}

/* Every host's claim names box index and the host answers there. */
static int assign_all(fleet *fl, int index, act_error *err)
{
    for (int h = 0; h < HOSTS; h++) {
        char host[16];
        host_name(h, host, sizeof(host));
        for (int tries = 0;; tries++) {
            claim current = {0}, next;
            int found = claims_read(fl->store, host, &current, err);
            if (found < 0)
                return found;
            claim_edit edit = {.kind = CLAIM_EDIT_ASSIGN};
            snprintf(edit.box, sizeof(edit.box), "%s", box_name(index));
            int r = claim_apply_edit(host, found ? &current : &(claim){0}, &edit, &next, err);
            if (r == 1)
                break;
            if (r < 0)
                return r;
            uint64_t revision = 0;
            r = claims_cas(fl->store, host, current.revision, &next, &revision, NULL, err);
            if (r == 0)
                break;
            if (r != CLAIMS_CHANGED || tries > 20)
                return r < 0 ? r : act_error_set(err, EAGAIN, "%s: the claim keeps changing", host);
        }
    }
    return 0;
}

/* The box index host h serves on by its claim (phase serving), or -1. */
static int serving_on(fleet *fl, int h, act_error *err)
{
    char host[16];
    host_name(h, host, sizeof(host));
    claim c = {0};
    if (claims_read(fl->store, host, &c, err) <= 0 || c.op.kind != CLAIM_OP_SERVING ||
        strcmp(c.op.phase, "serving") != 0)
        return -1;
    for (int i = 0; i < BOXES; i++)
        if (strcmp(c.holder.box, box_name(i)) == 0)
            return i;
    return -1;
}

/* Waits until every host answers on a box in [from, to], as a client that
 * reads the claim and asks there would; the box of each into on. */
static int all_answer(fleet *fl, int from, int to, int timeout_ms, int *on, act_error *err)
{
    bool done[HOSTS] = {false};
    int left = HOSTS;
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    while (left > 0) {
        for (int h = 0; h < HOSTS; h++) {
            if (done[h])
                continue;
            int index = serving_on(fl, h, err);
            char address[64];
            if (index < from || index > to)
                continue;
            snprintf(address, sizeof(address), "127.0.0.%d:%d", index + 2, fl->ports[h]);
            act_error echo_err = {0};
            if (bd_echo_once(address, 200, &echo_err) == 0) {
                done[h] = true;
                on[h] = index;
                left--;
            }
        }
        if (left && dd_now_ms() >= deadline)
            return act_error_set(err, ETIMEDOUT, "%d of %d hosts do not answer within %d ms",
                                 left, HOSTS, timeout_ms);
        if (left)
            dd_sleep_ms(2);
    }
    return 0;
}

/* Box index's daemon SIGKILLed, then every process of its cgroup root. */
static int power_cut(fleet *fl, int index, act_error *err)
{
    dd_daemon *d = &fl->boxes[index];
    int r = dd_kill(d, 10000, err);
    if (r < 0)
        return r;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/cgroup.kill", d->cgroup_path);
    FILE *f = fopen(path, "we");
    if (!f || fputs("1", f) < 0 || fclose(f) != 0)
        return act_error_set(err, errno, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

static int run(fleet *fl, size_t runs, act_error *err)
{
    int r = etcd_harness_start(&fl->etcd, err);
    if (r < 0)
        return r;
    fl->etcd_started = true;
    snprintf(fl->url, sizeof(fl->url), "%s/bench-failover-%d", fl->etcd.url_prefix,
             (int)getpid());
    if ((r = claims_store_open(fl->url, NULL, &fl->store, err)) < 0)
        return r;
    for (int h = 0; h < HOSTS; h++)
        if ((fl->ports[h] = dd_free_port(err)) < 0)
            return fl->ports[h];
    for (int i = 0; i < BOXES; i++)
        if ((r = setup_box(fl, i, err)) < 0)
            return r;
    int on[HOSTS];
    if ((r = assign_all(fl, 0, err)) < 0 || (r = all_answer(fl, 0, 0, 60000, on, err)) < 0)
        return r;
    bd_samples failover = {0}, back = {0};
    size_t spread[BOXES] = {0};
    for (size_t run = 0; run < runs && r == 0; run++) {
        uint64_t cut = act_now_usec();
        if ((r = power_cut(fl, 0, err)) < 0 || (r = all_answer(fl, 1, 2, 60000, on, err)) < 0)
            break;
        bd_samples_add(&failover, (double)(act_now_usec() - cut));
        for (int h = 0; h < HOSTS; h++)
            spread[on[h]]++;
        /* box-1 back, and the hosts with it: the baseline. */
        if ((r = dd_start(&fl->boxes[0], 30000, NULL, err)) < 0)
            break;
        uint64_t assigned = act_now_usec();
        if ((r = assign_all(fl, 0, err)) < 0 || (r = all_answer(fl, 0, 0, 60000, on, err)) < 0)
            break;
        bd_samples_add(&back, (double)(act_now_usec() - assigned));
    }
    if (r == 0) {
        double floor = (double)(LEASE_USEC + GRACE_USEC);
        double p50 = bd_samples_quantile(&failover, 0.5), p99 = bd_samples_quantile(&failover, 0.99);
        double lo = bd_samples_quantile(&failover, 0.0), hi = bd_samples_quantile(&failover, 1.0);
        double base = bd_samples_quantile(&back, 0.5);
        printf(BENCH ": %zu power cuts of a box serving %d failover hosts, 3 boxes on one etcd, "
                     "BoxLeaseSec=2s, FailoverGraceSec=500ms\n",
               runs, HOSTS);
        printf("  every host serving elsewhere   p50 %7.0f ms  p99 %7.0f ms  (%.0f..%.0f)\n",
               p50 / 1000, p99 / 1000, lo / 1000, hi / 1000);
        printf("  beyond lease + grace (%.1f s)   p50 %+7.0f ms  p99 %+7.0f ms  (target: p99 <= "
               "2000 ms)\n",
               floor / 1e6, (p50 - floor) / 1000, (p99 - floor) / 1000);
        printf("  baseline: the same hosts assigned back to the box, all serving  p50 %7.0f ms; "
               "RATIO (beyond / baseline) %.2f\n",
               base / 1000, (p50 - floor) / base);
        printf("  hosts taken: %zu by box-2, %zu by box-3\n", spread[1], spread[2]);
    }
    bd_samples_free(&failover);
    bd_samples_free(&back);
    return r;
}

int main(int argc, char **argv)
{
    size_t runs = argc > 1 ? strtoul(argv[1], NULL, 10) : 20;
    if (runs == 0) {
        fprintf(stderr, "usage: %s [runs]\n", argv[0]);
        return 2;
    }
    int can = bd_check_can_run(BENCH);
    if (can != 0)
        return can;
    if (!etcd_harness_available()) {
        printf(BENCH ": SKIPPED (%s not installed)\n", ETCD_HARNESS_BINARY);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    static fleet fl;
    act_error err = {0};
    int r = run(&fl, runs, &err);
    if (r < 0) {
        fprintf(stderr, BENCH ": %s\n", err.message);
        for (int i = 0; i < BOXES; i++)
            dd_dump_log(&fl.boxes[i]);
    }
    claims_store_free(fl.store);
    for (int i = 0; i < BOXES; i++) {
        act_error cleanup = {0};
        if (dd_teardown(&fl.boxes[i], &cleanup) < 0) {
            fprintf(stderr, BENCH ": cleanup: %s\n", cleanup.message);
            r = r < 0 ? r : -EBUSY;
        }
    }
    if (fl.etcd_started)
        etcd_harness_destroy(&fl.etcd);
    return r < 0 ? 1 : 0;
}
