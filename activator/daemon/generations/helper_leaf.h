/* A program of the host's own (ExecCheckpoint=, ExecRestore=) in a leaf of
 * its own, <kind>-<N>, with the host's credentials: it ends when the
 * program exits or its timeout passes, and its leaf is then retired with
 * proof. The owner hears the end first (to decide its result) and the
 * proof last (to report it), so no process of the program outlives what
 * its owner reports. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/daemon/generations/generation.h"

typedef struct ad_helper ad_helper;

typedef struct ad_helper_spec {
    const char *kind; /* the leaf's name before "-<number>": "restore", "checkpoint" */
    uint64_t number;
    char *const *argv;     /* argv[0] absolute */
    const char *extra_env; /* "KEY=VALUE" or NULL */
    int stdout_fd;         /* where its stdout goes; -1: where the host's output goes */
    uint64_t timeout_usec;
    /* The program exited with status (0..255, or 128 + signal); the
     * helper ends after this returns. */
    void (*exited)(int status, void *userdata);
    /* timeout_usec passed first; the helper ends after this returns. */
    void (*timed_out)(void *userdata);
    /* After the end: the leaf proven empty, or not (why says why). The
     * helper is freed once this returns. */
    void (*retired)(bool proven, const char *why, void *userdata);
    void *userdata;
} ad_helper_spec;

/* Makes the state directory and the leaf, starts the program in it and arms
 * its timeout. 0 with *out set: it runs. Negative, err filled: with *out
 * NULL nothing was made; with *out set the leaf exists, and the owner
 * records the failure and calls ad_helper_end. */
int ad_helper_start(ad_host *host, const ad_helper_spec *spec, ad_helper **out, act_error *err);

/* Ends it now (the program, if it runs, is killed) and retires the leaf
 * with proof; retired follows, perhaps from inside this call. Once it is
 * ending, nothing more happens. */
void ad_helper_end(ad_helper *helper);
