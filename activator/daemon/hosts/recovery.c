/* What a previous daemon left behind. The daemon may die at any instant and
 * its generations keep running (KillMode=process, no PDEATHSIG), so at
 * start-up every leaf under our subtree is found first. A generation that
 * was serving, whose record and claim still say it is this box's current
 * admission, is resumed: the new daemon supervises it and its clients never
 * notice the restart. Everything else is retired with proof by the sweep
 * (generations/sweep.c), all of it side by side once the loop runs, so that however
 * many leftovers there are the daemon is READY in time. Until its leftovers
 * are proven gone a host refuses wakes (unproven_stop) rather than risk two
 * generations on one state. */
#include "activator/daemon/hosts/recovery.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activator/daemon/hosts/self_fence.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/hosts/hosts.h"
#include "activator/daemon/generations/leftovers.h"
#include "activator/daemon/builds/swap.h"
#include "activator/daemon/generations/sweep.h"
#include "activator/daemon/wake/ops.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/names.h"

/* True when the claim routes to generation number on this box: it names
 * it serving (or frozen) under the record's session, or under a newer
 * session of this box's that only a swap's admission makes (it keeps
 * naming N while N+1 starts). That swap did not publish N+1 (which would
 * name N+1): it is interrupted (N+1 in starting_generation, the daemon
 * killed before its write-back of "N again") or failed and written back. */
static bool claim_routes_to(const ad_daemon *daemon, const claim *current, uint64_t number,
                            uint64_t session)
{
    if (!claim_owned_by(current, daemon->config.box) || !claim_names_a_generation(current) ||
        current->holder.generation != number)
        return false;
    return current->holder.session == session ||
           (current->holder.session > session &&
            strcmp(current->holder.box, daemon->config.box) == 0);
}

/* A leftover generation may be resumed when it is the one the record and the
 * claim both name as this box's serving admission, and its main process
 * still runs. Anything less certain is retired. */
static bool adoptable(ad_host *host, const ad_leftover *leftover, rec_generation_record *record,
                      claim *current, int *main_pidfd)
{
    uint64_t number = 0;
    act_error err = {0};
    const char *name = host->name;
    const ad_daemon *daemon = host->daemon;
    if (sscanf(leftover->leaf, "g-%" SCNu64, &number) != 1 || host->serving)
        return false;
    int dirfd = ad_host_dir(host, &err);
    if (dirfd < 0 || rec_read_generation(dirfd, name, number, record, &err) < 0 ||
        (record->phase != REC_GEN_SERVING && record->phase != REC_GEN_FROZEN))
        return false;
    /* Frozen or not, the claim names the generation (a frozen one's
     * write-back may not have landed before the daemon died). */
    if (claims_read(daemon->store, name, current, &err) != 1 ||
        !claim_routes_to(daemon, current, number, record->session))
        return false;
    for (size_t i = 0; i < leftover->n_procs; i++)
        if (leftover->procs[i].pid == record->pid) {
            *main_pidfd = leftover->procs[i].pidfd;
            return true;
        }
    return false;
}

/* The pidfd of the leftover's main process, taken: the one its record
 * names, else the first found; -1 when it has none. */
static int take_main_pidfd(ad_host *host, ad_leftover *leftover, uint64_t number)
{
    if (!leftover->n_procs)
        return -1;
    rec_generation_record record;
    int dirfd = host && number ? ad_host_dir(host, NULL) : -1;
    if (dirfd >= 0 && rec_read_generation(dirfd, leftover->host, number, &record, NULL) == 0)
        for (size_t i = 0; i < leftover->n_procs; i++)
            if (leftover->procs[i].pid == record.pid)
                return TAKE_FD(leftover->procs[i].pidfd);
    return TAKE_FD(leftover->procs[0].pidfd);
}

/* Hands leftover to the sweep, which stops it (SIGTERM and StopTimeoutSec
 * for its main process, then a kill) and proves it gone from the loop; its
 * host refuses wakes until then. */
static void retire_leftover(ad_daemon *daemon, ad_host *host, ad_leftover *leftover)
{
    if (!host)
        act_log(LOG_NOTICE, "cgroup hosts/%s/%s: no host %s is configured; retiring it",
                leftover->host, leftover->leaf, leftover->host);
    else
        act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = leftover->host},
                       "host %s: leaf %s outlived the previous daemon and is not its current "
                       "serving generation; retiring it with proof",
                       leftover->host, leftover->leaf);
    cg_leaf *leaf = NULL;
    act_error err = {0};
    int r = cg_leaf_open(daemon->cgroups, leftover->host, leftover->leaf, &leaf, &err);
    if (r == -ENOENT)
        return; /* gone since the scan; its record goes with the stale ones */
    if (host)
        pl_host_mark_unproven(host->pipeline);
    if (r == 0) {
        uint64_t number = 0;
        if (sscanf(leftover->leaf, "g-%" SCNu64, &number) != 1)
            number = 0;
        int main_pidfd = take_main_pidfd(host, leftover, number);
        r = ad_sweep_leftover(daemon, host, leftover->host, leaf, number, main_pidfd, &err);
    }
    if (r < 0)
        act_log(LOG_ERR, "host %s: leaf %s cannot be retired: %s; %s", leftover->host,
                leftover->leaf, err.message,
                host ? "the host refuses wakes until the next daemon retires it"
                     : "the next daemon retires it");
}

