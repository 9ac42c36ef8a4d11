/* Hybrid hosts: the v1 memory, pids and cpu hierarchies. The leaf's mirror
 * directories are made with mkdir and its limits written through libcgroup;
 * joining happens in the spawned child through pre-opened cgroup.procs fds,
 * because libcgroup is not async-signal-safe. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <libcgroup.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"

#include "cgroup/internal.h"

/* cfs_period_us the quota is expressed against: 100 ms, the kernel default. */
#define CG_V1_CFS_PERIOD_USEC 100000
/* cpu.shares when no weight is set: the kernel's default. */
#define CG_V1_SHARES_DEFAULT 1024

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;

static void init_libcgroup(void)
{
    init_result = cgroup_init();
}

static int libcgroup_errno(int code)
{
    if (code == ECGOTHER) {
        int e = cgroup_get_last_errno();
        return e > 0 ? e : EIO;
    }
    return code == ECGROUPNOTEXIST ? ENOENT : EIO;
}

int cg_v1_init(act_error *err)
{
    pthread_once(&init_once, init_libcgroup);
    if (init_result != 0)
        return act_error_set(err, libcgroup_errno(init_result),
                             "libcgroup cannot initialise (%s); the v1 controllers of this "
                             "hybrid host are unusable",
                             cgroup_strerror(init_result));
    return 0;
}

/* cpu.weight (1..10000, default 100) to cpu.shares (default 1024) the way
 * systemd converts it, so a host behaves alike on v1 and v2. */
static uint64_t weight_to_shares(uint32_t weight)
{
    uint64_t shares = (uint64_t)weight * 1024 / 100;
    if (shares < 2)
        shares = 2;
    if (shares > 262144)
        shares = 262144;
    return shares;
}

static bool wants(enum cg_controller c, const cg_limits *limits)
{
    if (!limits)
        return false;
    switch (c) {
    case CG_MEMORY: return limits->memory_max != 0;
    case CG_PIDS: return limits->pids_max != 0;
    case CG_CPU: return limits->cpu_quota_percent != 0 || limits->cpu_weight != 0;
    default: return false;
    }
}

bool cg_v1_mirror_needed(const cg_root *root, enum cg_controller c, const cg_limits *limits)
{
    assert(root);
    assert((unsigned)c < CG_CONTROLLER_COUNT);
    /* Only for a limit v2 cannot enforce. A mirror kept for its stats alone
     * (memory.usage_in_bytes, pids.current) would cost every spawn a
     * migration into it, which waits out an RCU grace period: most of a cold
     * wake on a hybrid host. v2's cpu.stat gives the CPU usage regardless. */
    return root->v1_mount[c] && !root->v2_has[c] && wants(c, limits);
}

/* The values of the controllers in mirrors: those of limits that are set,
 * and with reset also the defaults of those that are not (a running leaf
 * whose limit was lifted). */
static int add_values(struct cgroup *cg, const cg_limits *limits,
                      const bool mirrors[CG_CONTROLLER_COUNT], bool reset)
{
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        if (!mirrors[c] || !(reset || wants(c, limits)))
            continue;
        struct cgroup_controller *ctl = cgroup_add_controller(cg, cg_controller_names[c]);
        if (!ctl)
            return -ENOMEM;
        char value[32];
        int r = 0;
        if (c == CG_MEMORY) {
            snprintf(value, sizeof(value), "%" PRIu64, limits->memory_max);
            r = cgroup_add_value_string(ctl, "memory.limit_in_bytes",
                                        limits->memory_max ? value : "-1");
        }
        if (c == CG_PIDS) {
            snprintf(value, sizeof(value), "%" PRIu64, limits->pids_max);
            r = cgroup_add_value_string(ctl, "pids.max", limits->pids_max ? value : "max");
        }
        if (c == CG_CPU && (limits->cpu_quota_percent || reset)) {
            r = cgroup_add_value_int64(ctl, "cpu.cfs_period_us", CG_V1_CFS_PERIOD_USEC);
            if (r == 0)
                r = cgroup_add_value_int64(ctl, "cpu.cfs_quota_us",
                                           limits->cpu_quota_percent
                                               ? (int64_t)limits->cpu_quota_percent *
                                                     CG_V1_CFS_PERIOD_USEC / 100
                                               : -1);
        }
        if (r == 0 && c == CG_CPU && (limits->cpu_weight || reset))
            r = cgroup_add_value_uint64(ctl, "cpu.shares",
                                        limits->cpu_weight ? weight_to_shares(limits->cpu_weight)
                                                           : CG_V1_SHARES_DEFAULT);
        if (r != 0)
            return -libcgroup_errno(r);
    }
    return 0;
}

