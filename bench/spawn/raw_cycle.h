/* The baseline of the spawn benchmark: one cycle done with bare syscalls. */
#pragma once

#include <stddef.h>

#include "bench/spawn/raw_isolation.h"

/* Where the baseline works: the v2 host node and the v1 host nodes of the
 * controllers the layer also uses (n_v1 of them), so both sides create,
 * join and remove the same cgroup directories. */
struct raw_target {
    const char *v2_host;
    const char *v1_hosts[8];
    size_t n_v1;
    int exec_fd;
    const struct raw_isolation *isolation; /* NULL: bare; else raw_isolate in the child */
};

/* mkdir the leaf (and its v1 mirrors), clone3 into it with CLONE_PIDFD
 * (the child joins the v1 mirrors and execs), waitid on the pidfd, read
 * cgroup.events until it says populated 0, rmdir. Returns 0 or -errno
 * (-EIO when the child did not exit 0). */
int raw_cycle(const struct raw_target *target, unsigned cycle);

/* fork + execve + waitpid, no cgroup at all: context only. */
int fork_exec_cycle(const char *path);
