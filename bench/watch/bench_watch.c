/* bench-watch: how long a box takes to give a host up once its claim names
 * another box. Two real activatord boxes on one real etcd serve one host in
 * turn; each round the benchmark reassigns the host to the other box and
 * measures, from the claim's compare-and-swap:
 *   - a bare etcd watch (the claims library's, on a thread of its own)
 *     seeing that change: the baseline, what the store itself costs;
 *   - the losing box's generation retired, its cgroup proven empty (its
 *     "retired" event): the figure operators care about;
 *   - the winning box serving the host (after the loser released it).
 * It prints p50 and p99 of each and the retired/watch ratio of the medians.
 * No client load: nothing here competes for the two cores. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "bench/wake/bench_daemon.h"
#include "claims/claims.h"
#include "common/clock.h"
#include "tests/claims/etcd_harness.h"

#define BENCH "bench-watch"
#define HOST "web"
#define WARMUP 4
#define ROUNDS 40
/* When the watch saw each revision, CLOCK_MONOTONIC usec; 0: not yet. */
#define REVISIONS_MAX 4096

typedef struct baseline_watch {
    pthread_t thread;
    sd_event *loop;
    claim_store *store;
    claims_watch *watch;
    pthread_mutex_t lock;
    uint64_t seen_usec[REVISIONS_MAX];
    uint64_t first_revision;
    int error;
} baseline_watch;

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata)
{
    baseline_watch *bw = userdata;
    uint64_t now = act_now_usec();
    pthread_mutex_lock(&bw->lock);
    if (error < 0)
        bw->error = error;
    else if (change->revision >= bw->first_revision &&
             change->revision - bw->first_revision < REVISIONS_MAX)
        bw->seen_usec[change->revision - bw->first_revision] = now;
    pthread_mutex_unlock(&bw->lock);
}

static void *run_baseline(void *arg)
{
    baseline_watch *bw = arg;
    sd_event_loop(bw->loop);
    return NULL;
}

static int baseline_start(baseline_watch *bw, const char *url, uint64_t from, act_error *err)
{
    pthread_mutex_init(&bw->lock, NULL);
    bw->first_revision = from;
    int r = sd_event_new(&bw->loop);
    if (r < 0)
        return act_error_set(err, -r, "sd_event_new: %s", strerror(-r));
    if ((r = claims_store_open(url, NULL, &bw->store, err)) < 0 ||
        (r = claims_store_attach_event(bw->store, bw->loop, err)) < 0 ||
        (r = claims_watch_start(bw->store, from, on_change, bw, &bw->watch, err)) < 0)
        return r;
    if (pthread_create(&bw->thread, NULL, run_baseline, bw) != 0)
        return act_error_set(err, EAGAIN, "cannot start the watch thread");
    return 0;
}

static int on_exit_request(sd_event_source *source, void *userdata)
{
    sd_event_exit(sd_event_source_get_event(source), 0);
    return 0;
}

static void baseline_stop(baseline_watch *bw)
{
    if (bw->thread) {
        /* The loop belongs to its thread: asked to stop from there. */
        sd_event_add_defer(bw->loop, NULL, on_exit_request, NULL);
        pthread_join(bw->thread, NULL);
    }
    claims_watch_free(bw->watch);
    claims_store_free(bw->store);
    sd_event_unref(bw->loop);
}

static uint64_t baseline_seen(baseline_watch *bw, uint64_t revision, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited++) {
        pthread_mutex_lock(&bw->lock);
        uint64_t seen = revision - bw->first_revision < REVISIONS_MAX
                            ? bw->seen_usec[revision - bw->first_revision]
                            : 0;
        pthread_mutex_unlock(&bw->lock);
        if (seen)
            return seen;
        dd_sleep_ms(1);
    }
    return 0;
}

/* Writes the host's claim as assigned to box; *revision is the write's. */
static int assign(claim_store *store, const char *box, uint64_t *revision, act_error *err)
{
    claim current = {0};
    int found = claims_read(store, HOST, &current, err);
    if (found < 0)
        return found;
    claim next = current;
    snprintf(next.host, sizeof(next.host), HOST);
    snprintf(next.op.id, sizeof(next.op.id), "assign");
    next.op.kind = CLAIM_OP_SERVING;
    snprintf(next.op.phase, sizeof(next.op.phase), "assigned");
    snprintf(next.op.exec, sizeof(next.op.exec), "%s", box);
    return claims_cas(store, HOST, found ? current.revision : 0, &next, revision, NULL, err);
}

static int setup_box(dd_daemon *d, const char *box, const char *url, const char *address,
                     act_error *err)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s/act-bench-watch", bd_base_dir());
    dd_options options = {.dir_prefix = prefix, .cgroup_name = "act-bench-watch", .box = box,
                          .store_url = url};
    int r = dd_setup(d, &options, err);
    if (r < 0 || (r = dd_write_host(d, HOST, err,
                                    "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\n"
                                    "StopTimeoutSec=2\nReadyTimeoutSec=10\n"
                                    "[Listen]\nListenStream=%s\n",
                                    address)) < 0 ||
        (r = dd_start(d, 30000, NULL, err)) < 0)
        return r;
    return dd_stage(d, HOST, "v1", ACT_NOTIFY_ECHO, true, err);
}

