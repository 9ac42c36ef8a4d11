/* Errors that a person can act on.
 *
 * Functions that can fail return a negative errno and fill an act_error with
 * one sentence naming what failed, where, and what to do:
 *   "host web1: claim names box b2 as executor, this box is b1". */
#pragma once

#include <stddef.h>

typedef struct act_error {
    int errnum;         /* positive errno of the failure, 0 when unset */
    char message[1024]; /* the sentence; empty when unset */
} act_error;

/* Fills err (which may be NULL) and returns -errnum, so a failure path reads
 *   return act_error_set(err, ENOENT, "release %s: not staged", version); */
int act_error_set(act_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Puts "context: " in front of an already filled message and returns
 * -err->errnum, for callers that add where a lower layer's failure happened. */
int act_error_prefix(act_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Empties err. */
void act_error_clear(act_error *err);
