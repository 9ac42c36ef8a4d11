/* SystemCallFilter= values: "default", "none", "default ~ptrace",
 * "default io_uring_setup", "none ~kexec_load". */
#pragma once

#include "common/error.h"

typedef enum act_syscall_base {
    ACT_SYSCALLS_DEFAULT = 0, /* the activator's deny list (see cgroup/ seccomp) */
    ACT_SYSCALLS_NONE,        /* no filter at all */
} act_syscall_base;

typedef struct act_syscall_filter {
    act_syscall_base base;
    char **deny;  /* also denied: "~name" words; NULL-terminated, NULL when none */
    char **allow; /* taken off the default list: "name" words; NULL when none */
} act_syscall_filter;

/* Parses the value into *out (replacing nothing on failure). Every name must
 * be a system call libseccomp knows on this machine's architecture, so a typo
 * is an error here rather than a silently missing rule. */
int act_parse_syscall_filter(const char *text, act_syscall_filter *out, act_error *err);

void act_syscall_filter_clear(act_syscall_filter *filter);
