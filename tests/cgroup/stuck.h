/* A process held in uninterruptible sleep inside a cgroup, for as long as a
 * test wants: the one thing a cgroup kill cannot end at once, and so the way
 * to make a leaf that resists its proof of empty (see apps/cg-stuck.c for
 * how and why a FUSE read). Used by the cgroup tests and by the daemon's
 * tests alike, so it needs nothing of CMocka. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct cgt_stuck {
    pid_t helper;    /* cg-stuck, which holds the victim; 0 when none */
    int to_helper;   /* its stdin: a line lets the victim go */
    int from_helper; /* its stdout */
    pid_t victim;    /* the held process, in the cgroup */
} cgt_stuck;

/* Runs program (cg-stuck) and waits, up to 10 s, until its victim sits in
 * cgroup_dir with its read held. 0; -ENODEV when FUSE is not usable here (a
 * test skips then); another -errno otherwise, with out zeroed. why says what
 * failed. */
int cgt_stuck_start(const char *program, const char *cgroup_dir, cgt_stuck *out, char *why,
                    size_t why_size);

/* The victim's state from /proc/PID/stat: 'S' while it waits for its read,
 * 'D' once a SIGKILL is pending on it; '?' once it is gone. */
char cgt_stuck_state(const cgt_stuck *stuck);

/* Lets the victim go and waits, up to 10 s, until it and the helper ended.
 * what (may be NULL) gets the helper's last line ("released victim=P
 * killed=9"). 0 or -errno. Does nothing for a stuck already released or
 * never started (a zeroed one). */
int cgt_stuck_release(cgt_stuck *stuck, char *what, size_t what_size);
