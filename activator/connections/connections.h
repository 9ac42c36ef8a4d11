/* How many connections a host has right now, from the kernel's own socket
 * table (NETLINK_SOCK_DIAG), not from a guess such as "no accept for a while":
 * a long-lived idle keep-alive connection still counts, and a host with none
 * is idle however recently it last accepted. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "activator/listen/listen.h"
#include "common/error.h"

/* Counts the connected sockets (established, or closed by the peer only)
 * whose local end is one of addresses: TCP sockets on the address's port
 * (any local address when the listener is bound to the wildcard), unix
 * stream sockets accepted from the path. Listening sockets are not counted. */
int conn_count(const lsn_address *addresses, size_t n_addresses, uint64_t *count, act_error *err);
