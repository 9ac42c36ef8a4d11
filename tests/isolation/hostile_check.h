/* The hostile-tenant scenario, shared by the daemon test
 * (test_hostile.c, a daemon started by the test) and the check run under a
 * real systemd (act-hostile-check, in systemd-nspawn): both hosts are
 * serving when it starts; it drives act-hostile through its HTTP port,
 * measures the daemon from outside, and prints one line per attempt and
 *   N tried, 0 succeeded
 * A run fails when any attempt succeeded, when one could not be made
 * (untried), when the app could not do what any app must (a control), or
 * when the ordinary host or the daemon stopped answering. */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct hostile_setup {
    const char *control_url;   /* ipc://.../control.ipc: status latency, and a target */
    const char *events_url;    /* ipc://.../events.ipc: a target */
    const char *state_dir;     /* the daemon's StateDirectory: releases/, hosts/, claims/ */
    const char *runtime_dir;   /* the daemon's RuntimeDirectory: notify/ */
    const char *hostile_host;
    int hostile_port;
    const char *ordinary_host; /* act-testapp --log-requests */
    int ordinary_port;
    long pids_max;             /* the hostile host's PidsMax= in force */
    int flood_ms;              /* how long the flood, and each latency window, lasts */
    /* Whether text appears in the ordinary host's output within timeout_ms
     * (its journal stream, or the files its output goes to). */
    bool (*log_has)(const char *text, int timeout_ms, void *userdata);
    void *userdata;
} hostile_setup;

typedef struct hostile_outcome {
    unsigned tried;
    unsigned succeeded;
    unsigned untried;
    unsigned controls_failed;
    unsigned problems; /* the ordinary host or the daemon stopped answering */
    char succeeded_names[2048];
} hostile_outcome;

/* Runs the scenario, printing its lines on out. Returns 0 when every attempt
 * was made and failed and the box kept serving; 1 otherwise (out says why). */
int hostile_run(const hostile_setup *setup, hostile_outcome *outcome, FILE *out);
