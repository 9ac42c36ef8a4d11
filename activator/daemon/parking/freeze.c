/* Freeze parking: see parking/freeze.h.
 *
 * A thaw is on the path of a client's first byte, so it does as little as
 * it can before the app runs again: the claim read (ThawCheck=claim) and
 * one write to cgroup.freeze. What follows (the record, the claim's phase,
 * the idle watch, the supervision) happens after, on the loop. */
#include "activator/daemon/parking/freeze.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "activator/connections/connections.h"
#include "activator/daemon/generations/announce.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/parking/idle.h"
#include "activator/daemon/generations/record_writes.h"
#include "activator/daemon/wake/ops.h"
#ifdef ACTIVATOR_TEST_HOOKS
#include "activator/daemon/host/step_holds.h"
#endif
#include "common/clock.h"
#include "common/log.h"

struct ad_freeze {
    ad_host *host;
    ad_generation *gen;
    bool frozen;               /* cgroup.events said frozen: announced, recorded, claimed */
    bool announced;            /* its record says frozen, and so do the event and the claim */
    /* Frozen by the previous daemon: its record and claim say frozen
     * already, so a thaw before this daemon's freeze settles must say
     * serving again all the same. */
    bool resumed;
    bool thawing;              /* the thaw's claim read is in flight */
    uint64_t read_id;          /* the claim read this freeze waits for */
    uint64_t frozen_wall_usec; /* wall clock, for status */
    uint64_t frozen_usec;      /* CLOCK_MONOTONIC, for least recently used first */
    uint64_t demand_usec;      /* CLOCK_MONOTONIC: the connection that asked for the thaw */
    unsigned n_demand;
    sd_event_source **demand; /* one per listening socket */
    sd_event_source *expiry;  /* FrozenMaxSec= */
};

static uint64_t next_read_id = 1;

static void free_freeze(ad_freeze *f)
{
    /* A freeze still settling reports to nobody any more. */
    if (f->gen->settled_userdata == f)
        f->gen->settled = NULL;
    for (unsigned i = 0; i < f->n_demand; i++)
        sd_event_source_disable_unref(f->demand[i]);
    free(f->demand);
    sd_event_source_disable_unref(f->expiry);
    f->host->freeze = NULL;
    free(f);
}

void ad_freeze_forget(ad_host *host)
{
    ad_freeze *f = host->freeze;
    if (f)
        free_freeze(f);
}

bool ad_freeze_active(const ad_host *host, uint64_t *since_usec)
{
    const ad_freeze *f = host->freeze;
    if (since_usec)
        *since_usec = f && f->frozen ? f->frozen_wall_usec : 0;
    return f != NULL;
}

size_t ad_freeze_count(const ad_daemon *daemon)
{
    size_t n = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        const ad_freeze *f = daemon->hosts[i]->freeze;
        n += f && f->frozen;
    }
    return n;
}

ad_host *ad_freeze_coldest(ad_daemon *daemon)
{
    ad_host *coldest = NULL;
    uint64_t oldest = UINT64_MAX;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        const ad_freeze *f = daemon->hosts[i]->freeze;
        if (f && f->frozen && !f->thawing && f->frozen_usec < oldest) {
            oldest = f->frozen_usec;
            coldest = daemon->hosts[i];
        }
    }
    return coldest;
}

void ad_freeze_retire(ad_host *host, const char *why)
{
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                   "host %s: %s; retiring its frozen generation", host->name, why);
    ad_freeze_forget(host);
    pl_host_park(host->pipeline, PL_PARK_IDLE);
}

/* ---- the thaw ------------------------------------------------------------- */

static void on_record_written(ad_host *host, int result, const act_error *err)
{
    if (result < 0)
        act_log(LOG_WARNING, "host %s: %s", host->name, err->message);
}

static void write_record(ad_generation *gen, rec_generation_phase phase)
{
    rec_generation_record record;
    ad_generation_fill_record(gen, phase, &record);
    act_error err = {0};
    if (ad_record_write_async(gen->host, &record, NULL, on_record_written, &err) < 0)
        act_log(LOG_WARNING, "host %s: %s", gen->host->name, err.message);
}

static void count_thaw(ad_host *host, const char *outcome, uint64_t demand_usec)
{
    const met_daemon_metrics *metrics = host->daemon->metrics;
    if (!metrics)
        return;
    met_metric_add(metrics->thaws, MET_LABELS(outcome), 1);
    if (demand_usec)
        met_metric_observe(metrics->thaw_duration, NULL,
                           (double)(act_now_usec() - demand_usec) / 1e6);
}

