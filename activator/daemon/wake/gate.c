/* The gate (wake/internal.h): just before every exec, the claim is read again
 * and must still be our admission, the build must be the one the pin and
 * the hold allow, and the generation's record (and the build state, when
 * the build changed) must be written. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "activator/daemon/wake/internal.h"
#include "common/clock.h"
#include "common/log.h"

/* The gate re-reads the claim twice: before and after the build state is
 * written. Between admission and exec another box may have taken the host;
 * if so nothing is exec'd. */
static void gate_second_read(ad_host *host);

/* A write that moved the claim but left our admission in place fences this
 * wake all the same (its build may no longer be the one chosen), but not
 * the next: the clients waiting for this one are kept for it, a few times
 * in a row at most, so that a promote or a pin landing during a wake does
 * not cost them their connections. */
static void wake_again_if_still_admitted(ad_host *host, const claim *fresh)
{
    if (!claim_same_admission(&host->wake_state->admitted, fresh) ||
        host->wakes_again_in_a_row >= AD_WAKES_AGAIN_MAX)
        return;
    host->wake_again = true;
    host->wakes_again_in_a_row++;
}

/* What the gate's read of the claim says: PL_REASON_NONE when it is still
 * our admission, else why not (with the message in why). */
static pl_reason gate_claim_verdict(ad_host *host, int result, const claim *fresh,
                                    const act_error *err, char *why, size_t size)
{
    if (result < 0) {
        snprintf(why, size, "host %s: gate cannot read the claim: %s", host->name, err->message);
        return PL_REASON_STORE_ERROR;
    }
    if (result == 0) {
        snprintf(why, size, "host %s: the claim was deleted before exec", host->name);
        return PL_REASON_NOT_OWNER;
    }
    if (fresh->revision == host->wake_state->admitted.revision)
        return PL_REASON_NONE;
    if (!claim_owned_by(fresh, host->daemon->config.box)) {
        snprintf(why, size,
                 "host %s: before exec, the claim names box %s as executor, this box is %s",
                 host->name, claim_executor(fresh), host->daemon->config.box);
        return PL_REASON_NOT_OWNER;
    }
    wake_again_if_still_admitted(host, fresh);
    if (ad_wake_pin_mismatch(host, fresh)) {
        snprintf(why, size, "host %s: before exec, the pin changed to %s", host->name,
                 fresh->has_pin ? fresh->pin.version : "(none)");
        return PL_REASON_PIN_MISMATCH;
    }
    snprintf(why, size,
             "host %s: before exec, the claim moved from our admission (revision %" PRIu64
             ") to revision %" PRIu64,
             host->name, host->wake_state->admitted.revision, fresh->revision);
    return PL_REASON_CLAIM_CHANGED;
}

static bool gate_claim_still_ours(pl_wake *wake, ad_host *host, int result, const claim *fresh,
                                  const act_error *err)
{
    char why[GATE_WHY_SIZE];
    pl_reason reason = gate_claim_verdict(host, result, fresh, err, why, sizeof(why));
    if (reason == PL_REASON_NONE)
        return true;
    pl_wake_complete(wake, reason, "%s", why);
    return false;
}

static void on_gate_second_read(claim_store *store, int result, const claim *c,
                                const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    pl_wake *wake = take_wake(host);
    if (gate_claim_still_ours(wake, host, result, c, err))
        pl_wake_ok(wake);
}

static void on_gate_written(ad_host *host, int result, const act_error *err);

/* The pin and held checks the gate makes of our admission. */
static bool gate_build_chosen(pl_wake *wake, ad_host *host)
{
    if (ad_wake_pin_mismatch(host, &host->wake_state->admitted)) {
        pl_wake_complete(wake, PL_REASON_PIN_MISMATCH,
                         "host %s: the resolved build %s is not the pinned %s", host->name,
                         host->wake_state->resolved.identity.version,
                         host->wake_state->admitted.pin.version);
        return false;
    }
    if (ad_wake_held_mismatch(&host->wake_state->admitted,
                              host->wake_state->resolved.identity.version)) {
        pl_wake_complete(wake, PL_REASON_HELD_MISMATCH,
                         "host %s: held on version %s, but the build to run is %s", host->name,
                         host->wake_state->admitted.held,
                         host->wake_state->resolved.identity.version);
        return false;
    }
    return true;
}

/* A hash of a build (FNV-1a over its names): the gate's note of what
 * build-state.json names. A collision only costs the fast path's order. */
