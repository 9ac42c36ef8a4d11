/* One host on a simulated box (sim.h): a real wake pipeline whose claim
 * steps make real store calls through the claim code, and whose process
 * steps are timers. */
#include "bench/fleet/sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

/* The faked process: an exec takes 1 ms, readiness 5 ms more, a retirement
 * 1 ms. Short, so that what is measured is the claim's part. */
#define EXEC_USEC 1000
#define READY_USEC 5000
#define RETIRE_USEC 1000
/* sd-event's default accuracy (0) is 250 ms: a faked step must not wait
 * for a coalesced wakeup. */
#define STEP_ACCURACY_USEC 100

struct sim_host {
    sim_box *box;
    unsigned global;
    char name[16];
    pl_host *pipeline;
    claim seen;        /* the claim as last known here; revision 0: none */
    bool ours;         /* seen names this box as executor */
    char probe_op[65]; /* a move's target: the op its probe runs under */
    pl_wake *wake;     /* the wake whose store call is in flight */
    claim *published;  /* the admission that serves, once published; NULL otherwise */
    sd_event_source *step_timer;
    sd_event_source *idle_timer;
    bool writing;  /* a write-back (parked, released, moving) is in flight */
    bool draining; /* a move's source: write moving once at rest */
    uint64_t waking_usec;
    unsigned running; /* generations running here */
};

/* What a wake keeps between its claim steps. */
typedef struct wake_claims {
    claim observed; /* the read */
    claim admitted; /* our admission as written, then as last re-read */
} wake_claims;

static void settle(sim_host *host);

static sim_box_stats *stats(sim_host *host)
{
    return sim_box_stats_of(host->box);
}

static const char *box_name(sim_host *host)
{
    return sim_box_name(host->box);
}

static claim_store *store(sim_host *host)
{
    return sim_box_store(host->box);
}

static void remember(sim_host *host, const claim *c)
{
    if (c->revision >= host->seen.revision) {
        host->seen = *c;
        host->ours = claim_owned_by(c, box_name(host));
    }
}

/* A write of ours landed: the truth learns which boxes it named. */
static void wrote(sim_host *host, const claim *before, claim *after, uint64_t revision)
{
    after->revision = revision;
    sim_truth_wrote(sim_box_fleet(host->box)->truth, revision, before, after);
    remember(host, after);
}

static pl_wake *take_wake(sim_host *host)
{
    pl_wake *wake = host->wake;
    host->wake = NULL;
    return wake;
}

static wake_claims *claims_of(pl_wake *wake)
{
    return pl_wake_get_data(wake);
}

static void store_refusal(sim_host *host, pl_wake *wake, pl_reason reason, const char *what,
                          const act_error *err)
{
    atomic_fetch_add(&stats(host)->refusals_store, 1);
    atomic_store(&stats(host)->last_refusal_usec, act_now_usec());
    pl_wake_complete(wake, reason, "host %s: %s: %s", host->name, what,
                     err ? err->message : "store unavailable");
}

/* ---- read ----------------------------------------------------------------- */

static void on_read(claim_store *s, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    sim_host *host = userdata;
    pl_wake *wake = take_wake(host);
    if (result < 0) {
        store_refusal(host, wake, PL_REASON_STORE_ERROR, "cannot read its claim", err);
        return;
    }
    if (result == 0) {
        pl_wake_complete(wake, PL_REASON_NOT_OWNER, "host %s: no claim", host->name);
        return;
    }
    remember(host, c);
    if (!claim_owned_by(c, box_name(host))) {
        pl_wake_complete(wake, PL_REASON_NOT_OWNER, "host %s: not ours", host->name);
        return;
    }
    act_error why = {0};
    int r = host->probe_op[0] ? claim_probe_allows_wake(c, box_name(host), host->probe_op, &why)
                              : claim_phase_allows_wake(c, box_name(host), false, &why);
    if (r < 0) {
        pl_wake_complete(wake, r == -EAGAIN ? PL_REASON_RELEASE_PENDING : PL_REASON_WRONG_PHASE,
                         "%s", why.message);
        return;
    }
    claims_of(wake)->observed = *c;
    pl_wake_ok(wake);
}

