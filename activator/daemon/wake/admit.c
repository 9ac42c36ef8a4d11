/* The wake's first two steps, `read` and `admit`: where the wake's claim is
 * compare-and-swapped.
 *
 * `read` reads the host's claim (with ClaimUnclaimed=yes, creates it when
 * there is none) and judges whether it lets this box wake the host now.
 * `admit` then compare-and-swaps our admission over the claim at the
 * revision read: this box as holder, this daemon's incarnation, a new
 * session and a new generation. That write is the fence. The store takes
 * it only if nothing wrote the claim since our read, so of two boxes (or
 * two daemons) that read the same claim, one is admitted and the other
 * finds the claim changed. The revision it returns is the token every
 * later write of the wake compares with (the gate, the publication, the
 * write-backs), and nothing is exec'd before it lands: what begins beside
 * it (the early prepare and the early start) stops short of the exec.
 * A write that got in first but still lets this box serve (a pin, a hold)
 * is admitted over again; anything else ends the wake. */
#include "activator/daemon/wake/ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "activator/daemon/host/step_holds.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/wake/internal.h"
#include "common/clock.h"
#include "common/log.h"

/* While the claim watch cannot list the claims, nothing is admitted: an
 * admission the store cannot fence must not start anything. */
static bool refused_for_the_store(pl_wake *wake, ad_host *host)
{
    const ad_store_state *store = &host->daemon->store_state;
    if (!store->unavailable)
        return false;
    pl_wake_complete(wake, PL_REASON_STORE_UNAVAILABLE, "host %s: %s", host->name, store->refusal);
    return true;
}

/* ---- read ---------------------------------------------------------------- */

/* Whether c lets this box wake the host now: another executor means not
 * ours, and the op's phase must allow a wake. PL_REASON_NONE, or the refusal
 * with its sentence in message. */
static pl_reason judge_claim(const ad_host *host, const claim *c, char *message, size_t size)
{
    act_error err = {0};
    if (!claim_owned_by(c, host->daemon->config.box)) {
        const char *executor = claim_executor(c);
        if (executor[0])
            snprintf(message, size, "host %s: claim names box %s as executor, this box is %s",
                     host->name, executor, host->daemon->config.box);
        else
            snprintf(message, size, "host %s: claim is released (no executor), this box is %s",
                     host->name, host->daemon->config.box);
        return PL_REASON_NOT_OWNER;
    }
    /* While this box is a move's target, a wake is the move's probe, and
     * only a probe of that very op may be admitted. */
    const char *probe_op = host->probe_op;
    int r = probe_op ? claim_probe_allows_wake(c, host->daemon->config.box, probe_op, &err)
                     : claim_phase_allows_wake(c, host->daemon->config.box, false, &err);
    if (r < 0) {
        snprintf(message, size, "%s", err.message);
        /* A handover in progress: the box that held the host releases it
         * once its generation is proven stopped, and that write wakes the
         * host here (fleet/claim_watch.c). */
        return r == -EAGAIN ? PL_REASON_RELEASE_PENDING : PL_REASON_WRONG_PHASE;
    }
    return PL_REASON_NONE;
}

static void judge_observed(pl_wake *wake, ad_host *host)
{
    char message[sizeof(((act_error *)0)->message)];
    host->claim_ours = claim_owned_by(&host->wake_state->observed, host->daemon->config.box);
    pl_reason reason = judge_claim(host, &host->wake_state->observed, message, sizeof(message));
    if (reason != PL_REASON_NONE) {
        pl_wake_complete(wake, reason, "%s", message);
        return;
    }
    pl_wake_ok(wake);
}

