/* Zero-downtime build swaps: `activatorctl swap HOST VERSION`.
 *
 * The version is verified before anything starts, then pinned on the claim
 * (so every later start of the host, here or on another box, runs exactly
 * it), then generation N+1 starts beside N on the same listening sockets
 * (the pipeline's swap mode). N is retired only once N+1 is ready, published
 * and healthy, so no connection is refused at any point. A swap that fails
 * leaves N serving and records the pin failure on the claim, for operators
 * and for every box to see. stop-first retires N before starting N+1, for
 * apps that cannot run twice.
 *
 * A swap of a parked host is a wake of the pinned build, so the build is
 * proven (or its failure recorded on the pin) before a client depends on
 * it. A swap that arrives while a wake of the host is in flight is ordered
 * after that wake's admission rather than refused: the pin is written only
 * while no wake of the host has sent its admission (a pin landing after it
 * would fence that start at its gate and drop the clients waiting for it;
 * one landing before it is admitted over, wake/admit.c), and the swap then
 * joins the wake in flight, which runs the pin, or swaps the generation it
 * made serve.
 *
 * The claim's phase and generation are not written here: the swap's
 * admission keeps naming N until N+1 is published, and a swap that fails
 * names N again (claim/write_backs.c). The pin and its failure are, after that
 * write-back has landed, so the two never meet in the store. */
#include "activator/daemon/builds/swap.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/builds/identify.h"
#include "activator/daemon/generations/announce.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/host/step_holds.h"
#include "activator/daemon/wake/ops.h"
#include "activator/daemon/fetch/image_stage.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

struct ad_swap {
    ad_host *host;
    ad_swap_told_fn told; /* NULL: nobody asked (an interrupted swap recorded) */
    void *told_userdata;
    ctrl_swap_mode mode;
    bool request_no_wait;     /* answer once the swap has started */
    bool waits_for_park;      /* stop-first: N is being retired first */
    bool waits_to_pin;        /* a wake in flight has sent its admission; pin once it ends */
    unsigned pin_conflicts;   /* writes of the pin that met another write */
    /* The swap is a plain wake of the pin (a parked host, stop-first): that
     * wake writes the pin's failure with its own claim write. */
    bool pinned_wake;
    /* The pin's failure in the wake (ad_swap_note_pin_failure): why the swap
     * failed when its fallback serves instead. */
    char pin_failure_reason[32];
    char pin_failure_message[256];
    rel_pin pin;
    /* Where another box fetches the pinned build: its registry source by
     * digest ("" for a build staged from a directory). */
    char source[CLAIM_SOURCE_SIZE];
    /* The build that served when the swap began: what a cold wake runs
     * instead of the pin should the swap fail. Empty when none did. */
    rec_build_ref fallback;
    /* ... and where a box without it fetches it: its registry source by
     * digest, when known ("" for a build from no registry, or unknown). */
    char fallback_source[CLAIM_SOURCE_SIZE];
    char reason[32];
    char message[1200];
    unsigned failure_conflicts; /* writes of the failure that met another write */
};

/* Writes that land between our read of the claim and our write of the
 * failure, or of the pin, are read over this many times. */
#define FAILURE_CONFLICTS_MAX 3
#define PIN_CONFLICTS_MAX 3

static void tell(ad_swap *swap, const ad_swap_news *news)
{
    if (swap->told)
        swap->told(swap->host, news, swap->told_userdata);
}

/* The swap ended, and whoever asked is told last. code NULL: it serves the
 * pinned build, made current by this swap when made_current. */
static void end(ad_swap *swap, const char *code, const char *message, bool made_current)
{
    ad_host *host = swap->host;
    ad_swap_news news = {.ended = true,
                         .code = code,
                         .message = message,
                         .version = swap->pin.version,
                         .made_current = made_current};
    /* Over before anyone hears of it: a gc that follows keeps nothing for it. */
    host->swap = NULL;
    tell(swap, &news);
    free(swap);
}

static void fail(ad_swap *swap, const char *code, const char *message)
{
    end(swap, code, message, false);
}

/* ---- recording a failed swap on the claim -------------------------------- */

static void on_claim_for_failure(claim_store *store, int result, const claim *c,
                                 const act_error *err, void *userdata);

