/* The host table: one entry per configured host, with its sockets and its
 * pipeline, and on_transition, the pipeline's hook, where every
 * reaction to a host's change of state is decided. */
#include "activator/daemon/hosts/hosts.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/moves/checkpoint_request.h"
#include "activator/daemon/claim/release.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/accounts/dynamic_users.h"
#include "activator/daemon/hosts/fd_store.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/parking/idle.h"
#include "activator/daemon/generations/leftovers.h"
#include "activator/daemon/moves/move.h"
#include "activator/daemon/builds/swap.h"
#include "activator/daemon/generations/sweep.h"
#include "activator/daemon/wake/ops.h"
#ifdef ACTIVATOR_TEST_HOOKS
#include "activator/daemon/host/step_holds.h"
#endif
#include "activator/listen/listen.h"
#include "common/log.h"

static int compare_host_name(const void *key, const void *element)
{
    const ad_host *const *host = element;
    return strcmp(key, (*host)->name);
}

ad_host *ad_hosts_find(ad_daemon *daemon, const char *name)
{
    assert(daemon && name);
    ad_host **found =
        bsearch(name, daemon->hosts, daemon->n_hosts, sizeof(*daemon->hosts), compare_host_name);
    return found ? *found : NULL;
}

/* ---- demand ---------------------------------------------------------------- */

static void watch_demand(ad_host *host, bool watch);

/* A connection waits in a parked host's backlog: it wakes the host and stays
 * there until the new generation accepts it. */
static int on_demand(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_host *host = userdata;
    watch_demand(host, false);
    pl_host_wake(host->pipeline, PL_TRIGGER_CONNECTION, NULL, NULL);
    return 0;
}

static void watch_demand(ad_host *host, bool watch)
{
    const int *fds = host->listen_fds;
    for (unsigned i = 0; i < host->n_listen; i++) {
        sd_event_source **source = &host->demand_sources[i];
        if (!watch) {
            if (*source)
                sd_event_source_set_enabled(*source, SD_EVENT_OFF);
            continue;
        }
        if (!*source &&
            sd_event_add_io(host->daemon->loop, source, fds[i], EPOLLIN, on_demand, host) < 0) {
            act_log(LOG_ERR, "host %s: cannot watch its socket for connections", host->name);
            continue;
        }
        sd_event_source_set_enabled(*source, SD_EVENT_ON);
    }
}

/* A host we must not serve (refused for good) answers waiting clients by
 * closing their connections, rather than leaving them hanging until their
 * own timeout, and so that the backlog does not trigger wake after wake. */
#define DRAIN_BATCH 64

