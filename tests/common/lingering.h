/* A TCP socket whose last close blocks: SO_LINGER set, and data it cannot
 * send (its peer reads nothing), so
 * close() waits out the linger time. What a tenant hands the daemon to
 * stall it. */
#pragma once

/* The socket, and in *listener its peer, which reads nothing (close it
 * after the socket). -1 with errno on failure. */
int lingering_socket(int linger_sec, int *listener);
