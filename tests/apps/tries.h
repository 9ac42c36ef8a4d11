/* What a test app tries from inside its generation, and how each attempt
 * came out, one line each, for a test to check:
 *   try ACTION: ok[ DETAIL]
 *   try ACTION: ENAME (strerror)
 * ACTION is one of
 *   write:PATH          create PATH (or truncate it) and write a byte
 *   read:PATH           open PATH for reading
 *   openw:PATH          open PATH for writing, and close it unwritten
 *   blockdev:DIR        open the first block device in DIR: "ok NAME", or ENOENT
 *   list:DIR            count DIR's entries: "ok N entries"
 *   proc:PID            stat /proc/PID (PID "self" names ourselves)
 *   cgjoin:DIR          write our pid into DIR/cgroup.procs (a cgroup escape)
 *   cgwrite:FILE=VALUE  write VALUE into FILE (cgroup.kill, cgroup.freeze)
 *   connect:PATH        connect a datagram socket to the unix socket PATH
 *   pids:               "ok N pids: P1 P2 ...": the processes /proc shows us
 *   cgroup:             "ok PATH": where /proc/self/cgroup says we are (v2)
 * Anything else is reported as "try ACTION: EINVAL (unknown action)". */
#pragma once

#include <stddef.h>
#include <stdio.h>

/* Runs every action in order, printing one line each to out. */
void act_tries_run(char *const *actions, size_t n, FILE *out);