static void on_unclaimed_created(claim_store *store, int result, uint64_t new_revision,
                                 const claim *current, const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    pl_wake *wake = take_wake(host);
    if (result == CLAIMS_CHANGED) {
        /* Someone created a claim at the same moment: judge theirs. */
        host->wake_state->observed = *current;
        judge_observed(wake, host);
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: cannot create its claim: %s",
                         host->name, err->message);
        return;
    }
    host->wake_state->observed.revision = new_revision;
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                   "host %s: had no claim; claimed it for box %s (ClaimUnclaimed=yes)", host->name,
                   host->daemon->config.box);
    judge_observed(wake, host);
}

/* The claim a box writes for a configured host nobody has claimed yet. */
static void unclaimed_claim(const ad_host *host, claim *out)
{
    *out = (claim){0};
    snprintf(out->host, sizeof(out->host), "%s", host->name);
    snprintf(out->op.id, sizeof(out->op.id), "unclaimed");
    out->op.kind = CLAIM_OP_SERVING;
    snprintf(out->op.phase, sizeof(out->op.phase), "assigned");
    snprintf(out->op.exec, sizeof(out->op.exec), "%s", host->daemon->config.box);
}

/* The boxes listed before a claim is made for a host nobody claimed: a box
 * an operator drained takes no new host, this way neither. */
static void on_boxes_for_unclaimed(claim_store *store, int result, const claims_box *boxes,
                                   size_t n, const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    if (result < 0) {
        pl_wake_complete(take_wake(host), PL_REASON_STORE_ERROR,
                         "host %s: cannot list the boxes before claiming it: %s", host->name,
                         err->message);
        return;
    }
    const claims_box *self = claims_box_find(boxes, n, host->daemon->config.box);
    if (self && self->drained_usec) {
        pl_wake_complete(take_wake(host), PL_REASON_NOT_OWNER,
                         "host %s: no claim names it, and this box (%s) is drained, so it claims "
                         "no host (ClaimUnclaimed= is for a box that takes hosts); assign it to "
                         "another box with 'activatorctl claim assign %s BOX'",
                         host->name, host->daemon->config.box, host->name);
        return;
    }
    unclaimed_claim(host, &host->wake_state->observed);
    act_error call_err = {0};
    if (claims_cas_async(store, host->name, 0, &host->wake_state->observed, on_unclaimed_created,
                         host, &call_err) < 0)
        store_call_failed(take_wake(host), host, &call_err);
}

static void on_read(claim_store *store, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    ad_host *host = userdata;
    if (result < 0) {
        pl_wake_complete(take_wake(host), PL_REASON_STORE_ERROR,
                         "host %s: cannot read its claim: %s", host->name, err->message);
        return;
    }
    if (result == 0) {
        if (!host->daemon->config.claim_unclaimed) {
            pl_wake_complete(take_wake(host), PL_REASON_NOT_OWNER,
                             "host %s: no claim names this box (%s); assign it with "
                             "'activatorctl claim assign %s %s'",
                             host->name, host->daemon->config.box, host->name,
                             host->daemon->config.box);
            return;
        }
        /* One request more, only for the first wake of a host nobody
         * claimed yet. */
        act_error call_err = {0};
        if (claims_box_list_live_async(store, on_boxes_for_unclaimed, host, &call_err) < 0)
            store_call_failed(take_wake(host), host, &call_err);
        return;
    }
    host->wake_state->observed = *c;
    judge_observed(take_wake(host), host);
}

static void read_claim(void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = host->wake_state;
    /* The claim this box saw last, when it lets the wake go on, is the one
     * the admission is made on: its compare-and-swap names that revision,
     * so a claim the store has moved past is caught there, and the store's
     * answer taken as the read this wake did not make (admission_answered).
     * One that would refuse the wake is never trusted: the store is read. */
    char why[sizeof(((act_error *)0)->message)];
    if (ad_host_claim_last_seen(host, &w->observed) &&
        judge_claim(host, &w->observed, why, sizeof(why)) == PL_REASON_NONE) {
        w->observed_seen = true;
        act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name},
                       "host %s: admitting on the claim this box saw last (revision %" PRIu64
                       "), not read again",
                       host->name, w->observed.revision);
        judge_observed(take_wake(host), host);
        return;
    }
    act_error err = {0};
    if (claims_read_async(host->daemon->store, host->name, on_read, host, &err) < 0)
        store_call_failed(take_wake(host), host, &err);
}

