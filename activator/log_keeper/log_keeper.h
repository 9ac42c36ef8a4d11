/* The box's log keeper: a small process of activatord's own binary that
 * drains every host's output into its log file, so that no tenant's
 * output is ever written, sized or rotated by the daemon's loop.
 *
 * Without journald, a generation's stdout and stderr are the write end of
 * a pipe (activator/daemon/generations/output.c). The keeper reads the
 * pipe and appends what it reads to <state>/hosts/<host>/log/output.log,
 * and renames that file to output.log.1 once it reaches its bound: the
 * host never holds the file, so it cannot grow it with ftruncate() or seek
 * in it, and the file is never larger than the bound and one read.
 *
 * Generations outlive the daemon (a crash, a handover), so their pipes
 * must too: the keeper lives in a cgroup of its own beside hosts/, and it
 * and the daemon both hold every pipe's read end (protocol.h). The daemon
 * that dies leaves the pipes with the keeper, which goes on draining them;
 * the next daemon gets a copy of each when it connects. The keeper that
 * dies leaves them with the daemon, which starts another and hands it
 * every pipe. Only both dying at once (a power cut, the box's cgroup
 * killed) ends the pipes, and then their writers are gone too.
 *
 * The keeper exits once no daemon is connected and no pipe is left. */
#pragma once

/* Runs the keeper on its listening socket until it has nothing left to
 * keep; the process's exit status. */
int lk_keeper_main(int listen_fd);
