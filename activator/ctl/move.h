/* activatorctl move: starts a move (or resumes the one in flight to the same
 * box), then follows the host's claim through its phases until the host
 * serves on the box named, or the move rolled back, or --timeout ran out
 * (then it rolls the move back itself). move --abort rolls it back. */
#pragma once

#include <json-c/json.h>

#include "activator/ctl/client.h"

/* Gets the reply to a request, from a daemon or with --store from the claim
 * store (commands.c's way), as a CTL_EXIT_* code with *reply set when one
 * came. */
typedef int (*ctl_move_call_fn)(const ctl_options *options, const char *what,
                                json_object *request, json_object **reply);

typedef struct ctl_move_args {
    const char *host;
    const char *box;     /* NULL with abort */
    bool force;
    bool abort;
    int timeout_sec;     /* the whole move; then it is rolled back */
} ctl_move_args;

/* Runs it; returns 0 when the host serves on the box (or the abort rolled
 * it back), 1 when the move failed or was refused (the reason and where the
 * host serves now printed), 3 when nothing could be reached. */
int ctl_move_run(const ctl_options *options, const ctl_move_args *args, ctl_move_call_fn call);
