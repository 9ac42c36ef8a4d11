/* A generation that outlived the previous daemon (KillMode=process), taken
 * over at start-up: its leaf opened, its notify socket heard again at the
 * path its app still holds, its output logged on, its main process's exit
 * watched. hosts/recovery.c decides which ones are resumed, and hands over
 * the replica its record names (ad_generation_adopt_replica). */
#include "activator/daemon/generations/internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"

int ad_generation_adopt(ad_host *host, const char *leaf_name, const rec_generation_record *record,
                        const claim *current, int main_pidfd, ad_generation_exit_fn on_exit,
                        ad_generation **out, act_error *err)
{
    assert(host && leaf_name && record && current && main_pidfd >= 0 && out);
    ad_generation *gen = calloc(1, sizeof(*gen));
    if (!gen)
        return act_error_set(err, ENOMEM, "out of memory");
    *gen = (ad_generation){
        .host = host,
        .number = record->generation,
        .announced = true,
        .session = record->session,
        .admission_revision = current->revision,
        .build = record->build,
        .process = {.pid = record->pid, .pidfd = main_pidfd},
        .replica = {.process = {.pidfd = -1}},
        .helper_stdout_fd = -1,
        .on_exit = on_exit,
        .on_exit_userdata = host,
        .adopted = true,
        .ready = true,
        .exec_usec = act_now_usec(),
        .serving_usec = act_now_usec(),
    };
    const cfg_host *config = ad_host_config(host);
    int r = cg_leaf_open(host->daemon->cgroups, config->name, leaf_name, &gen->leaf, err);
    /* The app still holds the NOTIFY_SOCKET path it was started with. */
    if (r == 0 && ad_generation_wants_notify(config))
        r = ad_generation_open_notify(gen, NULL, err);
    /* Its output goes on where it went; the log is for its probes, and
     * keeps the file it may write to within its size. */
    char whose[80];
    snprintf(whose, sizeof(whose), "generation %" PRIu64 " resumed by a new daemon", gen->number);
    if (r == 0)
        r = ad_host_log_open(host, whose, &gen->log, err);
    if (r == 0)
        r = ad_generation_watch_exit(gen) < 0
                ? act_error_set(err, EIO, "cannot watch pid %d", (int)record->pid)
                : 0;
    if (r < 0) {
        gen->process.pidfd = -1; /* still the caller's */
        ad_generation_free(gen);
        return r;
    }
    *out = gen;
    return 0;
}

