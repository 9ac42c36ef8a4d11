/* Listening sockets the daemon owns on behalf of its hosts.
 *
 * The daemon binds every ListenStream= itself and keeps the socket for the
 * host's whole life: parked, a first connection waits in the backlog; across
 * a swap, generations N and N+1 accept from the same socket; across a daemon
 * restart, the socket survives in systemd's FD store. So a client never sees
 * a refused connection because of the activator. */
#pragma once

#include <stdbool.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/error.h"

typedef struct lsn_address {
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
    } addr;
    socklen_t len;
    /* An IPv6 wildcard that takes IPv4 connections too (IPV6_V6ONLY off);
     * an explicit [::]:PORT takes IPv6 only, so it can sit beside
     * 0.0.0.0:PORT. Not part of the address: two addresses are the same
     * when addr and len are. */
    bool dual_stack;
} lsn_address;

/* Parses "127.0.0.1:8080", "[::1]:8080" or an absolute unix path
 * "/run/web1.sock". `where` prefixes errors ("web1.conf:12: ListenStream"). */
int lsn_parse(const char *spec, const char *where, lsn_address *out, act_error *err);

/* ListenStream=: lsn_parse's forms, and a bare port as systemd.socket(5)
 * reads it: every address of the box, IPv6 and IPv4 on one socket ([::]:PORT,
 * dual_stack), or 0.0.0.0:PORT on a box without IPv6. */
int lsn_parse_stream(const char *spec, const char *where, lsn_address *out, act_error *err);

/* Binds and listens: SO_REUSEADDR, close-on-exec, non-blocking (the daemon
 * watches it on its loop; generations get it as-is and may change that).
 * A stale unix socket file is replaced; any other file at the path is not. */
int lsn_bind(const lsn_address *address, int backlog, act_error *err);

/* The same address (addr and len), as two ListenStream= lines can name. */
bool lsn_address_equal(const lsn_address *a, const lsn_address *b);

/* True when fd is a listening stream socket bound to address: how the daemon
 * recognises a socket handed back from the FD store after a restart. */
bool lsn_fd_matches(int fd, const lsn_address *address);

/* Human form for logs and status: "127.0.0.1:8080", "[::1]:8080", a path. */
void lsn_format(const lsn_address *address, char *out, size_t out_size);
