/* The messages between activatord and its log keeper (log_keeper.h says why
 * the keeper exists). One message is one SOCK_SEQPACKET datagram of text,
 * with at most LK_FDS_MAX descriptors riding on it:
 *
 *   daemon -> keeper
 *     add INO MAX HOST   [pipe read end, <state>/hosts/HOST/log]
 *                        drain this pipe into HOST's output.log, rotated
 *                        at MAX bytes; INO is the pipe's inode, its name
 *                        on both sides
 *     mark HOST TEXT     write "-- activatord: host HOST, TEXT --" into
 *                        HOST's output.log, after what its pipes hold now
 *     bound MAX          rotate every host's file at MAX bytes from now on
 *   keeper -> daemon
 *     held INO HOST      [pipe read end, the log directory]  one of the
 *                        pipes it drains, sent to each daemon that
 *                        connects, which keeps a copy
 *     hello PID          after the last "held": the daemon now holds
 *                        every pipe the keeper does
 *     ended INO          every writer of that pipe closed it, and what it
 *                        held is in the file
 *
 * Both sides hold every pipe's read end, so a pipe outlives either one's
 * death and its writers never meet a pipe without a reader. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define LK_SOCKET_NAME "log-keeper.sock"
/* The keeper's cgroup, a leaf of the box's root beside hosts/. */
#define LK_CGROUP_NODE "log-keeper"
#define LK_MESSAGE_MAX 1024
#define LK_FDS_MAX 2
/* The command line the daemon's binary is started with to be the keeper;
 * its listening socket is fd 3. */
#define LK_ARGUMENT "--log-keeper"
#define LK_LISTEN_FD 3

/* Sends text with n_fds descriptors; flags as send(2)'s (MSG_DONTWAIT).
 * 0, or -errno. */
int lk_send(int sock, const char *text, const int *fds, size_t n_fds, int flags);

/* Receives one message without waiting: its length, 0 when the peer is
 * gone, -EAGAIN when there is none, another -errno on failure. The text is
 * NUL-terminated; the descriptors that came with it are in
 * fds (CLOEXEC), *n_fds of them (more than max_fds, or a truncated message,
 * are closed and the message refused with -EBADMSG). text holds size
 * bytes with the NUL. */
ssize_t lk_receive(int sock, char *text, size_t size, int *fds, size_t max_fds, size_t *n_fds);