static void on_failure_recorded(claim_store *store, int result, uint64_t new_revision,
                                const claim *current, const act_error *err, void *userdata)
{
    ad_swap *swap = userdata;
    if (result == CLAIMS_CHANGED && swap->failure_conflicts++ < FAILURE_CONFLICTS_MAX) {
        on_claim_for_failure(store, current->revision ? 1 : 0, current, NULL, swap);
        return;
    }
    if (result < 0)
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = swap->host->name},
                       "host %s: cannot record the failed swap to %s on the claim: %s",
                       swap->host->name, swap->pin.version,
                       result == CLAIMS_CHANGED ? "the claim changed" : err->message);
    fail(swap, swap->reason, swap->message);
}

/* The claim keeps the pin with its failure next to it. */
static void on_claim_for_failure(claim_store *store, int result, const claim *c,
                                 const act_error *err, void *userdata)
{
    ad_swap *swap = userdata;
    ad_host *host = swap->host;
    claim next;
    claim_pin failed = {0};
    snprintf(failed.version, sizeof(failed.version), "%s", swap->pin.version);
    snprintf(failed.digest, sizeof(failed.digest), "%s", swap->pin.digest);
    snprintf(failed.failure_reason, sizeof(failed.failure_reason), "%s", swap->reason);
    act_copy_string(failed.failure_message, sizeof(failed.failure_message), swap->message);
    if (result > 0)
        next = *c;
    /* Gone, pinned to something else since, or failed already: not ours to
     * annotate. */
    if (result <= 0 ||
        !claim_record_pin_failure(&next, &failed, host->daemon->config.box, act_wallclock_usec())) {
        fail(swap, swap->reason, swap->message);
        return;
    }
    /* The fallback the pin names already keeps its source; another one
     * (a daemon that knew no fallback when it pinned) takes the swap's. */
    if (swap->fallback.version[0] &&
        (strcmp(next.pin.fallback_version, swap->fallback.version) != 0 ||
         strcmp(next.pin.fallback_digest, swap->fallback.build_digest) != 0)) {
        snprintf(next.pin.fallback_version, sizeof(next.pin.fallback_version), "%s",
                 swap->fallback.version);
        snprintf(next.pin.fallback_digest, sizeof(next.pin.fallback_digest), "%s",
                 swap->fallback.build_digest);
        snprintf(next.pin.fallback_source, sizeof(next.pin.fallback_source), "%s",
                 swap->fallback_source);
    }
    act_error call_err = {0};
    if (claims_cas_async(store, host->name, c->revision, &next, on_failure_recorded, swap,
                         &call_err) < 0) {
        fail(swap, swap->reason, swap->message);
    }
}

static void read_for_failure(void *userdata)
{
    ad_swap *swap = userdata;
    act_error err = {0};
    if (claims_read_async(swap->host->daemon->store, swap->host->name, on_claim_for_failure, swap,
                          &err) < 0) {
        fail(swap, swap->reason, swap->message);
    }
}

static void swap_failed(ad_swap *swap, const char *reason, const char *message)
{
    ad_host *host = swap->host;
    snprintf(swap->reason, sizeof(swap->reason), "%s", reason);
    snprintf(swap->message, sizeof(swap->message), "%s", message);
    act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name, .reason = reason},
                   "host %s: swap to %s failed: %s", host->name, swap->pin.version, message);
    if (!ad_claim_report_defer(host, read_for_failure, swap))
        read_for_failure(swap);
}

/* ---- the outcome ----------------------------------------------------------- */

static bool serves_the_pin(const ad_swap *swap)
{
    const ad_generation *serving = swap->host->serving;
    return serving && strcmp(serving->build.version, swap->pin.version) == 0 &&
           strcmp(serving->build.build_digest, swap->pin.digest) == 0;
}

static void answer_failure(void *userdata)
{
    ad_swap *swap = userdata;
    fail(swap, swap->reason, swap->message);
}

