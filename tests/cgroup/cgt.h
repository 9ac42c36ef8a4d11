/* Helpers shared by the cgroup tests: a throwaway cgroup root per test,
 * starting test apps with their stdout on a pipe, and the final checks. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "cgroup/cgroup.h"

/* Exit code meson reads as "skipped". */
#define CGT_SKIP 77

/* Returns 0 when the tests can run, or prints why not and returns CGT_SKIP. */
int cgt_check_can_run(const char *suite);

/* The environment switches that run the same tests on the fallback paths:
 * CG_TEST_SPAWN_METHOD=fork|clone3-copy and CG_TEST_FORCE_KILL_FALLBACK=1. */
cg_spawn_method cgt_spawn_method(void);
/* With CG_TEST_FD_WINDOW=1: reserves the spawn fd window, then opens 3,000
 * fds so that everything the tests hand a child lies far above it. Returns
 * 1 when it did, 0 when not asked, -1 on failure. */
int cgt_use_fd_window(void);
const char *cgt_spawn_method_name(void);
/* With CG_TEST_SPAWN_HELD=1 every spawn of the tests is held, then
 * released (cg_spawn_hold): the same promises through the held path. */
bool cgt_spawn_held(void);
/* cg_spawn, or hold and release with CG_TEST_SPAWN_HELD=1; held, it also
 * checks that the child has not exec'd before its release. */
int cgt_cg_spawn(cg_leaf *leaf, const cg_spawn_spec *spec, cg_process *proc, act_error *err);
/* True when pid is blocked in read(2) (what a held child waits in). */
bool cgt_blocked_in_read(pid_t pid);
bool cgt_force_kill_fallback(void);

/* cmocka setup/teardown: *state becomes a fresh throwaway cg_root; the
 * teardown removes it and checks that nothing of ours is left: no cgroup
 * directory in any hierarchy and no child process. */
int cgt_setup_root(void **state);
int cgt_teardown_root(void **state);

/* Creates a leaf, applying the kill-fallback switch; fails the test on error. */
cg_leaf *cgt_leaf(cg_root *root, const char *host, const char *name, const cg_limits *limits);

/* Opens a test app built next to the tests, or the one at an absolute path. */
int cgt_open_app(const char *name);

/* Starts app in leaf with argv (argv[0] added) and stdout on a pipe whose
 * read end is returned in *stdout_read. Extra spec settings come from
 * tweak (may be NULL). Returns cg_spawn's result. */
int cgt_spawn(cg_leaf *leaf, const char *app, const char *const *args,
              void (*tweak)(cg_spawn_spec *spec, void *data), void *data, cg_process *proc,
              int *stdout_read, act_error *err);

/* The same spec, held (cg_spawn_hold) into *held instead. */
int cgt_hold(cg_leaf *leaf, const char *app, const char *const *args,
             void (*tweak)(cg_spawn_spec *spec, void *data), void *data, cg_held_spawn **held,
             int *stdout_read, act_error *err);

/* cgt_spawn with the default spec, asserting it succeeded, then reads its
 * output until marker ("end\n", "ready\n"): the app is past its start. */
void cgt_start(cg_leaf *leaf, const char *app, const char *const *args, const char *marker,
               cg_process *proc, int *stdout_read);

/* Reads fd until marker appears, EOF, or timeout_ms pass; malloc'd text. */
char *cgt_read_until(int fd, const char *marker, int timeout_ms);

/* Copies the value of "key=value" from text into buf; false when absent. */
bool cgt_value(const char *text, const char *key, char *buf, size_t size);

/* Reaps the process behind pidfd and closes pidfd. */
void cgt_reap(int pidfd, siginfo_t *info);

/* True when pid is listed in the cgroup.procs under dir. */
bool cgt_pid_in_cgroup(const char *dir, pid_t pid);

/* True when path does not exist. */
bool cgt_gone(const char *path);