void ad_hosts_drain_backlog(ad_host *host)
{
    assert(host);
    const int *fds = host->listen_fds;
    for (unsigned i = 0; i < host->n_listen; i++) {
        /* Everything waiting is taken before anything is closed: a client
         * that sees its connection closed and connects again finds the
         * drain over, and its connection is a new demand, not drained. */
        int taken[DRAIN_BATCH];
        size_t n;
        do {
            n = 0;
            while (n < DRAIN_BATCH &&
                   (taken[n] = accept4(fds[i], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0)
                n++;
            for (size_t k = 0; k < n; k++)
                close(taken[k]);
        } while (n == DRAIN_BATCH);
    }
}

/* ---- transitions ------------------------------------------------------------ */

static void apply_pending(ad_host *host);

static bool is_failure(const pl_wake_event *event)
{
    switch (event->type) {
    case PL_WAKE_EVENT_FAILED:
    case PL_WAKE_EVENT_REFUSED:
    case PL_WAKE_EVENT_GAVE_UP:
    case PL_WAKE_EVENT_EXITED:
    case PL_WAKE_EVENT_FAULTED:
    case PL_WAKE_EVENT_CANCELLED:
        return event->reason != PL_REASON_NONE && event->reason != PL_REASON_CANCELLED;
    default:
        return false;
    }
}

/* What the claim should say once the transition's wake or retirement ends
 * (settle writes it). Only what this box's admission made true is reported,
 * and claim/write_backs.c writes it only while the claim still describes that
 * admission. A claim lost to another box is that box's to write now, so
 * nothing is reported of it. */
static void report_to_claim(ad_host *host, const pl_wake_event *event)
{
    const pl_host *pipeline = host->pipeline;
    const claim *admitted;
    switch (event->type) {
    case PL_WAKE_EVENT_WAKING:
        ad_claim_report_wake_began(host);
        return;
    case PL_WAKE_EVENT_ADMITTED:
    case PL_WAKE_EVENT_PUBLISHED:
        if ((admitted = ad_wake_ops_admitted(host)))
            ad_claim_report_admitted(host, admitted);
        return;
    default:
        break;
    }
    if (event->reason == PL_REASON_NOT_OWNER || event->park_cause == PL_PARK_CLAIM_LOST)
        return;
    /* A wake refused while a checkpoint is written changes nothing of the
     * host, which stays parked: the claim's compare-and-swap of the
     * checkpoint is the write that follows. */
    if (event->reason == PL_REASON_CHECKPOINTING)
        return;
    switch (event->type) {
    case PL_WAKE_EVENT_REFUSED:
    case PL_WAKE_EVENT_GAVE_UP:
        /* A swap's N+1 that did not make it: N serves on (below). */
        if (!event->swap)
            ad_claim_report_failed(host, event->reason, event->message, event->attempt);
        break;
    case PL_WAKE_EVENT_CANCELLED:
        ad_claim_report_parked(host);
        break;
    case PL_WAKE_EVENT_SWAP_FAILED:
        /* N serves on: the claim names it again (N+1 may have been published
         * before it failed). A park or an exit during the swap made the host
         * retiring instead, and its parking writes. */
        if (pl_host_get_state(pipeline) == PL_HOST_SERVING && host->serving)
            ad_claim_report_serving(host, host->serving->number);
        break;
    case PL_WAKE_EVENT_PARKED:
        /* A generation that may still run is no park: the box refuses wakes
         * until it is proven stopped, and the claim says why. */
        if (pl_host_is_unproven(pipeline))
            ad_claim_report_failed(host, PL_REASON_UNPROVEN_STOP, event->message, 0);
        else if (event->park_cause == PL_PARK_FAILURE)
            ad_claim_report_failed(host, event->reason, NULL, 0);
        else
            ad_claim_report_parked(host);
        break;
    default:
        break;
    }
}

/* A wake, swap or retirement ended: the host keeps the state it has now, so
 * what watches it is set from that state, and the claim is told. */
static void settle(ad_host *host, const pl_wake_event *event)
{
    ad_daemon *daemon = host->daemon;
    pl_host_state state = pl_host_get_state(host->pipeline);
#ifdef ACTIVATOR_TEST_HOOKS
    /* A test kills the daemon here, after a swap failed and before the
     * claim names N again (hosts/recovery.c finishes it). */
    if (ad_claim_report_serving_due(host))
        ad_step_holds_point(host, "swap_failed", ad_claim_report_settle);
    else
        ad_claim_report_settle(host);
#else
    ad_claim_report_settle(host);
#endif
    if (state != PL_HOST_SERVING)
        ad_idle_unwatch(host);
    if (!host->serving && !host->starting)
        ad_host_dir_close(host);
    if (state != PL_HOST_PARKED) {
        /* A swap waits for the wake in flight, whatever followed it. */
        ad_swap_host_settled(host);
        return;
    }
    /* Parked, whatever ended (served and parked, gave up, cancelled, or
     * refused): the sockets are ours to watch again, so the next client
     * wakes the host (after the failure-park backoff, if any). */
    if (!daemon->stopping && !host->removed)
        watch_demand(host, true);
    ad_swap_host_settled(host);
    /* An operator's checkpoint waits for the park it asked for. */
    ad_checkpoint_request_host_parked(host);
    /* Parked because the claim named another box: now that nothing runs,
     * the handover to that box may go on. */
    if (!host->claim_ours)
        ad_claim_release(host, NULL);
}

/* The pipeline's hook: every transition of every host comes here. The
 * reactions are decided here and nowhere else; the observers (generations/announce.c)
 * and the daemon's own (STATUS=, the end of a clean stop) are told after. */
static void on_transition(pl_host *pipeline, const pl_wake_event *event, void *userdata)
{
    ad_host *host = userdata;
    ad_daemon *daemon = host->daemon;

    /* Status shows why the last wake did not serve; a served wake clears it. */
    if (event->type == PL_WAKE_EVENT_SERVING)
        ad_host_set_last_failure(host, NULL, NULL);
    else if (is_failure(event))
        ad_host_set_last_failure(host, pl_reason_to_string(event->reason), event->message);

    ad_announce_transition(host, event);
    report_to_claim(host, event);
    /* A move waits for the source at rest and for the target's probe. */
    ad_move_on_transition(host, event);

    switch (event->type) {
    case PL_WAKE_EVENT_PARKING:
    case PL_WAKE_EVENT_FAULTED:
    case PL_WAKE_EVENT_EXITED:
    case PL_WAKE_EVENT_RETIRING:
        /* Whatever retires now, its retirement thaws it as it must: the
         * freeze of the serving generation (if any) is over. */
        ad_freeze_forget(host);
        break;
    default:
        break;
    }

    switch (event->type) {
    case PL_WAKE_EVENT_WAKING:
        watch_demand(host, false);
        /* A wake from parked: nothing of the settings in force is in use. */
        apply_pending(host);
        break;
    case PL_WAKE_EVENT_SERVING:
        /* Its sockets are the generation's now (a resumed one's too, which
         * served without a wake). */
        watch_demand(host, false);
        ad_idle_watch(host, ad_freeze_or_park);
        ad_wake_ops_supervise(host);
        break;
    case PL_WAKE_EVENT_SWAP_DONE:
        /* N+1 serves now, and is supervised from here on as N was. */
        ad_wake_ops_supervise(host);
        break;
    case PL_WAKE_EVENT_PARKING:
    case PL_WAKE_EVENT_FAULTED:
        ad_idle_unwatch(host);
        break;
    case PL_WAKE_EVENT_REFUSED:
        /* Waiting clients are closed now rather than left to time out: a
         * refusal answers them. Not in a swap: those clients are N's, and N
         * serves on. */
        if (!event->swap)
            ad_hosts_drain_backlog(host);
        break;
    case PL_WAKE_EVENT_UNPROVEN:
        /* The leaf that was not proven empty is kept on the host: the sweep
         * kills it again and again, and its proof clears the refusal. */
        ad_sweep_take_unproven(host);
        break;
    case PL_WAKE_EVENT_ENDED:
        settle(host, event);
        break;
    default:
        break;
    }

    if (daemon->observe_hosts)
        daemon->observe_hosts(daemon, host, event);
}

/* ---- sockets ---------------------------------------------------------------- */

/* Sockets handed back by systemd's FD store after a restart, sorted by
 * name (then fd, the store's order): each of 10,000 hosts finds its own by
 * a binary search, not a walk of all of them. */
typedef struct inherited_socket {
    char *name;
    int fd; /* -1 once taken */
} inherited_socket;

typedef struct inherited_fds {
    inherited_socket *items;
    size_t n;
} inherited_fds;

static int compare_inherited(const void *a, const void *b)
{
    const inherited_socket *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->fd > y->fd) - (x->fd < y->fd);
}

static void inherited_collect(inherited_fds *inherited)
{
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);
    if (n <= 0)
        return;
    inherited->items = calloc((size_t)n, sizeof(*inherited->items));
    if (!inherited->items) {
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return;
    }
    inherited->n = (size_t)n;
    for (int i = 0; i < n; i++) {
        inherited->items[i] = (inherited_socket){names[i], SD_LISTEN_FDS_START + i};
        fcntl(inherited->items[i].fd, F_SETFD, FD_CLOEXEC);
    }
    free(names); /* the names are the items' now */
    qsort(inherited->items, inherited->n, sizeof(*inherited->items), compare_inherited);
}