typedef struct fleet {
    etcd_harness etcd;
    bool etcd_started;
    char url[256];
    dd_daemon boxes[2];
    claim_store *store;
    baseline_watch watch;
} fleet;

static const char *const box_names[2] = {"box-1", "box-2"};

static int one_round(fleet *fl, int round, bd_samples *watch, bd_samples *retired,
                     bd_samples *served, act_error *err)
{
    int to = round % 2, from = 1 - to; /* round 1 moves it off box-1 */
    dd_events_drain(&fl->boxes[from]);
    uint64_t start = act_now_usec(), revision = 0;
    int r = assign(fl->store, box_names[to], &revision, err);
    if (r < 0)
        return r;
    dd_event gone;
    if (!dd_event_wait(&fl->boxes[from], HOST, "retired", 20000, NULL, NULL, &gone))
        return act_error_set(err, ETIMEDOUT, "round %d: %s did not retire %s within 20 s", round,
                             box_names[from], HOST);
    uint64_t retired_at = act_now_usec();
    if ((r = dd_wait_state(&fl->boxes[to], HOST, "serving", 20000, 1, err)) < 0)
        return r;
    uint64_t served_at = act_now_usec();
    uint64_t seen = baseline_seen(&fl->watch, revision, 10000);
    if (!seen)
        return act_error_set(err, ETIMEDOUT, "round %d: the bare watch never saw revision %" PRIu64,
                             round, revision);
    if (watch) {
        bd_samples_add(watch, (double)(seen - start));
        bd_samples_add(retired, (double)(retired_at - start));
        bd_samples_add(served, (double)(served_at - start));
    }
    return 0;
}

static void print_line(const char *what, bd_samples *samples)
{
    printf("  %-52s p50 %8.0f us  p99 %8.0f us\n", what, bd_samples_quantile(samples, 0.5),
           bd_samples_quantile(samples, 0.99));
}

static int run(fleet *fl, act_error *err)
{
    int r = etcd_harness_start(&fl->etcd, err);
    if (r < 0)
        return r;
    fl->etcd_started = true;
    snprintf(fl->url, sizeof(fl->url), "%s/bench-watch-%d", fl->etcd.url_prefix, (int)getpid());
    if ((r = claims_store_open(fl->url, NULL, &fl->store, err)) < 0)
        return r;
    int port = dd_free_port(err);
    if (port < 0)
        return port;
    static const char *const addresses[2] = {"127.0.0.2", "127.0.0.3"};
    for (int i = 0; i < 2; i++) {
        char address[64];
        snprintf(address, sizeof(address), "%s:%d", addresses[i], port);
        if ((r = setup_box(&fl->boxes[i], box_names[i], fl->url, address, err)) < 0)
            return r;
    }
    uint64_t revision = 0;
    if ((r = assign(fl->store, box_names[0], &revision, err)) < 0 ||
        (r = dd_wait_state(&fl->boxes[0], HOST, "serving", 20000, 1, err)) < 0 ||
        (r = baseline_start(&fl->watch, fl->url, revision + 1, err)) < 0)
        return r;
    bd_samples watch = {0}, retired = {0}, served = {0};
    for (int round = 1; round <= WARMUP + ROUNDS && r == 0; round++)
        r = one_round(fl, round, round > WARMUP ? &watch : NULL, &retired, &served, err);
    if (r == 0) {
        printf(BENCH ": %d reassignments of one host between two activatord boxes on one "
                     "etcd (state in %s)\n",
               ROUNDS, bd_base_dir());
        print_line("bare etcd watch sees the claim change", &watch);
        print_line("the losing box's generation retired (proven empty)", &retired);
        print_line("the winning box serves (after the release)", &served);
        printf("  retired/watch p50 ratio %.2f\n",
               bd_samples_quantile(&retired, 0.5) / bd_samples_quantile(&watch, 0.5));
    }
    free(watch.values);
    free(retired.values);
    free(served.values);
    return r;
}

int main(void)
{
    int can = bd_check_can_run(BENCH);
    if (can != 0)
        return can;
    if (!etcd_harness_available()) {
        printf(BENCH ": SKIPPED (%s not installed)\n", ETCD_HARNESS_BINARY);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    fleet fl = {0};
    act_error err = {0};
    int r = run(&fl, &err);
    if (r < 0) {
        fprintf(stderr, BENCH ": %s\n", err.message);
        for (int i = 0; i < 2; i++)
            dd_dump_log(&fl.boxes[i]);
    }
    baseline_stop(&fl.watch);
    claims_store_free(fl.store);
    for (int i = 0; i < 2; i++) {
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