static void on_swap_done(pl_host *pipeline, const pl_wake_result *result, void *userdata)
{
    ad_swap *swap = userdata;
    ad_host *host = swap->host;
    if (result->kind == PL_WAKE_SERVING && serves_the_pin(swap)) {
        const ad_generation *serving = host->serving;
        act_log_fields(LOG_INFO,
                       &(act_log_ctx){.host = host->name,
                                      .generation = serving ? serving->number : 0,
                                      .build = swap->pin.version},
                       "host %s: swapped to %s", host->name, swap->pin.version);
        if (swap->mode == CTRL_SWAP_STOP_FIRST)
            ad_publish(host, EV_EVENT_SWAP_DONE, serving, NULL);
        end(swap, NULL, NULL, true);
        return;
    }
    char message[sizeof(swap->message)];
    const char *reason;
    const char *serves = host->serving ? host->serving->build.version : "another build";
    if (result->kind == PL_WAKE_SERVING && swap->pin_failure_reason[0]) {
        /* The pinned wake's pin failed and its fallback serves: the
         * publication recorded the failure on the pin. */
        reason = swap->pin_failure_reason;
        snprintf(message, sizeof(message), "host %s: %s failed (%s); %s serves instead", host->name,
                 swap->pin.version, swap->pin_failure_message, serves);
    } else if (result->kind == PL_WAKE_SERVING) {
        /* A wake admitted before the pin made another build serve. */
        reason = "claim_changed";
        snprintf(message, sizeof(message),
                 "host %s: %s serves, started by a wake admitted before the pin to %s; swap again",
                 host->name, serves, swap->pin.version);
    } else {
        reason = result->reason != PL_REASON_NONE ? pl_reason_to_string(result->reason)
                                                  : pl_wake_kind_to_string(result->kind);
        snprintf(message, sizeof(message), "%s",
                 result->message ? result->message : "the swap did not serve");
    }
    if (swap->mode == CTRL_SWAP_STOP_FIRST)
        ad_publish(host, EV_EVENT_SWAP_FAILED, NULL, reason);
    /* Only the build's own failure is recorded on the pin, for every box to
     * see; a cancel, a refusal, a budget or a fence says nothing of the
     * build, and the pin stays for the next start. A pinned wake wrote its
     * failure with its own claim write. */
    if (!swap->pinned_wake && pl_reason_blames_build(result->reason)) {
        swap_failed(swap, reason, message);
        return;
    }
    act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name, .reason = reason},
                   "host %s: swap to %s failed: %s", host->name, swap->pin.version, message);
    snprintf(swap->reason, sizeof(swap->reason), "%s", reason);
    snprintf(swap->message, sizeof(swap->message), "%s", message);
    /* The operator hears of it once the claim says what the wake wrote (the
     * pin's failure among it), as for a failure the swap records itself. */
    if (!ad_claim_report_defer(host, answer_failure, swap))
        answer_failure(swap);
}

void ad_swap_note_pin_failure(ad_host *host, const claim_pin *failed)
{
    ad_swap *swap = host->swap;
    if (!swap || !failed || strcmp(failed->version, swap->pin.version) != 0)
        return;
    snprintf(swap->pin_failure_reason, sizeof(swap->pin_failure_reason), "%s",
             failed->failure_reason);
    snprintf(swap->pin_failure_message, sizeof(swap->pin_failure_message), "%s",
             failed->failure_message);
}

/* stop-first, and a swap of a parked host: a plain wake of the pinned build. */
static void start_pinned_wake(ad_swap *swap)
{
    pl_host *pipeline = swap->host->pipeline;
    swap->pinned_wake = true;
    int r = pl_host_wake(pipeline, PL_TRIGGER_WARM, on_swap_done, swap);
    if (r == PL_WAKE_ALREADY_SERVING) {
        /* Something else woke it first, with the pin already on the claim. */
        pl_wake_result served = {.kind = PL_WAKE_SERVING};
        on_swap_done(pipeline, &served, swap);
    } else if (r < 0) {
        swap_failed(swap, "internal", "cannot start the pinned wake");
    }
}

static void pin_when_no_admission(ad_swap *swap);
static void note_fallback(ad_swap *swap, const char *version);

/* The box may begin to stop, or the host leave the configuration, while a
 * swap waits; true (and the swap answered) when it did. */
