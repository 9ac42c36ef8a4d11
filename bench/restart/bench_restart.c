/* bench-restart: what a handover costs the clients of a box. A daemon serves
 * 100 hosts (act-notify-echo, one byte echoed per connection); an open-loop
 * client connects to them in turn at a fixed rate (two threads, 100
 * connections a second each: far below what two cores can do, so the client
 * does not measure contention). After a steady phase, the benchmark sends the
 * handover signal 20 times, each time starting the next daemon as systemd
 * would, and reports:
 *   - failed requests across the handovers (target 0);
 *   - the client's p50/p99 during the handovers against the steady phase;
 *   - the time from the signal to the next daemon answering status
 *     (target <= 200 ms with 100 hosts). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/wake/bench_daemon.h"
#include "common/clock.h"

#define BENCH "bench-restart"
#define HOSTS 100
#define HANDOVERS 20
#define CLIENTS 2
#define INTERVAL_USEC 10000 /* per client: 100 connections a second */
#define STEADY_USEC (3 * 1000 * 1000)

typedef struct load {
    char addresses[HOSTS][64];
    atomic_bool stop;
    atomic_bool in_handover;
    pthread_mutex_t lock;
    bd_samples steady, handover;
    unsigned failed_steady, failed_handover;
    char first_failure[1024];
} load;

typedef struct client {
    load *load;
    unsigned index;
    pthread_t thread;
} client;

static void record(load *l, bool handover, int r, double usec, const act_error *err)
{
    pthread_mutex_lock(&l->lock);
    if (r == 0) {
        bd_samples_add(handover ? &l->handover : &l->steady, usec);
    } else {
        if (!l->failed_steady && !l->failed_handover)
            snprintf(l->first_failure, sizeof(l->first_failure), "%.1000s", err->message);
        if (handover)
            l->failed_handover++;
        else
            l->failed_steady++;
    }
    pthread_mutex_unlock(&l->lock);
}

static void *run_client(void *arg)
{
    client *c = arg;
    load *l = c->load;
    uint64_t next = act_now_usec() + c->index * (INTERVAL_USEC / CLIENTS);
    for (unsigned i = c->index; !atomic_load(&l->stop); i += CLIENTS) {
        uint64_t now = act_now_usec();
        if (next > now)
            usleep((useconds_t)(next - now));
        next += INTERVAL_USEC;
        bool handover = atomic_load(&l->in_handover);
        act_error err = {0};
        uint64_t start = act_now_usec();
        int r = bd_echo_once(l->addresses[i % HOSTS], 5000, &err);
        record(l, handover || atomic_load(&l->in_handover), r, (double)(act_now_usec() - start),
               &err);
    }
    return NULL;
}

static int start_hosts(dd_daemon *d, load *l, act_error *err)
{
    int r = bd_setup(d, "restart", NULL, err);
    for (int i = 0; r == 0 && i < HOSTS; i++) {
        int port = dd_free_port(err);
        if (port < 0)
            return port;
        snprintf(l->addresses[i], sizeof(l->addresses[i]), "127.0.0.1:%d", port);
        char host[16];
        snprintf(host, sizeof(host), "h%03d", i);
        r = dd_write_host(d, host, err,
                          "[Host]\nExec=act-notify-echo\nIdleTimeoutSec=0\nStopTimeoutSec=2\n"
                          "[Listen]\nListenStream=%s\n",
                          l->addresses[i]);
    }
    if (r == 0)
        r = dd_start(d, 30000, NULL, err);
    for (int i = 0; r == 0 && i < HOSTS; i++) {
        char host[16];
        snprintf(host, sizeof(host), "h%03d", i);
        if ((r = dd_stage(d, host, "v1", ACT_NOTIFY_ECHO, true, err)) == 0)
            r = bd_echo_once(l->addresses[i], 10000, err); /* wakes it */
    }
    return r;
}

/* Where a takeover's time goes: the old daemon's exit after the signal,
 * the next one's start to READY=1, and from there to its first answer
 * (the harness's events subscription, then the status request). */
