/* The long attempts of act-hostile, each in a child of its own so that the
 * app keeps answering the test while they run. A job writes its report lines
 * (report.h) to out_fd and exits. */
#pragma once

/* Sends datagrams to the app's own NOTIFY_SOCKET as fast as the socket takes
 * them, for ms milliseconds: small STATUS= and WATCHDOG=1 ones and every
 * sixteenth a large one. Reports a note with what it sent; whether the
 * flood hurt anyone is for the test to measure. */
void job_flood(int out_fd, long ms);

/* Forks until max processes run or the kernel refuses, then keeps trying for
 * the rest of ms, as a fork bomb would; then lets them all go. Reports the
 * attempt "forkbomb": succeeded when max processes were made. */
void job_forkbomb(int out_fd, long ms, long max);