static bool ended_while_waiting(ad_swap *swap, const char *what)
{
    char message[256];
    if (swap->host->daemon->stopping) {
        snprintf(message, sizeof(message), "the box is stopping; the swap did not %s", what);
        fail(swap, "stopping", message);
        return true;
    }
    if (swap->host->removed) {
        snprintf(message, sizeof(message),
                 "the host was removed from the configuration; the swap did not %s", what);
        fail(swap, "unknown_host", message);
        return true;
    }
    return false;
}

void ad_swap_host_settled(ad_host *host)
{
    assert(host);
    ad_swap *swap = host->swap;
    if (!swap)
        return;
    if (swap->waits_to_pin) {
        /* The wake that ended may have been followed by another that has
         * not admitted yet: that one admits itself on the pin. */
        if (ad_wake_ops_admission_sent(host))
            return;
        swap->waits_to_pin = false;
        if (!ended_while_waiting(swap, "pin its version"))
            pin_when_no_admission(swap);
        return;
    }
    pl_host_state state = pl_host_get_state(host->pipeline);
    /* A trigger that came during N's retirement wakes the host at once,
     * after the pin was written: that wake runs the pin, and is joined. */
    if (swap->mode == CTRL_SWAP_STOP_FIRST && swap->waits_for_park &&
        (state == PL_HOST_PARKED || state == PL_HOST_WAKING)) {
        swap->waits_for_park = false;
        if (!ended_while_waiting(swap, "start N+1"))
            start_pinned_wake(swap);
    }
}

static void start_generation(ad_swap *swap)
{
    ad_host *host = swap->host;
    pl_host *pipeline = host->pipeline;
    pl_host_state state = pl_host_get_state(pipeline);
    if (state != PL_HOST_SERVING) {
        /* Parked, or a wake or a park in flight: every admission from the
         * pin on runs the pin, so the swap is a wake of it, joined when one
         * is in flight (or following the park). */
        if (swap->mode == CTRL_SWAP_STOP_FIRST)
            ad_publish(host, EV_EVENT_SWAP_STARTED, NULL, NULL);
        start_pinned_wake(swap);
        return;
    }
    if (serves_the_pin(swap)) {
        /* A wake that admitted itself on the pin made it serve already. */
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name, .build = swap->pin.version},
                       "host %s: serves %s already; nothing to swap", host->name,
                       swap->pin.version);
        end(swap, NULL, NULL, false);
        return;
    }
    if (swap->mode == CTRL_SWAP_STOP_FIRST) {
        ad_publish(host, EV_EVENT_SWAP_STARTED, host->serving, NULL);
        swap->waits_for_park = true;
        pl_host_park(pipeline, PL_PARK_REQUEST);
        return;
    }
    /* N serves until N+1 does: a frozen N runs again first (a stop-first
     * swap parks it above, and its retirement thaws it). */
    if (ad_freeze_active(host, NULL)) {
        act_error err = {0};
        if (ad_freeze_thaw(host, "swap", &err) < 0) {
            swap_failed(swap, "internal", err.message);
            return;
        }
    }
    int r = pl_host_swap(pipeline, on_swap_done, swap);
    if (r == -ESRCH) { /* parked meanwhile: the pinned wake does it */
        start_pinned_wake(swap);
        return;
    }
    if (r < 0)
        swap_failed(swap, r == -EBUSY ? "busy" : "internal",
                    r == -EBUSY ? "the host is busy (a swap or a retirement is in flight); "
                                  "swap it again once it serves or is parked"
                                : "cannot start the swap");
}

/* ---- pinning ----------------------------------------------------------------- */

static void on_pinned(claim_store *store, int result, uint64_t new_revision,
                      const claim *current, const act_error *err, void *userdata)
{
    ad_swap *swap = userdata;
    if (result == CLAIMS_CHANGED) {
        /* A wake's admission, say: it is waited for, and the pin read over. */
        if (swap->pin_conflicts++ < PIN_CONFLICTS_MAX) {
            pin_when_no_admission(swap);
            return;
        }
        char message[512];
        snprintf(message, sizeof(message),
                 "host %s: the claim changed %u times while the pin to %s was written (other "
                 "writers: wakes, moves, operators); nothing was started; retry the swap",
                 swap->host->name, swap->pin_conflicts, swap->pin.version);
        fail(swap, "claim_changed", message);
        return;
    }
    if (result < 0) {
        fail(swap, "store_error", err->message);
        return;
    }
    start_generation(swap);
}