/* The app runs again: everything a serving generation has comes back. */
static int thaw_now(ad_freeze *f, const char *why, act_error *err)
{
    ad_host *host = f->host;
    ad_generation *gen = f->gen;
    bool was_frozen = f->frozen, resumed = f->resumed;
    uint64_t demand_usec = f->demand_usec;
    int r = ad_generation_thaw(gen, NULL, NULL, err);
    free_freeze(f);
    if (r < 0) {
        /* Neither serving nor surely frozen: it goes, as a crash would. */
        act_log(LOG_ERR, "host %s: %s; retiring generation %" PRIu64, host->name, err->message,
                gen->number);
        pl_host_generation_failed(host->pipeline, PL_REASON_SETUP_FAILED, false, "host %s: %s",
                                  host->name, err->message);
        return r;
    }
    count_thaw(host, "served", demand_usec);
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name, .generation = gen->number},
                   "host %s: generation %" PRIu64 " thawed (%s)", host->name, gen->number, why);
    ad_publish(host, EV_EVENT_THAWED, gen, why);
    if (was_frozen || resumed) {
        write_record(gen, REC_GEN_SERVING);
        ad_claim_report_serving(host, gen->number);
        ad_claim_report_settle(host);
    }
    ad_idle_watch(host, ad_freeze_or_park);
    ad_wake_ops_supervise(host);
    return 0;
}

int ad_freeze_thaw(ad_host *host, const char *why, act_error *err)
{
    ad_freeze *f = host->freeze;
    if (!f)
        return act_error_set(err, ESRCH, "host %s is not frozen", host->name);
    if (host->fenced)
        return act_error_set(err, EPERM,
                             "host %s is fenced (its box cannot prove its lease): it stays "
                             "frozen",
                             host->name);
    return thaw_now(f, why, err);
}

/* The claim no longer names this admission: the generation must not serve
 * the client that came. It is retired, and the client waits in the backlog
 * for whatever the claim now says (a refused wake closes it). A claim that
 * names another box is that box's now: the generation is killed frozen
 * (generations/retire.c), and the release follows as for any claim lost. One that
 * still names this box but not this admission is parked as an operator's
 * park is. */
static void thaw_refused(ad_freeze *f, bool lost, const char *why)
{
    ad_host *host = f->host;
    count_thaw(host, "retired", f->demand_usec);
    act_log_fields(
        LOG_NOTICE,
        &(act_log_ctx){.host = host->name, .reason = lost ? "not_owner" : "claim_changed"},
        "host %s: not thawing generation %" PRIu64 ": %s; retiring it", host->name, f->gen->number,
        why);
    free_freeze(f);
    if (lost)
        host->claim_ours = false;
    pl_host_park(host->pipeline, lost ? PL_PARK_CLAIM_LOST : PL_PARK_REQUEST);
}

typedef struct thaw_read {
    ad_host *host;
    uint64_t id;
} thaw_read;

static void on_thaw_read(claim_store *store, int result, const claim *c, const act_error *err,
                         void *userdata)
{
    thaw_read *read = userdata;
    ad_host *host = read->host;
    ad_freeze *f = host->freeze;
    bool current = f && f->thawing && f->read_id == read->id;
    free(read);
    if (!current)
        return; /* retired or thawed meanwhile */
    f->thawing = false;
    const char *box = host->daemon->config.box;
    char why[512];
    if (result < 0) {
        /* Serving generations keep serving while the store is away; a
         * frozen one is serving too, so the watch's last word decides. */
        act_log(LOG_WARNING,
                "host %s: the claim could not be read before a thaw (%s); the claim watch "
                "last said it is %s",
                host->name, err->message, host->claim_ours ? "ours" : "not ours");
        if (!host->claim_ours) {
            thaw_refused(f, true, "the claim watch last saw the claim name another box");
            return;
        }
    } else if (result == 0) {
        thaw_refused(f, true, "the claim was deleted");
        return;
    } else if (!claim_owned_by(c, box)) {
        snprintf(why, sizeof(why), "the claim (revision %" PRIu64 ") names box %s as executor",
                 c->revision, claim_executor(c));
        thaw_refused(f, true, why);
        return;
    } else if (c->holder.session != f->gen->session || c->holder.generation != f->gen->number) {
        /* The admission is what makes the generation ours, whatever the
         * op: a move draining the host keeps it (and its drain retires the
         * generation, thawed first). */
        snprintf(why, sizeof(why),
                 "the claim (revision %" PRIu64 ") names session %" PRIu64 ", generation %" PRIu64
                 " in phase %s, not this admission (session %" PRIu64 ", generation %" PRIu64 ")",
                 c->revision, c->holder.session, c->holder.generation, c->op.phase, f->gen->session,
                 f->gen->number);
        thaw_refused(f, false, why);
        return;
    }
    act_error thaw_err = {0};
    thaw_now(f, "connection", &thaw_err);
}

static void stop_demand(ad_freeze *f)
{
    for (unsigned i = 0; i < f->n_demand; i++)
        if (f->demand[i])
            sd_event_source_set_enabled(f->demand[i], SD_EVENT_OFF);
}