/* Another box may take a failover host once this box's lease expired:
 * none starts here while the lease cannot be proven (hosts/self_fence.c). */
static bool refused_for_the_fence(pl_wake *wake, ad_host *host)
{
    if (!ad_host_fenced(host))
        return false;
    pl_wake_complete(wake, PL_REASON_FENCED,
                     "host %s: box %s cannot prove its lease to the claim store, and the host "
                     "fails over (Failover=yes), so it starts nowhere here until the store "
                     "acknowledges a renewal",
                     host->name, host->daemon->config.box);
    return true;
}

void ad_wake_op_read(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    if (!ad_wake_state_new(wake, host)) {
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: out of memory", host->name);
        return;
    }
    if (refused_for_the_store(wake, host))
        return;
    if (refused_for_the_fence(wake, host))
        return;
    /* The archive must be of a state nothing writes: a wake waits until
     * the checkpoint is written (unless ExecCheckpoint= snapshots live). */
    if ((host->checkpoint || host->checkpoint_request) && !ad_host_config(host)->checkpoint_live) {
        pl_wake_complete(wake, PL_REASON_CHECKPOINTING,
                         "host %s: a checkpoint of its state is being written; wake it again "
                         "once it is (activatorctl checkpoints %s lists them)",
                         host->name, host->name);
        return;
    }
    host->wake_state->waiting_wake = wake;
    /* The write-back of the last wake or park goes first: the admission
     * this read leads to must not meet it in the store. */
    if (!ad_claim_report_defer(host, read_claim, host))
        read_claim(host);
}

/* ---- admit --------------------------------------------------------------- */

/* An admission that lost its compare-and-swap is made again on the claim
 * now there, at most this many times, when the write that won still lets
 * this box serve (see admission_may_retry). */
#define ADMISSION_CONFLICTS_MAX 3

static void admit_on(pl_wake *wake, ad_host *host);

/* The write that won between our read and our admission only changed what
 * the next start runs or the op this box serves under (an operator's pin,
 * hold or unpin, a swap's pin, a claim written back): the same executor,
 * no other admission (the holder's incarnation and session as we read
 * them), and a phase that still allows this wake. Nothing of ours started
 * yet, so admitting on current is what a new wake would do, and the
 * trigger that is waiting is served instead of dropped. Anything else (a
 * new holder, another box, a move) is a real conflict and stays one. */
static bool admission_may_retry(const ad_host *host, const claim *observed, const claim *current,
                                char *why, size_t size)
{
    if (current->revision == 0) {
        snprintf(why, size, "the claim was deleted");
        return false;
    }
    if (strcmp(current->holder.incarnation, observed->holder.incarnation) != 0 ||
        current->holder.session != observed->holder.session) {
        snprintf(why, size, "another admission (session %" PRIu64 ") got in first",
                 current->holder.session);
        return false;
    }
    return judge_claim(host, current, why, size) == PL_REASON_NONE;
}

/* The admission is made again on current, the claim its lost
 * compare-and-swap found. The new admission may name another build (a pin)
 * or another generation: what was made beside the first one goes. */
static void admit_again_on(pl_wake *wake, ad_host *host, const claim *current)
{
    host->wake_state->observed = *current;
    ad_wake_early_start_discard(host->wake_state);
    admit_on(wake, host);
}

/* The admission was made on the claim this box saw last, not read, and the
 * store had moved past it: current, its answer, is what a read would have
 * given, and the wake goes on as if it had read it (admitted on it, or
 * refused for what it says). */
