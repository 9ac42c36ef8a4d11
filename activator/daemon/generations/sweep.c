/* The sweep: leaves whose stop is not proven, retired with proof however
 * long that takes, so that no host refuses wakes forever.
 *
 * A cgroup kill ends everything in a leaf at once, except a process in
 * uninterruptible sleep (a read from a hung NFS or FUSE server, say): its
 * SIGKILL waits until the sleep ends, which may be seconds or hours. So a
 * leaf here is watched (its cgroup.events) for as long as it has processes,
 * and proven empty the instant it is; and it is killed again after 1 s,
 * then 2, 4, ... up to every 60 s, for whatever in it could die now. Proven,
 * the leaf and its generation's record are removed and the generation is
 * announced retired; once no leaf of a host is left here, the host's
 * refusal (unproven_stop) clears.
 *
 * The leftovers of a previous daemon are retired here too, from the loop
 * and all side by side: the daemon is READY first, however many there are,
 * and their hosts refuse wakes until each is proven gone. */
#include "activator/daemon/generations/sweep.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/generations/record_writes.h"
#include "common/log.h"
#include "common/names.h"

#define SWEEP_RETRY_FIRST_USEC (1000 * 1000ull)
#define SWEEP_RETRY_MAX_USEC (60 * 1000 * 1000ull)

typedef struct sweep_leaf {
    ad_sweep *sweep;
    ad_host *host;               /* NULL: a leftover of a host not configured */
    char host_name[ACT_NAME_MAX + 1];
    cg_leaf *leaf;
    uint64_t generation;         /* the number of its record; 0: none */
    int main_pidfd;              /* a leftover's main process, to stop first; -1: none */
    uint64_t grace_usec;         /* what main_pidfd gets after SIGTERM */
    bool terminated;             /* SIGTERM sent (or nothing to send it to) */
    unsigned kills;
    uint64_t retry_usec;         /* the wait after the next kill */
    sd_event_source *timer;      /* the next SIGTERM or kill */
    sd_event_source *emptied;    /* the leaf's cgroup.events */
    sd_event_source *main_exit;  /* main_pidfd, during the grace */
} sweep_leaf;

struct ad_sweep {
    ad_daemon *daemon;
    sweep_leaf **leaves;
    size_t n;
};

static void leaf_free(sweep_leaf *entry)
{
    sd_event_source_disable_unref(entry->timer);
    sd_event_source_disable_unref(entry->emptied);
    sd_event_source_disable_unref(entry->main_exit);
    if (entry->main_pidfd >= 0)
        close(entry->main_pidfd);
    cg_leaf_free(entry->leaf);
    free(entry);
}

static void detach(sweep_leaf *entry)
{
    ad_sweep *sweep = entry->sweep;
    for (size_t i = 0; i < sweep->n; i++)
        if (sweep->leaves[i] == entry) {
            memmove(sweep->leaves + i, sweep->leaves + i + 1,
                    (sweep->n - i - 1) * sizeof(*sweep->leaves));
            sweep->n--;
            return;
        }
}

bool ad_sweep_holds(const ad_daemon *daemon, const ad_host *host)
{
    assert(daemon && host);
    const ad_sweep *sweep = daemon->sweep;
    for (size_t i = 0; sweep && i < sweep->n; i++)
        if (sweep->leaves[i]->host == host)
            return true;
    return false;
}

/* ---- proven ---------------------------------------------------------------- */

/* The leaf and its record are gone: the generation is retired, and a host
 * with nothing left here wakes again. */
static void finish(sweep_leaf *entry)
{
    ad_host *host = entry->host;
    ad_daemon *daemon = entry->sweep->daemon;
    detach(entry);
    if (host)
        ad_announce_swept(host, cg_leaf_name(entry->leaf), entry->generation);
    else
        act_log(LOG_NOTICE, "cgroup hosts/%s/%s is proven stopped and removed", entry->host_name,
                cg_leaf_name(entry->leaf));
    leaf_free(entry);
    if (!host || ad_sweep_holds(daemon, host))
        return;
    /* Nothing runs for the host now unless it serves (resumed beside a
     * leftover): 10,000 parked hosts hold no directory fd. */
    ad_host_dir_close_unless_used(host);
    pl_host_report_proof(host->pipeline);
}