/* A client waits on a socket of the frozen (or freezing) generation. */
static void demand(ad_freeze *f)
{
    ad_host *host = f->host;
    stop_demand(f);
    /* Fenced: the client waits in the backlog until the lease is proven
     * (hosts/self_fence.c watches the sockets again) or the host goes. */
    if (f->thawing || host->fenced)
        return;
    f->demand_usec = act_now_usec();
    act_error err = {0};
    /* Still freezing: as far as anyone knows it never stopped serving, and
     * its admission is the one the wake checked. */
    if (!f->frozen || ad_host_config(host)->thaw_check_cached) {
        if (!host->claim_ours) {
            thaw_refused(f, true, "the claim watch saw the claim name another box");
            return;
        }
        thaw_now(f, "connection", &err);
        return;
    }
    thaw_read *read = calloc(1, sizeof(*read));
    if (!read) {
        thaw_now(f, "connection", &err);
        return;
    }
    *read = (thaw_read){.host = host, .id = next_read_id++};
    f->thawing = true;
    f->read_id = read->id;
    if (claims_read_async(host->daemon->store, host->name, on_thaw_read, read, &err) < 0) {
        free(read);
        f->thawing = false;
        act_log(LOG_WARNING, "host %s: cannot read the claim before a thaw: %s", host->name,
                err.message);
        if (host->claim_ours)
            thaw_now(f, "connection", &err);
        else
            thaw_refused(f, true, "the claim watch last saw the claim name another box");
    }
}

static int on_demand(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    demand(userdata);
    return 0;
}

static int watch_demand(ad_freeze *f, act_error *err)
{
    ad_host *host = f->host;
    unsigned n = host->n_listen;
    const int *fds = host->listen_fds;
    f->demand = calloc(n ? n : 1, sizeof(*f->demand));
    if (!f->demand)
        return act_error_set(err, ENOMEM, "out of memory");
    f->n_demand = n;
    for (unsigned i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue;
        if (sd_event_add_io(host->daemon->loop, &f->demand[i], fds[i], EPOLLIN, on_demand, f) < 0)
            return act_error_set(err, EIO, "host %s: cannot watch its socket %u for connections",
                                 host->name, i);
        /* Before the loop's other sources: a waiting client is the one
         * thing a frozen host has to do. */
        sd_event_source_set_priority(f->demand[i], SD_EVENT_PRIORITY_IMPORTANT);
    }
    return 0;
}

/* ---- the freeze ------------------------------------------------------------ */

static int on_expired(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_freeze *f = userdata;
    char why[96];
    snprintf(why, sizeof(why), "frozen for FrozenMaxSec=%" PRIu64 "s",
             ad_host_config(f->host)->frozen_max_usec / 1000000);
    ad_freeze_retire(f->host, why);
    return 0;
}

static void on_frozen_recorded(ad_host *host, int result, const act_error *err)
{
    if (result < 0)
        act_log(LOG_WARNING, "host %s: %s", host->name, err->message);
    ad_freeze *f = host->freeze;
    /* Thawed or retired meanwhile: nothing is frozen to tell of. */
    if (!f || !f->frozen || f->announced)
        return;
    f->announced = true;
    ad_publish(host, EV_EVENT_FROZEN, f->gen, NULL);
    ad_claim_report_frozen(host);
    ad_claim_report_settle(host);
}

static void frozen(ad_freeze *f)
{
    ad_host *host = f->host;
    ad_generation *gen = f->gen;
    /* A client accepted by the app just before it froze holds no place in
     * the backlog, so no socket would ever wake it: seen by the kernel's
     * count of connections, it thaws the generation again. */
    uint64_t connections = 0;
    act_error err = {0};
    if (conn_count(host->listen, host->n_listen, &connections, &err) < 0) {
        act_log(LOG_WARNING, "host %s: %s; thawing", host->name, err.message);
        connections = 1;
    }
    if (connections > 0) {
        thaw_now(f, "a connection during the freeze", &err);
        return;
    }
    f->frozen = true;
    f->frozen_usec = act_now_usec();
    f->frozen_wall_usec = act_wallclock_usec();
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name, .generation = gen->number},
                   "host %s: generation %" PRIu64 " is frozen", host->name, gen->number);
    /* Told once the record says so: whoever saw the event may kill the
     * daemon, and the next one must find the generation frozen. */
    rec_generation_record record;
    ad_generation_fill_record(gen, REC_GEN_FROZEN, &record);
    if (ad_record_write_async(host, &record, NULL, on_frozen_recorded, &err) < 0) {
        act_log(LOG_WARNING, "host %s: %s", host->name, err.message);
        on_frozen_recorded(host, 0, NULL);
    }
    if (sd_event_add_time_relative(host->daemon->loop, &f->expiry, CLOCK_MONOTONIC,
                                   ad_host_config(host)->frozen_max_usec, 1000 * 1000, on_expired,
                                   f) < 0)
        act_log(LOG_ERR, "host %s: cannot arm FrozenMaxSec=; it stays frozen until used",
                host->name);
}

