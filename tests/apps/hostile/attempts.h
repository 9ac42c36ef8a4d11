/* The one-shot attempts of act-hostile: each tries one thing a tenant's code
 * must not be able to do, and reports it (report.h). The targets come from
 * the test (GET /attack?...), since only the test knows, from outside, where
 * the other host, the releases and the daemon's sockets are. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define ATTEMPT_MAX_TARGETS 64

typedef struct target_list {
    const char *paths[ATTEMPT_MAX_TARGETS];
    size_t n;
} target_list;

typedef struct attack_targets {
    pid_t other_pid;         /* the other host's main process; 0 when not given */
    target_list read;        /* files to open and read: the other host's state, claims */
    target_list list;        /* directories to list: the other host's state dir */
    target_list write;       /* existing files to open for writing: releases, manifests */
    target_list create_in;   /* directories to create a file in: release dirs */
    target_list connect;     /* stream sockets to connect to: control.ipc, events.ipc */
    target_list notify;      /* datagram sockets to send to: the other host's notify socket */
    target_list cgroup;      /* cgroup directories to move into, besides those found */
} attack_targets;

/* Makes every attempt against targets, then the controls (what the app must
 * be able to do in its own state directory and on its own notify socket). */
void attack(const attack_targets *targets);
