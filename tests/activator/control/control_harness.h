/* Test harness: an ctrl_server server on its own sd-event loop thread, with
 * a small dispatcher standing in for the daemon, and a bare REQ client. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "activator/control/control.h"

typedef struct harness {
    char dir[64];
    char url[128];
    ctrl_options options;
    int stop_fd[2];
    int ready_fd[2];
    int start_result;
    char start_error[1024];
    void *thread; /* pthread_t, kept opaque here */
    unsigned status_count; /* loop thread only */
    atomic_uint slow_wakes; /* "wake slow" requests the dispatcher holds */
    sd_event *event;
} harness;

/* Starts the server in a fresh temp dir. options may set permissions, group,
 * TLS; url and dispatch are filled in. Returns 0 or -errno. */
int harness_start(harness *h, const ctrl_options *overrides);
void harness_stop(harness *h);

/* Waits up to timeout_ms until the dispatcher holds count "wake slow"
 * requests, each in a context of its own. */
bool harness_wait_slow_wakes(harness *h, unsigned count, int timeout_ms);

/* Requests and activatorctl runs go through the daemon driver's
 * dd_request_nng and dd_run_as (tests/driver/daemon_driver.h). */
