/* bench_util.h */
#include "bench/common/bench_util.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "common/clock.h"

extern char **environ;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t bench_median_u64(uint64_t *values, size_t n)
{
    if (n == 0)
        return 0;
    qsort(values, n, sizeof(*values), cmp_u64);
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int bench_run_sh(const char *script, uint64_t *usec)
{
    char *const argv[] = {"sh", "-c", (char *)script, NULL};
    uint64_t start = act_now_usec();
    pid_t pid;
    int r = posix_spawnp(&pid, "sh", NULL, NULL, argv, environ);
    if (r != 0)
        return -r;
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    if (usec)
        *usec = act_now_usec() - start;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}
