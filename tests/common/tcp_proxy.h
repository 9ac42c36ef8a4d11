/* A TCP proxy on loopback, for tests that need the network between a box
 * and its store to misbehave in one exact way: here, to lose one answer.
 *
 * A proxy listens on an address of its own and relays every connection to
 * its target, byte for byte, on a thread of its own. A test that must see
 * what a client does when a write landed but its answer never came arms a
 * hold shared by one or more proxies: the first connection whose request
 * (everything the client sent since the last answer) contains the hold's
 * needles has its answer read and dropped, as a network that lost it would,
 * and stays open until the client gives up and closes it. That the server
 * answered is the proof the write was applied (etcd's gateway answers a
 * transaction once it is committed). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

typedef struct tcp_proxy tcp_proxy;
typedef struct tcp_proxy_hold tcp_proxy_hold;

/* A hold no proxy has armed yet; the caller frees it after every proxy that
 * shares it has stopped. */
tcp_proxy_hold *tcp_proxy_hold_new(void);
void tcp_proxy_hold_free(tcp_proxy_hold *hold);

/* Arms hold for one answer: that of the first request, on any proxy
 * sharing it, containing every one of the n needles. */
void tcp_proxy_hold_arm(tcp_proxy_hold *hold, const char *const *needles, size_t n);

/* How many answers hold has dropped so far. */
unsigned tcp_proxy_hold_dropped(tcp_proxy_hold *hold);

/* Starts a proxy on listen_address (a free port, see tcp_proxy_port) to
 * target_address:target_port; hold may be NULL. NULL with err set when it
 * cannot listen. */
tcp_proxy *tcp_proxy_start(const char *listen_address, const char *target_address, int target_port,
                           tcp_proxy_hold *hold, act_error *err);

/* The port it listens on. */
int tcp_proxy_port(const tcp_proxy *proxy);

/* Closes every connection and the listener, and frees it; NULL is a no-op. */
void tcp_proxy_stop(tcp_proxy *proxy);
