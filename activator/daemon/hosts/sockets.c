/* The hosts' listening sockets: bound at start, or taken back from
 * systemd's FD store or from a generation that outlived the previous
 * daemon; kept in the FD store; watched for demand while a host is parked;
 * drained when a host refuses for good; handed over to the next daemon.
 * Calls neither table.c nor transitions.c: when the sockets are watched
 * is theirs to decide. */
#include "activator/daemon/hosts/hosts.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activator/daemon/generations/leftovers.h"
#include "activator/daemon/hosts/fd_store.h"
#include "activator/daemon/hosts/internal.h"
#include "activator/daemon/moves/checkpoint_every.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/parking/idle.h"
#include "activator/listen/listen.h"
#include "common/log.h"

/* ---- demand ---------------------------------------------------------------- */

/* A connection waits in a parked host's backlog: it wakes the host and stays
 * there until the new generation accepts it. */
static int on_demand(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_host *host = userdata;
    ad_hosts_watch_demand(host, false);
    pl_host_wake(host->pipeline, PL_TRIGGER_CONNECTION, NULL, NULL);
    return 0;
}

void ad_hosts_watch_demand(ad_host *host, bool watch)
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

/* ---- the FD store ------------------------------------------------------------ */

/* Keeps the socket in systemd's FD store, so a restarted daemon gets the
 * same socket back and clients never see it closed. */
static void store_fd(const char *name, int fd)
{
    ad_fd_store_put(name, fd);
}

/* Takes the host's sockets out of the FD store, by their names. */
void ad_hosts_unstore_fds(ad_host *host)
{
    char *const *names = host->listen_names;
    for (unsigned i = 0; i < host->n_listen; i++)
        sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
}

void ad_hosts_store_fds(ad_host *host)
{
    const int *fds = host->listen_fds;
    char *const *names = host->listen_names;
    for (unsigned i = 0; i < host->n_listen; i++)
        if (fds[i] >= 0)
            store_fd(names[i], fds[i]);
}

/* ---- a start's sockets: handed back, taken back or bound -------------------- */

static int compare_inherited(const void *a, const void *b)
{
    const ad_hosts_inherited_socket *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->fd > y->fd) - (x->fd < y->fd);
}

static void inherited_collect(ad_hosts_inherited_fds *inherited)
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
        inherited->items[i] = (ad_hosts_inherited_socket){names[i], SD_LISTEN_FDS_START + i};
        fcntl(inherited->items[i].fd, F_SETFD, FD_CLOEXEC);
    }
    free(names); /* the names are the items' now */
    qsort(inherited->items, inherited->n, sizeof(*inherited->items), compare_inherited);
}

/* Takes the inherited socket named "<host>/<index>" if it is still bound to
 * what the config says; a socket whose address changed is not reused. */
static int inherited_take(ad_hosts_inherited_fds *inherited, const char *name,
                          const lsn_address *address)
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

static void inherited_release(ad_hosts_inherited_fds *inherited)
{
    for (size_t i = 0; i < inherited->n; i++) {
        ad_hosts_inherited_socket *item = &inherited->items[i];
        if (item->fd >= 0) {
            act_log(LOG_NOTICE, "closing inherited socket %s: no configured host uses it now",
                    item->name);
            close(item->fd);
        }
        free(item->name);
    }
    free(inherited->items);
}

/* Sockets per run offered while setting up: the manager is woken once for
 * each run, not for each socket. */
#define STORE_RUN 16

static int store_queue_add(ad_hosts_store_queue *queue, char *name, int fd)
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
static void store_queue_offer(ad_hosts_store_queue *queue)
{
    if (queue->n - queue->stored >= STORE_RUN)
        queue->stored +=
            ad_fd_store_put_many(queue->names + queue->stored, queue->fds + queue->stored,
                                 queue->n - queue->stored, false);
}

static void store_queue_flush(ad_hosts_store_queue *queue)
{
    ad_fd_store_put_many(queue->names + queue->stored, queue->fds + queue->stored,
                         queue->n - queue->stored, true);
    free(queue->names);
    free(queue->fds);
    *queue = (ad_hosts_store_queue){0};
}

/* One socket: from the FD store, else from a generation that outlived the
 * previous daemon, else newly bound. One not from the FD store is queued
 * for it. */
static int obtain_socket(ad_host *host, unsigned index, ad_hosts_inherited_fds *inherited,
                         ad_hosts_store_queue *queue, act_error *err)
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

void ad_hosts_binding_open(ad_hosts_binding *binding)
{
    *binding = (ad_hosts_binding){0};
    inherited_collect(&binding->inherited);
}

int ad_hosts_bind_sockets(ad_hosts_binding *binding, ad_host *host, act_error *err)
{
    size_t queued = binding->queue.n;
    for (unsigned i = 0; i < host->n_listen; i++) {
        int fd = obtain_socket(host, i, &binding->inherited, &binding->queue, err);
        if (fd < 0) {
            binding->queue.n = queued; /* its sockets close with it */
            return fd;
        }
        ad_host_set_listen_fd(host, i, fd);
    }
    return 0;
}

void ad_hosts_binding_offer(ad_hosts_binding *binding)
{
    store_queue_offer(&binding->queue);
}

void ad_hosts_binding_close(ad_hosts_binding *binding)
{
    inherited_release(&binding->inherited);
    store_queue_flush(&binding->queue);
}

/* ---- handover ------------------------------------------------------------------ */

size_t ad_hosts_hand_over(ad_daemon *daemon)
{
    size_t serving = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        ad_host *host = daemon->hosts[i];
        ad_hosts_watch_demand(host, false);
        ad_idle_unwatch(host);
        ad_freeze_hand_over(host);
        /* A periodic checkpoint's freeze ends: the app runs on under the
         * next daemon. */
        ad_checkpoint_every_stop(host, true);
        ad_hosts_store_fds(host);
        if (host->serving)
            serving++;
    }
    return serving;
}