static void admit_on_the_stores_claim(pl_wake *wake, ad_host *host, const claim *current)
{
    char why[sizeof(((act_error *)0)->message)];
    pl_reason reason = judge_claim(host, current, why, sizeof(why));
    host->claim_ours = claim_owned_by(current, host->daemon->config.box);
    if (reason != PL_REASON_NONE) {
        pl_wake_complete(wake, reason, "%s", why);
        return;
    }
    act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                   "host %s: the claim this box saw last (revision %" PRIu64
                   ") was behind the store's (revision %" PRIu64 "); admitting on the store's",
                   host->name, host->wake_state->observed.revision, current->revision);
    admit_again_on(wake, host, current);
}

/* The admission's answer, kept in w->answer, taken by the wake. */
static void admission_answered(ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    /* A held answer (test hooks) may find its wake gone, or another one. */
    if (!w || !w->answer.pending)
        return;
    w->answer.pending = false;
    int result = w->answer.result;
    uint64_t new_revision = w->answer.revision;
    const claim *current = &w->answer.current;
    const act_error *err = &w->answer.err;
    pl_wake *wake = take_wake(host);
    ad_wake_take_landed_write(host, "admission", &w->admitted, current, &result, &new_revision);
    if (result == CLAIMS_CHANGED) {
        char why[sizeof(((act_error *)0)->message)];
        bool seen = w->observed_seen;
        w->observed_seen = false;
        if (current->revision)
            ad_host_claim_seen(host, current, current->revision);
        if (w->admission_conflicts < ADMISSION_CONFLICTS_MAX &&
            admission_may_retry(host, &w->observed, current, why, sizeof(why))) {
            w->admission_conflicts++;
            act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                           "host %s: the claim changed between read (revision %" PRIu64
                           ") and admission (now revision %" PRIu64
                           ") in a way that still lets this box serve; admitting again on it "
                           "(%u of %u)",
                           host->name, w->observed.revision, current->revision,
                           w->admission_conflicts, ADMISSION_CONFLICTS_MAX);
            admit_again_on(wake, host, current);
            return;
        }
        if (seen && current->revision) {
            admit_on_the_stores_claim(wake, host, current);
            return;
        }
        if (w->admission_conflicts >= ADMISSION_CONFLICTS_MAX)
            snprintf(why, sizeof(why), "it changed %u times in a row", w->admission_conflicts + 1);
        pl_wake_complete(wake, PL_REASON_CLAIM_CHANGED,
                         "host %s: the claim changed between read (revision %" PRIu64
                         ") and admission (now revision %" PRIu64 "): %s",
                         host->name, w->observed.revision, current->revision, why);
        return;
    }
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_STORE_ERROR, "host %s: admission failed: %s", host->name,
                         err->message);
        return;
    }
    w->admitted.revision = new_revision;
    act_error check = {0};
    if (claim_admission_ok(&w->observed, &w->admitted, host->daemon->incarnation, &check) < 0) {
        pl_wake_complete(wake, PL_REASON_CLAIM_CHANGED, "%s", check.message);
        return;
    }
    ad_host_claim_seen(host, &w->admitted, new_revision);
    pl_wake_ok(wake);
}

static void on_admitted(claim_store *store, int result, uint64_t new_revision, const claim *current,
                        const act_error *err, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_state *w = host->wake_state;
    w->answer.pending = true;
    w->answer.result = result;
    w->answer.revision = new_revision;
    if (current)
        w->answer.current = *current;
    if (err)
        w->answer.err = *err;
#ifdef ACTIVATOR_TEST_HOOKS
    /* A test holds the answer here to see what was made beside it. */
    ad_step_holds_point(host, "admitted", admission_answered);
#else
    admission_answered(host);
#endif
}

/* The failover policy of this box's host file goes into every admission:
 * the claim's copy is what fences the host and lets another box take it. */
