/* Takeover: see fleet/takeover.h. */
#include "activator/daemon/fleet/takeover.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/hosts/hosts.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

/* Before each host, this long per host this box runs or wakes, this long per
 * thousandth of the box's memory in use (50 ms when all of it is), and up to
 * 5 ms drawn at random: a more loaded box asks later. */
#define STAGGER_PER_HOST_USEC (5 * 1000)
#define STAGGER_PER_PERMILLE_USEC 50
#define STAGGER_JITTER_USEC (5 * 1000)
/* Listings come at least this far apart. */
#define POLL_MIN_USEC (500 * 1000)

typedef struct dead_box {
    char box[65];
    uint64_t dead_since_usec; /* CLOCK_MONOTONIC: the first listing without it */
    bool taken;               /* its claims went through once */
} dead_box;

typedef struct ad_takeover {
    ad_daemon *daemon;
    sd_event_source *poll;
    bool listing;
    char (*live)[65]; /* the boxes live at the last listing */
    size_t n_live;
    dead_box *dead;
    size_t n_dead;
    /* The dead box whose claims are being gone through, one host at a
     * time. */
    bool running;
    size_t run_dead; /* index into dead */
    claim *claims;
    size_t n_claims;
    size_t next;       /* claims gone through so far */
    size_t offset;     /* where this box starts in them (see at()) */
    bool store_failed; /* a call failed, or the run stopped short: gone through again */
    sd_event_source *stagger;
    claim next_claim;
} ad_takeover;

static ad_takeover *of(ad_daemon *daemon)
{
    return daemon->takeover;
}

static void arm_poll(ad_takeover *t);
static void take_next(ad_takeover *t);

static void count(ad_daemon *daemon, const char *outcome)
{
    if (daemon->metrics)
        met_metric_add(daemon->metrics->takeovers, MET_LABELS(outcome), 1);
}

/* ---- one dead box's hosts ---------------------------------------------------- */

static void end_run(ad_takeover *t)
{
    if (t->running && t->run_dead < t->n_dead)
        t->dead[t->run_dead].taken = !t->store_failed;
    t->running = false;
    free(t->claims);
    t->claims = NULL;
    t->n_claims = t->next = 0;
    t->stagger = sd_event_source_disable_unref(t->stagger);
}

/* The i-th claim this box goes through. Each box starts at its own place
 * in the dead box's list (a hash of its name), so the survivors rarely
 * race for one host: they take the list from different ends. */
static claim *at(ad_takeover *t, size_t i)
{
    return &t->claims[(t->offset + i) % t->n_claims];
}

static size_t offset_of(const char *box, size_t n)
{
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (const char *c = box; *c; c++)
        hash = (hash ^ (uint8_t)*c) * 16777619u;
    return n ? hash % n : 0;
}

/* The hosts this box runs or is waking. */
static size_t load_of(const ad_daemon *daemon)
{
    size_t n = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        pl_host_state state = pl_host_get_state(daemon->hosts[i]->pipeline);
        n += state == PL_HOST_SERVING || state == PL_HOST_WAKING;
    }
    return n;
}

/* The box's memory in use, in thousandths: MemTotal less MemAvailable, as
 * /proc/meminfo says; 0 when it cannot be read. */
static unsigned memory_used_permille(void)
{
    _cleanup_fclose_ FILE *meminfo = fopen("/proc/meminfo", "re");
    unsigned long long total = 0, available = 0, value;
    char line[128];
    while (meminfo && fgets(line, sizeof(line), meminfo)) {
        if (sscanf(line, "MemTotal: %llu kB", &value) == 1)
            total = value;
        else if (sscanf(line, "MemAvailable: %llu kB", &value) == 1)
            available = value;
    }
    return total && available <= total ? (unsigned)((total - available) * 1000 / total) : 0;
}

/* A run ends only once its store call has answered (or the takeover is
 * freed), so at most one call is out at a time: its answer finds the
 * daemon's takeover, and it is that call's unless the takeover is gone.
 * The daemon outlives every call, so it is the calls' userdata (nothing is
 * allocated that a store freed with the call in flight would leak). */
static ad_takeover *answering(ad_daemon *daemon)
{
    ad_takeover *t = of(daemon);
    return t && t->running ? t : NULL;
}

static void checkpoint_age(const claim *c, char *out, size_t size)
{
    uint64_t now = act_wallclock_usec();
    if (!c->state.checkpoint[0])
        snprintf(out, size, "no checkpoint: it starts from an empty state");
    else if (c->state.stamp_usec && c->state.stamp_usec <= now)
        snprintf(out, size, "from checkpoint %s, %" PRIu64 " s old", c->state.checkpoint,
                 (now - c->state.stamp_usec) / 1000000);
    else
        snprintf(out, size, "from checkpoint %s", c->state.checkpoint);
}