/* Records whose leaf is gone describe generations that are proven gone. A
 * host never woken has no directory, and so no records: its directory is
 * opened, not made (ad_host_dir would make it, a mkdir per host and start). */
static void forget_stale_records(ad_host *host)
{
    _cleanup_free_ uint64_t *numbers = NULL;
    size_t count = 0;
    act_error err = {0};
    char path[ACT_NAME_MAX + 16];
    snprintf(path, sizeof(path), "hosts/%s", host->name);
    _cleanup_close_ int dirfd =
        openat(host->daemon->state_dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0 || rec_list_generations(dirfd, &numbers, &count, &err) < 0)
        return;
    const ad_generation *serving = host->serving;
    for (size_t i = 0; i < count; i++) {
        if (serving && serving->number == numbers[i])
            continue;
        char leaf_name[32];
        snprintf(leaf_name, sizeof(leaf_name), "g-%" PRIu64, numbers[i]);
        _cleanup_(cg_leaf_freep) cg_leaf *leaf = NULL;
        if (cg_leaf_open(host->daemon->cgroups, host->name, leaf_name, &leaf, &err) == -ENOENT)
            rec_remove_generation(dirfd, numbers[i], NULL);
    }
}

/* Only a host with a directory has records, and a box of 10,000 hosts
 * mostly never woken has few: hosts/ is listed once rather than each host's
 * directory looked for. */
static void forget_every_stale_record(ad_daemon *daemon)
{
    _cleanup_(closedirp) DIR *dir = act_opendir_at(daemon->state_dirfd, "hosts");
    struct dirent *de;
    while (dir && (de = readdir(dir))) {
        ad_host *host = de->d_name[0] != '.' ? ad_hosts_find(daemon, de->d_name) : NULL;
        if (host)
            forget_stale_records(host);
    }
}

/* The replica the record names, taken from the leftover to be watched on:
 * its pidfd, or -1 when it is no longer in the leaf. */
static int take_replica_pidfd(ad_leftover *leftover, const rec_generation_record *record)
{
    for (size_t i = 0; record->replica_pid > 0 && i < leftover->n_procs; i++)
        if (leftover->procs[i].pid == record->replica_pid)
            return TAKE_FD(leftover->procs[i].pidfd);
    return -1;
}

/* Makes the adopted generation the host's serving one: the pipeline
 * resumes as serving without a wake. */
static int resume(ad_host *host, ad_leftover *leftover, const rec_generation_record *record,
                  const claim *current, int main_pidfd, act_error *err)
{
    ad_generation *gen = NULL;
    /* N serves on under the claim's admission, a swap's newer session when
     * a swap did not publish: its record says so from here on, so the next
     * daemon finds the two agreeing. */
    rec_generation_record adopted = *record;
    adopted.session = current->holder.session;
    int r = ad_generation_adopt(host, leftover->leaf, &adopted, current, main_pidfd,
                                ad_wake_ops_on_generation_exit, &gen, err);
    if (r < 0)
        return r;
    /* Its replica is watched on, as the previous daemon watched it. */
    if (record->replica_pid > 0)
        ad_generation_adopt_replica(gen, record->replica_pid, take_replica_pidfd(leftover, record));
    host->serving = gen; /* before SERVING is announced */
    /* It served: a swap's fallback once it is parked (builds/swap.c). */
    host->last_served = gen->build;
    if (pl_host_adopt_serving(host->pipeline) < 0) {
        host->serving = NULL;
        gen->process.pidfd = -1; /* still the caller's */
        ad_generation_free(gen);
        return act_error_set(err, EBUSY, "host %s is not parked", host->name);
    }
    /* The claim names this box: a later change of it that still does (a pin,
     * a write-back of ours) is not news that wakes the host. */
    host->claim_ours = true;
    /* Our write-backs (a park) are made against the admission the previous
     * daemon made. */
    ad_claim_report_admitted(host, current);
    bool frozen = record->phase == REC_GEN_FROZEN;
    /* Off the loop: a hundred resumed generations would each hold the
     * start-up (and READY=1) for a file's write and rename. Until it lands
     * the old record stands, and a daemon that dies first resumes from it
     * as this one did. */
    ad_generation_write_record(gen, frozen ? REC_GEN_FROZEN : REC_GEN_SERVING);
    act_error thaw_err = {0};
    if (host->daemon->fenced && host->claim_failover) {
        /* Its lease not proven: it stays (or is made) frozen. */
        ad_self_fence_resumed(host);
    } else if (frozen) {
        ad_freeze_resume(host);
    } else if (ad_generation_thaw(gen, NULL, NULL, &thaw_err) < 0) {
        /* A daemon that died in the middle of a freeze left the leaf
         * frozen under a serving record: it serves, so it runs. */
        act_log(LOG_WARNING, "host %s: %s", host->name, thaw_err.message);
    }
    act_log_fields(
        LOG_NOTICE,
        &(act_log_ctx){.host = host->name, .generation = gen->number, .build = gen->build.version},
        "host %s: resumed generation %" PRIu64 " (pid %d, build %s) left %s by "
        "the previous daemon",
        host->name, gen->number, (int)gen->process.pid, gen->build.version,
        frozen ? "frozen" : "running");
    return 0;
}