/* Takes the inherited socket named "<host>/<index>" if it is still bound to
 * what the config says; a socket whose address changed is not reused. */
static int inherited_take(inherited_fds *inherited, const char *name, const lsn_address *address)
{
    size_t lo = 0, hi = inherited->n;
    while (lo < hi) { /* the first item named name, or where it would be */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(inherited->items[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < inherited->n && strcmp(inherited->items[i].name, name) == 0; i++) {
        int fd = inherited->items[i].fd;
        if (fd < 0)
            continue;
        inherited->items[i].fd = -1;
        if (lsn_fd_matches(fd, address)) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            return fd;
        }
        close(fd);
    }
    return -1;
}

static void inherited_release(inherited_fds *inherited)
{
    for (size_t i = 0; i < inherited->n; i++) {
        inherited_socket *item = &inherited->items[i];
        if (item->fd >= 0) {
            act_log(LOG_NOTICE, "closing inherited socket %s: no configured host uses it now",
                    item->name);
            close(item->fd);
        }
        free(item->name);
    }
    free(inherited->items);
}

/* Keeps the socket in systemd's FD store, so a restarted daemon gets the
 * same socket back and clients never see it closed. */
static void store_fd(const char *name, int fd)
{
    ad_fd_store_put(name, fd);
}

/* Takes the host's sockets out of the FD store, by their names. */
static void unstore_fds(ad_host *host)
{
    char *const *names = host->listen_names;
    for (unsigned i = 0; i < host->n_listen; i++)
        sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
}

static void store_fds(ad_host *host)
{
    const int *fds = host->listen_fds;
    char *const *names = host->listen_names;
    for (unsigned i = 0; i < host->n_listen; i++)
        if (fds[i] >= 0)
            store_fd(names[i], fds[i]);
}

/* The sockets a start bound, for the FD store: offered in runs while the
 * hosts are set up, which the manager reads in parallel, and all stored
 * before READY=1. */
typedef struct store_queue {
    char **names; /* the hosts' own listen names */
    int *fds;
    size_t n, cap;
    size_t stored; /* those before it are in the store */
} store_queue;

/* Sockets per run offered while setting up: the manager is woken once for
 * each run, not for each socket. */
#define STORE_RUN 16

static int store_queue_add(store_queue *queue, char *name, int fd)
{
    if (queue->n == queue->cap) {
        size_t cap = queue->cap ? 2 * queue->cap : 1024;
        char **names = realloc(queue->names, cap * sizeof(*names));
        if (names)
            queue->names = names;
        int *fds = names ? realloc(queue->fds, cap * sizeof(*fds)) : NULL;
        if (!fds)
            return -ENOMEM;
        queue->fds = fds;
        queue->cap = cap;
    }
    queue->names[queue->n] = name;
    queue->fds[queue->n++] = fd;
    return 0;
}

/* Offers what is queued, once a run is there, without waiting. */
static void store_queue_offer(store_queue *queue)
{
    if (queue->n - queue->stored >= STORE_RUN)
        queue->stored +=
            ad_fd_store_put_many(queue->names + queue->stored, queue->fds + queue->stored,
                                 queue->n - queue->stored, false);
}

static void store_queue_flush(store_queue *queue)
{
    ad_fd_store_put_many(queue->names + queue->stored, queue->fds + queue->stored,
                         queue->n - queue->stored, true);
    free(queue->names);
    free(queue->fds);
    *queue = (store_queue){0};
}

/* One socket: from the FD store, else newly bound, else (its address is
 * taken) from a generation that outlived the previous daemon. A new one is
 * queued for the FD store. */
static int obtain_socket(ad_host *host, unsigned index, inherited_fds *inherited,
                         store_queue *queue, act_error *err)
{
    const cfg_host *config = ad_host_config(host);
    const lsn_address *address = &host->listen[index];
    const char *name = host->listen_names[index];
    int fd = inherited_take(inherited, name, address);
    if (fd >= 0)
        return fd;
    /* A generation that outlived the previous daemon still holds the very
     * socket its clients connect to: take that one back before binding. A
     * new bind would not do: a TCP address is still in use, and binding a
     * unix socket path replaces the live socket with one nobody serves. */
    fd = ad_leftovers_take_socket(host->daemon, config->name, index, address);
    if (fd < 0)
        fd = lsn_bind(address, (int)config->backlog, err);
    if (fd < 0)
        return act_error_prefix(err, "host %s", config->name);
    if (store_queue_add(queue, host->listen_names[index], fd) < 0) {
        close(fd);
        return act_error_set(err, ENOMEM, "host %s: out of memory", config->name);
    }
    return fd;
}

static int bind_sockets(ad_host *host, inherited_fds *inherited, store_queue *queue, act_error *err)
{
    for (unsigned i = 0; i < host->n_listen; i++) {
        int fd = obtain_socket(host, i, inherited, queue, err);
        if (fd < 0)
            return fd;
        ad_host_set_listen_fd(host, i, fd);
    }
    return 0;
}

size_t ad_hosts_hand_over(ad_daemon *daemon)
{
    size_t serving = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        ad_host *host = daemon->hosts[i];
        watch_demand(host, false);
        ad_idle_unwatch(host);
        ad_freeze_hand_over(host);
        store_fds(host);
        if (host->serving)
            serving++;
    }
    return serving;
}