static void op_read(pl_wake *wake, void *userdata)
{
    sim_host *host = userdata;
    wake_claims *claims = calloc(1, sizeof(*claims));
    if (!claims) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: out of memory", host->name);
        return;
    }
    pl_wake_set_data(wake, claims, free);
    /* As the daemon: nothing is admitted while the box cannot list its
     * claims. */
    if (sim_box_store_unavailable(host->box)) {
        store_refusal(host, wake, PL_REASON_STORE_UNAVAILABLE, "the store is unavailable", NULL);
        return;
    }
    act_error err = {0};
    host->wake = wake;
    if (claims_read_async(store(host), host->name, on_read, host, &err) < 0)
        store_refusal(host, take_wake(host), PL_REASON_STORE_ERROR, "cannot read its claim", &err);
}

/* ---- admit ---------------------------------------------------------------- */

/* A wake's compare-and-swap that lost to another write: the claim now
 * there is remembered, and the wake ends with reason. */
static bool lost_to_another_write(sim_host *host, pl_wake *wake, int result, const claim *current,
                                  pl_reason reason)
{
    if (result != CLAIMS_CHANGED)
        return false;
    if (current->revision)
        remember(host, current);
    pl_wake_complete(wake, reason, "host %s: the claim changed under the wake", host->name);
    return true;
}

static void on_admitted(claim_store *s, int result, uint64_t new_revision, const claim *current,
                        const act_error *err, void *userdata)
{
    sim_host *host = userdata;
    pl_wake *wake = take_wake(host);
    wake_claims *claims = claims_of(wake);
    if (lost_to_another_write(host, wake, result, current, PL_REASON_CLAIM_CHANGED))
        return;
    if (result < 0) {
        store_refusal(host, wake, PL_REASON_STORE_ERROR, "cannot admit", err);
        return;
    }
    wrote(host, &claims->observed, &claims->admitted, new_revision);
    atomic_fetch_add(&stats(host)->admissions, 1);
    pl_wake_ok(wake);
}

static void op_admit(pl_wake *wake, void *userdata)
{
    sim_host *host = userdata;
    wake_claims *claims = claims_of(wake);
    uint64_t now = act_wallclock_usec();
    if (pl_wake_is_swap(wake))
        claim_next_swap_admission(&claims->observed, box_name(host), sim_box_incarnation(host->box),
                                  now, &claims->admitted);
    else
        claim_next_admission(&claims->observed, box_name(host), sim_box_incarnation(host->box), now,
                             &claims->admitted);
    act_error err = {0};
    host->wake = wake;
    if (claims_cas_async(store(host), host->name, claims->observed.revision, &claims->admitted,
                         on_admitted, host, &err) < 0)
        store_refusal(host, take_wake(host), PL_REASON_STORE_ERROR, "cannot admit", &err);
}

/* ---- gate: the claim read again must still be our admission ------------------- */

static void on_gate_read(claim_store *s, int result, const claim *c, const act_error *err,
                         void *userdata)
{
    sim_host *host = userdata;
    pl_wake *wake = take_wake(host);
    wake_claims *claims = claims_of(wake);
    if (result < 0) {
        store_refusal(host, wake, PL_REASON_STORE_ERROR, "cannot read its claim at the gate", err);
        return;
    }
    if (result == 0 || !claim_same_admission(&claims->admitted, c)) {
        if (result)
            remember(host, c);
        pl_wake_complete(wake, PL_REASON_CLAIM_CHANGED,
                         "host %s: the claim moved away from our admission", host->name);
        return;
    }
    remember(host, c);
    claims->admitted = *c;
    pl_wake_ok(wake);
}

static void op_gate(pl_wake *wake, void *userdata)
{
    sim_host *host = userdata;
    act_error err = {0};
    host->wake = wake;
    if (claims_read_async(store(host), host->name, on_gate_read, host, &err) < 0)
        store_refusal(host, take_wake(host), PL_REASON_STORE_ERROR,
                      "cannot read its claim at the gate", &err);
}

/* ---- the faked process: exec, ready, retire -------------------------------------- */

static int on_exec_done(sd_event_source *source, uint64_t usec, void *userdata)
{
    sim_host *host = userdata;
    host->step_timer = sd_event_source_disable_unref(host->step_timer);
    host->running++;
    sim_truth_runs(sim_box_fleet(host->box)->truth, host->global, sim_box_index(host->box));
    pl_wake_ok(take_wake(host));
    return 0;
}

static int on_step_done(sd_event_source *source, uint64_t usec, void *userdata)
{
    sim_host *host = userdata;
    host->step_timer = sd_event_source_disable_unref(host->step_timer);
    pl_wake_ok(take_wake(host));
    return 0;
}

