#include "activator/daemon/box/host_status.h"

#include <assert.h>

#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/moves/move.h"
#include "common/json_fields.h"
#include "common/clock.h"

static void add_generation(json_object *status, const ad_generation *gen)
{
    act_json_add_u64(status, "generation", gen->number);
    act_json_add_string(status, "version", gen->build.version);
    act_json_add_string(status, "digest", gen->build.build_digest);
    act_json_add_u64(status, "pid", (uint64_t)gen->process.pid);
    if (gen->serving_usec) {
        /* since_usec is wall clock: the CLI shows it as an uptime. */
        uint64_t served = act_now_usec() - gen->serving_usec;
        act_json_add_u64(status, "since_usec", act_wallclock_usec() - served);
    }
    cg_stats stats;
    if (ad_generation_stats(gen, &stats) == 0) {
        if (stats.has_memory)
            act_json_add_u64(status, "memory_current", stats.memory_current);
        if (stats.has_pids)
            act_json_add_u64(status, "pids_current", stats.pids_current);
    }
    act_json_add_string(status, "cgroup", cg_leaf_path(gen->leaf));
    if (gen->notify)
        act_json_add_u64(status, "notify_refused", ad_generation_notify_refused(gen));
}

json_object *ad_host_status_json(const ad_host *host)
{
    assert(host);
    const pl_host *pipeline = host->pipeline;
    json_object *status = json_object_new_object();
    act_json_add_string(status, "host", host->name);
    /* To the pipeline a frozen host serves; to an operator it is frozen,
     * since when (frozen_since_usec, wall clock) once the kernel says so. */
    uint64_t frozen_since = 0;
    bool frozen = ad_freeze_active(host, &frozen_since) && frozen_since;
    act_json_add_string(status, "state",
                        frozen ? "frozen" : pl_host_state_to_string(pl_host_get_state(pipeline)));
    if (frozen)
        act_json_add_u64(status, "frozen_since_usec", frozen_since);
    const ad_generation *serving = host->serving;
    const ad_generation *gen = serving ? serving : host->starting;
    if (gen)
        add_generation(status, gen);
    if (pl_host_is_unproven(pipeline))
        act_json_add_string(status, "reason", "unproven_stop");
    else
        act_json_add_string(status, "reason", host->last_reason);
    act_json_add_string(status, "message", host->last_message);
    act_json_add_u64(status, "failure_streak", pl_host_failure_streak(pipeline));
    char move[160];
    if (ad_move_describe(host, move, sizeof(move)))
        act_json_add_string(status, "move", move);
    if (host->pending != NULL)
        act_json_add_string(status, "config", "pending next start");
    return status;
}
