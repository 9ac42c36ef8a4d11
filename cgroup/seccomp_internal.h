/* The compiled seccomp program as the spawned child sees it, and systemd's
 * system call groups the compiler expands. */
#pragma once

#include <linux/filter.h>

struct cg_seccomp_program {
    struct sock_fprog fprog; /* what seccomp(SECCOMP_SET_MODE_FILTER) takes */
};

/* One of systemd's groups: "@network-io" and its members, system call
 * names or other groups ("@default"), NULL-terminated. */
typedef struct cg_seccomp_group {
    const char *name;
    const char *help;
    const char *const *members;
} cg_seccomp_group;

/* The group called name ("@system-service"), or NULL. */
const cg_seccomp_group *cg_seccomp_group_find(const char *name);