/* ---- set-up and teardown ---------------------------------------------------- */

static void pipeline_config_for(const ad_daemon *daemon, const cfg_host *config, pl_config *out)
{
    pl_config_init(out);
    out->max_starts = config->max_starts;
    out->ready_timeout_usec = config->ready_timeout_usec;
    out->park_backoff_max_usec = daemon->config.failure_backoff_max_usec;
    out->budget_wait_max_usec = daemon->config.start_budget_wait_usec;
    out->start_rate_per_sec = config->start_rate_limit;
    out->start_cap = (pl_start_cap *)&daemon->start_cap;
}

/* The pipeline takes what it reads of the host's configuration in force
 * and of the daemon's budgets again. */
static void update_pipeline(ad_host *host)
{
    pl_config config;
    pipeline_config_for(host->daemon, ad_host_config(host), &config);
    act_error err = {0};
    if (pl_host_set_config(host->pipeline, &config, &err) < 0)
        act_log(LOG_ERR, "%s", err.message);
}

/* Puts a host's pending settings in force, when nothing of the old ones is
 * in use: no generation and no wake state (a wake in flight holds its
 * probes on them). */
static void apply_pending(ad_host *host)
{
    if (!host->pending || host->serving || host->starting || host->replaced || host->wake_state ||
        host->swap)
        return;
    ad_host_apply_pending(host);
    update_pipeline(host);
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                   "host %s: the configuration loaded by the last reload is in force from this "
                   "start",
                   host->name);
}