static void on_record_removed(void *userdata)
{
    finish(userdata);
}

/* Whether the leaf is empty; if it is, it is removed and the entry ends
 * (now, or once the record is removed): the caller must not touch it. */
static bool proven_empty(sweep_leaf *entry)
{
    bool populated = true;
    act_error err = {0};
    if (cg_leaf_populated(entry->leaf, &populated, &err) < 0) {
        act_log(LOG_WARNING, "host %s: %s", entry->host_name, err.message);
        return false;
    }
    if (populated)
        return false;
    if (cg_leaf_remove(entry->leaf, &err) < 0) {
        act_log(LOG_WARNING, "host %s: leaf %s is empty but stays: %s", entry->host_name,
                cg_leaf_name(entry->leaf), err.message);
        return false;
    }
    entry->timer = sd_event_source_disable_unref(entry->timer);
    entry->emptied = sd_event_source_disable_unref(entry->emptied);
    entry->main_exit = sd_event_source_disable_unref(entry->main_exit);
    if (entry->host && entry->generation)
        ad_record_remove_async(entry->host, entry->generation, on_record_removed, entry);
    else
        finish(entry);
    return true;
}

static int on_emptied(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    proven_empty(userdata);
    return 0;
}

/* ---- stopping it, again and again ----------------------------------------- */

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata);

static int arm(sweep_leaf *entry, uint64_t usec)
{
    entry->timer = sd_event_source_disable_unref(entry->timer);
    return sd_event_add_time_relative(entry->sweep->daemon->loop, &entry->timer, CLOCK_MONOTONIC,
                                      usec, 0, on_timer, entry);
}

static void kill_leaf(sweep_leaf *entry)
{
    entry->main_exit = sd_event_source_disable_unref(entry->main_exit);
    if (entry->kills)
        act_log_fields(LOG_WARNING,
                       &(act_log_ctx){.host = entry->host_name, .generation = entry->generation},
                       "host %s: leaf %s still has processes after %u kill%s (one in "
                       "uninterruptible sleep dies only when it wakes); killing it again",
                       entry->host_name, cg_leaf_name(entry->leaf), entry->kills,
                       entry->kills == 1 ? "" : "s");
    act_error err = {0};
    if (cg_leaf_kill_start(entry->leaf, &err) < 0)
        act_log(LOG_WARNING, "host %s: %s", entry->host_name, err.message);
    entry->kills++;
    if (proven_empty(entry))
        return;
    uint64_t wait = entry->retry_usec;
    entry->retry_usec = wait * 2 < SWEEP_RETRY_MAX_USEC ? wait * 2 : SWEEP_RETRY_MAX_USEC;
    if (arm(entry, wait) < 0)
        act_log(LOG_ERR, "host %s: cannot arm the next kill of leaf %s; only its cgroup.events "
                         "can prove it stopped now",
                entry->host_name, cg_leaf_name(entry->leaf));
}

static int on_main_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    /* The main process ended within its grace: what it left behind has
     * nothing to wait for. */
    kill_leaf(userdata);
    return 0;
}

/* A leftover's main process is asked to stop first, as any retirement asks
 * it: SIGTERM, and its StopTimeoutSec to end before the kill. */
static void terminate(sweep_leaf *entry)
{
    entry->terminated = true;
    ad_daemon *daemon = entry->sweep->daemon;
    if (entry->main_pidfd >= 0 && entry->grace_usec &&
        syscall(SYS_pidfd_send_signal, entry->main_pidfd, SIGTERM, NULL, 0) == 0 &&
        sd_event_add_io(daemon->loop, &entry->main_exit, entry->main_pidfd, EPOLLIN,
                        on_main_exit, entry) >= 0 &&
        arm(entry, entry->grace_usec) >= 0)
        return;
    kill_leaf(entry);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    sweep_leaf *entry = userdata;
    if (entry->terminated)
        kill_leaf(entry);
    else
        terminate(entry);
    return 0;
}