/* Nothing of the host served here since this daemon started: the pin the
 * swap replaces served if it did not fail (its swap succeeded), and a
 * failed one's fallback did. A swap to the very version pinned already (a
 * retry, by a daemon that did not see the pin's first swap end) keeps that
 * pin's fallback. Anything else is unknown, and a failed swap then leaves
 * no fallback (pin_failed). */
static void fallback_from_claim(ad_swap *swap, const claim *c)
{
    if (swap->fallback.version[0] || !c->has_pin)
        return;
    bool use_fallback = claim_pin_failed(c) || strcmp(c->pin.version, swap->pin.version) == 0;
    const char *version = use_fallback ? c->pin.fallback_version : c->pin.version;
    const char *digest = use_fallback ? c->pin.fallback_digest : c->pin.digest;
    const char *source = use_fallback ? c->pin.fallback_source : c->pin.source;
    if (!version[0] || strcmp(version, swap->pin.version) == 0)
        return;
    snprintf(swap->fallback.version, sizeof(swap->fallback.version), "%s", version);
    snprintf(swap->fallback.build_digest, sizeof(swap->fallback.build_digest), "%s", digest);
    snprintf(swap->fallback_source, sizeof(swap->fallback_source), "%s", source);
}

static void on_claim_for_pin(claim_store *store, int result, const claim *c,
                             const act_error *err, void *userdata)
{
    ad_swap *swap = userdata;
    ad_host *host = swap->host;
    char message[1200];
    if (result <= 0) {
        snprintf(message, sizeof(message), "host %s: %s", host->name,
                 result < 0 ? err->message : "no claim names this box; assign it first");
        fail(swap, result < 0 ? "store_error" : "not_owner", message);
        return;
    }
    if (!claim_owned_by(c, host->daemon->config.box)) {
        snprintf(message, sizeof(message),
                 "host %s: claim names box %s as executor, this box is %s; swap it there",
                 host->name, claim_executor(c), host->daemon->config.box);
        fail(swap, "not_owner", message);
        return;
    }
    if (c->held[0] && strcmp(c->held, swap->pin.version) != 0) {
        snprintf(message, sizeof(message),
                 "host %s: held on version %s by an operator; release the hold before swapping "
                 "to %s",
                 host->name, c->held, swap->pin.version);
        fail(swap, "held_mismatch", message);
        return;
    }
    /* A wake may have sent its admission while the claim was read. */
    if (ad_wake_ops_admission_sent(host)) {
        pin_when_no_admission(swap);
        return;
    }
    /* A swap that began while a wake was in flight knew of nothing
     * serving; that wake has ended now (the pin waits for it). */
    note_fallback(swap, swap->pin.version);
    fallback_from_claim(swap, c);
    claim next = *c;
    next.has_pin = true;
    next.pin = (claim_pin){0};
    snprintf(next.pin.version, sizeof(next.pin.version), "%s", swap->pin.version);
    snprintf(next.pin.digest, sizeof(next.pin.digest), "%s", swap->pin.digest);
    snprintf(next.pin.source, sizeof(next.pin.source), "%s", swap->source);
    /* The fallback goes with the pin, not only with its failure: a failure
     * recorded by a daemon that no longer knows what served (this one
     * killed before it wrote it, hosts/recovery.c) keeps it. A cold wake reads it
     * only once the pin failed (wake/pin_choice.c). */
    snprintf(next.pin.fallback_version, sizeof(next.pin.fallback_version), "%s",
             swap->fallback.version);
    snprintf(next.pin.fallback_digest, sizeof(next.pin.fallback_digest), "%s",
             swap->fallback.build_digest);
    snprintf(next.pin.fallback_source, sizeof(next.pin.fallback_source), "%s",
             swap->fallback.version[0] ? swap->fallback_source : "");
    act_error call_err = {0};
    if (claims_cas_async(store, host->name, c->revision, &next, on_pinned, swap, &call_err) < 0) {
        fail(swap, "store_error", call_err.message);
    }
}

static void read_for_pin(void *userdata)
{
    ad_swap *swap = userdata;
    act_error err = {0};
    if (claims_read_async(swap->host->daemon->store, swap->host->name, on_claim_for_pin, swap,
                          &err) < 0) {
        fail(swap, "store_error", err.message);
    }
}