static void copy_failover(const ad_host *host, const claim *observed, claim *admitted)
{
    const cfg_host *config = ad_host_config(host);
    if (observed->has_failover != config->failover)
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name},
                       "host %s: the claim says failover is %s (box %s admitted it last), this "
                       "box's host file says Failover=%s; this admission writes this box's",
                       host->name, observed->has_failover ? "on" : "off",
                       observed->holder.box[0] ? observed->holder.box : "none",
                       config->failover ? "yes" : "no");
    admitted->has_failover = config->failover;
    admitted->failover = (claim_failover){0};
    for (char **box = config->failover_boxes;
         config->failover && box && *box && admitted->failover.n_boxes < CLAIM_FAILOVER_BOXES_MAX;
         box++)
        snprintf(admitted->failover.boxes[admitted->failover.n_boxes++],
                 sizeof(admitted->failover.boxes[0]), "%s", *box);
}

/* The admission the wake would write over the observed claim, in
 * w->admitted (its revision still the observed one's). */
static void make_admission(pl_wake *wake, ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    /* A swap's admission fences N+1 with a new session, but N serves until
     * N+1 is published, and the claim keeps saying so. */
    if (pl_wake_is_swap(wake))
        claim_next_swap_admission(&w->observed, host->daemon->config.box, host->daemon->incarnation,
                                  act_wallclock_usec(), &w->admitted);
    else
        claim_next_admission(&w->observed, host->daemon->config.box, host->daemon->incarnation,
                             act_wallclock_usec(), &w->admitted);
    copy_failover(host, &w->observed, &w->admitted);
}

/* CASes our admission over the observed claim. */
static void admit_on(pl_wake *wake, ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    make_admission(wake, host);
    act_error err = {0};
    w->waiting_wake = wake;
    w->admission_sent = true;
    if (claims_cas_async(host->daemon->store, host->name, w->observed.revision, &w->admitted,
                         on_admitted, host, &err) < 0) {
        store_call_failed(wake, host, &err);
        return;
    }
    ad_wake_begin_early_prepare(host);
}

/* ---- a held claim: its build is checked before the admission ------------ */

/* A hold freezes the host on one version: a wake whose build is not it is
 * refused, and so is one whose build is not staged here (a pinned one is
 * fetched first). Those refusals come before the admission, so a held
 * host that cannot run here spends no session and writes nothing: the
 * build is resolved and hashed first (the early prepare, which prepare
 * then takes). Only held claims wait for it; a plain wake overlaps the two. */

static void admit_after_fetch(ad_host *host, pl_wake *wake)
{
    ad_wake_early_forget(host->wake_state); /* it said "not staged" */
    ad_wake_op_admit(wake, host);
}

static void on_held_build_checked(ad_host *host, const ad_prepared *prepared)
{
    pl_wake *wake = take_wake(host);
    if (!wake)
        return;
    if (!ad_wake_prepared_stops(host, wake, prepared, admit_after_fetch))
        admit_on(wake, host);
}

static void check_held_build_then_admit(pl_wake *wake, ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    make_admission(wake, host); /* prepare's choice reads it */
    if (ad_wake_refuse_failed_pin(host, wake))
        return;
    w->waiting_wake = wake;
    if (!ad_wake_early_prepare_check(host, on_held_build_checked)) {
        w->waiting_wake = NULL;
        admit_on(wake, host); /* prepare checks it after the admission */
    }
}

void ad_wake_op_admit(pl_wake *wake, void *userdata)
{
    ad_host *host = userdata;
    if (refused_for_the_store(wake, host))
        return;
    if (refused_for_the_fence(wake, host))
        return;
    if (host->wake_state->observed.held[0] && !pl_wake_is_swap(wake)) {
        check_held_build_then_admit(wake, host);
        return;
    }
    admit_on(wake, host);
}

const claim *ad_wake_ops_admitted(const ad_host *host)
{
    const ad_wake_state *w = host->wake_state;
    return w && w->admitted.revision ? &w->admitted : NULL;
}

bool ad_wake_ops_admission_sent(const ad_host *host)
{
    const ad_wake_state *w = host->wake_state;
    return w && w->admission_sent;
}