static void after(sim_host *host, pl_wake *wake, uint64_t usec, sd_event_time_handler_t handler)
{
    host->wake = wake;
    if (sd_event_add_time_relative(sim_box_loop(host->box), &host->step_timer, CLOCK_MONOTONIC,
                                   usec, STEP_ACCURACY_USEC, handler, host) < 0)
        pl_wake_complete(take_wake(host), PL_REASON_SETUP_FAILED, "host %s: no timer", host->name);
}

static void op_exec(pl_wake *wake, void *userdata)
{
    after(userdata, wake, EXEC_USEC, on_exec_done);
}

static void op_ready(pl_wake *wake, void *userdata)
{
    after(userdata, wake, READY_USEC, on_step_done);
}

static void op_abandon(pl_wake *wake, pl_step step, void *userdata)
{
    sim_host *host = userdata;
    host->step_timer = sd_event_source_disable_unref(host->step_timer);
    host->wake = NULL;
}

static int on_retired(sd_event_source *source, uint64_t usec, void *userdata)
{
    sim_host *host = userdata;
    host->step_timer = sd_event_source_disable_unref(host->step_timer);
    pl_wake *wake = take_wake(host);
    const pl_retirement *retirement = pl_wake_retirement(wake);
    bool ran = retirement->exec_started || retirement->cause == PL_RETIRE_PARK ||
               retirement->cause == PL_RETIRE_EXITED || retirement->cause == PL_RETIRE_REPLACED;
    if (ran && host->running) {
        host->running--;
        sim_truth_stops(sim_box_fleet(host->box)->truth, host->global, sim_box_index(host->box));
    }
    pl_wake_retired(wake, true, NULL);
    return 0;
}

static void op_failed(pl_wake *wake, void *userdata)
{
    sim_host *host = userdata;
    host->wake = wake;
    if (sd_event_add_time_relative(sim_box_loop(host->box), &host->step_timer, CLOCK_MONOTONIC,
                                   RETIRE_USEC, STEP_ACCURACY_USEC, on_retired, host) < 0)
        on_retired(NULL, 0, host);
}

/* ---- publish ------------------------------------------------------------------------ */

static void on_published(claim_store *s, int result, uint64_t new_revision, const claim *current,
                         const act_error *err, void *userdata)
{
    sim_host *host = userdata;
    pl_wake *wake = take_wake(host);
    wake_claims *claims = claims_of(wake);
    if (lost_to_another_write(host, wake, result, current, PL_REASON_PUBLISH_LOST))
        return;
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_PUBLISH_LOST, "host %s: cannot publish: %s", host->name,
                         err->message);
        return;
    }
    claim before = claims->admitted;
    claim_next_published(&before, "sim", &claims->admitted);
    wrote(host, &before, &claims->admitted, new_revision);
    if (!host->published)
        host->published = malloc(sizeof(*host->published));
    if (host->published)
        *host->published = claims->admitted;
    host->probe_op[0] = '\0';
    atomic_fetch_add(&stats(host)->publications, 1);
    pl_wake_ok(wake);
}

static void op_publish(pl_wake *wake, void *userdata)
{
    sim_host *host = userdata;
    wake_claims *claims = claims_of(wake);
    claim next;
    claim_next_published(&claims->admitted, "sim", &next);
    act_error err = {0};
    host->wake = wake;
    if (claims_cas_async(store(host), host->name, claims->admitted.revision, &next, on_published,
                         host, &err) < 0)
        pl_wake_complete(take_wake(host), PL_REASON_PUBLISH_LOST, "host %s: %s", host->name,
                         err.message);
}

static const pl_ops sim_ops = {
    .read = op_read,
    .admit = op_admit,
    .gate = op_gate,
    .exec = op_exec,
    .ready = op_ready,
    .publish = op_publish,
    .failed = op_failed,
    .abandon = op_abandon,
};

/* ---- write-backs once at rest: parked, released, a move's moving --------------------- */

static void on_written_back(claim_store *s, int result, uint64_t new_revision, const claim *current,
                            const act_error *err, void *userdata);

/* A write-back in flight: the claim written travels with the call, for
 * the truth. The host outlives the call: the store is freed first. */
typedef struct write_call {
    sim_host *host;
    claim written;
} write_call;