static void on_taken(claim_store *store, int result, uint64_t new_revision, const claim *current,
                     const act_error *err, void *userdata)
{
    ad_takeover *t = answering(userdata);
    if (!t)
        return;
    const claim *c = at(t, t->next - 1);
    const char *dead = t->dead[t->run_dead].box;
    ad_host *host = ad_hosts_find(t->daemon, c->host);
    if (result == 0 && host) {
        char why[300], age[200];
        checkpoint_age(c, age, sizeof(age));
        snprintf(why, sizeof(why), "from box %s, whose lease expired; %s", dead, age);
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = c->host},
                       "host %s: taken over %s (revision %" PRIu64 ")", c->host, why, new_revision);
        ad_publish(host, EV_EVENT_TAKEN_OVER, NULL, why);
        count(t->daemon, "taken");
    } else if (result == CLAIMS_CHANGED) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = c->host},
                       "host %s: not taken from box %s: its claim changed (another box took "
                       "it, or an operator did)",
                       c->host, dead);
        count(t->daemon, "lost");
    } else if (result == CLAIMS_BOX_LIVE) {
        act_log(LOG_NOTICE, "box %s is live again; taking none of its hosts", dead);
        t->dead[t->run_dead] = t->dead[--t->n_dead];
        t->running = false; /* nothing to mark taken: the box is not dead */
        end_run(t);
        return;
    } else {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = c->host},
                       "host %s: cannot take it from box %s: %s; trying again at the next "
                       "listing",
                       c->host, dead, err ? err->message : "unknown error");
        t->store_failed = true;
        count(t->daemon, "failed");
    }
    take_next(t);
}

static int on_stagger_over(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_takeover *t = userdata;
    t->stagger = sd_event_source_disable_unref(t->stagger);
    ad_daemon *daemon = t->daemon;
    const claim *c = at(t, t->next++);
    claim_edit edit = {
        .kind = CLAIM_EDIT_ASSIGN, .holder_gone = true, .stamp_usec = act_wallclock_usec()};
    snprintf(edit.box, sizeof(edit.box), "%s", daemon->config.box);
    snprintf(edit.taken_from, sizeof(edit.taken_from), "%s", t->dead[t->run_dead].box);
    act_error err = {0};
    if (claim_apply_edit(c->host, c, &edit, &t->next_claim, &err) != 0) {
        take_next(t);
        return 0;
    }
    if (claims_cas_unless_live_async(daemon->store, c->host, c->revision, &t->next_claim,
                                     t->dead[t->run_dead].box, on_taken, daemon, &err) < 0) {
        act_log(LOG_WARNING, "host %s: cannot take it over: %s", c->host, err.message);
        t->store_failed = true;
        take_next(t);
    }
    return 0;
}

/* Whether this box may take c from the dead box. */
static bool takeable(const ad_takeover *t, const claim *c, const char *dead)
{
    ad_daemon *daemon = t->daemon;
    return strcmp(claim_executor(c), dead) == 0 && claim_failover_allows(c, daemon->config.box) &&
           ad_hosts_find(daemon, c->host);
}

static void take_next(ad_takeover *t)
{
    const char *dead = t->dead[t->run_dead].box;
    /* Fenced or stopping meanwhile: this box takes nothing now, and goes
     * through the dead box again once it may. */
    if (t->daemon->fenced || t->daemon->stopping) {
        t->store_failed = true;
        end_run(t);
        return;
    }
    while (t->next < t->n_claims && !takeable(t, at(t, t->next), dead))
        t->next++;
    if (t->next >= t->n_claims) {
        end_run(t);
        return;
    }
    uint64_t wait = load_of(t->daemon) * STAGGER_PER_HOST_USEC +
                    memory_used_permille() * STAGGER_PER_PERMILLE_USEC +
                    act_draw_below(STAGGER_JITTER_USEC + 1);
    if (sd_event_add_time_relative(t->daemon->loop, &t->stagger, CLOCK_MONOTONIC, wait, 1000,
                                   on_stagger_over, t) < 0)
        on_stagger_over(NULL, 0, t);
}

static void on_dead_claims(claim_store *store, int result, claim *claims, size_t n,
                           uint64_t revision, const act_error *err, void *userdata)
{
    ad_takeover *t = answering(userdata);
    if (!t) {
        free(claims);
        return;
    }
    if (result < 0) {
        act_log(LOG_WARNING,
                "box %s is dead, but its claims cannot be listed: %s; trying again "
                "at the next listing",
                t->dead[t->run_dead].box, err ? err->message : "unknown error");
        free(claims);
        t->store_failed = true;
        end_run(t);
        return;
    }
    t->claims = claims;
    t->n_claims = n;
    t->next = 0;
    t->offset = offset_of(t->daemon->config.box, n);
    take_next(t);
}

