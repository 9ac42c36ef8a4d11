/* bench-wake's busy box: a thread that stages and promotes a large build of
 * another host through the daemon's control socket, one version after the
 * other, until it is stopped, so that the wakes measured meanwhile share
 * the box with the hashing of whole builds (the stage's copy and hash, the
 * promote's re-hash). The build is the echo app with zeros after it (the
 * loader reads only its segments), so it is a real build of that size.
 * With a registry, every other stage pulls the same build as an image
 * (made by umoci, pushed by skopeo): the pull, its verification, the
 * layer's extraction and the stage, beside the wakes. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "tests/driver/daemon_driver.h"
#include "tests/image/registry_harness.h"

typedef struct busy_builds {
    dd_daemon *d;
    const char *host;
    char source[PATH_MAX];
    char image[256]; /* docker://... of the same build; "" without a registry */
    size_t mib;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_uint in_flight;   /* 1 while a stage or promote request is unanswered */
    atomic_uint cycles_done; /* stage + promote pairs answered ok */
    atomic_uint cycles_begun;
    atomic_uint pulls_done; /* of the cycles done, those whose stage pulled */
    int failed;             /* the first failure (negative errno), or 0 */
    act_error err;
} busy_builds;

/* Writes the build of mib MiB (app + zeros) into the daemon's dir; with
 * registry (may be NULL) also as an image, pushed there, whose file is
 * named exec (the host's Exec=). */
int busy_builds_prepare(busy_builds *busy, dd_daemon *d, const char *host, const char *app,
                        size_t mib, const reg_harness *registry, const char *exec, act_error *err);
/* Starts the thread; returns once its first request is about to go. */
int busy_builds_start(busy_builds *busy, act_error *err);
/* Stops it after the request in flight is answered; returns its failure. */
int busy_builds_stop(busy_builds *busy, act_error *err);