/* The pin is written only while no wake of the host has sent its
 * admission (ad_wake_ops_admission_sent says why); else the swap waits for
 * that wake to end (ad_swap_host_settled). */
static void pin_when_no_admission(ad_swap *swap)
{
    ad_host *host = swap->host;
    if (ad_wake_ops_admission_sent(host)) {
        if (!swap->waits_to_pin)
            act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name, .build = swap->pin.version},
                           "host %s: the swap to %s waits for the wake in flight to end before "
                           "it pins its version",
                           host->name, swap->pin.version);
        swap->waits_to_pin = true;
        return;
    }
    /* The write-back of a park or a failed swap goes first, so the pin is
     * written over it rather than refused by it. */
    if (!ad_claim_report_defer(host, read_for_pin, swap))
        read_for_pin(swap);
}

/* ---- the request ------------------------------------------------------------- */

/* Finds the staged build and re-hashes every file of it, so a swap to a
 * version that is not staged or does not verify is refused before anything
 * starts. Runs on a release worker: a large build takes seconds to hash. */
typedef struct verify_job {
    ad_swap *swap;                 /* on the loop only */
    rel_store *releases;
    char host[ACT_NAME_MAX + 1];
    char version[REL_NAME_SIZE];
    rel_pin pin;
    char source[CLAIM_SOURCE_SIZE];
    const char *code;
    int result;
    act_error err;
    /* The fallback noted at the start, identified beside: its source, kept
     * when it is the very build (the digest noted). */
    rec_build_ref fallback;
    char fallback_source[CLAIM_SOURCE_SIZE];
} verify_job;

static int verify_version(rel_store *releases, const char *host, const char *version, rel_pin *pin,
                          char source[CLAIM_SOURCE_SIZE], const char **code, act_error *err)
{
    int r = ad_build_identify(releases, host, version, pin, source, code, err);
    if (r == 0 && (r = rel_verify(releases, host, version, err)) < 0)
        *code = r == -ENOENT ? "not_staged" : "digest_mismatch";
    return r;
}

static void run_verify(void *data)
{
    verify_job *job = data;
    ad_test_hold_release_work("swap-verify", job->host);
    job->result = verify_version(job->releases, job->host, job->version, &job->pin, job->source,
                                 &job->code, &job->err);
    rel_pin fallback;
    const char *unused_code;
    act_error unused = {0};
    if (job->fallback.version[0] &&
        (ad_build_identify(job->releases, job->host, job->fallback.version, &fallback,
                           job->fallback_source, &unused_code, &unused) < 0 ||
         strcmp(fallback.digest, job->fallback.build_digest) != 0))
        job->fallback_source[0] = '\0';
}

static void complete_verify(void *data)
{
    _cleanup_free_ verify_job *job = data;
    ad_swap *swap = job->swap;
    ad_host *host = swap->host;
    if (job->result < 0) {
        fail(swap, job->code, job->err.message);
        return;
    }
    /* The box may have begun to stop, or the host left the configuration,
     * while the build was hashed. */
    if (host->daemon->stopping) {
        fail(swap, "stopping", "the box is stopping; the swap did not start");
        return;
    }
    if (host->removed) {
        fail(swap, "unknown_host",
             "the host was removed from the configuration; the swap did not start");
        return;
    }
    swap->pin = job->pin;
    snprintf(swap->source, sizeof(swap->source), "%s", job->source);
    if (rec_build_ref_equal(&swap->fallback, &job->fallback))
        snprintf(swap->fallback_source, sizeof(swap->fallback_source), "%s", job->fallback_source);
    if (swap->request_no_wait)
        tell(swap, &(ad_swap_news){.started = true, .version = swap->pin.version});
    pin_when_no_admission(swap);
}

/* The build that serves now, or served last: the fallback should the swap
 * fail. Never the build the swap goes to; the first one noted stays. */
static void note_fallback(ad_swap *swap, const char *version)
{
    if (swap->fallback.version[0])
        return;
    const ad_generation *serving = swap->host->serving;
    const rec_build_ref *served =
        serving ? &serving->build
                : (swap->host->last_served.version[0] ? &swap->host->last_served : NULL);
    if (served && served->version[0] && strcmp(served->version, version) != 0)
        swap->fallback = *served;
}

