/* The TLS engine of activatord's ControlListen=: which client certificate a
 * pipe presented.
 *
 * ControlOperators= and ControlViewers= name client certificates by subject
 * CN, but NNG 1.5.2 (Debian 12) has no way to read a pipe's peer certificate
 * (NNG_OPT_TLS_PEER_CN came with a later NNG). Its public engine interface
 * (nng/supplemental/tls/engine.h) lets a program bring its own TLS engine,
 * so activatord brings one on the same library NNG's built-in engine uses,
 * mbed TLS, with the same settings (TLS 1.2, the library's default suites):
 * it also keeps the subject CN of each verified peer certificate.
 *
 * The one per-pipe question the engine interface carries to a connection is
 * NNG_OPT_TLS_VERIFIED, answered synchronously on the asking thread, so the
 * CN travels with that answer through a thread-local slot: ctrl_tls_peer_cn
 * arms the slot, reads the option on the pipe, and takes what the pipe's
 * connection left there. A pipe whose connection is not this engine's leaves
 * nothing, and is refused. */
#pragma once

#include <stddef.h>

#include <nng/nng.h>

#include "common/error.h"

/* Makes this engine NNG's for every TLS configuration allocated afterwards
 * (process-wide: dialers too). Call once NNG has started (after any socket
 * was opened), or NNG's own start-up would register its built-in engine over
 * it. Idempotent. */
int ctrl_tls_engine_install(act_error *err);

/* The subject CN of the verified client certificate of pipe, into cn (of
 * size bytes). -ENOTSUP when pipe's connection is not of this engine,
 * -EPERM when its peer is not verified, -EBADMSG when the certificate has no
 * single CN of 1 to ACT_CN_MAX printable ASCII characters. Any thread. */
int ctrl_tls_peer_cn(nng_pipe pipe, char *cn, size_t size);