typedef struct settle_hold {
    ad_host *host;
    ad_generation *gen;
} settle_hold;

static void settled_after_hold(void *userdata)
{
    settle_hold *hold = userdata;
    ad_freeze *f = hold->host->freeze;
    /* Thawed or retired while held: nothing is left to settle. */
    if (f && f->gen == hold->gen && !f->frozen && hold->gen->frozen)
        frozen(f);
    free(hold);
}

static void on_frozen(ad_generation *gen, void *userdata)
{
    ad_freeze *f = userdata;
#ifdef ACTIVATOR_TEST_HOOKS
    settle_hold *hold = malloc(sizeof(*hold));
    if (hold) {
        *hold = (settle_hold){.host = f->host, .gen = gen};
        if (ad_test_hold_freeze(f->host->name, f->host->daemon->loop, settled_after_hold, hold))
            return;
        free(hold);
    }
#else
    (void)settled_after_hold;
#endif
    frozen(f);
}

/* resumed: the previous daemon froze it (ad_freeze.resumed). */
static int freeze_start(ad_host *host, const char *why, bool resumed, act_error *err)
{
    assert(host);
    const char *name = host->name;
    ad_generation *gen = host->serving;
    if (host->freeze)
        return act_error_set(err, EBUSY, "host %s is frozen already", name);
    if (pl_host_get_state(host->pipeline) != PL_HOST_SERVING || !gen || gen->retired || gen->exited)
        return act_error_set(err, EBUSY, "host %s is not serving (%s); only a serving host freezes",
                             name, pl_host_state_to_string(pl_host_get_state(host->pipeline)));
    if (host->swap || host->starting || host->replaced)
        return act_error_set(err, EBUSY, "host %s: a swap is in flight; freeze it once it ended",
                             name);
    if (host->checkpoint)
        return act_error_set(
            err, EBUSY, "host %s: a checkpoint is being written; freeze it once it ended", name);
    ad_freeze *f = calloc(1, sizeof(*f));
    if (!f)
        return act_error_set(err, ENOMEM, "out of memory");
    *f = (ad_freeze){.host = host, .gen = gen, .resumed = resumed};
    host->freeze = f;
    int r = watch_demand(f, err);
    if (r < 0) {
        free_freeze(f);
        return r;
    }
    ad_idle_unwatch(host);
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = name, .generation = gen->number},
                   "host %s: %s; freezing generation %" PRIu64, name, why, gen->number);
    r = ad_generation_freeze(gen, on_frozen, f, err);
    if (r < 0) {
        /* Whatever part of it froze runs again. */
        act_error thaw_err = {0};
        free_freeze(f);
        ad_generation_thaw(gen, NULL, NULL, &thaw_err);
        ad_idle_watch(host, ad_freeze_or_park);
        ad_wake_ops_supervise(host);
        return r;
    }
    return 0;
}

int ad_freeze_start(ad_host *host, const char *why, act_error *err)
{
    return freeze_start(host, why, false, err);
}

void ad_freeze_or_park(ad_host *host)
{
    const cfg_host *config = ad_host_config(host);
    if (config->park_freeze) {
        act_error err = {0};
        char why[96];
        snprintf(why, sizeof(why), "no connection for %" PRIu64 " s",
                 config->idle_timeout_usec / 1000000);
        if (ad_freeze_start(host, why, &err) == 0)
            return;
        act_log(LOG_WARNING, "host %s: cannot freeze it: %s; parking it instead", host->name,
                err.message);
    }
    pl_host_park(host->pipeline, PL_PARK_IDLE);
}

void ad_freeze_hand_over(ad_host *host)
{
    ad_freeze *f = host->freeze;
    if (!f)
        return;
    ad_generation *gen = f->gen;
    bool was_frozen = f->frozen;
    free_freeze(f);
    act_error err = {0};
    if (!was_frozen && ad_generation_thaw(gen, NULL, NULL, &err) < 0)
        act_log(LOG_WARNING, "host %s: %s", host->name, err.message);
}

void ad_freeze_watch_again(ad_host *host)
{
    ad_freeze *f = host->freeze;
    for (unsigned i = 0; f && i < f->n_demand; i++)
        if (f->demand[i])
            sd_event_source_set_enabled(f->demand[i], SD_EVENT_ON);
}

void ad_freeze_resume(ad_host *host)
{
    act_error err = {0};
    if (freeze_start(host, "frozen by the previous daemon", true, &err) < 0)
        act_log(LOG_WARNING, "host %s: cannot resume its frozen generation frozen: %s", host->name,
                err.message);
}
