/* The pipeline's hook, ad_hosts_on_transition: every transition of every
 * host comes here, and this is the one place a transition changes what the
 * rooms below do next. It reports to the claim what the transition made true
 * (report_to_claim) and writes it once the wake or retirement ends
 * (settle), sets what watches the host (demand, idleness, supervision),
 * and puts settings a reload left pending in force at a wake from parked.
 * The observers are told too, and decide nothing. */
#include "activator/daemon/hosts/hosts.h"

#include "activator/daemon/builds/swap.h"
#include "activator/daemon/claim/release.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/generations/announce.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/generations/sweep.h"
#include "activator/daemon/hosts/internal.h"
#include "activator/daemon/moves/checkpoint_every.h"
#include "activator/daemon/moves/checkpoint_request.h"
#include "activator/daemon/moves/move.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/parking/idle.h"
#include "activator/daemon/wake/ops.h"
#ifdef ACTIVATOR_TEST_HOOKS
#include "activator/daemon/host/step_holds.h"
#endif
#include "common/log.h"

/* ---- the pipeline's settings ---------------------------------------------------- */

/* Here because a wake from parked is when pending settings come in force,
 * and the pipeline takes them then; table.c makes each pipeline from them
 * too, and gives them to every pipeline again when the budgets change. */

void ad_hosts_pipeline_config(const ad_daemon *daemon, const cfg_host *config, pl_config *out)
{
    pl_config_init(out);
    out->max_starts = config->max_starts;
    out->ready_timeout_usec = config->ready_timeout_usec;
    out->wake_timeout_usec = config->wake_timeout_usec;
    out->park_backoff_max_usec = daemon->config.failure_backoff_max_usec;
    out->budget_wait_max_usec = daemon->config.start_budget_wait_usec;
    out->start_rate_per_sec = config->start_rate_limit;
    out->start_cap = (pl_start_cap *)&daemon->start_cap;
}

/* The pipeline takes what it reads of the host's configuration in force
 * and of the daemon's budgets again. */
void ad_hosts_update_pipeline(ad_host *host)
{
    pl_config config;
    ad_hosts_pipeline_config(host->daemon, ad_host_config(host), &config);
    act_error err = {0};
    if (pl_host_set_config(host->pipeline, &config, &err) < 0)
        act_log(LOG_ERR, "%s", err.message);
}

/* Puts a host's pending settings in force, when nothing of the old ones is
 * in use: no generation and no wake state (a wake in flight holds its
 * probes on them). */
void ad_hosts_apply_pending(ad_host *host)
{
    if (!host->pending || host->serving || host->starting || host->replaced || host->wake_state ||
        host->swap)
        return;
    ad_host_apply_pending(host);
    ad_hosts_update_pipeline(host);
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                   "host %s: the configuration loaded by the last reload is in force from this "
                   "start",
                   host->name);
}

/* ---- transitions ------------------------------------------------------------ */

static bool is_failure(const pl_wake_event *event)
{
    switch (event->type) {
    case PL_WAKE_EVENT_FAILED:
    case PL_WAKE_EVENT_REFUSED:
    case PL_WAKE_EVENT_GAVE_UP:
    case PL_WAKE_EVENT_EXITED:
    case PL_WAKE_EVENT_FAULTED:
    case PL_WAKE_EVENT_CANCELLED:
        return event->reason != PL_REASON_NONE && event->reason != PL_REASON_CANCELLED;
    default:
        return false;
    }
}

/* What the claim should say once the transition's wake or retirement ends
 * (settle writes it). Only what this box's admission made true is reported,
 * and claim/write_backs.c writes it only while the claim still describes that
 * admission. A claim lost to another box is that box's to write now, so
 * nothing is reported of it. */