/* Writes the values through libcgroup, which the caller has described. */
static int modify(const char *rel, const cg_limits *limits, const bool mirrors[CG_CONTROLLER_COUNT],
                  bool reset, act_error *err)
{
    int r = cg_v1_init(err);
    if (r < 0)
        return r;
    /* cgroup_free takes the variable's address and ignores NULL. */
    _cleanup_(cgroup_free) struct cgroup *cg = cgroup_new_cgroup(rel);
    if (!cg)
        return act_error_set(err, ENOMEM, "out of memory describing v1 cgroup %s", rel);
    r = add_values(cg, limits, mirrors, reset);
    if (r < 0)
        return act_error_set(err, -r, "cannot describe v1 cgroup %s: %s", rel, strerror(-r));
    int code = cgroup_modify_cgroup(cg);
    if (code != 0)
        return act_error_set(err, libcgroup_errno(code),
                             "cannot write the v1 limits of %s through libcgroup: %s", rel,
                             cgroup_strerror(code));
    return 0;
}

/* The mirrors are plain directories: libcgroup's creation also chowns every
 * control file and rereads the mount table, several times the cost of the
 * mkdir, for nothing we need. libcgroup writes the limits. */
static int make_mirror(const cg_root *root, enum cg_controller c, const char *rel, act_error *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", root->v1_mount[c], rel) >= (int)sizeof(path))
        return act_error_set(err, ENAMETOOLONG, "v1 cgroup path for %s is too long", rel);
    if (mkdir(path, 0755) == 0)
        return 0;
    if (errno == ENOENT) {
        char *slash = strrchr(path, '/');
        *slash = '\0';
        int r = act_mkdir_p(path, 0755, err);
        *slash = '/';
        if (r < 0)
            return r;
        if (mkdir(path, 0755) == 0)
            return 0;
    }
    return act_error_set(err, errno, "cannot create v1 cgroup %s: %s", path, strerror(errno));
}

/* The mirrors are plain directories: libcgroup's creation also chowns every
 * control file and rereads the mount table, several times the cost of the
 * mkdir, for nothing we need. libcgroup writes the limits. */
static int make_mirrors(cg_root *root, const char *rel, const cg_limits *limits, act_error *err)
{
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        if (!cg_v1_mirror_needed(root, c, limits))
            continue;
        int r = make_mirror(root, c, rel, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int cg_v1_create(cg_root *root, const char *rel, const cg_limits *limits, act_error *err)
{
    assert(root);
    assert(rel);
    int r = make_mirrors(root, rel, limits, err);
    if (r < 0)
        return r;
    bool mirrors[CG_CONTROLLER_COUNT] = {false};
    bool any_limit = false;
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        mirrors[c] = root->v1_mount[c] != NULL;
        any_limit |= mirrors[c] && wants(c, limits);
    }
    return any_limit ? modify(rel, limits, mirrors, false, err) : 0;
}

int cg_v1_set(cg_leaf *leaf, const cg_limits *limits, bool mirror_made[CG_CONTROLLER_COUNT],
              act_error *err)
{
    assert(leaf && limits && mirror_made);
    bool mirrors[CG_CONTROLLER_COUNT] = {false};
    bool any = false;
    for (int c = 0; c < CG_CONTROLLER_COUNT; c++) {
        mirror_made[c] = false;
        if (!leaf->root->v1_mount[c])
            continue;
        if (!leaf->v1_path[c] && wants(c, limits)) {
            int r = make_mirror(leaf->root, c, leaf->rel, err);
            if (r < 0)
                return r;
            mirror_made[c] = true;
        }
        mirrors[c] = leaf->v1_path[c] || mirror_made[c];
        any |= mirrors[c];
    }
    return any ? modify(leaf->rel, limits, mirrors, true, err) : 0;
}