/* The pipeline's operations: the daemon's own, wrapped in the tests' step
 * holds when the build has them. */
static const pl_ops *operations(ad_daemon *daemon)
{
#ifdef ACTIVATOR_TEST_HOOKS
    return ad_step_holds_ops(&ad_wake_ops, daemon->loop);
#else
    (void)daemon;
    return &ad_wake_ops;
#endif
}

static void teardown_host(ad_host *host)
{
    pl_host *pipeline = host->pipeline;
    if (pipeline && pl_host_free(pipeline) < 0)
        act_log(LOG_WARNING, "host %s: pipeline still busy at exit", host->name);
    host->pipeline = NULL;
    ad_wake_state_free(host->wake_state);
    host->wake_state = NULL;
    /* A frozen generation left running stays frozen: its record says so,
     * and the next daemon resumes it that way. */
    ad_freeze_forget(host);
    ad_generation_free(host->serving);
    host->serving = NULL;
    ad_generation_free(host->starting);
    host->starting = NULL;
    ad_generation_free(host->replaced);
    host->replaced = NULL;
    free(host->swap);
    host->swap = NULL;
    ad_claim_report_free(host);
    ad_move_free(host);
    ad_host_free(host);
}

/* A host with its settings (taken) and its pipeline; its sockets are the
 * caller's to fill. */
