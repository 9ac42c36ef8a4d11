/* The clients: one thread per host making a request every interval_ms
 * (open loop: a slow answer does not push the schedule back, the requests
 * it overran are skipped, not queued), to the box the claim names as a
 * router would, read from the store every 100 ms by a thread of its own.
 *
 * Every failed request must fall in a fault's window on that host: from the
 * fault's start until the host answers a request begun after the fault was
 * over (or SOAK_RECOVERY_MS passed). The crash-looping host declares its own
 * failures: every one of its requests may fail. */
#include "soak.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- windows ---- */

static void host_window_open(soak_host *h, int recover_on, unsigned fault_id, soak_fault_kind kind,
                             uint64_t now)
{
    pthread_mutex_lock(&h->lock);
    /* Drop windows long over, so the list stays short in a night's run. */
    size_t kept = 0;
    for (size_t i = 0; i < h->n_windows; i++) {
        soak_window *w = &h->windows[i];
        bool over = w->end_ms && w->end_ms + SOAK_RECOVERY_MS + 60000 < now;
        if (!over)
            h->windows[kept++] = *w;
    }
    h->n_windows = kept;
    if (h->n_windows == h->cap_windows) {
        size_t cap = h->cap_windows ? 2 * h->cap_windows : 16;
        soak_window *grown = realloc(h->windows, cap * sizeof(*grown));
        if (!grown)
            abort();
        h->windows = grown;
        h->cap_windows = cap;
    }
    h->windows[h->n_windows++] = (soak_window){
        .fault_id = fault_id, .kind = kind, .recover_on = recover_on, .start_ms = now};
    pthread_mutex_unlock(&h->lock);
}

void soak_window_open(soak *s, soak_host *host, int box, int recover_on, unsigned fault_id,
                      soak_fault_kind kind)
{
    if ((int)kind == s->undeclared)
        return; /* the self-test: this fault makes failures nobody expects */
    uint64_t now = soak_now_ms();
    for (size_t i = 0; i < s->n_hosts; i++) {
        soak_host *h = &s->hosts[i];
        if (host && h != host)
            continue;
        if (!host && box >= 0 && atomic_load(&h->route) != box)
            continue;
        host_window_open(h, recover_on, fault_id, kind, now);
    }
}

void soak_window_close(soak *s, unsigned fault_id)
{
    uint64_t now = soak_now_ms();
    for (size_t i = 0; i < s->n_hosts; i++) {
        soak_host *h = &s->hosts[i];
        pthread_mutex_lock(&h->lock);
        for (size_t j = 0; j < h->n_windows; j++)
            if (h->windows[j].fault_id == fault_id && !h->windows[j].end_ms)
                h->windows[j].end_ms = now;
        pthread_mutex_unlock(&h->lock);
    }
}

/* A request of h to box route that began at start and answered at end:
 * the windows it closes (those over before it began). */
static void note_success(soak_host *h, int route, uint64_t start, uint64_t end)
{
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->n_windows; i++) {
        soak_window *w = &h->windows[i];
        if (w->end_ms && !w->recovered_ms && start >= w->end_ms &&
            (w->recover_on < 0 || w->recover_on == route))
            w->recovered_ms = end;
    }
    pthread_mutex_unlock(&h->lock);
}

/* The window a failed request of h (begun at start, failed at end) falls
 * in: true with its kind in *kind. */
