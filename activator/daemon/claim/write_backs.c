/* What the claim says about a host we hold: the write-backs that follow an
 * admission (see claim/write_backs.h).
 *
 * Each write is a compare-and-swap against the revision our admission (or our
 * last write) left, so the common case is one round trip. When the claim
 * changed meanwhile, the store answers with the claim that is there now: if
 * it still describes our admission (someone changed a pin or a hold), the
 * write is made again on top of it; if not, another writer owns the claim's
 * truth now and the write-back is left out without a word beyond the log.
 *
 * A write the store did not answer (unreachable, or too slow) is tried again
 * with a backoff until it lands or becomes moot, so that a park during an
 * outage does not leave the claim naming a generation that no longer runs.
 * Each try reads the claim first: the write that timed out may have landed,
 * and another writer may have moved the claim on. A wake that begins makes
 * the retry moot (its admission writes the claim), and one that waits for
 * the write has it tried at once.
 *
 * A clean stop parks every host, and its parked write-backs are made like any
 * other: box/daemon.c waits for them within the stop's deadline, so the claims of
 * a stopped box say parked rather than serving. */
#include "activator/daemon/claim/write_backs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

/* Unrelated writes that land between ours and the store (a pin, a hold, an
 * operator's note) are written over this many times before we give up. */
#define CONFLICT_RETRIES 3

/* The store's failures are tried again after 100 ms doubling to 5 s, as the
 * claim watch heals: an outage costs a try every few seconds per host. */
#define RETRY_FIRST_USEC (100 * 1000ull)
#define RETRY_MAX_USEC (5 * 1000 * 1000ull)

typedef enum report_kind {
    REPORT_NONE = 0,
    REPORT_PARKED,
    REPORT_FAILED,
    REPORT_SERVING,
    REPORT_FROZEN,
} report_kind;

typedef struct report {
    report_kind kind;
    claim_failure failure; /* REPORT_FAILED */
    claim_pin pin_failure; /* REPORT_FAILED: the pin's failure in the wake; empty reason: none */
    uint64_t generation;   /* REPORT_SERVING */
} report;

typedef struct waiter {
    struct waiter *next;
    void (*fn)(void *userdata);
    void *userdata;
} waiter;

struct ad_claim_report {
    ad_host *host;
    /* Our admission as the store holds it; revision 0 when there is none to
     * write for. */
    claim ours;
    /* Bumped whenever ours is replaced, so a write that was started for an
     * earlier admission does not bring it back when it ends. */
    uint64_t epoch;
    report reported; /* waits for settle, or for the write in flight to end */
    bool due;        /* reported was settled: written once nothing is in flight */
    bool writing;
    report writing_report;
    uint64_t writing_epoch;
    claim written; /* what the write in flight writes */
    unsigned conflicts;
    /* The write the store failed, waiting for its next try (writing stays
     * set meanwhile); backoff_usec is 0 while nothing failed. */
    sd_event_source *retry_timer;
    uint64_t backoff_usec;
    waiter *waiters;
};

static ad_claim_report *report_of(const ad_host *host)
{
    return host->claim_report;
}

static const char *phase_of(report_kind kind)
{
    switch (kind) {
    case REPORT_PARKED:
        return "parked";
    case REPORT_FAILED:
        return "failed";
    case REPORT_SERVING:
        return "serving";
    case REPORT_FROZEN:
        return "frozen";
    case REPORT_NONE:
        break;
    }
    return "";
}

/* Kept while it has something to write or to wait for, or while our
 * admission may still be written (the host starts or serves under it). */
static void free_when_unused(ad_claim_report *r)
{
    bool active = r->ours.revision && (strcmp(r->ours.op.phase, "starting") == 0 ||
                                       strcmp(r->ours.op.phase, "serving") == 0 ||
                                       strcmp(r->ours.op.phase, "frozen") == 0);
    if (r->writing || r->reported.kind != REPORT_NONE || r->waiters || active)
        return;
    r->host->claim_report = NULL;
    free(r);
}

/* Nothing is in flight or reported any more: whoever waited goes on, and a
 * clean stop may see the host at rest. */
