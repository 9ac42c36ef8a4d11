/* bench-swap: request latency while activatord swaps builds, against the
 * steady state of the same run, and the number of failed requests.
 *
 *   bench-swap [RATE]
 *
 * One host runs act-testapp (HTTP/1.0, one connection per request) on
 * 127.0.0.1, under a daemon in a session of its own as under systemd (with
 * autogroup scheduling, a daemon in the benchmark's session takes its
 * CPU share from the client's thread). The run measures two clients in turn (swap_clients.h), each
 * over its own series of swaps on the same daemon:
 *
 * - back to back: the next request as soon as the last is answered. On a
 *   two-core box it keeps both cores busy, so its tail measures contention
 *   as much as the daemon: its ratio is printed, not judged.
 * - open loop: RATE requests per second on a fixed schedule (default 2000;
 *   the argument, else $ACT_BENCH_SWAP_RATE), which leaves the box spare
 *   CPU. Latency runs from each request's scheduled send time, so a stall
 *   delays (and counts against) every request due during it. This is the
 *   variant the p99 target judges. It runs alone on the box's first CPU,
 *   and the daemon with its apps on the others (split_cpus), so that what
 *   it measures is the swap and not its own wait for a CPU.
 *
 * For each, the main thread alternates quiet periods with overlap swaps
 * v1 -> v2 -> v1 ... through the control socket, each one timed from the
 * request to its reply (the reply comes once N+1 serves and N is retired
 * with proof). A request is "during a swap" when it starts (is sent, or
 * scheduled) between a swap's request and its reply, "steady" when its
 * interval overlaps no swap. The few that started before a swap and were
 * still open when it began are shown on their own: under the open loop, a
 * stall of the box in a quiet period keeps every request due in it open,
 * and counting them all as the next swap's would charge it with the stall.
 * Their errors count as errors during a swap.
 *
 * A control says how much of a ratio is the box rather than the swap: for
 * each swap, a quiet window as long as it, CONTROL_AFTER_MS after its reply
 * (so within the steady requests). Its p99 against steady is what a ratio
 * looks like when nothing happens; on a box shared with other work it
 * moves as much as the swaps' ratio does.
 *
 * Requests during a swap are also split by who answered: N (the build
 * swapped from) or N+1 (the build swapped to), since a freshly started
 * process answers its first requests cold (page faults, lazy binding).
 *
 * With $ACT_BENCH_SWAP_SAMPLES naming a directory, each client's requests
 * and swaps are written there (back-to-back.tsv, open-loop.tsv), one line a
 * request, times in us from the series' first request, to look at where in
 * a swap the slow ones fall.
 *
 * An error is any request that is refused, reset, times out
 * (SC_REQUEST_TIMEOUT_MS), or is not answered "200 OK" by the app. Targets:
 * open-loop p99 during swaps <= 2x steady, errors 0 for both clients. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/listen/listen.h"
#include "bench/swap/swap_clients.h"
#include "bench/wake/bench_daemon.h"
#include "common/clock.h"

#ifndef ACT_TESTAPP
#error "ACT_TESTAPP must name the act-testapp executable"
#endif

#define BENCH "bench-swap"
#define HOST "web"
/* At 2000/s a swap of ~60 ms holds ~120 open-loop requests: 30 swaps hold
 * ~3,600, whose p99 is their 36th slowest, and one scheduling hiccup of a
 * busy box decides it. The open loop swaps twice as often. */
#define SWAPS_BACK_TO_BACK 30
#define SWAPS_OPEN_LOOP 60
#define SWAPS_MAX 60
#define QUIET_MS 400
#define TARGET_P99 2.0
#define CONTROL_AFTER_MS 150
#define DEFAULT_RATE 2000
#define MAX_RATE 100000

/* The open loop's requests per second (main() sets it). */
static unsigned open_loop_rate = DEFAULT_RATE;