static void report_to_claim(ad_host *host, const pl_wake_event *event)
{
    const pl_host *pipeline = host->pipeline;
    const claim *admitted;
    switch (event->type) {
    case PL_WAKE_EVENT_WAKING:
        ad_claim_report_wake_began(host);
        return;
    case PL_WAKE_EVENT_ADMITTED:
    case PL_WAKE_EVENT_PUBLISHED:
        if ((admitted = ad_wake_ops_admitted(host)))
            ad_claim_report_admitted(host, admitted);
        return;
    default:
        break;
    }
    if (event->reason == PL_REASON_NOT_OWNER || event->park_cause == PL_PARK_CLAIM_LOST)
        return;
    /* A wake refused while a checkpoint is written changes nothing of the
     * host, which stays parked: the claim's compare-and-swap of the
     * checkpoint is the write that follows. */
    if (event->reason == PL_REASON_CHECKPOINTING)
        return;
    switch (event->type) {
    case PL_WAKE_EVENT_REFUSED:
    case PL_WAKE_EVENT_GAVE_UP:
        /* A swap's N+1 that did not make it: N serves on (below). */
        if (!event->swap) {
            ad_claim_report_failed(host, event->reason, event->message, event->attempt);
            ad_claim_report_pin_failure(host, ad_wake_ops_pin_failure(host));
        }
        break;
    case PL_WAKE_EVENT_CANCELLED:
        ad_claim_report_parked(host);
        break;
    case PL_WAKE_EVENT_SWAP_FAILED:
        /* N serves on: the claim names it again (N+1 may have been published
         * before it failed). A park or an exit during the swap made the host
         * retiring instead, and its parking writes. */
        if (pl_host_get_state(pipeline) == PL_HOST_SERVING && host->serving)
            ad_claim_report_serving(host, host->serving->number);
        break;
    case PL_WAKE_EVENT_PARKED:
        /* A generation that may still run is no park: the box refuses wakes
         * until it is proven stopped, and the claim says why. */
        if (pl_host_is_unproven(pipeline))
            ad_claim_report_failed(host, PL_REASON_UNPROVEN_STOP, event->message, 0);
        else if (event->park_cause == PL_PARK_FAILURE)
            ad_claim_report_failed(host, event->reason, NULL, 0);
        else
            ad_claim_report_parked(host);
        break;
    default:
        break;
    }
}

/* A wake, swap or retirement ended: the host keeps the state it has now, so
 * what watches it is set from that state, and the claim is told. */
static void settle(ad_host *host, const pl_wake_event *event)
{
    ad_daemon *daemon = host->daemon;
    pl_host_state state = pl_host_get_state(host->pipeline);
#ifdef ACTIVATOR_TEST_HOOKS
    /* A test kills the daemon here, after a swap failed and before the
     * claim names N again (hosts/recovery.c finishes it). */
    if (ad_claim_report_serving_due(host))
        ad_step_holds_point(host, "swap_failed", ad_claim_report_settle);
    else
        ad_claim_report_settle(host);
#else
    ad_claim_report_settle(host);
#endif
    if (state != PL_HOST_SERVING)
        ad_idle_unwatch(host);
    if (!host->serving && !host->starting)
        ad_host_dir_close(host);
    if (state != PL_HOST_PARKED) {
        /* A swap waits for the wake in flight, whatever followed it. */
        ad_swap_host_settled(host);
        return;
    }
    /* Parked, whatever ended (served and parked, gave up, cancelled, or
     * refused): the sockets are ours to watch again, so the next client
     * wakes the host (after the failure-park backoff, if any). */
    if (!daemon->stopping && !host->removed)
        ad_hosts_watch_demand(host, true);
    ad_swap_host_settled(host);
    /* An operator's checkpoint waits for the park it asked for. */
    ad_checkpoint_request_host_parked(host);
    /* Parked because the claim named another box: now that nothing runs,
     * the handover to that box may go on. */
    if (!host->claim_ours)
        ad_claim_release(host, NULL);
}