static void became_idle(ad_claim_report *r)
{
    waiter *waiters = TAKE_PTR(r->waiters);
    while (waiters) {
        waiter *next = waiters->next;
        waiters->fn(waiters->userdata);
        free(waiters);
        waiters = next;
    }
    ad_daemon *daemon = r->host->daemon;
    ad_host *host = r->host;
    free_when_unused(r);
    const ad_box_observers *observers = daemon->observers;
    if (observers && observers->claim_reports_ended)
        observers->claim_reports_ended(daemon, host);
}

/* The claim report would make of current; false when it already says so. */
static bool next_claim(const ad_claim_report *r, const report *rep, const claim *current,
                       claim *next)
{
    char handle[sizeof(next->holder.handle)];
    switch (rep->kind) {
    case REPORT_PARKED:
        claim_next_parked(current, next);
        break;
    case REPORT_FAILED:
        claim_next_failed(current, &rep->failure, next);
        claim_record_pin_failure(next, &rep->pin_failure, r->host->daemon->config.box,
                                 rep->failure.stamp_usec);
        break;
    case REPORT_SERVING:
        ad_host_format_handle(r->host, rep->generation, handle, sizeof(handle));
        claim_next_serving_again(current, rep->generation, handle, next);
        break;
    case REPORT_FROZEN:
        claim_next_frozen(current, next);
        break;
    case REPORT_NONE:
        return false;
    }
    return strcmp(next->op.phase, current->op.phase) != 0 ||
           strcmp(next->holder.handle, current->holder.handle) != 0 ||
           next->holder.generation != current->holder.generation ||
           next->holder.starting_generation != current->holder.starting_generation ||
           next->has_failure != current->has_failure ||
           strcmp(next->pin.failure_reason, current->pin.failure_reason) != 0;
}

static void on_written(claim_store *store, int result, uint64_t new_revision, const claim *current,
                       const act_error *err, void *userdata);

/* Writes r->writing_report over r->ours by compare-and-swap. Returns true
 * when a write was started. */
static bool write_over_ours(ad_claim_report *r)
{
    /* A probe's phases are its orchestrator's to write. */
    if (!r->ours.revision || r->ours.op.kind != CLAIM_OP_SERVING ||
        !next_claim(r, &r->writing_report, &r->ours, &r->written))
        return false;
    act_error err = {0};
    if (claims_cas_async(r->host->daemon->store, r->host->name, r->ours.revision, &r->written,
                         on_written, r, &err) < 0) {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = r->host->name},
                       "host %s: cannot write phase %s to its claim: %s", r->host->name,
                       phase_of(r->writing_report.kind), err.message);
        return false;
    }
    return true;
}

/* Starts the write of the settled report, or goes idle. */
static void write_due(ad_claim_report *r)
{
    while (r->due && !r->writing) {
        r->due = false;
        r->writing_report = r->reported;
        r->reported = (report){0};
        r->writing_epoch = r->epoch;
        r->conflicts = 0;
        r->writing = write_over_ours(r);
    }
    if (!r->writing && r->reported.kind == REPORT_NONE)
        became_idle(r);
}

/* The write in flight (or waiting for its retry) is over, whatever it did. */
static void write_ended(ad_claim_report *r)
{
    r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
    r->backoff_usec = 0;
    r->writing = false;
    write_due(r);
}

static void retry_now(ad_claim_report *r);

static int on_retry_due(sd_event_source *source, uint64_t usec, void *userdata)
{
    retry_now(userdata);
    return 0;
}

/* Tries the write the store failed again after the next delay. */
static void retry_later(ad_claim_report *r, const act_error *err)
{
    const char *phase = phase_of(r->writing_report.kind);
    bool first = r->backoff_usec == 0;
    r->backoff_usec = first ? RETRY_FIRST_USEC : r->backoff_usec * 2;
    if (r->backoff_usec > RETRY_MAX_USEC)
        r->backoff_usec = RETRY_MAX_USEC;
    /* Once at the first failure, not at every try: an outage is long. */
    act_log_fields(first ? LOG_WARNING : LOG_DEBUG, &(act_log_ctx){.host = r->host->name},
                   "host %s: cannot write phase %s to its claim: %s; trying again in %" PRIu64
                   " ms, until the store answers",
                   r->host->name, phase, err ? err->message : "unknown error",
                   r->backoff_usec / 1000);
    r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
    if (sd_event_add_time_relative(r->host->daemon->loop, &r->retry_timer, CLOCK_MONOTONIC,
                                   r->backoff_usec, 0, on_retry_due, r) < 0) {
        act_log_fields(LOG_ERR, &(act_log_ctx){.host = r->host->name},
                       "host %s: cannot arm the retry of its claim's phase %s; the claim says "
                       "so only after its next wake",
                       r->host->name, phase);
        write_ended(r);
    }
}

