/* The prepare step (wake/internal.h): which build the admission chose, resolved,
 * opened and hashed off the loop, then checked against the claim's pin and
 * hold; and that same work begun beside the admission, which it does not
 * depend on, so that the two overlap. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/wake/internal.h"
#include "common/log.h"

static pl_reason reason_of_resolve(int r)
{
    switch (r) {
    case -ENOENT:
        return PL_REASON_NOT_STAGED;
    case -EKEYREJECTED:
        return PL_REASON_PIN_MISMATCH;
    case -EBADMSG:
    case -EUCLEAN:
    case -ELOOP:
    case -EPERM:
        return PL_REASON_DIGEST_MISMATCH;
    default:
        return PL_REASON_SETUP_FAILED;
    }
}

/* The held version freezes the host: a build that is not it never runs. */
bool ad_wake_held_mismatch(const claim *c, const char *version)
{
    return c->held[0] && strcmp(c->held, version) != 0;
}

/* The pin, or the fallback of a pin that failed (wake/pin_choice.h). */
bool ad_wake_pin_mismatch(const ad_host *host, const claim *c)
{
    const rel_identity *id = &host->wake_state->resolved.identity;
    return ad_pin_mismatch(c, id->version, id->build_digest);
}

/* A cold wake does not run a pin that failed: it says which build stands in. */
static void announce_fallback(ad_host *host, const claim *admitted, const ad_generation *gen)
{
    char why[512];
    snprintf(why, sizeof(why), "pin %s failed (%s); running %s, the build that served last",
             admitted->pin.version, admitted->pin.failure_reason, gen->build.version);
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name, .build = gen->build.version},
                   "host %s: %s", host->name, why);
    ad_publish(host, EV_EVENT_PIN_FALLBACK, gen, why);
}

static void on_prepared(ad_host *host, ad_prepared *prepared, void *userdata);

/* The pinned build is staged now (wake/fetch_wait.c): resolved as usual. */
static void prepare_fetched(ad_host *host, pl_wake *wake)
{
    rel_pin pin;
    ad_pin_choose(&host->wake_state->admitted, &pin);
    act_error err = {0};
    host->wake_state->waiting_wake = wake;
    if (ad_build_prepare_async(host, &pin, on_prepared, NULL, &err) < 0) {
        host->wake_state->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
    }
}

bool ad_wake_prepared_refused(ad_host *host, pl_wake *wake, const ad_prepared *prepared)
{
    const claim *admitted = &host->wake_state->admitted;
    if (prepared->result < 0) {
        pl_wake_complete(wake,
                         prepared->script_problem ? PL_REASON_SETUP_FAILED
                                                  : reason_of_resolve(prepared->result),
                         "%s", prepared->err.message);
        return true;
    }
    if (ad_wake_held_mismatch(admitted, prepared->resolved.identity.version)) {
        pl_wake_complete(wake, PL_REASON_HELD_MISMATCH,
                         "host %s: held on version %s, but the build to run is %s", host->name,
                         admitted->held, prepared->resolved.identity.version);
        return true;
    }
    return false;
}

bool ad_wake_prepared_stops(ad_host *host, pl_wake *wake, const ad_prepared *prepared,
                            ad_wake_fetched_fn *again)
{
    if (prepared->result < 0 && !prepared->script_problem &&
        ad_wake_fetch_missing_pin(host, wake, prepared->result, again))
        return true;
    return ad_wake_prepared_refused(host, wake, prepared);
}

bool ad_wake_refuse_failed_pin(ad_host *host, pl_wake *wake)
{
    const claim *admitted = &host->wake_state->admitted;
    rel_pin unused;
    if (ad_pin_choose(admitted, &unused) != AD_PIN_FAILED)
        return false;
    pl_wake_complete(wake, PL_REASON_PIN_FAILED,
                     "host %s: the pinned build %s failed (%s: %s) and no build that served "
                     "can stand in; unpin it (activatorctl unpin %s), promote a build, or "
                     "swap to one",
                     host->name, admitted->pin.version, admitted->pin.failure_reason,
                     admitted->pin.failure_message, host->name);
    return true;
}

static void on_prepared(ad_host *host, ad_prepared *prepared, void *userdata)
{
    (void)userdata;
    pl_wake *wake = take_wake(host);
    const claim *admitted = &host->wake_state->admitted;
    if (ad_wake_prepared_stops(host, wake, prepared, prepare_fetched))
        return;
    host->wake_state->resolved = prepared->resolved;
    prepared->resolved.exec_fd = -1; /* ours now */
    ad_wake_fill_build(&host->starting->build, &host->wake_state->resolved.identity);
    ad_wake_set_script(host->starting, prepared);
    rel_pin unused;
    if (ad_pin_choose(admitted, &unused) == AD_PIN_FALLBACK)
        announce_fallback(host, admitted, host->starting);
    pl_wake_ok(wake);
}