static int make_host(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err)
{
    ad_host *host = NULL;
    int r = ad_host_new(daemon, settings, &host, err);
    if (r < 0)
        return r;
    pl_config pipeline_config;
    pipeline_config_for(daemon, ad_host_config(host), &pipeline_config);
    pl_host *pipeline = NULL;
    r = pl_host_new(daemon->loop, host->name, &pipeline_config, operations(daemon), host,
                    on_transition, host, &pipeline, err);
    if (r < 0) {
        teardown_host(host);
        return r;
    }
    host->pipeline = pipeline;
    *out = host;
    return 0;
}

static int setup_host(ad_daemon *daemon, cfg_host *config, inherited_fds *inherited,
                      store_queue *queue, ad_host **out, act_error *err)
{
    ad_host_settings *settings = NULL;
    const char *failed_key = NULL;
    ad_host *host = NULL;
    int r = ad_host_settings_new(daemon, config, &settings, &failed_key, err);
    if (r == 0)
        r = make_host(daemon, settings, &host, err);
    /* hosts/<host>/ is made at the first wake (ad_host_dir), not here: two
     * mkdirs (an inode each) per parked host and start add up at 10,000. */
    size_t queued = queue->n;
    if (r == 0 && (r = bind_sockets(host, inherited, queue, err)) < 0) {
        queue->n = queued; /* its sockets close with it */
        teardown_host(host);
    }
    if (r == 0)
        *out = host;
    return r;
}

/* A heap copy of *config, which is left zeroed: the host owns it now. */
static cfg_host *take_config(cfg_host *config)
{
    cfg_host *owned = malloc(sizeof(*owned));
    if (owned)
        *owned = TAKE_STRUCT(*config);
    return owned;
}

int ad_hosts_setup(ad_daemon *daemon, cfg_host *configs, size_t n_configs, act_error *err)
{
    assert(daemon && daemon->loop);
    daemon->hosts = calloc(n_configs ? n_configs : 1, sizeof(*daemon->hosts));
    if (!daemon->hosts) {
        cfg_hosts_free(configs, n_configs);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    daemon->cap_hosts = n_configs ? n_configs : 1;
    /* Before any host is given a dynamic user: none may get a uid another
     * host names by number. */
    int excluded = ad_dynamic_users_exclude_hosts(daemon->dynamic_users, configs, n_configs, err);
    if (excluded < 0) {
        cfg_hosts_free(configs, n_configs);
        return excluded;
    }
    /* The accounts of the box, listed once rather than looked up twice per
     * host; and one fsync for every record made, before any uid is used. */
    act_error list_err = {0};
    if (ad_dynamic_users_read_system(daemon->dynamic_users, &list_err) < 0)
        act_log(LOG_WARNING, "dynamic users: %s; looking each uid up instead", list_err.message);
    ad_dynamic_users_defer_sync(daemon->dynamic_users);
    inherited_fds inherited = {0};
    inherited_collect(&inherited);
    store_queue queue = {0};
    /* A host that cannot be set up (its port is taken, its User= is
     * missing) is left out with an error; the others are served. The table
     * stays sorted because the configs are. */
    size_t n = 0;
    for (size_t i = 0; i < n_configs; i++) {
        act_error host_err = {0};
        char name[ACT_NAME_MAX + 1];
        snprintf(name, sizeof(name), "%s", configs[i].name);
        cfg_host *config = take_config(&configs[i]);
        int r = config
                    ? setup_host(daemon, config, &inherited, &queue, &daemon->hosts[n], &host_err)
                    : act_error_set(&host_err, ENOMEM, "host %s: out of memory", name);
        if (r < 0) {
            act_log_fields(LOG_ERR, &(act_log_ctx){.host = name}, "%s (host not served)",
                           host_err.message);
            continue;
        }
        store_queue_offer(&queue);
        n++;
    }
    cfg_hosts_free(configs, n_configs);
    daemon->n_hosts = n;
    inherited_release(&inherited);
    store_queue_flush(&queue);
    int synced = ad_dynamic_users_sync(daemon->dynamic_users, err);
    if (synced < 0)
        return synced;
    for (size_t i = 0; i < daemon->n_hosts; i++)
        watch_demand(daemon->hosts[i], true);
    return 0;
}

void ad_hosts_teardown(ad_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_hosts; i++)
        teardown_host(daemon->hosts[i]);
    for (size_t i = 0; i < daemon->n_removed_hosts; i++)
        teardown_host(daemon->removed_hosts[i]);
    free(daemon->hosts);
    free(daemon->removed_hosts);
    ad_fd_store_close();
    daemon->hosts = daemon->removed_hosts = NULL;
    daemon->n_hosts = daemon->n_removed_hosts = 0;
    daemon->cap_hosts = daemon->cap_removed_hosts = 0;
}

