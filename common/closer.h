/* Closing a file descriptor someone else gave us, without waiting for it.
 *
 * The last close of a file can block its caller: a TCP socket with
 * SO_LINGER set and unsent data waits out its linger time (up to hours), a
 * FUSE file waits for its server's FLUSH. A tenant that hands such an fd to
 * the daemon (over its notify socket, or left where the daemon takes a
 * socket back) would stall the daemon's loop. So such fds are closed here:
 * a socket first loses its linger (SO_LINGER 0: the close resets it at
 * once), then the fd goes to a thread of its own that only closes. When
 * that thread is behind by more than its queue holds, the fd is closed in
 * place after all; by then it can no longer linger. */
#pragma once

/* Closes fd (a negative fd is ignored) as above; never blocks for the
 * linger of a socket. Any thread. */
void act_close_foreign(int fd);

/* Closes fd on the closer thread without touching its options: for an fd
 * that may still be shared with its owner (a socket taken back from a
 * generation), whose own linger is its business. Falls back to closing in
 * place when the queue is full. */
void act_close_later(int fd);
