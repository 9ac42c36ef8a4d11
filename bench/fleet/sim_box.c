/* One simulated box (sim.h): its own store client, lease and view of its
 * claims, its hosts, and the workload's draws. Everything but the stats
 * and the abandon request is touched on the box's loop only. */
#include "bench/fleet/sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/clock.h"

#define TICK_USEC (100 * 1000ull)
#define BUCKETS 256

typedef struct host_entry {
    sim_host *host;
    struct host_entry *next;
} host_entry;

struct sim_box {
    sim_fleet *fleet;
    unsigned index;
    char name[16];
    char incarnation[33];
    sd_event *loop;
    claim_store *store;
    claims_box_lease *lease;
    claims_box_view *view;
    host_entry *buckets[BUCKETS];
    sim_host **hosts; /* every host this box knows, for the draws */
    size_t n_hosts, cap_hosts;
    bool store_unavailable;
    /* Events received, judged against the truth at a later tick. */
    struct received {
        uint64_t revision, at_usec;
    } * received;
    size_t n_received, cap_received;
    atomic_bool listed;
    atomic_bool abandon;
    bool abandoned;
    unsigned seed;
    sim_box_stats stats;
};

static unsigned bucket_of(const char *name)
{
    unsigned h = 5381;
    for (; *name; name++)
        h = h * 33 + (unsigned char)*name;
    return h % BUCKETS;
}

static sim_host *find_host(sim_box *box, const char *name)
{
    for (host_entry *e = box->buckets[bucket_of(name)]; e; e = e->next)
        if (strcmp(sim_host_name(e->host), name) == 0)
            return e->host;
    return NULL;
}

/* "h000042" is host 42 of the fleet. */
static int host_number(const char *name, unsigned n_hosts)
{
    char *end;
    if (name[0] != 'h')
        return -1;
    unsigned long number = strtoul(name + 1, &end, 10);
    return *end == '\0' && number < n_hosts ? (int)number : -1;
}

static sim_host *add_host(sim_box *box, unsigned global)
{
    sim_host *host;
    act_error err = {0};
    if (sim_host_new(box, global, &host, &err) < 0) {
        fprintf(stderr, "bench-fleet: box %s: %s\n", box->name, err.message);
        return NULL;
    }
    host_entry *entry = malloc(sizeof(*entry));
    if (box->n_hosts == box->cap_hosts) {
        size_t cap = box->cap_hosts ? box->cap_hosts * 2 : 128;
        sim_host **grown = realloc(box->hosts, cap * sizeof(*grown));
        if (grown) {
            box->hosts = grown;
            box->cap_hosts = cap;
        }
    }
    if (!entry || box->n_hosts == box->cap_hosts) {
        free(entry);
        sim_host_free(host);
        return NULL;
    }
    unsigned b = bucket_of(sim_host_name(host));
    *entry = (host_entry){.host = host, .next = box->buckets[b]};
    box->buckets[b] = entry;
    box->hosts[box->n_hosts++] = host;
    return host;
}

/* The host a claim of the box's index is about: one it knows, or one that
 * a claim now names (a move's target learns of it so). */
static sim_host *host_for(sim_box *box, const claim_change *change)
{
    sim_host *host = find_host(box, change->claim.host);
    if (host || change->kind != CLAIM_CHANGE_PUT || !claim_names_box(&change->claim, box->name))
        return host;
    int global = host_number(change->claim.host,
                             box->fleet->config.n_boxes * box->fleet->config.hosts_per_box);
    return global < 0 ? NULL : add_host(box, (unsigned)global);
}

/* ---- the view's owner -------------------------------------------------------------- */

static bool changed(claims_box_view *view, const claim_change *change, void *userdata)
{
    sim_box *box = userdata;
    atomic_fetch_add(&box->stats.events, 1);
    if (change->kind == CLAIM_CHANGE_MALFORMED)
        return false;
    if (box->n_received == box->cap_received) {
        size_t cap = box->cap_received ? box->cap_received * 2 : 256;
        struct received *grown = realloc(box->received, cap * sizeof(*grown));
        if (grown) {
            box->received = grown;
            box->cap_received = cap;
        }
    }
    if (box->n_received < box->cap_received)
        box->received[box->n_received++] =
            (struct received){.revision = change->revision, .at_usec = act_now_usec()};
    sim_host *host = host_for(box, change);
    if (host)
        sim_host_claim_changed(host, change);
    return host != NULL;
}