static void write_back(sim_host *host, const claim *next)
{
    act_error err = {0};
    write_call *call = malloc(sizeof(*call));
    if (!call)
        return;
    call->host = host;
    call->written = *next;
    host->writing = true;
    if (claims_cas_async(store(host), host->name, host->seen.revision, &call->written,
                         on_written_back, call, &err) < 0) {
        host->writing = false;
        free(call);
    }
}

/* What this box owes the claim of a host at rest, if anything: the parked
 * state of the admission that served, the release of a claim that names
 * another box, or a move's drain. */
static void settle(sim_host *host)
{
    if (host->writing || !host->seen.revision ||
        pl_host_get_state(host->pipeline) != PL_HOST_PARKED)
        return;
    const char *box = box_name(host);
    claim next;
    if (host->draining) {
        const char *phase = claim_move_phase(&host->seen);
        host->draining = false;
        if (phase && strcmp(phase, "draining") == 0 && strcmp(host->seen.op.from, box) == 0) {
            claim_move_next_moving(&host->seen, NULL, act_wallclock_usec(), &next);
            write_back(host, &next);
        }
        return;
    }
    if (claim_release_due(&host->seen, box)) {
        claim_next_released(&host->seen, act_wallclock_usec(), &next);
        write_back(host, &next);
        return;
    }
    if (host->published && claim_same_admission(host->published, &host->seen) &&
        claim_names_a_generation(&host->seen)) {
        claim_next_parked(&host->seen, &next);
        free(host->published);
        host->published = NULL;
        write_back(host, &next);
    }
}

static void on_written_back(claim_store *s, int result, uint64_t new_revision, const claim *current,
                            const act_error *err, void *userdata)
{
    write_call *call = userdata;
    sim_host *host = call->host;
    if (result == 0) {
        claim before = host->seen;
        wrote(host, &before, &call->written, new_revision);
    } else if (result == CLAIMS_CHANGED && current->revision) {
        remember(host, current);
    }
    free(call);
    host->writing = false;
    settle(host);
}

/* ---- pipeline events -------------------------------------------------------------- */

static int on_idle(sd_event_source *source, uint64_t usec, void *userdata)
{
    sim_host *host = userdata;
    host->idle_timer = sd_event_source_disable_unref(host->idle_timer);
    pl_host_park(host->pipeline, PL_PARK_IDLE);
    return 0;
}

static void on_event(pl_host *pipeline, const pl_wake_event *event, void *userdata)
{
    sim_host *host = userdata;
    sim_fleet *fleet = sim_box_fleet(host->box);
    switch (event->type) {
    case PL_WAKE_EVENT_WAKING:
    case PL_WAKE_EVENT_SWAP_STARTED:
        host->waking_usec = event->at_usec;
        break;
    case PL_WAKE_EVENT_ADMITTED:
        sim_samples_add(&fleet->admission_usec[atomic_load(&fleet->phase)],
                        (double)(event->at_usec - host->waking_usec));
        break;
    case PL_WAKE_EVENT_PUBLISHED:
        sim_samples_add(&fleet->published_usec[atomic_load(&fleet->phase)],
                        (double)(event->at_usec - host->waking_usec));
        break;
    case PL_WAKE_EVENT_SERVING:
        host->idle_timer = sd_event_source_disable_unref(host->idle_timer);
        sd_event_add_time_relative(sim_box_loop(host->box), &host->idle_timer, CLOCK_MONOTONIC,
                                   fleet->config.idle_usec, 0, on_idle, host);
        break;
    case PL_WAKE_EVENT_REFUSED:
        if (event->reason != PL_REASON_STORE_ERROR && event->reason != PL_REASON_STORE_UNAVAILABLE)
            atomic_fetch_add(&stats(host)->refusals_other, 1);
        break;
    case PL_WAKE_EVENT_ENDED:
        settle(host);
        break;
    default:
        break;
    }
}

/* ---- the claim changed ----------------------------------------------------------------- */