void ad_swap_record_interrupted(ad_host *host, const claim *current, const rec_build_ref *served)
{
    assert(host && current && served);
    /* A pin that failed already, or that names what serves, is no failed
     * swap of this admission's; and a swap in flight records its own. */
    if (!current->has_pin || claim_pin_failed(current) || host->swap ||
        (strcmp(current->pin.version, served->version) == 0 &&
         strcmp(current->pin.digest, served->build_digest) == 0))
        return;
    ad_swap *swap = calloc(1, sizeof(*swap));
    if (!swap) {
        act_log(LOG_ERR,
                "host %s: out of memory; the interrupted swap to %s is not recorded "
                "on its pin",
                host->name, current->pin.version);
        return;
    }
    swap->host = host;
    snprintf(swap->pin.version, sizeof(swap->pin.version), "%s", current->pin.version);
    snprintf(swap->pin.digest, sizeof(swap->pin.digest), "%s", current->pin.digest);
    if (strcmp(served->version, swap->pin.version) != 0)
        swap->fallback = *served;
    char message[sizeof(swap->message)];
    snprintf(message, sizeof(message),
             "host %s: the daemon stopped before generation %" PRIu64 " of the swap to %s was "
             "published; generation %" PRIu64 " (build %s) serves on, and a cold wake runs %s "
             "instead of the pin; swap again to retry",
             host->name, current->holder.starting_generation, swap->pin.version,
             current->holder.generation, served->version, served->version);
    /* In flight until its failure is written, as any swap: a second one is
     * refused as busy meanwhile, and gc keeps the version. */
    host->swap = swap;
    swap_failed(swap, "interrupted", message);
}

const char *ad_swap_version(const ad_swap *swap)
{
    return swap ? swap->pin.version : NULL;
}

void ad_swap_start(ad_host *host, const ad_swap_order *order, ad_swap_told_fn told, void *userdata)
{
    assert(host && order && told);
    char message[1200];
    const ad_swap *in_flight = host->swap;
    ad_swap_news refused = {.ended = true, .version = order->version, .message = message};
    if (in_flight) {
        snprintf(message, sizeof(message),
                 "host %s: a swap to %s is already in flight; wait for it to end", host->name,
                 in_flight->pin.version);
        refused.code = "busy";
    } else if (host->daemon->stopping) {
        snprintf(message, sizeof(message), "box %s is stopping; swap refused",
                 host->daemon->config.box);
        refused.code = "stopping";
    }
    if (refused.code) {
        told(host, &refused, userdata);
        return;
    }
    ad_swap *swap = calloc(1, sizeof(*swap));
    verify_job *job = swap ? calloc(1, sizeof(*job)) : NULL;
    if (!job) {
        free(swap);
        told(host,
             &(ad_swap_news){.ended = true,
                             .code = "internal",
                             .message = "out of memory",
                             .version = order->version},
             userdata);
        return;
    }
    swap->host = host;
    swap->told = told;
    swap->told_userdata = userdata;
    swap->mode = order->mode;
    swap->request_no_wait = order->no_wait;
    /* Named now, so a second swap is refused as busy and a gc keeps the
     * version while it is verified. */
    snprintf(swap->pin.version, sizeof(swap->pin.version), "%s", order->version);
    note_fallback(swap, order->version);
    job->swap = swap;
    job->releases = host->daemon->releases;
    snprintf(job->host, sizeof(job->host), "%s", host->name);
    snprintf(job->version, sizeof(job->version), "%s", order->version);
    job->fallback = swap->fallback;
    act_error err = {0};
    /* A job the stop leaves undelivered holds nothing but itself. */
    if (act_offload_submit_droppable(host->daemon->release_work, act_offload_lane(job->host),
                                     run_verify, complete_verify, free, job, &err) < 0) {
        free(job);
        snprintf(message, sizeof(message), "host %s: %s", host->name, err.message);
        free(swap);
        refused.code = "internal";
        told(host, &refused, userdata);
        return;
    }
    /* The host's from here: end() frees it. */
    host->swap = swap;
}
