/* Kill with proof, retire and containment against real cgroups: a
 * daemonized grandchild, an app that ignores SIGTERM, a process in
 * uninterruptible sleep, a fork bomb under PidsMax, a memory hog under
 * MemoryMax (v1 or v2, whichever this host has); a leaf frozen and thawed
 * again and again.
 * CG_TEST_SPAWN_METHOD=fork and CG_TEST_FORCE_KILL_FALLBACK=1 run the same tests
 * on the fork spawn path and the freeze + SIGKILL + thaw kill path. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "tests/cgroup/cgt.h"
#include "tests/cgroup/stuck.h"

#define SEC 1000000ULL

static pid_t value_pid(const char *out, const char *key)
{
    char text[32];
    if (!cgt_value(out, key, text, sizeof(text))) {
        print_error("no %s= in output: %s\n", key, out);
        fail();
    }
    return (pid_t)atoi(text);
}

static bool pidfd_exited(int pidfd, int timeout_ms)
{
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
    return poll(&pfd, 1, timeout_ms) == 1;
}

static void kill_with_proof_removes_a_daemonized_grandchild(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-1", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    assert_int_equal(cgt_spawn(leaf, "cg-doublefork", NULL, NULL, NULL, &proc, &out_fd, &err), 0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "end\n", 10000);
    pid_t grandchild = value_pid(out, "grandchild");
    assert_int_equal(value_pid(out, "main"), proc.pid);
    assert_true(cgt_pid_in_cgroup(cg_leaf_path(leaf), proc.pid));
    assert_true(cgt_pid_in_cgroup(cg_leaf_path(leaf), grandchild));
    _cleanup_close_ int grandchild_fd = (int)syscall(SYS_pidfd_open, grandchild, 0);
    assert_true(grandchild_fd >= 0);

    assert_int_equal(cg_leaf_kill_and_wait(leaf, 10 * SEC, &err), 0);
    assert_true(pidfd_exited(grandchild_fd, 0));
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    assert_int_equal(info.si_code, CLD_KILLED);
    assert_int_equal(info.si_status, SIGKILL);

    char host_path[4096];
    snprintf(host_path, sizeof(host_path), "%s/hosts/web1", cg_root_path(*state));
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    assert_true(cgt_gone(cg_leaf_path(leaf)));
    assert_true(cgt_gone(host_path));
    for (const char *c = "memory"; c; c = strcmp(c, "memory") == 0 ? "pids" : NULL)
        if (cg_leaf_v1_path(leaf, c))
            assert_true(cgt_gone(cg_leaf_v1_path(leaf, c)));
    close(out_fd);
    cg_leaf_free(leaf);
}

static void retire_kills_an_app_ignoring_sigterm_after_the_grace(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-2", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    assert_int_equal(cgt_spawn(leaf, "cg-ignore-term", NULL, NULL, NULL, &proc, &out_fd, &err), 0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "ready\n", 10000);
    assert_non_null(strstr(out, "ready"));

    uint64_t grace = 300000, start = act_now_usec();
    assert_int_equal(cg_retire_blocking(leaf, proc.pidfd, grace, 10 * SEC, &err), 0);
    uint64_t took = act_now_usec() - start;
    /* It waited out the grace, and the kill after it is bounded. */
    assert_true(took >= grace);
    assert_true(took < grace + 10 * SEC);
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    assert_int_equal(info.si_code, CLD_KILLED);
    assert_int_equal(info.si_status, SIGKILL);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    close(out_fd);
    cg_leaf_free(leaf);
}

static void retire_of_a_cooperative_app_ends_when_it_exits(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-3", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    const char *args[] = {"0", "wait", NULL};
    cgt_start(leaf, "cg-probe", args, "end\n", &proc, &out_fd);
    /* A grace far longer than the test's timeout: only an early end passes. */
    assert_int_equal(cg_retire_blocking(leaf, proc.pidfd, 3600 * SEC, 10 * SEC, &err), 0);
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    assert_int_equal(info.si_code, CLD_EXITED);
    assert_int_equal(info.si_status, 0);
    close(out_fd);
    cg_leaf_free(leaf);
}

/* Until cgroup.events says frozen is want, learnt through the events fd. */
static void wait_frozen(cg_leaf *leaf, bool want)
{
    act_error err = {0};
    int events = cg_leaf_events_fd(leaf, &err);
    assert_true(events >= 0);
    uint64_t deadline = act_now_usec() + 10 * SEC;
    for (;;) {
        bool frozen = !want;
        assert_int_equal(cg_leaf_frozen(leaf, &frozen, &err), 0);
        if (frozen == want)
            return;
        assert_true(act_now_usec() < deadline);
        struct pollfd pfd = {.fd = events, .events = CG_LEAF_EVENTS_POLL};
        poll(&pfd, 1, 100);
    }
}

