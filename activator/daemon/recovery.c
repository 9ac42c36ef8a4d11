/* What a previous daemon left behind. Generations outlive the daemon (it may
 * have been killed at any instant), so at start-up every leaf under our
 * subtree is found and retired with proof before the first wake. A host
 * whose old generation cannot be proven stopped refuses wakes
 * (unproven_stop) rather than risk two generations on one state. */
#include "activator/daemon/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

#define RECOVERY_KILL_TIMEOUT_USEC (10 * 1000 * 1000ull)

typedef struct recovery {
    act_daemon *daemon;
    unsigned retired;
    unsigned unproven;
} recovery;

static void log_leftover(const act_daemon_host *host, const char *host_name,
                         const char *leaf_name)
{
    if (!host) {
        act_log(LOG_NOTICE, "cgroup hosts/%s/%s: no host %s is configured; retiring it",
                host_name, leaf_name, host_name);
        return;
    }
    uint64_t number = 0;
    act_generation_record record = {0};
    act_error err = {0};
    int dirfd = act_host_dir((act_daemon_host *)host, &err);
    if (dirfd >= 0 && sscanf(leaf_name, "g-%" SCNu64, &number) == 1 &&
        act_records_read_generation(dirfd, host_name, number, &record, &err) == 0)
        act_log_fields(LOG_NOTICE,
                       &(act_log_ctx){.host = host_name, .generation = number,
                                      .build = record.build.version},
                       "host %s: generation %" PRIu64 " (build %s, session %" PRIu64
                       ") outlived the previous daemon; retiring it with proof",
                       host_name, number, record.build.version, record.session);
    else
        act_log(LOG_NOTICE, "host %s: leaf %s outlived the previous daemon; retiring it",
                host_name, leaf_name);
}

static int on_leaf(const char *host_name, const char *leaf_name, cg_found_process *procs,
                   size_t n_procs, void *userdata)
{
    recovery *state = userdata;
    act_daemon *daemon = state->daemon;
    act_daemon_host *host = act_hosts_find(daemon, host_name);
    log_leftover(host, host_name, leaf_name);

    cg_leaf *leaf = NULL;
    act_error err = {0};
    if (cg_leaf_open(daemon->cgroups, host_name, leaf_name, &leaf, &err) < 0) {
        act_log(LOG_ERR, "%s", err.message);
        state->unproven++;
        if (host)
            host->unproven_at_start = true;
        return 0;
    }
    /* The main process is the oldest one found; it gets SIGTERM and the
     * host's grace, as a clean stop would give it. */
    int pidfd = n_procs ? procs[0].pidfd : -1;
    uint64_t grace = host ? host->config->stop_timeout_usec : 0;
    int r = cg_retire_blocking(leaf, pidfd, grace, RECOVERY_KILL_TIMEOUT_USEC, &err);
    if (r == 0 && cg_leaf_remove(leaf, &err) == 0) {
        state->retired++;
        uint64_t number = 0;
        if (host && sscanf(leaf_name, "g-%" SCNu64, &number) == 1 &&
            act_host_dir(host, NULL) >= 0)
            act_records_remove_generation(host->host_dirfd, number, NULL);
    } else {
        act_log(LOG_ERR, "host %s: leaf %s not proven stopped: %s", host_name, leaf_name,
                err.message);
        state->unproven++;
        if (host)
            host->unproven_at_start = true;
    }
    cg_leaf_free(leaf);
    return 0;
}

/* Records whose leaf is gone describe generations that are proven gone. */
static void forget_stale_records(act_daemon_host *host)
{
    uint64_t *numbers = NULL;
    size_t count = 0;
    act_error err = {0};
    if (act_host_dir(host, &err) < 0 ||
        act_records_list_generations(host->host_dirfd, &numbers, &count, &err) < 0)
        return;
    for (size_t i = 0; i < count; i++) {
        char leaf_name[32];
        snprintf(leaf_name, sizeof(leaf_name), "g-%" PRIu64, numbers[i]);
        cg_leaf *leaf = NULL;
        if (cg_leaf_open(host->daemon->cgroups, host->config->name, leaf_name, &leaf, &err) ==
            -ENOENT)
            act_records_remove_generation(host->host_dirfd, numbers[i], NULL);
        cg_leaf_free(leaf);
    }
    free(numbers);
}

int act_recover(act_daemon *daemon, act_error *err)
{
    recovery state = {.daemon = daemon};
    int r = cg_enumerate(daemon->cgroups, on_leaf, &state, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        if (!state.unproven)
            forget_stale_records(&daemon->hosts[i]);
        act_host_dir_close(&daemon->hosts[i]);
    }
    if (state.retired || state.unproven)
        act_log(LOG_NOTICE, "recovery: %u leftover leaves retired with proof, %u not proven",
                state.retired, state.unproven);
    return 0;
}