static void listed(claims_box_view *view, const claim *claims, size_t n, uint64_t revision,
                   void *userdata)
{
    sim_box *box = userdata;
    /* Each claim listed stands for a put; a known host the list lacks for
     * a delete. The hosts are not sorted, so the list is searched. */
    bool baseline = !atomic_load(&box->listed);
    for (size_t i = 0; i < n; i++) {
        claim_change change = {
            .kind = CLAIM_CHANGE_PUT, .revision = claims[i].revision, .claim = claims[i]};
        sim_host *host = host_for(box, &change);
        if (host && baseline)
            sim_host_baseline(host, &claims[i]);
        else if (host)
            sim_host_claim_changed(host, &change);
    }
    if (baseline) {
        atomic_store(&box->listed, true);
        return;
    }
    for (size_t i = 0; i < box->n_hosts; i++) {
        const char *name = sim_host_name(box->hosts[i]);
        bool found = false;
        for (size_t lo = 0, hi = n; lo < hi && !found;) {
            size_t mid = (lo + hi) / 2;
            int c = strcmp(claims[mid].host, name);
            if (c == 0)
                found = true;
            else if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (found || claims_box_view_is_malformed(view, name))
            continue;
        claim_change change = {.kind = CLAIM_CHANGE_DELETE, .revision = revision};
        snprintf(change.claim.host, sizeof(change.claim.host), "%s", name);
        sim_host_claim_changed(box->hosts[i], &change);
    }
    atomic_store(&box->listed, true);
}

static void store_health(claims_box_view *view, const act_error *err, void *userdata)
{
    sim_box *box = userdata;
    box->store_unavailable = err != NULL;
}

static void watch_ended(claims_box_view *view, const act_error *err, void *userdata)
{
    sim_box *box = userdata;
    atomic_fetch_add(&box->stats.watch_ends, 1);
    atomic_store(&box->stats.last_watch_end_usec, act_now_usec());
    /* The reason without what varies (ports, revisions, counts). */
    char reason[96];
    size_t n = 0;
    for (const char *p = err ? err->message : "unknown"; *p && n + 1 < sizeof(reason); p++)
        if (!(*p >= '0' && *p <= '9'))
            reason[n++] = *p;
    reason[n] = '\0';
    sim_fleet *fleet = box->fleet;
    int phase = atomic_load(&fleet->phase);
    pthread_mutex_lock(&fleet->ends_lock);
    size_t i = 0;
    while (i < fleet->n_end_reasons && strcmp(fleet->end_reasons[i].reason, reason) != 0)
        i++;
    if (i == fleet->n_end_reasons && i < sizeof(fleet->end_reasons) / sizeof(fleet->end_reasons[0]))
        snprintf(fleet->end_reasons[fleet->n_end_reasons++].reason, sizeof(reason), "%s", reason);
    if (i < fleet->n_end_reasons)
        fleet->end_reasons[i].count[phase]++;
    pthread_mutex_unlock(&fleet->ends_lock);
}

static void heal_ended(claims_box_view *view, int result, size_t n, uint64_t duration_usec,
                       void *userdata)
{
    sim_box *box = userdata;
    if (result < 0) {
        atomic_fetch_add(&box->stats.heals_failed, 1);
        return;
    }
    atomic_fetch_add(&box->stats.heals_ok, 1);
    atomic_store(&box->stats.last_heal_usec, act_now_usec());
}

static const claims_box_view_ops view_ops = {
    .changed = changed,
    .listed = listed,
    .store_health = store_health,
    .watch_ended = watch_ended,
    .heal_ended = heal_ended,
};

/* ---- the workload ------------------------------------------------------------------- */

/* Whether an event of rate per_min a minute happens in one tick (Poisson:
 * at these rates, at most one per tick is the rule). */
static bool draw(sim_box *box, double per_min)
{
    double p = 1.0 - exp(-per_min * ((double)TICK_USEC / 60e6));
    return (double)rand_r(&box->seed) / RAND_MAX < p;
}

static sim_host *any_host(sim_box *box)
{
    return box->n_hosts ? box->hosts[(size_t)rand_r(&box->seed) % box->n_hosts] : NULL;
}

/* A watch event is judged a second after it came: by then the writer has
 * heard back from its write and told the truth. */
#define JUDGE_AFTER_USEC (1000 * 1000ull)

static void judge_received(sim_box *box)
{
    uint64_t now = act_now_usec();
    size_t judged = 0;
    for (; judged < box->n_received && now - box->received[judged].at_usec >= JUDGE_AFTER_USEC;
         judged++) {
        int names = sim_truth_names(box->fleet->truth, box->received[judged].revision, box->index);
        if (names > 0)
            atomic_fetch_add(&box->stats.events_concerning, 1);
        else if (names < 0)
            atomic_fetch_add(&box->stats.events_unknown, 1);
        atomic_fetch_add(&box->stats.events_judged, 1);
    }
    if (judged) {
        memmove(box->received, box->received + judged,
                (box->n_received - judged) * sizeof(*box->received));
        box->n_received -= judged;
    }
}

void sim_box_tick(sim_box *box)
{
    judge_received(box);
    if (atomic_load(&box->abandon) && !box->abandoned) {
        box->abandoned = true;
        claims_box_lease_abandon(box->lease);
    }
    if (!atomic_load(&box->fleet->workload))
        return;
    const sim_config *config = &box->fleet->config;
    double wakes = config->hosts_per_box * config->wakes_pct_per_min / 100.0;
    if (draw(box, wakes)) {
        sim_host *host = any_host(box);
        if (host && sim_host_connect(host))
            atomic_fetch_add(&box->stats.wakes, 1);
        else
            atomic_fetch_add(&box->stats.wakes_skipped, 1);
    }
    if (draw(box, config->swaps_per_box_min)) {
        /* A swap needs a serving host: a few tries among the box's. */
        for (int tries = 0; tries < 16; tries++) {
            sim_host *host = any_host(box);
            if (host && sim_host_swap(host)) {
                atomic_fetch_add(&box->stats.swaps, 1);
                break;
            }
        }
    }
    if (config->n_boxes > 1 && draw(box, config->moves_per_box_min)) {
        unsigned to = (unsigned)rand_r(&box->seed) % (config->n_boxes - 1);
        to += to >= box->index;
        char to_name[16];
        snprintf(to_name, sizeof(to_name), "b%04u", to);
        sim_host *host = any_host(box);
        if (host && sim_host_move(host, to_name))
            atomic_fetch_add(&box->stats.moves, 1);
    }
}

/* ---- life ---------------------------------------------------------------------------- */

/* The store's reads and compare-and-swaps, timed for the fleet's breakdown
 * of an admission. */
static void on_store_op(const char *operation, uint64_t duration_usec, int result, void *userdata)
{
    sim_box *box = userdata;
    sim_fleet *fleet = box->fleet;
    int phase = atomic_load(&fleet->phase);
    if (strcmp(operation, "read") == 0)
        sim_samples_add(&fleet->read_usec[phase], (double)duration_usec);
    else if (strcmp(operation, "cas") == 0)
        sim_samples_add(&fleet->cas_usec[phase], (double)duration_usec);
}

int sim_box_start(sim_fleet *fleet, unsigned index, sd_event *loop, sim_box **out, act_error *err)
{
    sim_box *box = calloc(1, sizeof(*box));
    if (!box)
        return act_error_set(err, ENOMEM, "out of memory");
    box->fleet = fleet;
    box->index = index;
    box->loop = loop;
    snprintf(box->name, sizeof(box->name), "b%04u", index);
    unsigned char random[16];
    if (getrandom(random, sizeof(random), 0) != sizeof(random))
        memset(random, (int)index, sizeof(random));
    for (size_t i = 0; i < sizeof(random); i++)
        snprintf(box->incarnation + 2 * i, 3, "%02x", random[i]);
    box->seed = (unsigned)random[0] << 8 | random[1] | index << 16;
    *out = box;

    const sim_config *config = &fleet->config;
    claims_store_options options = {0};
    int r = claims_store_open(config->store_url, &options, &box->store, err);
    if (r >= 0)
        r = claims_store_attach_event(box->store, loop, err);
    if (r >= 0)
        claims_store_set_observer(box->store, on_store_op, box);
    if (r < 0)
        return act_error_prefix(err, "box %s", box->name);
    for (unsigned i = 0; i < config->hosts_per_box; i++)
        if (!add_host(box, index * config->hosts_per_box + i))
            return act_error_set(err, ENOMEM, "box %s: cannot set up its hosts", box->name);
    claims_box record = {.lease_ttl_usec = config->lease_usec,
                         .started_usec = act_wallclock_usec()};
    snprintf(record.box, sizeof(record.box), "%s", box->name);
    snprintf(record.incarnation, sizeof(record.incarnation), "%s", box->incarnation);
    snprintf(record.version, sizeof(record.version), "bench-fleet");
    if ((r = claims_box_lease_start_async(box->store, loop, &record, &box->lease, err)) < 0 ||
        (r = claims_box_view_new(box->store, loop, box->name, config->watch_timeout_usec, &view_ops,
                                 box, &box->view, err)) < 0)
        return act_error_prefix(err, "box %s", box->name);
    claims_box_view_heal(box->view);
    return 0;
}

void sim_box_abandon_lease(sim_box *box)
{
    atomic_store(&box->abandon, true);
}

sim_box_stats *sim_box_stats_of(sim_box *box)
{
    return &box->stats;
}

claim_store *sim_box_store(sim_box *box)
{
    return box->store;
}

bool sim_box_listed(sim_box *box)
{
    return atomic_load(&box->listed);
}

const char *sim_box_name(const sim_box *box)
{
    return box->name;
}

unsigned sim_box_index(const sim_box *box)
{
    return box->index;
}

const char *sim_box_incarnation(const sim_box *box)
{
    return box->incarnation;
}

sd_event *sim_box_loop(const sim_box *box)
{
    return box->loop;
}

sim_fleet *sim_box_fleet(const sim_box *box)
{
    return box->fleet;
}

bool sim_box_store_unavailable(const sim_box *box)
{
    return box->store_unavailable;
}

/* After the loop ran for the last time: the view (its watch is the
 * store's), then the store, which drops the calls in flight without their
 * callbacks, which would otherwise find their hosts gone. */
void sim_box_free(sim_box *box)
{
    if (!box)
        return;
    claims_box_view_free(box->view);
    claims_store_free(box->store);
    claims_box_lease_free(box->lease);
    for (unsigned b = 0; b < BUCKETS; b++)
        for (host_entry *e = box->buckets[b], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    for (size_t i = 0; i < box->n_hosts; i++)
        sim_host_free(box->hosts[i]);
    free(box->hosts);
    free(box->received);
    free(box);
}
