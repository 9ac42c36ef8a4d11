/* bench-checkpoint-pause: the pause a periodic checkpoint (CheckpointEverySec=)
 * puts on a serving app, for 10 MiB and 100 MiB of state: its leaf frozen
 * (cgroup.freeze, until cgroup.events says frozen), the state directory
 * archived with ckpt_write, the leaf thawed, as moves/checkpoint_every.c
 * does, with a real app in a real leaf writing into the state directory
 * between rounds. The baseline, in the same run and interleaved: the same
 * ckpt_write with the app running, no freeze. The ratio says what freezing
 * adds to the archive alone; the pause itself is what clients wait.
 * Median and p99 over the runs, with the spread (min..max).
 *
 *   bench-checkpoint-pause [runs]    default: 20
 *
 * As root, on a box with a cgroup2 hierarchy (a throwaway root below our
 * own cgroup). Target: the pause p99 <= 100 ms for 10 MiB. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/common/bench_util.h"
#include "cgroup/cgroup.h"
#include "checkpoint/checkpoint.h"
#include "common/clock.h"

static int write_blob(const char *path, size_t len, uint64_t *x)
{
    uint64_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    for (size_t j = 0; j < len / sizeof(uint64_t); j++) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        buf[j] = *x;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ssize_t n = fd >= 0 ? write(fd, buf, len) : -1;
    if (fd >= 0)
        close(fd);
    free(buf);
    return n == (ssize_t)len ? 0 : -EIO;
}

/* mib files of 1 MiB of incompressible bytes: the archive's worst case. */
static int make_state(const char *state, unsigned mib)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char path[4200];
    for (unsigned i = 0; i < mib; i++) {
        snprintf(path, sizeof(path), "%s/b%03u", state, i);
        if (write_blob(path, 1u << 20, &x) < 0)
            return -EIO;
    }
    return 0;
}

/* Freezes or thaws leaf and waits until cgroup.events says so. */
static int set_frozen(cg_leaf *leaf, bool frozen, act_error *err)
{
    int r = cg_leaf_freeze(leaf, frozen, err);
    if (r < 0)
        return r;
    int fd = cg_leaf_events_fd(leaf, err);
    if (fd < 0)
        return fd;
    for (;;) {
        bool now = !frozen;
        if ((r = cg_leaf_frozen(leaf, &now, err)) < 0)
            return r;
        if (now == frozen)
            return 0;
        struct pollfd p = {.fd = fd, .events = CG_LEAF_EVENTS_POLL};
        poll(&p, 1, 100);
    }
}

