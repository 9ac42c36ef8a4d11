/* SystemCallFilter= values: "default", "none", "default ~ptrace",
 * "default io_uring_setup", "none ~kexec_load". */
#pragma once

#include "common/error.h"

typedef enum cfg_syscall_base {
    CFG_SYSCALLS_DEFAULT = 0, /* the activator's deny list (see cgroup/ seccomp) */
    CFG_SYSCALLS_NONE,        /* no filter at all */
} cfg_syscall_base;

typedef struct cfg_syscall_filter {
    cfg_syscall_base base;
    char **deny;  /* also denied: "~name" words; NULL-terminated, NULL when none */
    char **allow; /* taken off the default list: "name" words; NULL when none */
} cfg_syscall_filter;

/* Parses the value into *out (replacing nothing on failure). Every name must
 * be a system call libseccomp knows on this machine's architecture, so a typo
 * is an error here rather than a silently missing rule. */
int cfg_parse_syscall_filter(const char *text, cfg_syscall_filter *out, act_error *err);

void cfg_syscall_filter_clear(cfg_syscall_filter *filter);