/* ---- reload ------------------------------------------------------------------ */

/* A table of hosts grown to hold more, so that what a reload applies once
 * it has checked everything cannot fail for want of memory. */
static int reserve(ad_host ***table, size_t n, size_t *cap, size_t more, act_error *err)
{
    if (n + more <= *cap)
        return 0;
    ad_host **grown = realloc(*table, (n + more) * sizeof(**table));
    if (!grown)
        return act_error_set(err, ENOMEM, "out of memory");
    *table = grown;
    *cap = n + more;
    return 0;
}

int ad_hosts_reserve(ad_daemon *daemon, size_t adding, size_t removing, act_error *err)
{
    assert(daemon);
    int r = reserve(&daemon->hosts, daemon->n_hosts, &daemon->cap_hosts, adding, err);
    if (r == 0)
        r = reserve(&daemon->removed_hosts, daemon->n_removed_hosts, &daemon->cap_removed_hosts,
                    removing, err);
    return r;
}

int ad_hosts_prepare(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err)
{
    assert(daemon && settings && out);
    return make_host(daemon, settings, out, err);
}

void ad_hosts_discard(ad_host *host)
{
    if (host)
        teardown_host(host);
}

void ad_hosts_insert(ad_daemon *daemon, ad_host *host)
{
    assert(daemon && host && daemon->n_hosts < daemon->cap_hosts);
    assert(!ad_hosts_find(daemon, host->name));
    size_t at = 0;
    while (at < daemon->n_hosts && strcmp(daemon->hosts[at]->name, host->name) < 0)
        at++;
    memmove(&daemon->hosts[at + 1], &daemon->hosts[at],
            (daemon->n_hosts - at) * sizeof(*daemon->hosts));
    daemon->hosts[at] = host;
    daemon->n_hosts++;
    store_fds(host);
    watch_demand(host, true);
}