typedef struct window {
    uint64_t start, end;
    char to; /* the version swapped to: '1' or '2' */
    bool ok;
} window;

/* One client's series of swaps. */
typedef struct series {
    sc_client client;
    int swaps;
    window windows[SWAPS_MAX];
    size_t n_windows;
    uint64_t stopped; /* when the client was told to stop */
    unsigned failed_swaps, switched;
} series;

/* The swap in flight when a request started, or NULL. */
static const window *started_in_swap(const sc_sample *s, const window *windows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s->start >= windows[i].start && s->start <= windows[i].end)
            return &windows[i];
    return NULL;
}

/* Whether a request's interval overlaps any swap. */
static bool overlaps_swap(const sc_sample *s, const window *windows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s->start <= windows[i].end && s->end >= windows[i].start)
            return true;
    return false;
}

/* Whether a request overlaps the control window of swaps[i]: as long as the
 * swap, CONTROL_AFTER_MS after its reply, and only if it ends a quiet
 * period's tail before the next swap (or the client's stop). */
static bool in_control(const sc_sample *sample, const series *s, size_t i)
{
    uint64_t start = s->windows[i].end + CONTROL_AFTER_MS * 1000ULL;
    uint64_t end = start + (s->windows[i].end - s->windows[i].start);
    uint64_t next = i + 1 < s->n_windows ? s->windows[i + 1].start : s->stopped;
    if (end + CONTROL_AFTER_MS * 1000ULL > next)
        return false;
    return sample->start <= end && sample->end >= start;
}

static bool in_any_control(const sc_sample *sample, const series *s)
{
    for (size_t i = 0; i < s->n_windows; i++)
        if (in_control(sample, s, i))
            return true;
    return false;
}

/* The first answer that started after a swap's reply must come from the
 * build it swapped to: the proof that the swaps happened at all. */
static bool new_build_answers(const sc_client *c, const window *w)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->samples[i].start > w->end && c->samples[i].version)
            return c->samples[i].version == w->to;
    return false;
}

/* The latency of the first answer N+1 gave within a swap's window (the
 * request a fresh process answers cold), or a negative value if none. */
static double first_new_answer_usec(const sc_client *c, const window *w)
{
    for (size_t i = 0; i < c->n; i++) {
        const sc_sample *s = &c->samples[i];
        if (s->start <= w->end && s->end >= w->start && s->version == w->to)
            return (double)(s->end - s->start);
    }
    return -1;
}

/* Runs s->swaps swaps under s's client, which is started here and stopped at
 * the end. *serving is the version that serves ('1' or '2'), kept across
 * series. */
static int run_series(dd_daemon *d, series *s, char *serving, act_error *err)
{
    int r = sc_client_start(&s->client, err);
    if (r < 0)
        return r;
    act_error swap_err = {0};
    dd_sleep_ms(QUIET_MS);
    for (int i = 0; i < s->swaps; i++) {
        window *w = &s->windows[s->n_windows++];
        w->to = *serving == '1' ? '2' : '1';
        w->start = act_now_usec();
        int q = dd_request(d, 60000, NULL, &swap_err,
                           "{\"v\":1,\"op\":\"swap\",\"host\":\"" HOST "\",\"version\":\"v%c\"}",
                           w->to);
        w->end = act_now_usec();
        w->ok = q == 0;
        if (q < 0) {
            s->failed_swaps++;
            fprintf(stderr, BENCH ": swap %d: %s\n", i + 1, swap_err.message);
        } else {
            *serving = w->to;
        }
        dd_sleep_ms(QUIET_MS);
    }
    s->stopped = act_now_usec();
    sc_client_stop(&s->client);
    if (s->client.failure)
        return act_error_set(err, EIO, "the %s client gave up: %s",
                             s->client.rate ? "open-loop" : "back-to-back", s->client.failure);
    return 0;
}

