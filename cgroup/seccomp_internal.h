/* The compiled seccomp program as the spawned child sees it. */
#pragma once

#include <linux/filter.h>

struct cg_seccomp_program {
    struct sock_fprog fprog; /* what seccomp(SECCOMP_SET_MODE_FILTER) takes */
};
