/* What a previous daemon left running: every leaf under our cgroup subtree,
 * found at start-up before the hosts' sockets are bound (a socket still
 * held by a surviving generation can then be taken back), and kept until
 * hosts/recovery.c has resumed or retired each one. */
#pragma once

#include "activator/daemon/host/context.h"
#include "common/names.h"

typedef struct ad_leftover {
    char host[ACT_NAME_MAX + 1];
    char leaf[ACT_NAME_MAX + 1];
    cg_found_process *procs;         /* pidfd -1 once taken */
    size_t n_procs;
    bool resumed;                    /* hosts/recovery.c resumed it */
} ad_leftover;

struct ad_leftovers {
    ad_leftover *items; /* in the order found */
    size_t n;
};

/* Fills daemon->leftovers. */
int ad_leftovers_scan(ad_daemon *daemon, act_error *err);
/* The listening socket <host>/<index> as the generation it was passed to
 * still holds it, if it is bound to address; -1 when none is. */
int ad_leftovers_take_socket(ad_daemon *daemon, const char *host, unsigned index,
                             const lsn_address *address);
void ad_leftovers_free(ad_daemon *daemon);
