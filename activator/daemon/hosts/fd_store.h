/* systemd's FD store, for the hosts' listening sockets: FDSTORE=1 with
 * FDNAME=<host>/<n>, one fd per message (an FDNAME= names every fd of its
 * message). sd_pid_notify_with_fds makes and closes a socket for each call;
 * a 10,000-host start stores 10,000 sockets, so one socket is kept for all
 * of them instead, connected once. Not thread-safe: the loop thread's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Puts fd in the FD store as name. Without $NOTIFY_SOCKET, nothing. */
void ad_fd_store_put(const char *name, int fd);
/* Puts fds[i] in the FD store as names[i], i < n: still a message each,
 * but sent in batches (sendmmsg), so that the manager reads a run of them
 * rather than being woken for each. With wait false, stops where the
 * manager's queue is full (a few messages deep) and returns how many it put,
 * for the caller to offer the rest again once it did other work; with wait
 * true, puts every one (libsystemd's way where a batch fails), returning n. */
size_t ad_fd_store_put_many(char *const *names, const int *fds, size_t n, bool wait);
/* Closes the kept socket (at exit; a later put opens it again). */
void ad_fd_store_close(void);