/* The claim as the store holds it now, for the write the store failed: it
 * may have landed after all, it may be moot, or it is made again. */
static void on_read_for_retry(claim_store *store, int result, const claim *current,
                              const act_error *err, void *userdata)
{
    ad_claim_report *r = userdata;
    const char *phase = phase_of(r->writing_report.kind);
    if (r->epoch != r->writing_epoch) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                       "host %s: a wake began since phase %s failed to be written; its "
                       "admission writes the claim",
                       r->host->name, phase);
        write_ended(r);
        return;
    }
    if (result < 0) {
        retry_later(r, err);
        return;
    }
    if (result == 0 || !current->revision) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                       "host %s: its claim is gone; phase %s is not written", r->host->name, phase);
        write_ended(r);
        return;
    }
    if (claim_same_admission(&r->written, current)) {
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = r->host->name},
                       "host %s: the claim says %s (revision %" PRIu64 "): the write the "
                       "store did not answer had landed",
                       r->host->name, phase, current->revision);
        r->ours = *current;
        write_ended(r);
        return;
    }
    if (!claim_same_admission(&r->ours, current)) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                       "host %s: the claim moved past our admission while the store did not "
                       "answer (now revision %" PRIu64 ", executor %s); phase %s is not "
                       "written over it",
                       r->host->name, current->revision, claim_executor(current), phase);
        write_ended(r);
        return;
    }
    r->ours = *current;
    if (write_over_ours(r)) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                       "host %s: the store answers again; writing phase %s to its claim",
                       r->host->name, phase);
        return;
    }
    write_ended(r);
}

static void retry_now(ad_claim_report *r)
{
    r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
    act_error err = {0};
    if (claims_read_async(r->host->daemon->store, r->host->name, on_read_for_retry, r, &err) < 0)
        retry_later(r, &err);
}

static void on_written(claim_store *store, int result, uint64_t new_revision, const claim *current,
                       const act_error *err, void *userdata)
{
    ad_claim_report *r = userdata;
    const char *phase = phase_of(r->writing_report.kind);
    bool ours_still = r->epoch == r->writing_epoch;
    if (result == 0) {
        act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = r->host->name},
                       "host %s: the claim says %s (revision %" PRIu64 ")", r->host->name, phase,
                       new_revision);
        ad_host_claim_seen(r->host, &r->written, new_revision);
        if (ours_still) {
            r->ours = r->written;
            r->ours.revision = new_revision;
        }
    } else if (result == CLAIMS_CHANGED) {
        if (ours_still && current->revision && claim_same_admission(&r->ours, current) &&
            r->conflicts++ < CONFLICT_RETRIES) {
            r->ours = *current;
            if (write_over_ours(r))
                return;
        } else {
            act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                           "host %s: the claim moved past our admission (now revision %" PRIu64
                           ", executor %s, session %" PRIu64 "); phase %s is not written over it",
                           r->host->name, current->revision,
                           current->revision ? claim_executor(current) : "none",
                           current->holder.session, phase);
        }
    } else if (ours_still) {
        retry_later(r, err);
        return;
    } else {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                       "host %s: cannot write phase %s to its claim (%s), and a wake began "
                       "since; its admission writes the claim",
                       r->host->name, phase, err->message);
    }
    write_ended(r);
}

/* ---- what hosts/transitions.c and hosts/recovery.c tell ------------------------------ */

void ad_claim_report_admitted(ad_host *host, const claim *ours)
{
    ad_claim_report *r = report_of(host);
    if (!r) {
        r = calloc(1, sizeof(*r));
        if (!r) {
            act_log(LOG_ERR, "host %s: out of memory; its claim will not be written back",
                    host->name);
            return;
        }
        r->host = host;
        host->claim_report = r;
    }
    r->ours = *ours;
    r->epoch++;
    host->claim_failover = ours->has_failover;
}