/* The claim still names the swap's N+1 as starting: the daemon died before
 * the swap's write-back (its failure, or the middle of it). N+1 was never
 * published, and its leaf, if any, is retired as any leftover; what the
 * previous daemon would have written is written now: N again on the claim,
 * then the pin's failure with N's build as its fallback. */
static void finish_interrupted_swap(ad_host *host, const claim *current,
                                    const rec_generation_record *record)
{
    if (!current->holder.starting_generation)
        return;
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name, .generation = record->generation},
                   "host %s: the swap to generation %" PRIu64 " was not published before the "
                   "previous daemon ended; generation %" PRIu64 " serves on, and the claim "
                   "names it again",
                   host->name, current->holder.starting_generation, record->generation);
    if (record->phase == REC_GEN_FROZEN)
        ad_claim_report_frozen(host);
    else
        ad_claim_report_serving(host, record->generation);
    ad_claim_report_settle(host);
    ad_swap_record_interrupted(host, current, &record->build);
}

void ad_recover_settle_claim(ad_host *host, const claim *c)
{
    const char *box = host->daemon->config.box;
    if (host->serving || c->op.kind != CLAIM_OP_SERVING || strcmp(c->holder.box, box) != 0 ||
        !claim_owned_by(c, box) ||
        (!claim_names_a_generation(c) && strcmp(c->op.phase, "starting") != 0))
        return;
    act_log_fields(LOG_NOTICE, &(act_log_ctx){.host = host->name},
                   "host %s: the claim says generation %" PRIu64 " of this box is %s, but "
                   "nothing of it runs any more; writing it parked",
                   host->name, c->holder.generation, c->op.phase);
    /* Over exactly this claim: a writer that moved it on since wins. */
    ad_claim_report_admitted(host, c);
    ad_claim_report_parked(host);
    ad_claim_report_settle(host);
    /* A swap's N+1 was never published, and N is gone too: the pin was
     * never proven, and a cold wake runs the build that served instead,
     * when the pin names it (else the pin stays as it is: refusing every
     * wake pin_failed would be worse than trying it). */
    if (c->holder.starting_generation && c->has_pin && c->pin.fallback_version[0]) {
        rec_build_ref fallback = {0};
        snprintf(fallback.version, sizeof(fallback.version), "%s", c->pin.fallback_version);
        snprintf(fallback.build_digest, sizeof(fallback.build_digest), "%s",
                 c->pin.fallback_digest);
        ad_swap_record_interrupted(host, c, &fallback);
    }
}

void ad_recover(ad_daemon *daemon)
{
    unsigned resumed = 0, retiring = 0;
    ad_leftovers *leftovers = daemon->leftovers;
    size_t n_leftovers = leftovers ? leftovers->n : 0;
    /* Every generation that can be resumed is, before anything is retired:
     * a host refuses wakes while a leftover of its own is retired, and a
     * pipeline that refuses wakes resumes nothing. */
    for (size_t i = 0; i < n_leftovers; i++) {
        ad_leftover *leftover = &leftovers->items[i];
        ad_host *host = ad_hosts_find(daemon, leftover->host);
        rec_generation_record record;
        claim current;
        int main_pidfd = -1;
        if (!host || !adoptable(host, leftover, &record, &current, &main_pidfd))
            continue;
        act_error adopt_err = {0};
        if (resume(host, leftover, &record, &current, main_pidfd, &adopt_err) < 0) {
            act_log(LOG_WARNING, "host %s: cannot resume %s: %s", leftover->host, leftover->leaf,
                    adopt_err.message);
            continue;
        }
        for (size_t j = 0; j < leftover->n_procs; j++)
            if (leftover->procs[j].pidfd == main_pidfd)
                leftover->procs[j].pidfd = -1; /* the generation owns it now */
        leftover->resumed = true;
        resumed++;
        finish_interrupted_swap(host, &current, &record);
    }
    for (size_t i = 0; i < n_leftovers; i++) {
        ad_leftover *leftover = &leftovers->items[i];
        if (leftover->resumed)
            continue;
        retire_leftover(daemon, ad_hosts_find(daemon, leftover->host), leftover);
        retiring++;
    }
    forget_every_stale_record(daemon);
    for (size_t i = 0; i < daemon->n_hosts; i++)
        if (!daemon->hosts[i]->serving)
            ad_host_dir_close(daemon->hosts[i]);
    if (n_leftovers)
        act_log(LOG_NOTICE,
                "recovery: %u generations resumed, %u leftover leaves being retired with proof "
                "(their hosts refuse wakes until then)",
                resumed, retiring);
    ad_leftovers_free(daemon);
}