static void start_run(ad_takeover *t, size_t dead_index)
{
    t->running = true;
    t->run_dead = dead_index;
    t->store_failed = false;
    act_log(LOG_NOTICE,
            "box %s is dead (its lease expired); taking the failover hosts it ran "
            "that this box may take",
            t->dead[dead_index].box);
    act_error err = {0};
    if (claims_list_box_async(t->daemon->store, t->dead[dead_index].box, NULL, NULL, on_dead_claims,
                              t->daemon, &err) < 0) {
        t->store_failed = true;
        end_run(t);
    }
}

/* ---- which boxes died -------------------------------------------------------- */

static bool named(char (*boxes)[65], size_t n, const char *box)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(boxes[i], box) == 0)
            return true;
    return false;
}

static void note_dead(ad_takeover *t, const char *box)
{
    for (size_t i = 0; i < t->n_dead; i++)
        if (strcmp(t->dead[i].box, box) == 0)
            return;
    dead_box *grown = realloc(t->dead, (t->n_dead + 1) * sizeof(*grown));
    if (!grown)
        return;
    t->dead = grown;
    dead_box *d = &t->dead[t->n_dead++];
    *d = (dead_box){.dead_since_usec = act_now_usec()};
    snprintf(d->box, sizeof(d->box), "%s", box);
    act_log(LOG_NOTICE,
            "box %s: no live lease any more; its failover hosts may be taken in %" PRIu64
            " ms (FailoverGraceSec=)",
            box, t->daemon->config.failover_grace_usec / 1000);
}

static void on_boxes(claim_store *store, int result, const claims_box *boxes, size_t n,
                     const act_error *err, void *userdata)
{
    ad_daemon *daemon = userdata;
    ad_takeover *t = of(daemon);
    if (!t)
        return;
    t->listing = false;
    if (result < 0) {
        arm_poll(t);
        return;
    }
    char(*live)[65] = calloc(n ? n : 1, sizeof(*live));
    if (!live) {
        arm_poll(t);
        return;
    }
    size_t n_live = 0;
    bool drained = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(boxes[i].box, daemon->config.box) == 0)
            drained = boxes[i].drained_usec != 0;
        if (boxes[i].live)
            snprintf(live[n_live++], sizeof(live[0]), "%s", boxes[i].box);
    }
    for (size_t i = 0; i < t->n_live; i++)
        if (!named(live, n_live, t->live[i]) && strcmp(t->live[i], daemon->config.box) != 0)
            note_dead(t, t->live[i]);
    /* A box live again is not dead; while a run goes through one, the
     * entries stay where they are (the run's write finds a live box itself). */
    for (size_t i = t->n_dead; i-- > 0 && !t->running;)
        if (named(live, n_live, t->dead[i].box))
            t->dead[i] = t->dead[--t->n_dead];
    free(t->live);
    t->live = live;
    t->n_live = n_live;
    uint64_t now = act_now_usec();
    for (size_t i = 0; i < t->n_dead && !t->running && !drained; i++)
        if (!t->dead[i].taken &&
            now >= t->dead[i].dead_since_usec + daemon->config.failover_grace_usec)
            start_run(t, i);
    arm_poll(t);
}

static int on_poll(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_takeover *t = userdata;
    ad_daemon *daemon = t->daemon;
    act_error err = {0};
    if (daemon->stopping || daemon->fenced || t->listing) {
        arm_poll(t);
        return 0;
    }
    if (claims_box_list_live_async(daemon->store, on_boxes, daemon, &err) < 0) {
        arm_poll(t);
        return 0;
    }
    t->listing = true;
    return 0;
}

static void arm_poll(ad_takeover *t)
{
    uint64_t period = t->daemon->config.box_lease_usec / 4;
    if (period < POLL_MIN_USEC)
        period = POLL_MIN_USEC;
    int r = t->poll ? sd_event_source_set_time_relative(t->poll, period)
                    : sd_event_add_time_relative(t->daemon->loop, &t->poll, CLOCK_MONOTONIC, period,
                                                 10 * 1000, on_poll, t);
    if (r >= 0)
        r = sd_event_source_set_enabled(t->poll, SD_EVENT_ONESHOT);
    if (r < 0)
        act_log(LOG_ERR, "box %s: cannot arm the listing of the boxes: %s; no takeover",
                t->daemon->config.box, strerror(-r));
}

void ad_takeover_start(ad_daemon *daemon)
{
    bool any = false;
    for (size_t i = 0; i < daemon->n_hosts && !any; i++)
        any = ad_host_config(daemon->hosts[i])->failover;
    if (!any || daemon->takeover)
        return;
    ad_takeover *t = calloc(1, sizeof(*t));
    if (!t)
        return;
    t->daemon = daemon;
    daemon->takeover = t;
    /* At once: the boxes live now are the ones whose death it will see. */
    on_poll(NULL, 0, t);
}

void ad_takeover_free(ad_daemon *daemon)
{
    ad_takeover *t = of(daemon);
    if (!t)
        return;
    end_run(t);
    sd_event_source_disable_unref(t->poll);
    free(t->live);
    free(t->dead);
    daemon->takeover = NULL;
    free(t);
}