static uint64_t build_mark(const rec_build_ref *build)
{
    uint64_t h = 1469598103934665603ull;
    const char *parts[] = {build->version, build->digest, build->build_digest};
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
        for (const char *p = parts[i];; p++) {
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
            if (!*p)
                break;
        }
    return h ? h : 1;
}

static void on_gate_first_read(claim_store *store, int result, const claim *c, const act_error *err,
                               void *userdata)
{
    ad_host *host = userdata;
    pl_wake *wake = take_wake(host);
    if (!gate_claim_still_ours(wake, host, result, c, err) || !gate_build_chosen(wake, host))
        return;
    ad_generation *gen = host->starting;
    rec_build_state state = {
        .build = gen->build,
        .generation = gen->number,
        .session = gen->session,
        .written_usec = act_wallclock_usec(),
    };
    act_error write_err = {0};
    host->wake_state->waiting_wake = wake;
    if (write_record_async(gen, REC_GEN_STARTING, &state, on_gate_written, &write_err) < 0) {
        host->wake_state->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name,
                         write_err.message);
    }
}

/* The build state is durable and the record written: ownership once more,
 * then the exec. */
static void on_gate_written(ad_host *host, int result, const act_error *err)
{
    if (result < 0) {
        host->build_state_mark = 0;
        pl_wake_complete(take_wake(host), PL_REASON_SETUP_FAILED, "host %s: %s", host->name,
                         err->message);
        return;
    }
    host->build_state_mark = build_mark(&host->starting->build);
    gate_second_read(host);
}

/* The gate's fast path. When build-state.json already names the build, the
 * only write is the record, which does not depend on the claim: it and the
 * last read of the claim go out together, and the exec waits for both. (The
 * read is still the last thing before the exec; the first read only ever
 * kept a build state from being written for a claim that was no longer
 * ours.) */
static void gate_fast_answered(ad_host *host, pl_reason reason, const char *why)
{
    ad_wake_state *w = host->wake_state;
    if (reason != PL_REASON_NONE && w->gate_failure == PL_REASON_NONE) {
        w->gate_failure = reason;
        snprintf(w->gate_why, sizeof(w->gate_why), "%s", why);
    }
    /* Both answers first: the wake ends with nothing of its own in flight. */
    if (--w->gate_answers_due > 0)
        return;
    if (w->gate_failure != PL_REASON_NONE)
        pl_wake_complete(take_wake(host), w->gate_failure, "%s", w->gate_why);
    else
        pl_wake_ok(take_wake(host));
}

static void on_gate_fast_written(ad_host *host, int result, const act_error *err)
{
    char why[GATE_WHY_SIZE] = "";
    if (result < 0)
        snprintf(why, sizeof(why), "host %s: %s", host->name, err->message);
    gate_fast_answered(host, result < 0 ? PL_REASON_SETUP_FAILED : PL_REASON_NONE, why);
}

static void on_gate_fast_read(claim_store *store, int result, const claim *c, const act_error *err,
                              void *userdata)
{
    ad_host *host = userdata;
    char why[GATE_WHY_SIZE] = "";
    pl_reason reason = gate_claim_verdict(host, result, c, err, why, sizeof(why));
    gate_fast_answered(host, reason, why);
}

static void gate_fast(pl_wake *wake, ad_host *host)
{
    ad_generation *gen = host->starting;
    act_error err = {0};
    act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name},
                   "host %s: gate: build state unchanged; the record and the claim's read go out "
                   "together",
                   host->name);
    ad_wake_state *w = host->wake_state;
    w->waiting_wake = wake;
    w->gate_answers_due = 2;
    w->gate_failure = PL_REASON_NONE;
    if (write_record_async(gen, REC_GEN_STARTING, NULL, on_gate_fast_written, &err) < 0) {
        w->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
        return;
    }
    if (claims_read_async(host->daemon->store, host->name, on_gate_fast_read, host, &err) < 0) {
        char why[GATE_WHY_SIZE];
        snprintf(why, sizeof(why), "host %s: %s", host->name, err.message);
        gate_fast_answered(host, PL_REASON_STORE_ERROR, why);
    }
}

static void gate_second_read(ad_host *host)
{
    act_error err = {0};
    if (claims_read_async(host->daemon->store, host->name, on_gate_second_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

static void gate_first_read(ad_host *host)
{
    act_error err = {0};
    if (claims_read_async(host->daemon->store, host->name, on_gate_first_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

void ad_wake_op_gate(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    if (host->build_state_mark == build_mark(&host->starting->build)) {
        if (gate_build_chosen(wake, host))
            gate_fast(wake, host);
        return;
    }
    host->wake_state->waiting_wake = wake;
    gate_first_read(host);
}