static uint64_t percentile(uint64_t *sorted, size_t n, double p)
{
    size_t at = (size_t)(p * (double)(n - 1) + 0.5);
    return sorted[at < n ? at : n - 1];
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int run_size(cg_leaf *leaf, const char *tmp, const char *state, unsigned mib, size_t runs)
{
    char store[1100], command[4400];
    snprintf(store, sizeof(store), "%s/checkpoints-%u", tmp, mib);
    snprintf(command, sizeof(command), "rm -rf %s/b* && mkdir -p %s", state, store);
    if (system(command) != 0 || make_state(state, mib) < 0) {
        fprintf(stderr, "cannot make %u MiB of state in %s\n", mib, state);
        return -1;
    }
    uint64_t *pause = calloc(runs, sizeof(*pause)), *alone = calloc(runs, sizeof(*alone));
    if (!pause || !alone)
        return -1;
    int r = 0;
    for (size_t i = 0; i < runs && r == 0; i++) {
        act_error err = {0};
        ckpt_info info;
        uint64_t start = act_now_usec();
        r = ckpt_write(store, "bench", state, i + 1, "box-1", NULL, &info, &err);
        alone[i] = act_now_usec() - start;

        start = act_now_usec();
        if (r == 0)
            r = set_frozen(leaf, true, &err);
        if (r == 0)
            r = ckpt_write(store, "bench", state, i + 1, "box-1", NULL, &info, &err);
        if (r == 0)
            r = set_frozen(leaf, false, &err);
        pause[i] = act_now_usec() - start;
        if (r < 0)
            fprintf(stderr, "%u MiB, run %zu: %s\n", mib, i + 1, err.message);
        (void)ckpt_prune(store, "bench", 1, NULL, 0, &err);
    }
    if (r == 0) {
        qsort(pause, runs, sizeof(*pause), compare_u64);
        qsort(alone, runs, sizeof(*alone), compare_u64);
        uint64_t p50 = percentile(pause, runs, 0.5), base = percentile(alone, runs, 0.5);
        printf("%4u MiB  pause p50 %7.1f ms  p99 %7.1f ms  (%.1f..%.1f)   archive alone p50 "
               "%7.1f ms (%.1f..%.1f)   RATIO %.2f  added %+.1f ms%s\n",
               mib, p50 / 1000.0, percentile(pause, runs, 0.99) / 1000.0, pause[0] / 1000.0,
               pause[runs - 1] / 1000.0, base / 1000.0, alone[0] / 1000.0, alone[runs - 1] / 1000.0,
               (double)p50 / (double)base, ((double)p50 - (double)base) / 1000.0,
               mib == 10 ? "   (target: pause p99 <= 100 ms)" : "");
    }
    free(pause);
    free(alone);
    return r;
}

int main(int argc, char **argv)
{
    size_t runs = argc > 1 ? strtoul(argv[1], NULL, 10) : 20;
    if (runs == 0) {
        fprintf(stderr, "usage: %s [runs]\n", argv[0]);
        return 2;
    }
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
    char tmp[1024], state[1100], writer[4400];
    snprintf(tmp, sizeof(tmp), "%s/bench-pause-XXXXXX", base);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "cannot create a temporary directory under %s: %s\n", base,
                strerror(errno));
        return 1;
    }
    snprintf(state, sizeof(state), "%s/state", tmp);
    mkdir(state, 0755);
    act_error err = {0};
    cg_root *root = NULL;
    cg_leaf *leaf = NULL;
    int status = 1;
    if (cg_root_create_throwaway("bench-pause", &root, &err) < 0 ||
        cg_leaf_create(root, "bench", "g-1", NULL, &leaf, &err) < 0) {
        fprintf(stderr, "bench-checkpoint-pause: %s (run as root on a cgroup2 box)\n", err.message);
        goto out;
    }
    /* The app: it writes into its state directory now and then, as a
     * serving app does. */
    snprintf(writer, sizeof(writer), "while :; do date >> %s/log; sleep 0.01; done", state);
    const char *const app_argv[] = {"/bin/sh", "-c", writer, NULL};
    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.exec_fd = open("/bin/sh", O_RDONLY | O_CLOEXEC);
    spec.argv = app_argv;
    cg_process app;
    if (spec.exec_fd < 0 || cg_spawn(leaf, &spec, &app, &err) < 0) {
        fprintf(stderr, "bench-checkpoint-pause: cannot start the app: %s\n", err.message);
        goto out;
    }
    close(spec.exec_fd);
    printf("the pause of a periodic checkpoint (freeze, ckpt_write, thaw) against ckpt_write "
           "alone, %zu runs each, incompressible state\n",
           runs);
    status = run_size(leaf, tmp, state, 10, runs) == 0 && run_size(leaf, tmp, state, 100, runs) == 0
                 ? 0
                 : 1;
    close(app.pidfd);
out:
    if (leaf)
        cg_leaf_free(leaf);
    if (root && cg_root_destroy_throwaway(root, &err) < 0)
        fprintf(stderr, "bench-checkpoint-pause: %s\n", err.message);
    snprintf(writer, sizeof(writer), "rm -rf %s", tmp);
    if (system(writer) != 0)
        fprintf(stderr, "cannot remove %s\n", tmp);
    return status;
}
