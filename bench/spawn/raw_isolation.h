/* The isolated variant's baseline: a generation's isolation done by hand in
 * the child with bare syscalls, on the bench's own small box, in the order
 * a person would write them: no plan, no checks, no ordering logic. What
 * the layer adds on top of this is what the isolated ratio measures.
 *
 * To measure another isolation step (credentials, capabilities, a seccomp
 * filter), add it to raw_isolate and the same setting to the isolated spec
 * in bench_spawn.c (isolated_spec), side by side. */
#pragma once

#include <limits.h>

/* The bench's box: the daemon's state and runtime directories (hidden),
 * one host's state directory (kept writable), its notify directory
 * (passed) and its build's directory (passed read-only). */
struct raw_isolation {
    char root[64];
    char state[PATH_MAX / 4];
    char hosts[PATH_MAX / 4];
    char host_dir[PATH_MAX / 4];
    char host_state[PATH_MAX / 4];
    char run[PATH_MAX / 4];
    char notify[PATH_MAX / 4];
    char releases[PATH_MAX / 4];
    char host_releases[PATH_MAX / 4];
    char build[PATH_MAX / 4]; /* passed read-only, as the daemon passes the build it runs */
};

/* Makes the box under /run; returns 0 or -errno. */
int raw_isolation_init(struct raw_isolation *iso);
void raw_isolation_cleanup(const struct raw_isolation *iso);

/* In the child, before exec: returns 0 or an errno. */
int raw_isolate(const struct raw_isolation *iso);