/* Freeze and thaw, again and again (the leaf keeps cgroup.freeze open from
 * the first freeze): a frozen process does not run, not even to die of
 * the SIGTERM it was sent; thawed, it does. */
static void a_frozen_leaf_thaws_again_and_again(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-9", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    const char *args[] = {"7", "wait", NULL};
    cgt_start(leaf, "cg-probe", args, "end\n", &proc, &out_fd);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(cg_leaf_freeze(leaf, true, &err), 0);
        wait_frozen(leaf, true);
        assert_int_equal(cg_leaf_freeze(leaf, false, &err), 0);
        wait_frozen(leaf, false);
    }
    assert_int_equal(cg_leaf_freeze(leaf, true, &err), 0);
    wait_frozen(leaf, true);
    assert_int_equal(kill(proc.pid, SIGTERM), 0);
    assert_false(pidfd_exited(proc.pidfd, 200));
    assert_int_equal(cg_leaf_freeze(leaf, false, &err), 0);
    assert_true(pidfd_exited(proc.pidfd, 10000));
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    assert_int_equal(info.si_code, CLD_EXITED);
    assert_int_equal(info.si_status, 7);
    assert_int_equal(cg_leaf_wait_empty(leaf, 10 * SEC, &err), 0);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    assert_true(cgt_gone(cg_leaf_path(leaf)));
    close(out_fd);
    cg_leaf_free(leaf);
}

static void not_proven_is_told_apart_from_proven(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-4", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    cgt_start(leaf, "cg-ignore-term", NULL, "ready\n", &proc, &out_fd);
    assert_int_equal(cg_leaf_wait_empty(leaf, 50000, &err), -ETIMEDOUT);
    assert_non_null(strstr(err.message, "NOT proven"));
    assert_int_equal(cg_leaf_remove(leaf, &err), -EBUSY);
    assert_non_null(strstr(err.message, "kill it with proof"));
    assert_int_equal(cg_leaf_kill_and_wait(leaf, 10 * SEC, &err), 0);
    cgt_reap(proc.pidfd, NULL);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    close(out_fd);
    cg_leaf_free(leaf);
}

/* The event-loop way: the events fd turns readable when the leaf empties,
 * and cg_leaf_populated drains it. */
static void events_fd_signals_emptiness(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-5", NULL);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    const char *args[] = {"0", "wait", NULL};
    cgt_start(leaf, "cg-probe", args, "end\n", &proc, &out_fd);
    int events = cg_leaf_events_fd(leaf, &err);
    assert_true(events >= 0);
    bool populated = false;
    assert_int_equal(cg_leaf_populated(leaf, &populated, &err), 0);
    assert_true(populated);
    struct pollfd pfd = {.fd = events, .events = CG_LEAF_EVENTS_POLL};
    assert_int_equal(poll(&pfd, 1, 0), 0);

    assert_int_equal(cg_leaf_kill_start(leaf, &err), 0);
    while (populated) {
        assert_int_equal(poll(&pfd, 1, 10000), 1);
        assert_int_equal(cg_leaf_populated(leaf, &populated, &err), 0);
    }
    assert_int_equal(poll(&pfd, 1, 0), 0);
    cgt_reap(proc.pidfd, NULL);
    close(out_fd);
    cg_leaf_free(leaf);
}

/* The process held in uninterruptible sleep, released by the teardown too,
 * so that a failed check never leaves it (and its leaf) behind. */
static cgt_stuck held;

static int release_held_then_teardown(void **state)
{
    char what[256];
    if (cgt_stuck_release(&held, what, sizeof(what)) < 0)
        print_error("cg-stuck did not end cleanly: %s\n", what);
    return cgt_teardown_root(state);
}

/* What does hold a kill off: a process in uninterruptible sleep (here a read
 * that a FUSE server leaves unanswered, apps/cg-stuck.c). SIGKILL stays
 * pending on it, so the leaf stays populated and is not proven empty, kill
 * after kill, for as long as the sleep lasts; the instant it ends the
 * process dies and the events fd says so. A frozen cgroup would not do:
 * cgroup v2's freezer lets SIGKILL through. */