/* An early answer that prepare waits for or takes: on_prepared as usual. */
static void finish_with_early(ad_host *host, early_prepare *early)
{
    host->wake_state->early = NULL;
    act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name},
                   "host %s: prepare takes the build resolved beside the admission", host->name);
    on_prepared(host, &early->prepared, NULL);
    rel_resolved_release(&early->prepared.resolved);
    free(early);
}

static void on_early_prepared(ad_host *host, ad_prepared *prepared, void *userdata)
{
    early_prepare *early = userdata;
    if (!early->wake_state) {
        free(early); /* its wake is gone; complete_prepare closes the fd */
        return;
    }
    early->prepared = *prepared;
    prepared->resolved.exec_fd = -1; /* ours now */
    early->done = true;
    if (early->awaited)
        finish_with_early(host, early);
    else if (early->checked)
        early->checked(host, &early->prepared);
    else
        ad_wake_early_start(host, &early->prepared);
}

/* The daemon stops with the early work in flight: its wake, if still
 * there, forgets it. */
static void early_prepare_dropped(void *userdata)
{
    early_prepare *early = userdata;
    if (early->wake_state)
        early->wake_state->early = NULL;
    free(early);
}

static early_prepare *usable_early(ad_host *host, ad_pin_choice choice, const rel_pin *pin);

void ad_wake_begin_early_prepare(ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    rel_pin pin;
    ad_pin_choice choice = ad_pin_choose(&w->admitted, &pin);
    /* An admission made again over a pin may run another build than the
     * first one resolved: that answer is dropped, and this one begun. */
    if (usable_early(host, choice, &pin))
        return; /* a retried attempt's admission: the first one's answer stands */
    early_prepare *early = calloc(1, sizeof(*early));
    if (!early)
        return; /* prepare then does the work itself */
    early->wake_state = w;
    early->prepared.resolved.exec_fd = -1;
    early->choice = choice;
    early->pin = pin;
    act_error err = {0};
    if (early->choice == AD_PIN_FAILED ||
        ad_build_prepare_async_droppable(host, early->choice == AD_PIN_NONE ? NULL : &early->pin,
                                         on_early_prepared, early_prepare_dropped, early,
                                         &err) < 0) {
        free(early);
        return;
    }
    w->early = early;
    act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name},
                   "host %s: resolving its build beside the admission", host->name);
}

/* The early answer, when it was asked for the build prepare chose. */
static early_prepare *usable_early(ad_host *host, ad_pin_choice choice, const rel_pin *pin)
{
    early_prepare *early = host->wake_state->early;
    if (!early)
        return NULL;
    if (ad_wake_early_is_for(early, choice, pin))
        return early;
    /* Not the build to run after all: drop it (when it answers). */
    ad_wake_early_forget(host->wake_state);
    return NULL;
}

void ad_wake_op_prepare(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    const claim *admitted = &host->wake_state->admitted;
    rel_resolved_release(&host->wake_state->resolved);
    rel_pin pin;
    ad_pin_choice choice = ad_pin_choose(admitted, &pin);
    if (ad_wake_refuse_failed_pin(host, wake))
        return;
    /* Should the pin fail, its fallback runs in this wake, and must still
     * fit in it (wake/pin_failure.c). */
    if (choice == AD_PIN_EXACT && admitted->pin.fallback_version[0] && !pl_wake_is_swap(wake))
        pl_wake_keep_room_for_fallback(wake);
    early_prepare *early = usable_early(host, choice, &pin);
    if (early) {
        host->wake_state->waiting_wake = wake;
        early->awaited = true;
        if (early->done)
            finish_with_early(host, early);
        return;
    }
    /* A child held for the build the early answer named runs nothing. */
    ad_generation_drop_held(host->starting);
    act_error err = {0};
    host->wake_state->waiting_wake = wake;
    if (ad_build_prepare_async(host, choice == AD_PIN_NONE ? NULL : &pin, on_prepared, NULL, &err) <
        0) {
        host->wake_state->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
    }
}

bool ad_wake_early_prepare_check(ad_host *host, ad_wake_checked_fn *checked)
{
    ad_wake_state *w = host->wake_state;
    rel_pin pin;
    ad_pin_choice choice = ad_pin_choose(&w->admitted, &pin);
    early_prepare *early = usable_early(host, choice, &pin);
    if (!early) {
        ad_wake_begin_early_prepare(host);
        early = w->early;
    }
    if (!early)
        return false;
    if (early->done) {
        checked(host, &early->prepared);
        return true;
    }
    early->checked = checked;
    return true;
}

void ad_wake_early_forget(ad_wake_state *w)
{
    early_prepare *early = w->early;
    if (early && early->done) {
        rel_resolved_release(&early->prepared.resolved);
        free(early);
    } else if (early) {
        early->wake_state = NULL; /* freed with its answer */
    }
    w->early = NULL;
}