void sim_host_claim_changed(sim_host *host, const claim_change *change)
{
    if (change->kind == CLAIM_CHANGE_MALFORMED)
        return;
    const char *box = box_name(host);
    pl_host_state state = pl_host_get_state(host->pipeline);
    if (change->kind == CLAIM_CHANGE_DELETE) {
        /* The claim names other boxes (or none): not ours. */
        host->ours = false;
        if (state == PL_HOST_WAKING)
            pl_host_cancel(host->pipeline, PL_REASON_NOT_OWNER, "host %s: not ours", host->name);
        else if (state == PL_HOST_SERVING)
            pl_host_park(host->pipeline, PL_PARK_CLAIM_LOST);
        return;
    }
    bool was_ours = host->ours;
    remember(host, &change->claim);
    const claim *c = &host->seen;
    const char *phase = claim_move_phase(c);
    if (phase && strcmp(phase, "draining") == 0 && strcmp(c->op.from, box) == 0) {
        /* This box is a move's source: retire, then write moving. */
        host->draining = true;
        if (state != PL_HOST_PARKED) {
            pl_host_cancel(host->pipeline, PL_REASON_CANCELLED, "host %s: moving", host->name);
            pl_host_park(host->pipeline, PL_PARK_REQUEST);
        }
        settle(host);
        return;
    }
    if (phase && strcmp(phase, "moving") == 0 && strcmp(c->op.to, box) == 0) {
        /* This box is a move's target: its probe wake. */
        snprintf(host->probe_op, sizeof(host->probe_op), "%s", c->op.id);
        if (state == PL_HOST_PARKED)
            pl_host_wake(host->pipeline, PL_TRIGGER_CLAIM_CHANGE, NULL, NULL);
        return;
    }
    if (!host->ours) {
        if (state == PL_HOST_WAKING)
            pl_host_cancel(host->pipeline, PL_REASON_NOT_OWNER, "host %s: not ours", host->name);
        else if (state == PL_HOST_SERVING)
            pl_host_park(host->pipeline, PL_PARK_CLAIM_LOST);
        settle(host);
        return;
    }
    bool handed_over =
        c->holder.box[0] && strcmp(c->holder.box, box) != 0 && c->holder.released_usec;
    if ((!was_ours || handed_over) && state == PL_HOST_PARKED &&
        claim_phase_allows_wake(c, box, false, NULL) == 0)
        pl_host_wake(host->pipeline, PL_TRIGGER_CLAIM_CHANGE, NULL, NULL);
}

void sim_host_baseline(sim_host *host, const claim *c)
{
    remember(host, c);
}

/* ---- the workload ------------------------------------------------------------------- */

bool sim_host_connect(sim_host *host)
{
    if (!host->ours || host->writing || pl_host_get_state(host->pipeline) != PL_HOST_PARKED ||
        claim_phase_allows_wake(&host->seen, box_name(host), false, NULL) < 0)
        return false;
    return pl_host_wake(host->pipeline, PL_TRIGGER_CONNECTION, NULL, NULL) >= 0;
}

bool sim_host_swap(sim_host *host)
{
    return host->ours && pl_host_get_state(host->pipeline) == PL_HOST_SERVING &&
           pl_host_swap(host->pipeline, NULL, NULL) == PL_WAKE_STARTED;
}

/* The operator's part of a move (activatorctl move): the claim to
 * move/draining, at the revision this box last saw. */
bool sim_host_move(sim_host *host, const char *to)
{
    if (!host->ours || host->writing || pl_host_get_state(host->pipeline) != PL_HOST_PARKED ||
        claim_move_phase(&host->seen))
        return false;
    char op_id[48];
    snprintf(op_id, sizeof(op_id), "move-%s-%llu", host->name,
             (unsigned long long)host->seen.revision);
    claim next;
    act_error err = {0};
    if (claim_move_start(host->name, &host->seen, to, op_id, false, act_wallclock_usec(), &next,
                         &err) != 0)
        return false;
    write_back(host, &next);
    return host->writing;
}

/* ---- life ---------------------------------------------------------------------------- */

int sim_host_new(sim_box *box, unsigned global, sim_host **out, act_error *err)
{
    sim_host *host = calloc(1, sizeof(*host));
    if (!host)
        return act_error_set(err, ENOMEM, "out of memory");
    host->box = box;
    host->global = global;
    snprintf(host->name, sizeof(host->name), "h%06u", global);
    pl_config config;
    pl_config_init(&config);
    config.max_starts = 1;
    int r = pl_host_new(sim_box_loop(box), host->name, &config, &sim_ops, host, on_event, host,
                        &host->pipeline, err);
    if (r < 0) {
        free(host);
        return r;
    }
    *out = host;
    return 0;
}

void sim_host_free(sim_host *host)
{
    if (!host)
        return;
    sd_event_source_disable_unref(host->step_timer);
    sd_event_source_disable_unref(host->idle_timer);
    pl_host_free(host->pipeline);
    free(host->published);
    free(host);
}

const char *sim_host_name(const sim_host *host)
{
    return host->name;
}