void ad_hosts_remove(ad_daemon *daemon, ad_host *host)
{
    assert(daemon && host && daemon->n_removed_hosts < daemon->cap_removed_hosts);
    size_t at = 0;
    while (at < daemon->n_hosts && daemon->hosts[at] != host)
        at++;
    assert(at < daemon->n_hosts);
    memmove(&daemon->hosts[at], &daemon->hosts[at + 1],
            (daemon->n_hosts - at - 1) * sizeof(*daemon->hosts));
    daemon->n_hosts--;
    daemon->removed_hosts[daemon->n_removed_hosts++] = host;

    /* Out of the table, nothing can trigger it: its sockets close now (its
     * generation keeps its own copies until it is retired), and what runs
     * is retired with proof. The claim is left as it is. */
    host->removed = true;
    /* Its freeze watches the sockets about to close; the park below
     * retires the generation, thawed first. */
    ad_freeze_forget(host);
    unstore_fds(host);
    act_error err = {0};
    if (ad_host_replace_sockets(host, &(cfg_host){0}, NULL, &err) < 0)
        act_log(LOG_ERR, "host %s: its sockets stay open: %s", host->name, err.message);
    ad_idle_unwatch(host);
    pl_host *pipeline = host->pipeline;
    pl_host_cancel(pipeline, PL_REASON_CANCELLED,
                   "host %s: removed from the configuration by a reload", host->name);
    pl_host_park(pipeline, PL_PARK_REQUEST);
}

bool ad_hosts_removed_at_rest(const ad_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_removed_hosts; i++)
        if (!ad_host_at_rest(daemon->removed_hosts[i]))
            return false;
    return true;
}

ad_host *ad_hosts_find_removed(ad_daemon *daemon, const char *name)
{
    assert(daemon && name);
    for (size_t i = daemon->n_removed_hosts; i-- > 0;)
        if (strcmp(daemon->removed_hosts[i]->name, name) == 0)
            return daemon->removed_hosts[i];
    return NULL;
}

int ad_hosts_rebind(ad_host *host, const cfg_host *loaded, int *fds, act_error *err)
{
    assert(host && loaded);
    /* A frozen generation's watch is on the sockets being replaced: it is
     * thawed, and freezes again once idle, watching the new ones. */
    act_error thaw_err = {0};
    if (ad_freeze_active(host, NULL) && ad_freeze_thaw(host, "reload", &thaw_err) < 0)
        act_log(LOG_WARNING, "host %s: %s", host->name, thaw_err.message);
    /* Names follow positions: what moved is stored again under its new
     * name, once the old names are gone. */
    unstore_fds(host);
    int r = ad_host_replace_sockets(host, loaded, fds, err);
    if (r < 0) {
        store_fds(host);
        return act_error_prefix(err, "host %s", host->name);
    }
    for (unsigned i = 0; i < loaded->n_listen; i++)
        /* A kept socket takes Backlog= as it is now (listen again on a
         * listening socket changes only that). */
        if (listen(fds[i], (int)loaded->backlog) < 0)
            act_log(LOG_WARNING, "host %s: cannot set the backlog of %s: %s", host->name,
                    host->listen_names[i], strerror(errno));
    store_fds(host);
    if (pl_host_get_state(host->pipeline) == PL_HOST_PARKED && !host->daemon->stopping)
        watch_demand(host, true);
    return 0;
}

int ad_hosts_set_limits(ad_host *host, const cfg_limits *limits, act_error *err)
{
    assert(host && limits);
    ad_host_set_limits(host, limits);
    ad_generation *running[] = {host->serving, host->starting, host->replaced};
    int result = 0;
    for (size_t i = 0; i < ARRAY_SIZE(running); i++) {
        act_error gen_err = {0};
        int r = running[i] ? ad_generation_set_limits(running[i], limits, &gen_err) : 0;
        if (r < 0 && result == 0) {
            result = r;
            if (err)
                *err = gen_err;
        }
    }
    return result;
}

bool ad_hosts_set_pending(ad_host *host, ad_host_settings *settings)
{
    assert(host);
    ad_host_set_pending(host, settings);
    if (ad_host_at_rest(host))
        apply_pending(host);
    return host->pending != NULL;
}

void ad_hosts_update_budgets(ad_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_hosts; i++)
        update_pipeline(daemon->hosts[i]);
    for (size_t i = 0; i < daemon->n_removed_hosts; i++)
        update_pipeline(daemon->removed_hosts[i]);
}
