/* Resource limits: checked against what the host can enforce before
 * anything is created, then written to v2 control files (the v1 side is
 * written by libcgroup at creation, see v1.c). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cgroup/internal.h"

/* The period cpu.max expresses the quota against: 100 ms, the default. */
#define CG_CPU_PERIOD_USEC 100000

/* Where a limit of controller c goes: v2, v1, or nowhere (an error). */
static int route_check(const cg_root *root, enum cg_controller c, const char *what,
                       act_error *err)
{
    if (root->v2_has[c] || root->v1_mount[c])
        return 0;
    return act_error_set(err, EOPNOTSUPP,
                         "%s is set but the %s controller is neither enabled for %s (cgroup v2) "
                         "nor mounted writable as cgroup v1; delegate the controller to the "
                         "activator or drop the limit",
                         what, cg_controller_names[c], root->v2_path);
}

bool cg_limits_free_at_spawn(const cg_root *root, const cg_limits *limits)
{
    assert(root);
    if (!limits)
        return true;
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++)
        if (cg_v1_mirror_needed(root, c, limits))
            return false;
    return true;
}

int cg_limits_check(const cg_root *root, const cg_limits *limits, act_error *err)
{
    assert(root);
    if (!limits)
        return 0;
    int r;
    if (limits->memory_max && (r = route_check(root, CG_MEMORY, "MemoryMax", err)) < 0)
        return r;
    if (limits->memory_high) {
        if (!root->v2_has[CG_MEMORY])
            return act_error_set(err, EOPNOTSUPP,
                                 "MemoryHigh is set but the v2 memory controller is not enabled "
                                 "for %s, and cgroup v1 has no equivalent; use MemoryMax on this "
                                 "host or delegate the v2 memory controller",
                                 root->v2_path);
        if (limits->memory_max && limits->memory_high > limits->memory_max)
            return act_error_set(err, EINVAL,
                                 "MemoryHigh (%" PRIu64 ") is above MemoryMax (%" PRIu64
                                 "); set it at or below MemoryMax",
                                 limits->memory_high, limits->memory_max);
    }
    if (limits->pids_max && (r = route_check(root, CG_PIDS, "PidsMax", err)) < 0)
        return r;
    if (limits->cpu_quota_percent) {
        if (limits->cpu_quota_percent > 100000)
            return act_error_set(err, EINVAL,
                                 "CPUQuota %" PRIu32 "%% is more than 1000 CPUs; use a percentage "
                                 "such as 200 for two CPUs",
                                 limits->cpu_quota_percent);
        if ((r = route_check(root, CG_CPU, "CPUQuota", err)) < 0)
            return r;
    }
    if (limits->cpu_weight) {
        if (limits->cpu_weight > 10000)
            return act_error_set(err, EINVAL,
                                 "CPUWeight %" PRIu32 " is out of range; use 1 to 10000 (100 is "
                                 "the default)",
                                 limits->cpu_weight);
        if ((r = route_check(root, CG_CPU, "CPUWeight", err)) < 0)
            return r;
    }
    return 0;
}

static int write_limit(cg_leaf *leaf, const char *file, const char *value, act_error *err)
{
    int r = cg_write_file_at(leaf->dir_fd, file, value);
    if (r < 0)
        return act_error_set(err, -r, "cannot write \"%s\" to %s/%s: %s", value, leaf->v2_path,
                             file, strerror(-r));
    return 0;
}

/* Writes the limits of limits; with reset, the unset ones as the cgroup's
 * defaults too (a running leaf whose limit was lifted). */
static int write_v2(cg_leaf *leaf, const cg_limits *limits, bool reset, act_error *err)
{
    struct {
        enum cg_controller controller;
        const char *file;
        bool set;
        const char *unset; /* the cgroup's default */
        char value[48];
    } files[] = {
        {CG_MEMORY, "memory.max", limits->memory_max != 0, "max", ""},
        {CG_MEMORY, "memory.high", limits->memory_high != 0, "max", ""},
        {CG_PIDS, "pids.max", limits->pids_max != 0, "max", ""},
        {CG_CPU, "cpu.max", limits->cpu_quota_percent != 0, "max 100000", ""},
        {CG_CPU, "cpu.weight", limits->cpu_weight != 0, "100", ""},
    };
    snprintf(files[0].value, sizeof(files[0].value), "%" PRIu64, limits->memory_max);
    snprintf(files[1].value, sizeof(files[1].value), "%" PRIu64, limits->memory_high);
    snprintf(files[2].value, sizeof(files[2].value), "%" PRIu64, limits->pids_max);
    snprintf(files[3].value, sizeof(files[3].value), "%" PRIu64 " %d",
             (uint64_t)limits->cpu_quota_percent * CG_CPU_PERIOD_USEC / 100, CG_CPU_PERIOD_USEC);
    snprintf(files[4].value, sizeof(files[4].value), "%" PRIu32, limits->cpu_weight);
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        if (!leaf->root->v2_has[files[i].controller] || !(files[i].set || reset))
            continue;
        const char *value = files[i].set ? files[i].value : files[i].unset;
        int r = write_limit(leaf, files[i].file, value, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int cg_limits_apply_v2(cg_leaf *leaf, const cg_limits *limits, act_error *err)
{
    assert(leaf);
    return limits ? write_v2(leaf, limits, false, err) : 0;
}

int cg_limits_set_v2(cg_leaf *leaf, const cg_limits *limits, act_error *err)
{
    assert(leaf && limits);
    return write_v2(leaf, limits, true, err);
}
