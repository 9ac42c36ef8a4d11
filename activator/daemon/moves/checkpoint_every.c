/* CheckpointEverySec=: see moves/checkpoint_every.h.
 *
 * One round: freeze the serving generation (built-in transport), once the
 * leaf says frozen write the checkpoint (moves/checkpoints.c, off the
 * loop), thaw it the moment the archive is written, then name the
 * checkpoint on the claim (moves/checkpoint_naming.c) if the freeze held
 * throughout. The next round is armed when this one ends, so a slow one
 * never overlaps the next. */
#include "activator/daemon/moves/checkpoint_every.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/generations/generation.h"
#include "activator/daemon/moves/checkpoint_naming.h"
#include "activator/daemon/moves/checkpoints.h"
#include "common/clock.h"
#include "common/log.h"

struct ad_checkpoint_every {
    ad_host *host;
    ad_checkpoint_every_resume_fn resume;
    sd_event_source *timer;
    /* The round in flight: the generation it checkpoints, and whether it
     * froze it (the built-in transport), at which freezer write and when. */
    ad_generation *gen;
    bool froze;
    uint64_t freezer_writes;
    uint64_t frozen_usec;
    bool writing; /* host->checkpoint is this round's */
    bool naming;  /* the claim's compare-and-swap is in flight */
};

static void count(ad_host *host, const char *outcome)
{
    const met_daemon_metrics *metrics = host->daemon->metrics;
    if (metrics)
        met_metric_add(metrics->checkpoints, MET_LABELS(outcome), 1);
}

static void arm_next(ad_checkpoint_every *every);

/* The generation runs again, and is supervised again (resume) unless it is
 * on its way out. */
static void thaw(ad_checkpoint_every *every, bool resume)
{
    ad_generation *gen = every->gen;
    if (!every->froze)
        return;
    every->froze = false;
    /* Thawed by someone else (a retirement) already: not ours to touch. */
    if (gen->retired || !gen->frozen || gen->freezer_writes != every->freezer_writes)
        return;
    act_error err = {0};
    if (ad_generation_thaw(gen, NULL, NULL, &err) < 0) {
        act_log(LOG_ERR, "host %s: cannot thaw generation %" PRIu64 " after its checkpoint: %s",
                every->host->name, gen->number, err.message);
        return;
    }
    const met_daemon_metrics *metrics = every->host->daemon->metrics;
    if (metrics)
        met_metric_observe(metrics->checkpoint_pause, NULL,
                           (double)(act_now_usec() - every->frozen_usec) / 1e6);
    if (resume && every->host->serving == gen && every->resume)
        every->resume(every->host);
}

static void round_over(ad_checkpoint_every *every)
{
    every->gen = NULL;
    every->writing = every->naming = false;
    arm_next(every);
}

/* userdata is the host: a round stopped meanwhile is freed, and a new one
 * (armed after a stop) is not naming. */
static void on_named(ad_host *host, int result, uint64_t new_revision, const char *code,
                     const act_error *err, void *userdata)
{
    ad_checkpoint_every *every = host->checkpoint_every;
    if (!every || !every->naming)
        return;
    if (result < 0) {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name}, "%s", err->message);
        count(host, "failed");
    } else {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = host->name},
                       "host %s: periodic checkpoint named on the claim (revision %" PRIu64 ")",
                       host->name, new_revision);
        count(host, "named");
    }
    round_over(every);
}

/* Whether what was archived is one instant of the state: the generation
 * stayed frozen from before the archive began to its end (or snapshots
 * itself live), and no other generation could write meanwhile. */
static bool archive_holds(const ad_checkpoint_every *every, const ad_host *host, char *why,
                          size_t size)
{
    const ad_generation *gen = every->gen;
    if (host->serving != gen || gen->retired || gen->exited) {
        snprintf(why, size, "its generation %" PRIu64 " stopped serving meanwhile", gen->number);
        return false;
    }
    if (every->froze && (!gen->frozen || gen->freezer_writes != every->freezer_writes)) {
        snprintf(why, size, "its generation %" PRIu64 " was thawed meanwhile", gen->number);
        return false;
    }
    if (host->swap || host->starting) {
        snprintf(why, size, "a swap started meanwhile");
        return false;
    }
    return true;
}

static void on_written(ad_host *host, int result, const claim_state *written, const act_error *err,
                       void *userdata)
{
    ad_checkpoint_every *every = userdata;
    every->writing = false;
    char why[160];
    bool holds = result >= 0 && archive_holds(every, host, why, sizeof(why));
    thaw(every, true);
    if (result < 0) {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name},
                       "host %s: periodic checkpoint failed: %s", host->name, err->message);
        count(host, "failed");
        round_over(every);
        return;
    }
    if (!holds) {
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name},
                       "host %s: periodic checkpoint %s not named: %s", host->name,
                       written->checkpoint, why);
        count(host, "discarded");
        round_over(every);
        return;
    }
    act_error name_err = {0};
    every->naming = true;
    if (ad_checkpoint_name(host, written, every->gen->session, on_named, host, &name_err) < 0)
        on_named(host, -EIO, 0, "store_error", &name_err, host);
}

