/* Test harness: an act_control server on its own sd-event loop thread, with
 * a small dispatcher standing in for the daemon, and a bare REQ client. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "activator/control/control.h"

typedef struct harness {
    char dir[64];
    char url[128];
    act_control_options options;
    int stop_fd[2];
    int ready_fd[2];
    int start_result;
    char start_error[1024];
    void *thread; /* pthread_t, kept opaque here */
    unsigned status_count; /* loop thread only */
    sd_event *event;
} harness;

/* Starts the server in a fresh temp dir. options may set permissions, group,
 * TLS; url and dispatch are filled in. Returns 0 or -errno. */
int harness_start(harness *h, const act_control_options *overrides);
void harness_stop(harness *h);

/* One request on a fresh REQ socket; *reply is malloc'd text. Returns 0 or an
 * NNG error. */
int harness_request(const char *url, const void *body, size_t len, int timeout_ms, char **reply);

/* Runs argv as uid/gid (when uid != (uid_t)-1) with stdout and stderr
 * captured into out (NUL-terminated). Returns the exit status, or -1. */
int harness_run(char *const argv[], uid_t uid, gid_t gid, char *out, size_t out_size);
