/* bench-notify: the control round trip (`status`) of the real activatord
 * while one of its hosts floods its own notify socket, against the same
 * round trip while nothing floods, in the same run.
 *
 * Two hosts run act-notify-echo. "flood" also runs act-notify-flood as its
 * ExecReplicate=, which sends WATCHDOG=1 to the generation's NOTIFY_SOCKET
 * as fast as the socket takes it for FLOOD_SECONDS: the daemon's loop reads
 * a burst of datagrams per turn, and must go on answering control requests
 * and serving the other host meanwhile. Status requests are timed before
 * the flood (the baseline) and during it, alternately in short blocks so
 * that the machine's noise hits both alike; the flood is started once per
 * round. Target: p99 during the flood <= 2 x idle. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/wake/bench_daemon.h"
#include "common/clock.h"

#ifndef ACT_NOTIFY_ECHO
#error "ACT_NOTIFY_ECHO must name the act-notify-echo executable"
#endif
#ifndef ACT_NOTIFY_FLOOD
#error "ACT_NOTIFY_FLOOD must name the act-notify-flood executable"
#endif

#define BENCH "bench-notify"
#define ROUNDS 3
#define FLOOD_SECONDS 6
#define SAMPLES_PER_ROUND 1000
#define TARGET 2.0

static int time_status(dd_daemon *d, bd_samples *samples, size_t n, act_error *err)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t start = act_now_usec();
        json_object *result = NULL;
        int r = dd_request(d, 5000, &result, err, "{\"v\":1,\"op\":\"status\",\"host\":\"calm\"}");
        json_object_put(result);
        if (r < 0)
            return r;
        if (bd_samples_add(samples, (double)(act_now_usec() - start)) < 0)
            return act_error_set(err, ENOMEM, "out of memory");
    }
    return 0;
}

static int write_echo_host(dd_daemon *d, const char *host, const char *extra, act_error *err)
{
    /* Written before the daemon starts; staged through it once it runs. */
    int port = dd_free_port(err);
    if (port < 0)
        return port;
    int r = dd_write_host(d, host, err,
                          "[Host]\n"
                          "Exec=act-notify-echo\n"
                          "IdleTimeoutSec=0\n"
                          "StopTimeoutSec=2\n"
                          "ReadyTimeoutSec=10\n"
                          "%s"
                          "[Listen]\n"
                          "ListenStream=127.0.0.1:%d\n",
                          extra, port);
    return r;
}

static int request(dd_daemon *d, const char *op, const char *host, act_error *err)
{
    return dd_request(d, 30000, NULL, err, "{\"v\":1,\"op\":\"%s\",\"host\":\"%s\"}", op, host);
}

static int run(dd_daemon *d, act_error *err)
{
    int r = bd_setup(d, "notify", NULL, err);
    if (r < 0)
        return r;
    char flood[256];
    snprintf(flood, sizeof(flood), "ExecReplicate=%s %d\n", ACT_NOTIFY_FLOOD, FLOOD_SECONDS);
    if ((r = write_echo_host(d, "calm", "", err)) < 0 ||
        (r = write_echo_host(d, "flood", flood, err)) < 0 ||
        (r = dd_start(d, 30000, NULL, err)) < 0 ||
        (r = dd_stage(d, "calm", "v1", ACT_NOTIFY_ECHO, true, err)) < 0 ||
        (r = dd_stage(d, "flood", "v1", ACT_NOTIFY_ECHO, true, err)) < 0 ||
        (r = request(d, "wake", "calm", err)) < 0)
        return r;

    bd_samples idle = {0}, flooded = {0};
    for (int round = 0; round < ROUNDS && r == 0; round++) {
        r = time_status(d, &idle, SAMPLES_PER_ROUND, err);
        uint64_t started = act_now_usec();
        if (r == 0)
            r = request(d, "wake", "flood", err);
        /* Only what falls inside the flood counts. */
        while (r == 0 && act_now_usec() - started < (FLOOD_SECONDS - 1) * 1000000ull)
            r = time_status(d, &flooded, 100, err);
        if (r == 0)
            r = request(d, "park", "flood", err);
    }
    if (r == 0) {
        double idle_p50 = bd_samples_quantile(&idle, 0.5), idle_p99 = bd_samples_quantile(&idle, 0.99);
        double flood_p50 = bd_samples_quantile(&flooded, 0.5);
        double flood_p99 = bd_samples_quantile(&flooded, 0.99);
        printf("%s: status round trip, %zu idle and %zu flooded samples\n", BENCH, idle.n,
               flooded.n);
        printf("  idle:    p50 %8.1f us   p99 %8.1f us\n", idle_p50, idle_p99);
        printf("  flooded: p50 %8.1f us   p99 %8.1f us\n", flood_p50, flood_p99);
        printf("  ratio:   p50 %.2f   p99 %.2f   (target p99 <= %.1f)\n", flood_p50 / idle_p50,
               flood_p99 / idle_p99, TARGET);
    }
    bd_samples_free(&idle);
    bd_samples_free(&flooded);
    return r;
}

int main(void)
{
    return bd_main(BENCH, run);
}