static void write_now(ad_checkpoint_every *every)
{
    ad_host *host = every->host;
    act_error err = {0};
    if (ad_checkpoint_start(host, every->gen->number, on_written, every, &err) < 0) {
        thaw(every, true);
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name},
                       "host %s: periodic checkpoint not started: %s", host->name, err.message);
        count(host, "failed");
        round_over(every);
        return;
    }
    every->writing = true;
}

static void on_frozen(ad_generation *gen, void *userdata)
{
    ad_checkpoint_every *every = userdata;
    every->frozen_usec = act_now_usec();
    write_now(every);
}

/* Why host cannot be checkpointed this round, or NULL. */
static const char *busy(const ad_host *host)
{
    const ad_generation *gen = host->serving;
    if (pl_host_get_state(host->pipeline) != PL_HOST_SERVING || !gen || gen->retired || gen->exited)
        return "not serving";
    if (gen->frozen || host->freeze)
        return "frozen";
    if (host->swap || host->starting || host->replaced)
        return "swapping";
    if (host->checkpoint || host->checkpoint_request)
        return "checkpointing";
    if (host->move || host->probe_op)
        return "moving";
    if (!host->claim_ours)
        return "not this box's";
    return NULL;
}

static void start_round(ad_checkpoint_every *every)
{
    ad_host *host = every->host;
    const char *why = busy(host);
    if (why) {
        act_log_fields(LOG_DEBUG, &(act_log_ctx){.host = host->name},
                       "host %s: periodic checkpoint skipped: %s", host->name, why);
        count(host, "skipped");
        arm_next(every);
        return;
    }
    const cfg_host *config = ad_host_config(host);
    every->gen = host->serving;
    if (config->exec_checkpoint && config->checkpoint_live) {
        write_now(every);
        return;
    }
    act_error err = {0};
    every->froze = true;
    every->freezer_writes = every->gen->freezer_writes + 1;
    if (ad_generation_freeze(every->gen, on_frozen, every, &err) < 0) {
        act_log_fields(LOG_WARNING, &(act_log_ctx){.host = host->name},
                       "host %s: periodic checkpoint: cannot freeze generation %" PRIu64 ": %s",
                       host->name, every->gen->number, err.message);
        every->freezer_writes = every->gen->freezer_writes;
        thaw(every, true);
        count(host, "failed");
        round_over(every);
    }
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    start_round(userdata);
    return 0;
}

static void arm_next(ad_checkpoint_every *every)
{
    ad_host *host = every->host;
    uint64_t period = ad_host_config(host)->checkpoint_every_usec;
    if (!period) {
        every->timer = sd_event_source_disable_unref(every->timer);
        return;
    }
    int r = every->timer
                ? sd_event_source_set_time_relative(every->timer, period)
                : sd_event_add_time_relative(host->daemon->loop, &every->timer, CLOCK_MONOTONIC,
                                             period, 10 * 1000, on_timer, every);
    if (r >= 0)
        r = sd_event_source_set_enabled(every->timer, SD_EVENT_ONESHOT);
    if (r < 0)
        act_log(LOG_ERR, "host %s: cannot arm CheckpointEverySec=: %s; no periodic checkpoint",
                host->name, strerror(-r));
}

void ad_checkpoint_every_arm(ad_host *host, ad_checkpoint_every_resume_fn resume)
{
    if (!ad_host_config(host)->checkpoint_every_usec || host->checkpoint_every)
        return;
    ad_checkpoint_every *every = calloc(1, sizeof(*every));
    if (!every) {
        act_log(LOG_ERR, "host %s: out of memory; no periodic checkpoint", host->name);
        return;
    }
    *every = (ad_checkpoint_every){.host = host, .resume = resume};
    host->checkpoint_every = every;
    arm_next(every);
}

void ad_checkpoint_every_stop(ad_host *host, bool thaw_it)
{
    ad_checkpoint_every *every = host->checkpoint_every;
    if (!every)
        return;
    host->checkpoint_every = NULL;
    every->timer = sd_event_source_disable_unref(every->timer);
    if (every->writing)
        ad_checkpoint_cancel(host);
    ad_generation *gen = every->gen;
    if (gen && every->froze && !gen->retired) {
        /* A freeze still settling tells nobody any more. */
        if (gen->settled_userdata == every)
            gen->settled = NULL;
        if (thaw_it)
            thaw(every, false);
    }
    free(every);
}
