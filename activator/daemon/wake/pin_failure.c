/* A pinned build's failure in the wake that ran it (wake/internal.h).
 *
 * Only the build's own outcomes count (pl_reason_blames_build: it was
 * exec'd and crashed, was not ready in time, or came up unhealthy); a
 * refusal, a cancel, a budget or a store outcome says nothing of the build.
 * The failure is noted when `failed` retires the attempt, and written with
 * the wake's next claim write: the publication of the fallback that stood in,
 * or the failed phase of a wake that gave up. A later attempt of the pin
 * that serves leaves nothing to write. Nothing here writes on its own, so a
 * pin failure costs no extra compare-and-swap.
 *
 * A failure before ready with a fallback named switches the wake to it: the
 * next attempt runs the fallback at once, under the same admission, within
 * what is left of MaxStarts= and WakeTimeoutSec=. A swap beside a serving N
 * never switches (N serves on; builds/swap.c records its failure). */
#include <string.h>

#include "activator/daemon/wake/internal.h"
#include "activator/daemon/wake/ops.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

static bool runs_the_pin(const claim *admitted, const rec_build_ref *build)
{
    rel_pin pin;
    return ad_pin_choose(admitted, &pin) == AD_PIN_EXACT &&
           strcmp(build->version, pin.version) == 0 && strcmp(build->build_digest, pin.digest) == 0;
}

void ad_wake_note_pin_failure(pl_wake *wake, ad_host *host, const ad_generation *gen)
{
    ad_wake_state *w = host->wake_state;
    const pl_retirement *retirement = pl_wake_retirement(wake);
    /* record_attempt: the build's own failure, not the gate's refusal. */
    if (!w || !gen || !retirement->record_attempt || w->pin_failure.failure_reason[0] ||
        !runs_the_pin(&w->admitted, &gen->build))
        return;
    claim_pin *failed = &w->pin_failure;
    snprintf(failed->version, sizeof(failed->version), "%s", gen->build.version);
    snprintf(failed->digest, sizeof(failed->digest), "%s", gen->build.build_digest);
    snprintf(failed->failure_reason, sizeof(failed->failure_reason), "%s",
             pl_reason_to_string(retirement->reason));
    act_copy_string(failed->failure_message, sizeof(failed->failure_message),
                    pl_wake_failure_message(wake));

    if (pl_wake_is_swap(wake) || retirement->cause != PL_RETIRE_ATTEMPT ||
        !w->admitted.pin.fallback_version[0])
        return; /* retried as the pipeline says; recorded if the wake gives up */
    /* The admission as this wake now knows it: the pin failed here. prepare
     * and the gate choose from it (wake/pin_choice.h), so they run and
     * allow the fallback; the store learns it with the publication. */
    claim_record_pin_failure(&w->admitted, failed, host->daemon->config.box, act_wallclock_usec());
    act_log_fields(LOG_NOTICE,
                   &(act_log_ctx){.host = host->name,
                                  .generation = gen->number,
                                  .build = gen->build.version,
                                  .reason = failed->failure_reason},
                   "host %s: pinned build %s failed (%s); this wake runs its fallback %s next",
                   host->name, failed->version, failed->failure_reason,
                   w->admitted.pin.fallback_version);
    pl_wake_next_attempt_at_once(wake);
}

void ad_wake_pin_failure_onto(const ad_host *host, const rec_build_ref *published, claim *next)
{
    const ad_wake_state *w = host->wake_state;
    if (!w)
        return;
    /* A start of the pin that serves clears whatever failure of it stands. */
    if (claim_clear_pin_failure(next, published->version, published->build_digest))
        return;
    claim_record_pin_failure(next, &w->pin_failure, host->daemon->config.box, act_wallclock_usec());
}

const claim_pin *ad_wake_ops_pin_failure(const ad_host *host)
{
    const ad_wake_state *w = host->wake_state;
    return w && w->pin_failure.failure_reason[0] ? &w->pin_failure : NULL;
}
