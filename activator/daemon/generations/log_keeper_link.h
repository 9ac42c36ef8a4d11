/* The daemon's side of the box's log keeper (activator/log_keeper/
 * log_keeper.h): it finds the keeper a previous daemon left, or starts
 * one, and hands it a pipe for each host log it opens (generations/
 * output.c). It keeps a copy of every pipe's read end, the keeper's and
 * its own, so a keeper that dies loses no pipe: the daemon starts another
 * (after 100 ms, doubling to 5 s while starts keep failing) and hands it
 * them all.
 *
 * While there is no keeper, ad_log_keeper_pipe fails and the host's output
 * goes to its file directly (output.c says what that costs). A test build
 * runs without one under ACTIVATOR_TEST_NO_LOG_KEEPER=1, which is how the
 * tests show what the keeper defends. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/daemon/host/context.h"

typedef struct ad_log_keeper ad_log_keeper;

/* Connects to the keeper, or starts one in <cgroup root>/log-keeper; none
 * when not needed (under journald). A box without one still runs (the
 * hosts' output goes to their files, and the daemon says why); only out of
 * memory fails. */
int ad_log_keeper_open(ad_daemon *daemon, bool needed, act_error *err);

/* A new pipe whose read end the keeper drains into output.log in dir_fd
 * (host's log directory, which the caller keeps), rotated at max_bytes;
 * its write end (CLOEXEC) is the caller's, in *write_fd. -errno when there
 * is no keeper now. */
int ad_log_keeper_pipe(ad_daemon *daemon, const char *host, int dir_fd, uint64_t max_bytes,
                       int *write_fd);

/* A line "-- activatord: host <host>, <text> --" in host's output.log, after
 * what its pipes hold now; dropped while there is no keeper. */
void ad_log_keeper_mark(ad_daemon *daemon, const char *host, const char *text);

/* HostLogMaxSize= changed: every host's file is rotated at max_bytes from
 * its next write on. Dropped while there is no keeper (the next keeper
 * gets the bound with each pipe). */
void ad_log_keeper_set_bound(ad_daemon *daemon, uint64_t max_bytes);

/* Closes the link; with wait_for_exit (a clean stop, every generation gone)
 * waits up to a second for the keeper to drain what is left and exit, and
 * removes its cgroup. Otherwise the keeper goes on for the generations
 * still running, and the next daemon connects to it. */
void ad_log_keeper_close(ad_daemon *daemon, bool wait_for_exit);