static void a_process_in_uninterruptible_sleep_holds_off_the_proof(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-8", NULL);
    char why[512];
    int r = cgt_stuck_start(CG_STUCK, cg_leaf_path(leaf), &held, why, sizeof(why));
    if (r == -ENODEV) {
        print_message("SKIP: FUSE is not usable here: %s\n", why);
        cg_leaf_free(leaf);
        skip();
    }
    if (r < 0) {
        print_error("%s\n", why);
        fail();
    }
    assert_true(cgt_pid_in_cgroup(cg_leaf_path(leaf), held.victim));

    act_error err = {0};
    assert_int_equal(cg_leaf_kill_and_wait(leaf, 300000, &err), -ETIMEDOUT);
    assert_int_equal(cgt_stuck_state(&held), 'D');
    /* Killing it again changes nothing while it sleeps. */
    assert_int_equal(cg_leaf_kill_and_wait(leaf, 300000, &err), -ETIMEDOUT);
    assert_int_equal(cg_leaf_remove(leaf, &err), -EBUSY);

    int events = cg_leaf_events_fd(leaf, &err);
    assert_true(events >= 0);
    bool populated = false;
    assert_int_equal(cg_leaf_populated(leaf, &populated, &err), 0);
    assert_true(populated);
    char what[256];
    assert_int_equal(cgt_stuck_release(&held, what, sizeof(what)), 0);
    /* It died of the SIGKILL that waited for it, not of the failed read. */
    assert_non_null(strstr(what, "killed=9"));
    struct pollfd pfd = {.fd = events, .events = CG_LEAF_EVENTS_POLL};
    assert_int_equal(poll(&pfd, 1, 10000), 1);
    assert_int_equal(cg_leaf_populated(leaf, &populated, &err), 0);
    assert_false(populated);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
}

static void fork_bomb_is_contained_by_pids_max(void **state)
{
    cg_limits limits = {.pids_max = 32};
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-6", &limits);
    /* Never start a bomb without its limit in place. */
    char path[4096], text[64] = "";
    const char *pids_dir = cg_leaf_v1_path(leaf, "pids") ? cg_leaf_v1_path(leaf, "pids")
                                                           : cg_leaf_path(leaf);
    snprintf(path, sizeof(path), "%s/pids.max", pids_dir);
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    assert_non_null(fgets(text, sizeof(text), f));
    fclose(f);
    assert_string_equal(text, "32\n");

    cg_process proc;
    int out_fd;
    act_error err = {0};
    assert_int_equal(cgt_spawn(leaf, "cg-forkbomb", NULL, NULL, NULL, &proc, &out_fd, &err), 0);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "limit\n", 30000);
    assert_non_null(strstr(out, "limit"));
    cg_stats stats;
    assert_int_equal(cg_leaf_stats(leaf, &stats, &err), 0);
    assert_true(stats.has_pids);
    assert_true(stats.pids_current <= 32);
    assert_true(stats.pids_current >= 2);

    assert_int_equal(cg_leaf_kill_and_wait(leaf, 30 * SEC, &err), 0);
    cgt_reap(proc.pidfd, NULL);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    close(out_fd);
    cg_leaf_free(leaf);
}

static void memory_hog_is_oom_killed_inside_its_leaf(void **state)
{
    cg_limits limits = {.memory_max = 32 << 20};
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-7", &limits);
    cg_process proc;
    int out_fd;
    act_error err = {0};
    const char *args[] = {"512", NULL};
    assert_int_equal(cgt_spawn(leaf, "cg-memhog", args, NULL, NULL, &proc, &out_fd, &err), 0);
    assert_true(pidfd_exited(proc.pidfd, 60000));
    cg_stats stats;
    assert_int_equal(cg_leaf_stats(leaf, &stats, &err), 0);
    assert_true(stats.has_memory);
    assert_true(stats.oom_kills >= 1);
    siginfo_t info;
    cgt_reap(proc.pidfd, &info);
    assert_int_equal(info.si_code, CLD_KILLED);
    assert_int_equal(info.si_status, SIGKILL);
    _cleanup_free_ char *out = cgt_read_until(out_fd, "survived", 1000);
    assert_null(strstr(out, "survived"));
    /* This process is still here to check all of the above. */
    assert_int_equal(cg_leaf_wait_empty(leaf, 10 * SEC, &err), 0);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    close(out_fd);
    cg_leaf_free(leaf);
}

int main(void)
{
    int r = cgt_check_can_run("cgroup kill");
    if (r != 0)
        return r;
#define T(f) cmocka_unit_test_setup_teardown(f, cgt_setup_root, cgt_teardown_root)
    const struct CMUnitTest tests[] = {
        T(kill_with_proof_removes_a_daemonized_grandchild),
        T(retire_kills_an_app_ignoring_sigterm_after_the_grace),
        T(retire_of_a_cooperative_app_ends_when_it_exits),
        T(not_proven_is_told_apart_from_proven),
        T(a_frozen_leaf_thaws_again_and_again),
        T(events_fd_signals_emptiness),
        cmocka_unit_test_setup_teardown(a_process_in_uninterruptible_sleep_holds_off_the_proof,
                                        cgt_setup_root, release_held_then_teardown),
        T(fork_bomb_is_contained_by_pids_max),
        T(memory_hog_is_oom_killed_inside_its_leaf),
    };
    return cmocka_run_group_tests_name(cgt_force_kill_fallback() ? "cgroup kill (fallbacks)"
                                                                 : "cgroup kill",
                                       tests, NULL, NULL);
}
