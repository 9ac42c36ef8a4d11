/* The [Limits] of a host file as the cgroup layer takes them: what goes
 * into a generation's leaf (generation.c), and so, for PidsMax= left to its
 * default, whether RLIMIT_NPROC holds the host to it at each spawn instead
 * (spawn.c). */
#include "activator/daemon/generations/generation.h"

/* Whether the default PidsMax= goes into the leaf (see the header). */
static bool default_pids_in_leaf(const cg_root *root, const cfg_limits *limits, bool own_uid)
{
    const cg_limits pids = {.pids_max = limits->pids_max};
    if (cg_limits_check(root, &pids, NULL) < 0)
        return false;
    return !own_uid || cg_limits_free_at_spawn(root, &pids);
}

/* Whether the default MemoryMax= goes into the leaf: only where it costs a
 * start nothing. On a box whose memory controller is cgroup v1 only, the
 * leaf would join a v1 group at every start, which waits out an RCU grace
 * period (milliseconds, most of a cold wake); there a host without
 * MemoryMax= runs without one, as the daemon says at start. */
bool ad_default_memory_in_leaf(const cg_root *root, uint64_t memory_max)
{
    const cg_limits memory = {.memory_max = memory_max};
    return cg_limits_check(root, &memory, NULL) == 0 && cg_limits_free_at_spawn(root, &memory);
}

void ad_limits_from_config(const cg_root *root, const cfg_limits *limits, bool own_uid,
                           cg_limits *out)
{
    bool pids_unset = limits->pids_max == CFG_LIMIT_INFINITY ||
                      (limits->pids_max_is_default && !default_pids_in_leaf(root, limits, own_uid));
    bool memory_unset =
        limits->memory_max == CFG_LIMIT_INFINITY ||
        (limits->memory_max_is_default && !ad_default_memory_in_leaf(root, limits->memory_max));
    /* "infinity" is the cgroup's own default, so it is simply not written. */
    *out = (cg_limits){
        .memory_max = memory_unset ? 0 : limits->memory_max,
        .memory_high = limits->memory_high == CFG_LIMIT_INFINITY ? 0 : limits->memory_high,
        .pids_max = pids_unset ? 0 : limits->pids_max,
        .cpu_quota_percent = limits->cpu_quota_percent,
        .cpu_weight = limits->cpu_weight,
    };
}
