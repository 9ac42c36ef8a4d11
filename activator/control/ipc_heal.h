/* A local (ipc://) listener that heals itself.
 *
 * NNG 1.5.2's IPC transport can wedge a listener: a client that connects,
 * sends its SP header and closes before it reads ours leaves the listener,
 * at times, delivering no new connection to its socket ever again. The
 * kernel still accepts, the header exchange still completes, but the pipe
 * never joins the socket, so every later request (or subscription) goes
 * unanswered until the listener is closed. Pipes already joined keep
 * working, and a new listener on the same path delivers again. Any local
 * peer that can reach the socket file (a viewer, an activatorctl killed
 * mid-connect) can cause it.
 *
 * So the daemon probes its own listener: every IPC_HEAL_PERIOD_USEC it
 * connects to the socket file and sends the SP header of the peer protocol
 * (a plain connection, not an NNG socket: see ipc_heal.c), and expects
 * the pipe to reach the served socket (the owner's pipe callback reports it
 * through ipc_heal_note_pipe) within IPC_HEAL_TIMEOUT_USEC. No request is sent
 * and no request context is taken, so a server busy answering is never taken
 * for a wedged one, and the probe shows up in no request metric. When the
 * pipe does not arrive, a new listener takes the socket file over, with the
 * same mode, owner and ACL, and one line is logged.
 *
 * Closing the wedged listener would heal it too, but NNG closes every pipe a
 * listener delivered when the listener closes, and a request in flight on a
 * healthy pipe would be lost with it. So the wedged listener is retired
 * instead: no client can find it any more, its pipes stay joined, and it is
 * closed once the last of them is gone (the owner's pipe callbacks count
 * them through ipc_heal_note_pipe and ipc_heal_note_pipe_gone). A probe
 * that was only slow costs as little: a listener that was not wedged serves
 * its pipes until they go, like a wedged one. Only the probe must not hang
 * up before the listener has read its header, or the prober itself would
 * wedge a listener that was merely slow (a loaded machine), and strand a
 * client whose connection it had accepted but not yet delivered: the
 * retiring listener keeps the probe's connection until its header is read.
 *
 * What no healing mends: a connection that was still in its handshake when
 * the listener wedged (another client hung up in that instant) is kept by
 * NNG and never delivered. It is closed when its listener closes, once the
 * listener's delivered pipes are gone; its client then sees the connection
 * close (activatorctl says so and exits 3; an NNG client that reconnects
 * sends its request again). NNG 1.5.2 now and then loses
 * some memory of a wedged listener when it closes (never a descriptor): a
 * few KiB for each wedge, a price against a deaf control socket.
 *
 * The prober runs on a thread of its own: it sleeps most of the time, and
 * opening or closing a listener waits for NNG's threads, which the daemon's
 * loop must never do. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>

#include "activator/control/peer.h"
#include "common/cleanup.h"
#include "common/error.h"

/* A probe starts this often... */
#define IPC_HEAL_PERIOD_USEC (3 * 1000 * 1000ull)
/* ...and its pipe must reach the socket within this; a wedged listener is
 * so listening again within the sum of both. */
#define IPC_HEAL_TIMEOUT_USEC (1500 * 1000ull)

typedef struct ipc_heal ipc_heal;

typedef struct ipc_heal_options {
    const char *what;      /* "Control" or "Events", the key named in messages */
    nng_socket socket;     /* the served socket */
    const char *url;       /* "ipc:///path"; must outlive the healer */
    int mode;              /* the socket file's mode */
    const ctrl_access *access; /* owner and ACL (ctrl_ipc_socket_grant); must outlive it */
    uint16_t peer_protocol; /* the SP protocol of the peers: 0x30 REQ v0, 0x21 SUB v0 */
} ipc_heal_options;

/* Allocates the healer without listening, so that the owner can hand it to
 * its pipe callback before any pipe can come. */
int ipc_heal_new(const ipc_heal_options *options, ipc_heal **out, act_error *err);

/* Listens on options->url as the options say: a listener on a temporary
 * name beside it (the path with ".h<n>" appended), renamed over it once its
 * mode, owner and ACL are set, so the path must leave room for that. With
 * probe, also starts the prober's thread. Fails with a sentence naming the
 * URL; with EADDRINUSE when another process listens on the path. */
int ipc_heal_listen(ipc_heal *heal, bool probe, act_error *err);

/* Stops the prober and waits for its thread, before the served socket
 * closes (else it could listen again on a socket that is closing). */
void ipc_heal_stop(ipc_heal *heal);

/* NNG thread, from the served socket's NNG_PIPE_EV_ADD_PRE callback: true
 * when pipe is the probe's (this process's own), which is noted as proof that
 * the listener delivers. heal may be NULL (no healer yet). */
bool ipc_heal_note_pipe(ipc_heal *heal, nng_pipe pipe);

/* NNG thread, from the served socket's NNG_PIPE_EV_REM_POST callback. */
void ipc_heal_note_pipe_gone(ipc_heal *heal, nng_pipe pipe);

/* After the served socket is closed (its pipe callbacks may run until
 * then). Stops probing if still on, and removes the socket file. */
void ipc_heal_free(ipc_heal *heal);
DEFINE_TRIVIAL_CLEANUP_FUNC(ipc_heal *, ipc_heal_free)