/* Writes s's requests and swaps to <$ACT_BENCH_SWAP_SAMPLES>/<file>. */
static void dump_samples(const series *s, const char *file)
{
    const char *dir = getenv("ACT_BENCH_SWAP_SAMPLES");
    const sc_client *c = &s->client;
    if (!dir || !c->n)
        return;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "we");
    if (!f) {
        fprintf(stderr, BENCH ": cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    uint64_t t0 = c->samples[0].start;
    /* CLOCK_MONOTONIC of time 0, to line the file up with other tools
     * (perf record -k CLOCK_MONOTONIC). */
    fprintf(f, "# t0 %" PRIu64 " us\n", t0);
    fprintf(f, "# swap\tstart\tend\tto\n");
    for (size_t i = 0; i < s->n_windows; i++)
        fprintf(f, "swap\t%" PRIu64 "\t%" PRIu64 "\t%c\n", s->windows[i].start - t0,
                s->windows[i].end - t0, s->windows[i].to);
    fprintf(f, "# request\tstart\tsent\tend\tversion\terror\n");
    for (size_t i = 0; i < c->n; i++) {
        const sc_sample *r = &c->samples[i];
        fprintf(f, "request\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%c\t%s\n", r->start - t0,
                r->sent - t0, r->end - t0, r->version ? r->version : '-',
                r->error ? r->error : "-");
    }
    if (fclose(f) != 0)
        fprintf(stderr, BENCH ": cannot write %s: %s\n", path, strerror(errno));
}

static void print_samples(const char *label, bd_samples *samples)
{
    printf("  %-28s n=%7zu  p50 %8.0f us  p99 %8.0f us\n", label, samples->n,
           bd_samples_quantile(samples, 0.5), bd_samples_quantile(samples, 0.99));
}

/* Prints one series' latencies, swaps, errors and ratios (named by variant,
 * e.g. "back to back" or "open loop, 2000/s"); judges the p99 ratio when
 * judged. Returns the number of failed requests. */
static size_t report(series *s, const char *variant, bool judged)
{
    sc_client *c = &s->client;
    bd_samples steady = {0}, during = {0}, during_old = {0}, during_new = {0}, swap_ms = {0},
               first_new = {0}, lag = {0}, control = {0}, straddling = {0};
    size_t errors_steady = 0, errors_during = 0;
    char first_error[64] = "";
    for (size_t i = 0; i < c->n; i++) {
        const sc_sample *sample = &c->samples[i];
        const window *swap = started_in_swap(sample, s->windows, s->n_windows);
        bool in_swap = swap != NULL;
        bool straddles = !in_swap && overlaps_swap(sample, s->windows, s->n_windows);
        bd_samples_add(&lag, (double)(sample->sent - sample->start));
        if (!sample->version) {
            if (!first_error[0])
                snprintf(first_error, sizeof(first_error), "%s (%s)", sample->error,
                         in_swap || straddles ? "during a swap" : "steady");
            *(in_swap || straddles ? &errors_during : &errors_steady) += 1;
            continue;
        }
        double usec = (double)(sample->end - sample->start);
        bd_samples_add(in_swap ? &during : straddles ? &straddling : &steady, usec);
        if (!in_swap && !straddles && in_any_control(sample, s))
            bd_samples_add(&control, usec);
        if (in_swap)
            bd_samples_add(sample->version == swap->to ? &during_new : &during_old, usec);
    }
    for (size_t i = 0; i < s->n_windows; i++) {
        bd_samples_add(&swap_ms, (double)(s->windows[i].end - s->windows[i].start) / 1000.0);
        s->switched += s->windows[i].ok && new_build_answers(c, &s->windows[i]);
        double first = first_new_answer_usec(c, &s->windows[i]);
        if (first >= 0)
            bd_samples_add(&first_new, first);
    }

    size_t errors = errors_steady + errors_during;
    printf(BENCH ": %d overlap swaps v1 <-> v2 of act-testapp, %d ms apart, under %s client "
                 "(%zu requests); state in %s\n",
           s->swaps, QUIET_MS, variant, c->n, bd_base_dir());
    print_samples("steady (no swap in flight)", &steady);
    print_samples("during a swap", &during);
    print_samples("  of which answered by N", &during_old);
    print_samples("  of which answered by N+1", &during_new);
    print_samples("open when a swap began", &straddling);
    print_samples("control (quiet, as long)", &control);
    if (c->rate)
        printf("  sent late against the schedule (client lag): p50 %.0f us, p99 %.0f us, max "
               "in flight %zu, waits for an fd %zu\n",
               bd_samples_quantile(&lag, 0.5), bd_samples_quantile(&lag, 0.99), c->max_in_flight,
               c->out_of_fds);
    printf("  N+1's first answer in each swap (a fresh process answers cold): p50 %.0f us over "
           "%zu swaps\n",
           bd_samples_quantile(&first_new, 0.5), first_new.n);
    printf("  swap request -> reply (N+1 serving, N retired): p50 %.1f ms, p99 %.1f ms\n",
           bd_samples_quantile(&swap_ms, 0.5), bd_samples_quantile(&swap_ms, 0.99));
    printf("  swaps refused or failed: %u; swaps after which the new build answered: %u/%d\n",
           s->failed_swaps, s->switched, s->swaps);
    printf("  failed requests: %zu during swaps, %zu steady%s%s\n", errors_during, errors_steady,
           first_error[0] ? "; first: " : "", first_error);
    double p99 = bd_samples_quantile(&during, 0.99) / bd_samples_quantile(&steady, 0.99);
    double p50 = bd_samples_quantile(&during, 0.5) / bd_samples_quantile(&steady, 0.5);
    double control_p99 = bd_samples_quantile(&control, 0.99) / bd_samples_quantile(&steady, 0.99);
    printf("RATIO p50 swap/steady (%s) = %.2f\n", variant, p50);
    if (judged)
        printf("RATIO p99 swap/steady (%s) = %.2f (target <= %.0f: %s)\n", variant, p99, TARGET_P99,
               p99 <= TARGET_P99 ? "met" : "NOT met");
    else
        printf("RATIO p99 swap/steady (%s) = %.2f (not judged: this client keeps every core "
               "busy)\n",
               variant, p99);
    printf("RATIO p99 control/steady (%s) = %.2f (what the box alone gives; no target)\n", variant,
           control_p99);
    printf("ERRORS (%s) %zu (target 0: %s)\n", variant, errors, errors == 0 ? "met" : "NOT met");

    bd_samples_free(&steady);
    bd_samples_free(&during);
    bd_samples_free(&during_old);
    bd_samples_free(&during_new);
    bd_samples_free(&first_new);
    bd_samples_free(&swap_ms);
    bd_samples_free(&lag);
    bd_samples_free(&control);
    bd_samples_free(&straddling);
    return errors;
}

static int check_series(const series *s, const char *variant, act_error *err)
{
    if (s->failed_swaps || s->switched != (unsigned)s->swaps)
        return act_error_set(err, EPROTO,
                             "%s: %u of %d swaps failed and the new build answered after %u: the "
                             "numbers above do not measure %d swaps",
                             variant, s->failed_swaps, s->swaps, s->switched, s->swaps);
    return 0;
}

/* The box's CPUs: the open loop gets the first alone, and the daemon (with
 * every app it starts, which inherit it) and this benchmark's main thread
 * get the others. On two cores a client beside them waited for a CPU their
 * swap held, and its wait counted as the swap's. The back-to-back client
 * keeps every CPU: it is not judged. One CPU: nothing to split. */
static cpu_set_t all_cpus, client_cpu;

static void split_cpus(char *placement, size_t size)
{
    sched_getaffinity(0, sizeof(all_cpus), &all_cpus);
    int n = CPU_COUNT(&all_cpus), first = -1;
    for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
        if (CPU_ISSET(i, &all_cpus))
            first = i;
    cpu_set_t rest = all_cpus;
    CPU_CLR(first, &rest);
    CPU_ZERO(&client_cpu);
    CPU_SET(first, &client_cpu);
    if (n < 2 || sched_setaffinity(0, sizeof(rest), &rest) < 0) {
        client_cpu = all_cpus;
        snprintf(placement, size, "the open loop shares %d CPU%s with the daemon", n,
                 n == 1 ? "" : "s");
        return;
    }
    snprintf(placement, size,
             "the open loop alone on CPU %d; the daemon and its apps on the other %d", first,
             n - 1);
}

static int run(dd_daemon *d, act_error *err)
{
    /* A stall at the open loop's rate keeps a request open for every one due
     * during it: room for SC_REQUEST_TIMEOUT_MS worth at the default rate. */
    int r = bd_raise_nofile(16384, 1024, err);
    char address[64];
    if (r < 0 || (r = bd_set_up_one_host(d, "swap", HOST, "act-testapp", 5, address,
                                         sizeof(address), err)) < 0)
        return r;
    /* The daemon in a session of its own, as under systemd: with autogroup
     * scheduling, in ours its work during a swap took the client thread's
     * CPU share, and the client's lag was charged to the swap. */
    d->own_session = true;
    char placement[128];
    split_cpus(placement, sizeof(placement));
    printf("%s: %s\n", BENCH, placement);
    if ((r = dd_start(d, 30000, NULL, err)) < 0 ||
        (r = dd_stage(d, HOST, "v1", ACT_TESTAPP, true, err)) < 0 ||
        (r = dd_stage(d, HOST, "v2", ACT_TESTAPP, false, err)) < 0 ||
        (r = dd_request(d, 30000, NULL, err, "{\"v\":1,\"op\":\"wake\",\"host\":\"" HOST "\"}")) <
            0)
        return r;

    static series back_to_back = {.swaps = SWAPS_BACK_TO_BACK},
                  open_loop = {.swaps = SWAPS_OPEN_LOOP};
    if ((r = lsn_parse(address, "client target", &back_to_back.client.target, err)) < 0)
        return r;
    open_loop.client.target = back_to_back.client.target;
    open_loop.client.rate = open_loop_rate;
    back_to_back.client.cpus = &all_cpus;
    open_loop.client.cpus = &client_cpu;
    char open_variant[64];
    snprintf(open_variant, sizeof(open_variant), "open loop, %u/s", open_loop_rate);

    char serving = '1';
    r = run_series(d, &back_to_back, &serving, err);
    if (r == 0) {
        report(&back_to_back, "back to back", false);
        dump_samples(&back_to_back, "back-to-back.tsv");
        r = run_series(d, &open_loop, &serving, err);
    }
    if (r == 0) {
        report(&open_loop, open_variant, true);
        dump_samples(&open_loop, "open-loop.tsv");
        if ((r = check_series(&back_to_back, "back to back", err)) == 0)
            r = check_series(&open_loop, open_variant, err);
    }
    sc_client_free(&back_to_back.client);
    sc_client_free(&open_loop.client);
    return r;
}

int main(int argc, char **argv)
{
    const char *rate = argc > 1 ? argv[1] : getenv("ACT_BENCH_SWAP_RATE");
    if (rate) {
        char *end = NULL;
        errno = 0;
        unsigned long value = strtoul(rate, &end, 10);
        if (argc > 2 || errno || end == rate || *end || value == 0 || value > MAX_RATE) {
            fprintf(stderr,
                    "usage: %s [RATE]\n"
                    "RATE (or $ACT_BENCH_SWAP_RATE) is the open-loop client's requests per "
                    "second, 1 to %d (default %d); got \"%s\"\n",
                    argv[0], MAX_RATE, DEFAULT_RATE, rate);
            return 2;
        }
        open_loop_rate = (unsigned)value;
    }
    return bd_main(BENCH, run);
}
