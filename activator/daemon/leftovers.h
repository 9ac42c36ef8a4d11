/* What a previous daemon left running: every leaf under our cgroup subtree,
 * found at start-up before the hosts' sockets are bound (a socket still
 * held by a surviving generation can then be taken back), and kept until
 * recovery.c has resumed or retired each one. */
#pragma once

#include "activator/daemon/context.h"
#include "common/names.h"

typedef struct act_leftover {
    char host[ACT_NAME_MAX + 1];
    char leaf[ACT_NAME_MAX + 1];
    cg_found_process *procs;         /* pidfd -1 once taken */
    size_t n_procs;
} act_leftover;

struct act_leftovers {
    act_leftover *items;             /* in the order found */
    size_t n;
};

/* Fills daemon->leftovers. */
int act_leftovers_scan(act_daemon *daemon, act_error *err);
/* The listening socket <host>/<index> as the generation it was passed to
 * still holds it, if it is bound to address; -1 when none is. */
int act_leftovers_take_socket(act_daemon *daemon, const char *host, unsigned index,
                              const act_listen_address *address);
void act_leftovers_free(act_daemon *daemon);
