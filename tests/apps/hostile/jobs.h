/* The long attempts of act-hostile, each in a child of its own so that the
 * app keeps answering the test while they run. A job writes its report lines
 * (report.h) to out_fd and exits. */
#pragma once

/* Sends datagrams to the app's own NOTIFY_SOCKET as fast as the socket takes
 * them, for ms milliseconds: small STATUS= and WATCHDOG=1 ones and every
 * sixteenth a large one. Reports a note with what it sent; whether the
 * flood hurt anyone is for the test to measure. */
void job_flood(int out_fd, long ms);

/* Pushes a TCP socket whose close lingers sec seconds (SO_LINGER, unsent
 * data: tests/common/lingering.h) over the app's own NOTIFY_SOCKET
 * (FDSTORE=1) and drops its own copy, so that the daemon's close of it is
 * the last; holds the socket's peer for the linger, then reports a note.
 * Whether the daemon's loop waited is for the test to measure. */
void job_linger(int out_fd, long sec);

/* Forks until the kernel refuses (the host's cap), or max processes run,
 * or within_ms passed with neither. At the first refusal it reports a note
 * "forkbomb at the cap: ..." at once, and keeps trying, as a fork bomb
 * would, until SIGUSR1 (the test has judged the box meanwhile) or for
 * hold_ms; then lets them all go. Reports the attempt "forkbomb": succeeded
 * when max processes were made; "untried" when within_ms passed before the
 * cap or max was reached (a box too slow to tell anything). */
void job_forkbomb(int out_fd, long max, long within_ms, long hold_ms);