/* The pipeline's hook: every transition of every host comes here. The
 * reactions are decided here and nowhere else. The observers only observe:
 * generations/announce.c's (the journal, the events, the counters), and the
 * box's (STATUS=, the end of a clean stop), told last, once every reaction
 * is done. */
void ad_hosts_on_transition(pl_host *pipeline, const pl_wake_event *event, void *userdata)
{
    ad_host *host = userdata;
    ad_daemon *daemon = host->daemon;

    /* Status shows why the last wake did not serve; a served wake clears it. */
    if (event->type == PL_WAKE_EVENT_SERVING)
        ad_host_set_last_failure(host, NULL, NULL);
    else if (is_failure(event))
        ad_host_set_last_failure(host, pl_reason_to_string(event->reason), event->message);

    ad_announce_transition(host, event);
    /* A swap's pinned wake ends: the swap answers with the pin's failure. */
    if (event->type == PL_WAKE_EVENT_SERVING || event->type == PL_WAKE_EVENT_GAVE_UP ||
        event->type == PL_WAKE_EVENT_REFUSED)
        ad_swap_note_pin_failure(host, ad_wake_ops_pin_failure(host));
    report_to_claim(host, event);
    /* A move waits for the source at rest and for the target's probe. */
    ad_move_on_transition(host, event);

    switch (event->type) {
    case PL_WAKE_EVENT_PARKING:
    case PL_WAKE_EVENT_FAULTED:
    case PL_WAKE_EVENT_EXITED:
    case PL_WAKE_EVENT_RETIRING:
        /* Whatever retires now, its retirement thaws it as it must: the
         * freeze of the serving generation (if any) is over, and so is a
         * periodic checkpoint's. */
        ad_freeze_forget(host);
        ad_checkpoint_every_stop(host, false);
        break;
    default:
        break;
    }

    switch (event->type) {
    case PL_WAKE_EVENT_WAKING:
        host->wake_again = false;
        ad_hosts_watch_demand(host, false);
        /* A wake from parked: nothing of the settings in force is in use. */
        ad_hosts_apply_pending(host);
        break;
    case PL_WAKE_EVENT_SERVING:
        host->wakes_again_in_a_row = 0;
        /* Its sockets are the generation's now (a resumed one's too, which
         * served without a wake). */
        ad_hosts_watch_demand(host, false);
        ad_idle_watch(host, ad_freeze_or_park);
        ad_wake_ops_supervise(host);
        ad_checkpoint_every_arm(host, ad_wake_ops_supervise);
        break;
    case PL_WAKE_EVENT_SWAP_DONE:
        /* N+1 serves now, and is supervised from here on as N was. */
        ad_wake_ops_supervise(host);
        break;
    case PL_WAKE_EVENT_PARKING:
    case PL_WAKE_EVENT_FAULTED:
        ad_idle_unwatch(host);
        break;
    case PL_WAKE_EVENT_REFUSED:
        /* Waiting clients are closed now rather than left to time out: a
         * refusal answers them. Not in a swap: those clients are N's, and N
         * serves on. Nor when the refusal came from a claim write that left
         * our admission in place: the sockets, watched again once the host
         * is parked, wake it again for them (wake/gate.c). */
        if (!event->swap && !host->wake_again)
            ad_hosts_drain_backlog(host);
        break;
    case PL_WAKE_EVENT_UNPROVEN:
        /* The leaf that was not proven empty is kept on the host: the sweep
         * kills it again and again, and its proof clears the refusal. */
        ad_sweep_take_unproven(host);
        break;
    case PL_WAKE_EVENT_PROVEN:
        /* Nothing of the host runs here any more: a claim that names another
         * box waited for this to be released there. */
        if (!host->claim_ours)
            ad_claim_release(host, NULL);
        break;
    case PL_WAKE_EVENT_ENDED:
        settle(host, event);
        break;
    default:
        break;
    }

    const ad_box_observers *observers = daemon->observers;
    if (observers && observers->host_transition)
        observers->host_transition(daemon, host, event);
}
