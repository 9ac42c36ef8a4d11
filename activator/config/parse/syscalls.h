/* SystemCallFilter= lines, in systemd's syntax: system call names and
 * systemd's @groups, a leading ~ making the line a deny line, several lines
 * accumulating and an empty one resetting, as in a unit file. */
#pragma once

#include <stdbool.h>

#include "common/error.h"

typedef enum cfg_syscall_base {
    CFG_SYSCALLS_DEFAULT = 0, /* the activator's default allow-list (cgroup/ seccomp) */
    CFG_SYSCALLS_ALLOW,       /* an allow-list that starts empty (after a reset) */
    CFG_SYSCALLS_NONE,        /* a deny-list; with nothing denied, no filter at all */
} cfg_syscall_base;

/* A zeroed filter is the default. allow and deny hold single system calls
 * (groups expanded when read), never one in both: on an allow-list, allow
 * adds to it and deny takes off it; on a deny-list, deny adds and allow
 * takes off. */
typedef struct cfg_syscall_filter {
    cfg_syscall_base base;
    /* After an empty line: no filter, and the next line decides whether the
     * list is an allow-list (names) or a deny-list (~names), as in systemd. */
    bool reset;
    char **deny;  /* NULL-terminated, NULL when none */
    char **allow; /* NULL-terminated, NULL when none */
} cfg_syscall_filter;

/* Applies one SystemCallFilter= line to *filter (changing nothing on
 * failure):
 *   ""                       reset: no filter, the next line starts a list
 *   "@network-io io_uring_setup"   allow these too
 *   "~@mount keyctl"          refuse these too
 * Every name must be a system call libseccomp knows on this machine's
 * architecture and every group one of systemd's, so a typo is an error
 * here rather than a silently missing rule. */
int cfg_parse_syscall_filter(const char *text, cfg_syscall_filter *filter, act_error *err);

void cfg_syscall_filter_clear(cfg_syscall_filter *filter);
