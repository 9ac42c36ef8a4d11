/* The early start (wake/internal.h): a cold wake's generation made ready
 * beside its admission. The admission's compare-and-swap is a durable
 * write, a millisecond on an ordinary disk, and most of what follows it
 * does not depend on its answer: the leaf, the state directory, the
 * notify socket, and the child's own setup (its leaf's groups, its
 * filesystem view, its credentials). So once the build is resolved beside
 * the admission, the generation the admission names is reserved and its
 * child cloned and held just before its exec (cg_spawn_hold). The steps
 * then take what was made instead of making it, and the order that
 * matters stays: nothing is exec'd before the admission is ours and the
 * gate has passed. Whatever does not hold by then (another generation
 * number, another build, a restore to run first) discards the early
 * start, and the steps make everything as they always did. */
#include <inttypes.h>
#include <string.h>

#include "activator/daemon/wake/internal.h"
#include "common/log.h"

/* Kills and reaps the held child, removes the leaf it never ran in, and
 * frees gen; nothing of it was recorded or announced. */
static void discard(ad_generation *gen)
{
    ad_host *host = gen->host;
    ad_generation_drop_held(gen);
    act_error err = {0};
    if (cg_leaf_remove(gen->leaf, &err) < 0 &&
        !ad_host_keep_unproven(host, TAKE_PTR(gen->leaf), gen->number))
        act_log(LOG_ERR,
                "host %s: cannot remove the leaf of an early start (%s), nor keep it for the "
                "sweep; the next daemon retires it",
                host->name, err.message);
    ad_generation_free(gen);
}

void ad_wake_early_start_discard(ad_wake_state *w)
{
    if (w->early_gen)
        discard(TAKE_PTR(w->early_gen));
}

void ad_wake_early_start(ad_host *host, const ad_prepared *prepared)
{
    ad_wake_state *w = host->wake_state;
    pl_wake *wake = w->waiting_wake;
    /* Only while the admission is out, and only for a cold start: a swap
     * runs N+1 beside N, and its steps stay in their plain order. */
    if (!wake || pl_wake_step(wake) != PL_STEP_ADMIT || pl_wake_is_swap(wake) || w->early_gen ||
        host->starting || prepared->result < 0)
        return;
    const claim *proposed = &w->admitted;
    const rel_identity *id = &prepared->resolved.identity;
    /* A restore changes the state directory the child's view shows; a
     * held version the build is not ends the wake at prepare. */
    if ((proposed->held[0] && strcmp(proposed->held, id->version) != 0) ||
        ad_restore_would_run(host, &proposed->state))
        return;
    ad_generation *gen = NULL;
    act_error err = {0};
    if (ad_generation_new(host, "g", claim_admitted_generation(proposed), &gen, &err) < 0) {
        act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name}, "host %s: no early start: %s",
                       host->name, err.message);
        return;
    }
    ad_wake_fill_build(&gen->build, id);
    ad_wake_set_script(gen, prepared);
    if (ad_host_state_directory(host, &err) < 0 || ad_wake_open_notify(gen, &err) < 0 ||
        ad_generation_spawn_held(gen, prepared->resolved.exec_fd, &err) < 0) {
        /* The steps make it again, and report what fails then. */
        act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name}, "host %s: no early start: %s",
                       host->name, err.message);
        discard(gen);
        return;
    }
    w->early_gen = gen;
    act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name, .generation = gen->number},
                   "host %s: generation %" PRIu64 " made ready beside the admission, held before "
                   "its exec",
                   host->name, gen->number);
}

/* Whether the early answer that stands is for the build the admission
 * chose (prepare takes it) and is the one build was made from. */
static bool early_answer_stands(ad_host *host, const rec_build_ref *build)
{
    const early_prepare *early = host->wake_state->early;
    rel_pin pin;
    ad_pin_choice choice = ad_pin_choose(&host->wake_state->admitted, &pin);
    if (!early || !early->done || early->prepared.result < 0 ||
        !ad_wake_early_is_for(early, choice, &pin))
        return false;
    const rel_identity *id = &early->prepared.resolved.identity;
    return strcmp(build->version, id->version) == 0 && strcmp(build->digest, id->digest) == 0 &&
           strcmp(build->build_digest, id->build_digest) == 0;
}

bool ad_wake_early_start_adopt(ad_host *host)
{
    ad_wake_state *w = host->wake_state;
    ad_generation *gen = TAKE_PTR(w->early_gen);
    if (!gen)
        return false;
    if (gen->number != claim_admitted_generation(&w->admitted) || host->starting ||
        !early_answer_stands(host, &gen->build)) {
        discard(gen);
        return false;
    }
    host->starting = gen;
    return true;
}