void ad_claim_report_wake_began(ad_host *host)
{
    ad_claim_report *r = report_of(host);
    if (!r)
        return;
    r->ours = (claim){0};
    r->epoch++;
    /* A write waiting for its retry is moot: the wake's admission writes
     * the claim, and it must not wait for a store that may be gone. */
    if (r->retry_timer) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                       "host %s: a wake began; phase %s is not written, its admission writes "
                       "the claim",
                       r->host->name, phase_of(r->writing_report.kind));
        write_ended(r);
        return;
    }
    free_when_unused(r);
}

/* The report of host, when there is an admission to write it for. */
static report *report_slot(ad_host *host)
{
    ad_claim_report *r = report_of(host);
    return r && r->ours.revision ? &r->reported : NULL;
}

void ad_claim_report_parked(ad_host *host)
{
    report *slot = report_slot(host);
    if (slot)
        *slot = (report){.kind = REPORT_PARKED};
}

void ad_claim_report_failed(ad_host *host, pl_reason reason, const char *message, unsigned attempts)
{
    report *slot = report_slot(host);
    if (!slot)
        return;
    *slot = (report){.kind = REPORT_FAILED};
    claim_failure *failure = &slot->failure;
    snprintf(failure->reason, sizeof(failure->reason), "%s", pl_reason_to_string(reason));
    if (message)
        act_copy_string(failure->message, sizeof(failure->message), message);
    else
        snprintf(failure->message, sizeof(failure->message),
                 "host %s: generation %" PRIu64 " failed after it served (%s)", host->name,
                 claim_admitted_generation(&report_of(host)->ours), failure->reason);
    /* The claim's message is one line whatever the failure's text held. */
    for (char *c = failure->message; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    failure->attempts =
        attempts > CLAIM_FAILURE_ATTEMPTS_MAX ? CLAIM_FAILURE_ATTEMPTS_MAX : attempts;
    failure->stamp_usec = act_wallclock_usec();
}

void ad_claim_report_pin_failure(ad_host *host, const claim_pin *failed)
{
    report *slot = report_slot(host);
    if (slot && slot->kind == REPORT_FAILED && failed)
        slot->pin_failure = *failed;
}

void ad_claim_report_serving(ad_host *host, uint64_t generation)
{
    report *slot = report_slot(host);
    if (slot)
        *slot = (report){.kind = REPORT_SERVING, .generation = generation};
}

void ad_claim_report_frozen(ad_host *host)
{
    report *slot = report_slot(host);
    if (slot)
        *slot = (report){.kind = REPORT_FROZEN};
}

void ad_claim_report_settle(ad_host *host)
{
    ad_claim_report *r = report_of(host);
    if (!r || r->reported.kind == REPORT_NONE)
        return;
    r->due = true;
    write_due(r);
}

bool ad_claim_report_serving_due(const ad_host *host)
{
    const ad_claim_report *r = report_of(host);
    return r && r->reported.kind == REPORT_SERVING;
}

bool ad_claim_report_busy(const ad_host *host)
{
    const ad_claim_report *r = report_of(host);
    return r && (r->writing || r->reported.kind != REPORT_NONE);
}

bool ad_claim_report_defer(ad_host *host, void (*fn)(void *userdata), void *userdata)
{
    ad_claim_report *r = report_of(host);
    if (!ad_claim_report_busy(host))
        return false;
    waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return false; /* goes on at once: at worst its CAS meets ours and is refused */
    *w = (waiter){.fn = fn, .userdata = userdata};
    waiter **tail = &r->waiters;
    while (*tail)
        tail = &(*tail)->next;
    *tail = w;
    /* The one waiting needs the store too: no reason to wait out the delay. */
    if (r->retry_timer)
        retry_now(r);
    return true;
}

void ad_claim_report_store_answers(ad_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        ad_claim_report *r = report_of(daemon->hosts[i]);
        if (!r || !r->retry_timer)
            continue;
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = r->host->name},
                       "host %s: the claim store answers again; trying the write of phase %s "
                       "now rather than in %" PRIu64 " ms",
                       r->host->name, phase_of(r->writing_report.kind), r->backoff_usec / 1000);
        retry_now(r);
    }
}

void ad_claim_report_free(ad_host *host)
{
    ad_claim_report *r = report_of(host);
    if (!r)
        return;
    while (r->waiters) {
        waiter *next = r->waiters->next;
        free(r->waiters);
        r->waiters = next;
    }
    sd_event_source_disable_unref(r->retry_timer);
    host->claim_report = NULL;
    free(r);
}
