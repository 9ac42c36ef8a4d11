/* Killing a leaf and proving it empty. The proof is cgroup.events saying
 * "populated 0" (events.c), learnt through a notification, never by
 * sleeping and looking again. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"

/* A leaf that keeps forking between sweeps of the freeze fallback is frozen
 * by then; more sweeps than this mean something is badly wrong. */
#define CG_KILL_SWEEPS_MAX 16

/* Sends SIGKILL to every pid listed in cgroup.procs; returns how many were
 * newly signalled (pids in seen[] were signalled by an earlier sweep). */
static int kill_listed(cg_leaf *leaf, pid_t *seen, size_t *n_seen, size_t cap)
{
    _cleanup_free_ pid_t *pids = NULL;
    size_t n = 0;
    int r = cg_read_pids(leaf->dir_fd, &pids, &n);
    if (r < 0)
        return r;
    int fresh = 0;
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (size_t j = 0; j < *n_seen && !known; j++)
            known = seen[j] == pids[i];
        if (known)
            continue;
        kill(pids[i], SIGKILL);
        fresh++;
        if (*n_seen < cap)
            seen[(*n_seen)++] = pids[i];
    }
    return fresh;
}

/* For kernels without cgroup.kill: freeze so that nothing forks unseen
 * between reading cgroup.procs and signalling (a child forked into a
 * freezing cgroup starts frozen), kill what is listed until a sweep finds
 * nothing new, then thaw so the killed processes can die. A process that a
 * fork in flight produced just as we thawed is caught by looking once more
 * and going round again. */
static int kill_by_freezing(cg_leaf *leaf, act_error *err)
{
    pid_t seen[1024];
    size_t n_seen = 0;
    for (int round = 0; round < CG_KILL_SWEEPS_MAX; round++) {
        int r = cg_leaf_freeze(leaf, true, err);
        if (r < 0)
            return r;
        for (int sweep = 0; sweep < CG_KILL_SWEEPS_MAX; sweep++) {
            r = kill_listed(leaf, seen, &n_seen, ARRAY_SIZE(seen));
            if (r <= 0)
                break;
        }
        act_error thaw_err = {0};
        int thaw = cg_leaf_freeze(leaf, false, &thaw_err);
        if (r < 0)
            return act_error_set(err, -r, "cannot read %s/cgroup.procs: %s", leaf->v2_path,
                                 strerror(-r));
        if (thaw < 0)
            return act_error_set(err, -thaw, "after killing: %s", thaw_err.message);
        r = kill_listed(leaf, seen, &n_seen, ARRAY_SIZE(seen));
        if (r == 0)
            return 0;
        if (r < 0)
            return act_error_set(err, -r, "cannot read %s/cgroup.procs: %s", leaf->v2_path,
                                 strerror(-r));
    }
    return act_error_set(err, EAGAIN,
                         "%s keeps producing processes faster than they can be killed; try "
                         "again",
                         leaf->v2_path);
}

int cg_leaf_kill_start(cg_leaf *leaf, act_error *err)
{
    assert(leaf);
    if (!leaf->force_kill_fallback) {
        int r = cg_write_file_at(leaf->dir_fd, "cgroup.kill", "1");
        if (r == 0)
            return 0;
        if (r != -ENOENT)
            return act_error_set(err, -r, "cannot write cgroup.kill of %s: %s", leaf->v2_path,
                                 strerror(-r));
    }
    return kill_by_freezing(leaf, err);
}

int cg_leaf_wait_empty(cg_leaf *leaf, uint64_t timeout_usec, act_error *err)
{
    assert(leaf);
    /* Most leaves are empty by the time anyone asks; no watch needed then. */
    bool populated = true;
    int r = cg_leaf_populated(leaf, &populated, err);
    if (r < 0 || !populated)
        return r;
    int fd = cg_leaf_events_fd(leaf, err);
    if (fd < 0)
        return fd;
    uint64_t deadline = act_now_usec() + timeout_usec;
    for (;;) {
        /* Read after the watch exists, so an exit in between is not lost. */
        if ((r = cg_leaf_populated(leaf, &populated, err)) < 0)
            return r;
        if (!populated)
            return 0;
        uint64_t now = act_now_usec();
        if (now >= deadline)
            return act_error_set(err, ETIMEDOUT,
                                 "cgroup %s still has processes after %llu ms; it is NOT proven "
                                 "empty",
                                 leaf->v2_path, (unsigned long long)(timeout_usec / 1000));
        uint64_t left_ms = (deadline - now + 999) / 1000;
        struct pollfd pfd = {.fd = fd, .events = CG_LEAF_EVENTS_POLL};
        if (poll(&pfd, 1, left_ms > 60000 ? 60000 : (int)left_ms) < 0 && errno != EINTR)
            return act_error_set(err, errno, "cannot poll the events of %s: %s", leaf->v2_path,
                                 strerror(errno));
    }
}

int cg_leaf_kill_and_wait(cg_leaf *leaf, uint64_t timeout_usec, act_error *err)
{
    assert(leaf);
    int r = cg_leaf_kill_start(leaf, err);
    if (r < 0)
        return r;
    return cg_leaf_wait_empty(leaf, timeout_usec, err);
}

int cg_retire_blocking(cg_leaf *leaf, int pidfd, uint64_t grace_usec, uint64_t kill_timeout_usec,
                       act_error *err)
{
    assert(leaf);
    if (pidfd >= 0) {
        if (syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) < 0 && errno != ESRCH)
            return act_error_set(err, errno, "cannot send SIGTERM to the main process of %s: %s",
                                 leaf->v2_path, strerror(errno));
        /* The pidfd turns readable when the main process exits. */
        uint64_t deadline = act_now_usec() + grace_usec;
        for (;;) {
            uint64_t now = act_now_usec();
            if (now >= deadline)
                break;
            uint64_t left_ms = (deadline - now + 999) / 1000;
            struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
            int n = poll(&pfd, 1, left_ms > 60000 ? 60000 : (int)left_ms);
            if (n > 0)
                break;
            if (n < 0 && errno != EINTR)
                return act_error_set(err, errno, "cannot poll the main process of %s: %s",
                                     leaf->v2_path, strerror(errno));
        }
    }
    return cg_leaf_kill_and_wait(leaf, kill_timeout_usec, err);
}