typedef struct takeover_phases {
    bd_samples exited, ready, answered;
} takeover_phases;

/* The signal, the next daemon started, and its first status answer. */
static int hand_over_once(dd_daemon *d, double *usec, takeover_phases *spent, act_error *err)
{
    /* The harness's events subscriber is closed first: closing an NNG
     * socket is the harness's time, not the handover's. */
    dd_events_close(d);
    uint64_t start = act_now_usec();
    int status = dd_hand_over(d, 30000, err);
    if (status != 0)
        return status < 0 ? status : act_error_set(err, EIO, "the handover exited %d", status);
    uint64_t exited = act_now_usec();
    int r = dd_start(d, 30000, NULL, err);
    uint64_t ready = d->ready_usec;
    json_object *result = NULL;
    if (r == 0)
        r = dd_request(d, 5000, &result, err, "{\"v\":1,\"op\":\"status\"}");
    json_object_put(result);
    uint64_t answered = act_now_usec();
    *usec = (double)(answered - start);
    if (r == 0 && ready > exited && answered > ready) {
        bd_samples_add(&spent->exited, (double)(exited - start));
        bd_samples_add(&spent->ready, (double)(ready - exited));
        bd_samples_add(&spent->answered, (double)(answered - ready));
    }
    return r;
}

static void print_line(const char *what, bd_samples *samples)
{
    printf("  %-44s p50 %8.0f us  p99 %8.0f us  (%zu)\n", what, bd_samples_quantile(samples, 0.5),
           bd_samples_quantile(samples, 0.99), samples->n);
}

static int run(dd_daemon *d, act_error *err)
{
    act_error limit_err = {0};
    bd_raise_nofile(65536, 4096, &limit_err);
    load l = {0};
    pthread_mutex_init(&l.lock, NULL);
    int r = start_hosts(d, &l, err);
    if (r < 0)
        return r;
    client clients[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        clients[i] = (client){.load = &l, .index = i};
        pthread_create(&clients[i].thread, NULL, run_client, &clients[i]);
    }
    usleep(STEADY_USEC);
    bd_samples takeover = {0};
    takeover_phases phases = {0};
    for (int i = 0; i < HANDOVERS && r == 0; i++) {
        atomic_store(&l.in_handover, true);
        double usec = 0;
        r = hand_over_once(d, &usec, &phases, err);
        atomic_store(&l.in_handover, false);
        if (r == 0)
            bd_samples_add(&takeover, usec);
        usleep(200 * 1000);
    }
    atomic_store(&l.stop, true);
    for (unsigned i = 0; i < CLIENTS; i++)
        pthread_join(clients[i].thread, NULL);
    if (r == 0) {
        printf(BENCH ": %d handovers of a daemon serving %d hosts, under %d connections a "
                     "second\n",
               HANDOVERS, HOSTS, CLIENTS * 1000000 / INTERVAL_USEC);
        print_line("client, steady", &l.steady);
        print_line("client, during handovers", &l.handover);
        print_line("signal -> next daemon answers status", &takeover);
        print_line("  of which: signal -> old daemon exited", &phases.exited);
        print_line("            its exit -> next daemon READY=1", &phases.ready);
        print_line("            READY=1 -> status answered", &phases.answered);
        printf("  failed requests: %u during handovers (target 0), %u steady%s%s\n",
               l.failed_handover, l.failed_steady, l.first_failure[0] ? "; first: " : "",
               l.first_failure);
        printf("  p99 during/steady ratio %.2f; takeover p50 %.0f ms (target <= 200 ms)\n",
               bd_samples_quantile(&l.handover, 0.99) / bd_samples_quantile(&l.steady, 0.99),
               bd_samples_quantile(&takeover, 0.5) / 1000);
    }
    bd_samples_free(&l.steady);
    bd_samples_free(&l.handover);
    bd_samples_free(&takeover);
    bd_samples_free(&phases.exited);
    bd_samples_free(&phases.ready);
    bd_samples_free(&phases.answered);
    return r;
}

int main(void)
{
    return bd_main(BENCH, run);
}
