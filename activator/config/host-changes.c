/* What differs between two loads of one host file, sorted by when it can
 * apply to a host that runs: its sockets at once, its running leaf's limits
 * at once, everything else from its next start. */
#include <string.h>

#include "activator/config/config.h"
#include "common/strv.h"

static bool same_string(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_probe(const probe_spec *a, const probe_spec *b)
{
    if (!a || !b)
        return a == b;
    return a->kind == b->kind && act_strv_equal(a->argv, b->argv) &&
           (a->kind != PROBE_CONNECT || lsn_address_equal(&a->address, &b->address));
}

static bool same_listen(const cfg_host *a, const cfg_host *b)
{
    if (a->n_listen != b->n_listen || a->backlog != b->backlog)
        return false;
    for (uint16_t i = 0; i < a->n_listen; i++)
        if (!lsn_address_equal(&a->listen[i], &b->listen[i]) ||
            a->listen[i].dual_stack != b->listen[i].dual_stack)
            return false;
    return true;
}

static bool same_limits(const cfg_limits *a, const cfg_limits *b)
{
    return a->memory_max == b->memory_max && a->memory_max_is_default == b->memory_max_is_default &&
           a->memory_high == b->memory_high && a->pids_max == b->pids_max &&
           a->pids_max_is_default == b->pids_max_is_default &&
           a->cpu_quota_percent == b->cpu_quota_percent && a->cpu_weight == b->cpu_weight;
}

/* The rlimits a start sets: they apply from the next start. */
static bool same_rlimits(const cfg_limits *a, const cfg_limits *b)
{
    return a->nofile_soft == b->nofile_soft && a->nofile_hard == b->nofile_hard &&
           a->private_tmp_size == b->private_tmp_size;
}

static bool same_filter(const cfg_syscall_filter *a, const cfg_syscall_filter *b)
{
    return a->base == b->base && a->reset == b->reset && act_strv_equal(a->allow, b->allow) &&
           act_strv_equal(a->deny, b->deny);
}

static bool same_start(const cfg_host *a, const cfg_host *b)
{
    return act_strv_equal(a->exec_argv, b->exec_argv) &&
           act_strv_equal(a->environment, b->environment) && same_string(a->user, b->user) &&
           same_string(a->group, b->group) && act_strv_equal(a->exec_restore, b->exec_restore) &&
           act_strv_equal(a->exec_replicate, b->exec_replicate) &&
           a->replicate_restart == b->replicate_restart &&
           a->replicate_restart_usec == b->replicate_restart_usec &&
           a->replicate_required == b->replicate_required &&
           act_strv_equal(a->exec_checkpoint, b->exec_checkpoint) && a->stateless == b->stateless &&
           a->checkpoint_live == b->checkpoint_live &&
           a->checkpoint_timeout_usec == b->checkpoint_timeout_usec &&
           a->checkpoint_every_usec == b->checkpoint_every_usec && a->failover == b->failover &&
           act_strv_equal(a->failover_boxes, b->failover_boxes) &&
           same_probe(&a->ready, &b->ready) && same_probe(a->health_check, b->health_check) &&
           a->ready_timeout_usec == b->ready_timeout_usec &&
           a->probe_timeout_usec == b->probe_timeout_usec &&
           a->wake_timeout_usec == b->wake_timeout_usec &&
           a->stop_timeout_usec == b->stop_timeout_usec &&
           a->idle_timeout_usec == b->idle_timeout_usec &&
           a->start_rate_limit == b->start_rate_limit && a->max_starts == b->max_starts &&
           a->ambient_capabilities == b->ambient_capabilities &&
           a->releases_keep == b->releases_keep &&
           same_filter(&a->limits.syscall_filter, &b->limits.syscall_filter) &&
           same_rlimits(&a->limits, &b->limits) &&
           act_strv_equal(a->read_write_paths, b->read_write_paths) &&
           a->filesystem_box == b->filesystem_box && a->private_ipc == b->private_ipc &&
           a->private_network == b->private_network && a->park_freeze == b->park_freeze &&
           a->restore_requires_same_build == b->restore_requires_same_build &&
           a->frozen_max_usec == b->frozen_max_usec && a->thaw_check_cached == b->thaw_check_cached;
}

unsigned cfg_host_changes(const cfg_host *running, const cfg_host *loaded)
{
    unsigned changes = CFG_HOST_SAME;
    if (!same_listen(running, loaded))
        changes |= CFG_HOST_CHANGED_LISTEN;
    if (!same_limits(&running->limits, &loaded->limits))
        changes |= CFG_HOST_CHANGED_LIMITS;
    if (!same_start(running, loaded))
        changes |= CFG_HOST_CHANGED_START;
    return changes;
}