static bool explain_failure(soak_host *h, uint64_t start, uint64_t end, soak_fault_kind *kind)
{
    bool found = false;
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->n_windows && !found; i++) {
        const soak_window *w = &h->windows[i];
        uint64_t until = UINT64_MAX;
        if (w->end_ms)
            until = w->recovered_ms ? w->recovered_ms : w->end_ms + SOAK_RECOVERY_MS;
        if (start <= until && end >= w->start_ms) {
            *kind = w->kind;
            found = true;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return found;
}

static void tally_reason(soak *s, const char *reason)
{
    for (size_t i = 0; i < 8; i++) {
        if (!s->failure_reasons[i][0])
            snprintf(s->failure_reasons[i], sizeof(s->failure_reasons[i]), "%s", reason);
        if (strcmp(s->failure_reasons[i], reason) == 0) {
            s->failure_reason_counts[i]++;
            return;
        }
    }
}

/* ---- one client ---- */

typedef struct client_arg {
    soak *s;
    soak_host *h;
} client_arg;

static client_arg client_args[SOAK_HOSTS_MAX];

static void sleep_until(uint64_t when_ms)
{
    uint64_t now = soak_now_ms();
    if (when_ms > now)
        dd_sleep_ms((long)(when_ms - now));
}

static void one_request(soak *s, soak_host *h)
{
    int route = atomic_load(&h->route);
    if (route < 0)
        return;
    char body[512];
    uint64_t start = soak_now_ms();
    int r = dd_http_get_at(fl_box_address((size_t)route), h->port, body, sizeof(body));
    uint64_t end = soak_now_ms();
    bool answered = r > 0 && strstr(body, "pid=");
    h->requests++;
    if (answered) {
        h->answered++;
        note_success(h, route, start, end);
        const char *counter = strstr(body, "counter=");
        if (h->kind == SOAK_COUNTER && counter) {
            long value = atol(counter + 8);
            soak_check_host(s, I_COUNTER, h, value > h->last_counter,
                            "host %s: %s answered counter=%ld after counter=%ld", h->name,
                            fl_box_name((size_t)route), value, h->last_counter);
            h->last_counter = value;
        }
        return;
    }
    h->failed++;
    char reason[96];
    snprintf(reason, sizeof(reason), "%s", r < 0 ? strerror(-r) : "an answer without pid=");
    soak_fault_kind kind = F__COUNT;
    bool declared = h->kind == SOAK_CRASHLOOP;
    bool explained = declared || explain_failure(h, start, end, &kind);
    /* What the kernel says of the host's port right after: whether anything
     * listens there, and how many connections wait in its accept queue. */
    if (!explained)
        soak_history_sockets(s, h, fl_box_address((size_t)route), h->port);
    char what[512];
    snprintf(what, sizeof(what),
             "host %s: a request to %s at +%.3f s failed after %llu ms (%s) with no fault "
             "window open on it%s",
             h->name, fl_box_name((size_t)route), (double)(start - s->start_ms) / 1000.0,
             (unsigned long long)(end - start), reason,
             atomic_load(&h->swaps_in_flight) > 0 ? ", while a swap of it was in flight" : "");
    pthread_mutex_lock(&s->failures_lock);
    tally_reason(s, reason);
    if (declared)
        s->failures_declared++;
    else if (explained)
        s->failures_by_kind[kind]++;
    pthread_mutex_unlock(&s->failures_lock);
    soak_check_host(s, I_FAILURES, h, explained, "%s", what);
}

void soak_swap_answered(soak_host *h)
{
    atomic_fetch_sub(&h->swaps_in_flight, 1);
}

static void *client_run(void *arg)
{
    client_arg *a = arg;
    uint64_t next = soak_now_ms();
    while (!atomic_load(&a->s->stop_clients) && !atomic_load(&a->s->broken)) {
        sleep_until(next);
        next += a->h->interval_ms;
        one_request(a->s, a->h);
        uint64_t now = soak_now_ms();
        if (next < now) /* open loop: what was overrun is skipped */
            next = now;
    }
    return NULL;
}

void soak_clients_start(soak *s)
{
    atomic_store(&s->stop_clients, false);
    s->clients_running = true;
    for (size_t i = 0; i < s->n_hosts; i++) {
        client_args[i] = (client_arg){.s = s, .h = &s->hosts[i]};
        if (pthread_create(&s->client_threads[i], NULL, client_run, &client_args[i]) != 0)
            abort();
    }
}

void soak_clients_stop(soak *s)
{
    atomic_store(&s->stop_clients, true);
    if (!s->clients_running)
        return;
    s->clients_running = false;
    for (size_t i = 0; i < s->n_hosts; i++)
        pthread_join(s->client_threads[i], NULL);
}

/* ---- the router ---- */

static void route_all(soak *s)
{
    for (size_t i = 0; i < s->n_hosts; i++) {
        soak_host *h = &s->hosts[i];
        claim c = {0};
        act_error err = {0};
        if (claims_read(s->router_store, h->name, &c, &err) <= 0)
            continue; /* the store is down: the last route stands */
        soak_history_claim(s, h, &c);
        const char *executor = claim_executor(&c);
        for (size_t b = 0; executor && b < s->n_boxes; b++)
            if (strcmp(executor, fl_box_name(b)) == 0)
                atomic_store(&h->route, (int)b);
    }
}

static void *router_run(void *arg)
{
    soak *s = arg;
    while (!atomic_load(&s->stop_router)) {
        route_all(s);
        dd_sleep_ms(100);
    }
    return NULL;
}

void soak_router_start(soak *s)
{
    route_all(s);
    atomic_store(&s->stop_router, false);
    s->router_running = true;
    if (pthread_create(&s->router_thread, NULL, router_run, s) != 0)
        abort();
}

void soak_router_stop(soak *s)
{
    atomic_store(&s->stop_router, true);
    if (!s->router_running)
        return;
    s->router_running = false;
    pthread_join(s->router_thread, NULL);
}