/* ---- taking leaves in ------------------------------------------------------- */

static int add(ad_daemon *daemon, sweep_leaf *entry, uint64_t first_usec, act_error *err)
{
    if (!daemon->sweep) {
        daemon->sweep = calloc(1, sizeof(*daemon->sweep));
        if (!daemon->sweep)
            return act_error_set(err, ENOMEM, "out of memory");
        daemon->sweep->daemon = daemon;
    }
    ad_sweep *sweep = daemon->sweep;
    sweep_leaf **grown = realloc(sweep->leaves, (sweep->n + 1) * sizeof(*grown));
    if (!grown)
        return act_error_set(err, ENOMEM, "out of memory");
    sweep->leaves = grown;
    entry->sweep = sweep;
    int events_fd = cg_leaf_events_fd(entry->leaf, err);
    if (events_fd < 0)
        return events_fd;
    int r = sd_event_add_io(daemon->loop, &entry->emptied, events_fd, CG_LEAF_EVENTS_POLL,
                            on_emptied, entry);
    if (r >= 0)
        r = arm(entry, first_usec);
    if (r < 0)
        return act_error_set(err, -r, "cannot watch %s: %s", cg_leaf_path(entry->leaf),
                             strerror(-r));
    sweep->leaves[sweep->n++] = entry;
    return 0;
}

static sweep_leaf *leaf_new(ad_host *host, const char *host_name, cg_leaf *leaf,
                            uint64_t generation)
{
    sweep_leaf *entry = calloc(1, sizeof(*entry));
    if (!entry) {
        cg_leaf_free(leaf);
        return NULL;
    }
    *entry = (sweep_leaf){
        .host = host,
        .leaf = leaf,
        .generation = generation,
        .main_pidfd = -1,
        .retry_usec = SWEEP_RETRY_FIRST_USEC,
    };
    snprintf(entry->host_name, sizeof(entry->host_name), "%s", host_name);
    return entry;
}

int ad_sweep_leftover(ad_daemon *daemon, ad_host *host, const char *host_name, cg_leaf *leaf,
                      uint64_t generation, int main_pidfd, act_error *err)
{
    assert(daemon && host_name && leaf);
    sweep_leaf *entry = leaf_new(host, host_name, leaf, generation);
    if (!entry) {
        if (main_pidfd >= 0)
            close(main_pidfd);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    entry->main_pidfd = main_pidfd;
    entry->grace_usec = host ? ad_host_config(host)->stop_timeout_usec : 0;
    int r = add(daemon, entry, 0, err);
    if (r < 0)
        leaf_free(entry);
    return r;
}

void ad_sweep_take_unproven(ad_host *host)
{
    assert(host);
    ad_unproven_leaf kept;
    while (ad_host_take_unproven(host, &kept)) {
        const char *name = host->name;
        sweep_leaf *entry = leaf_new(host, name, kept.leaf, kept.generation);
        act_error err = {0};
        int r = entry ? 0 : act_error_set(&err, ENOMEM, "out of memory");
        if (entry) {
            /* Its retirement killed it already: the next kill comes after
             * the first wait. */
            entry->kills = 1;
            r = add(host->daemon, entry, entry->retry_usec, &err);
            if (r < 0)
                leaf_free(entry);
            else
                act_log_fields(LOG_NOTICE,
                               &(act_log_ctx){.host = name, .generation = kept.generation},
                               "host %s: leaf %s is swept until it is proven stopped; the host "
                               "refuses wakes until then",
                               name, cg_leaf_name(entry->leaf));
        }
        if (r < 0)
            act_log(LOG_ERR, "host %s: cannot sweep a leaf not proven stopped: %s; the host "
                             "refuses wakes until the next daemon retires it",
                    name, err.message);
    }
}

void ad_sweep_free(ad_daemon *daemon)
{
    ad_sweep *sweep = daemon->sweep;
    if (!sweep)
        return;
    for (size_t i = 0; i < sweep->n; i++)
        leaf_free(sweep->leaves[i]);
    free(sweep->leaves);
    free(sweep);
    daemon->sweep = NULL;
}
