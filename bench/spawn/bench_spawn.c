/* bench-spawn: what one generation's start/stop cycle costs through the
 * cgroup layer (create leaf, spawn a tiny static app, wait for its exit
 * through the pidfd, prove the leaf empty, remove it) against the same
 * cgroup work done with bare syscalls, in the same run, same N, same app.
 * Variants alternate in rounds so drift in the machine hits all alike.
 * Prints medians and the ratio; target: layer <= 1.15x baseline.
 *
 * The isolated variant does the same with a generation's isolation: the
 * layer with a filesystem view (isolated_spec), the baseline with the same
 * unshare and mounts done by hand in its child (raw_isolation.c). Its own
 * ratio has the same target. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/spawn/raw_cycle.h"
#include "cgroup/cgroup.h"
#include "common/clock.h"

#define ROUNDS 10
#define TIMEOUT_USEC 10000000ULL

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_usec(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

/* What the isolated variant's spawns get besides the plain spec: as a
 * generation of the daemon does, a filesystem view (the daemon's state and
 * runtime directories hidden, the host's state directory kept, its notify
 * directory passed, its build passed read-only, private /tmp, /proc
 * without the others' processes).
 * NULL fields: the plain variant. */
typedef struct isolation {
    const cg_fs_view *view;
    const char *const *passed;
    const char *const *read_only;
} isolation;

static void isolated_spec(cg_spawn_spec *spec, const isolation *iso)
{
    if (!iso)
        return;
    spec->fs_view = iso->view;
    spec->fs_passed = iso->passed;
    spec->fs_read_only = iso->read_only;
    spec->private_ipc = true;
}

static int make_view(const struct raw_isolation *raw, cg_fs_view **view, act_error *err)
{
    const char *hidden[] = {raw->state, raw->run, NULL};
    const char *writable[] = {raw->host_state, NULL};
    cg_fs_view_spec spec = {
        .hidden = hidden,
        .writable = writable,
        .private_tmp = true,
        .hide_processes = true,
        .private_dev = true,
    };
    return cg_fs_view_new(&spec, view, err);
}

static int layer_cycle(cg_root *root, int exec_fd, unsigned cycle, const isolation *iso,
                       act_error *err)
{
    char name[32];
    snprintf(name, sizeof(name), "%s-%u", iso ? "i" : "g", cycle);
    cg_leaf *leaf = NULL;
    int r = cg_leaf_create(root, "bench", name, NULL, &leaf, err);
    if (r < 0)
        return r;
    const char *argv[] = {"spawn-tiny", NULL};
    const char *envp[] = {NULL};
    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.exec_fd = exec_fd;
    spec.argv = argv;
    spec.envp = envp;
    isolated_spec(&spec, iso);
    cg_process proc;
    r = cg_spawn(leaf, &spec, &proc, err);
    if (r == 0) {
        siginfo_t info;
        if (waitid(P_PIDFD, (id_t)proc.pidfd, &info, WEXITED) < 0)
            r = -errno;
        else if (info.si_code != CLD_EXITED || info.si_status != 0)
            r = act_error_set(err, EIO, "the tiny app did not exit 0");
        close(proc.pidfd);
    }
    if (r == 0)
        r = cg_leaf_wait_empty(leaf, TIMEOUT_USEC, err);
    if (r == 0)
        r = cg_leaf_remove(leaf, err);
    cg_leaf_free(leaf);
    return r;
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 300;
    if (n < ROUNDS)
        n = ROUNDS;
    n -= n % ROUNDS;
    if (geteuid() != 0) {
        printf("bench-spawn: SKIP, needs root to create cgroups\n");
        return 77;
    }
    int exec_fd = open(SPAWN_TINY_APP, O_RDONLY | O_CLOEXEC);
    if (exec_fd < 0) {
        fprintf(stderr, "bench-spawn: cannot open %s: %s\n", SPAWN_TINY_APP, strerror(errno));
        return 1;
    }
    cg_root *root = NULL;
    act_error err = {0};
    if (cg_root_create_throwaway("act-bench", &root, &err) < 0) {
        fprintf(stderr, "bench-spawn: %s\n", err.message);
        return 1;
    }
    /* A leaf that lives through the run keeps the host node in place, as a
     * serving generation does while the next one starts. */
    cg_leaf *keeper = NULL;
    int r = cg_leaf_create(root, "bench", "keep", NULL, &keeper, &err);
    if (r < 0) {
        fprintf(stderr, "bench-spawn: %s\n", err.message);
        cg_root_destroy_throwaway(root, &err);
        return 1;
    }
    char v2_host[4096], v1_hosts[3][4096];
    snprintf(v2_host, sizeof(v2_host), "%s/hosts/bench", cg_root_path(root));
    struct raw_target target = {.v2_host = v2_host, .exec_fd = exec_fd};
    const char *controllers[] = {"memory", "pids", "cpu"};
    char v1_names[64] = "";
    for (size_t c = 0; c < 3; c++) {
        const char *leaf_v1 = cg_leaf_v1_path(keeper, controllers[c]);
        if (!leaf_v1)
            continue;
        snprintf(v1_hosts[target.n_v1], sizeof(v1_hosts[0]), "%.*s",
                 (int)(strrchr(leaf_v1, '/') - leaf_v1), leaf_v1);
        target.v1_hosts[target.n_v1] = v1_hosts[target.n_v1];
        target.n_v1++;
        strcat(v1_names, " ");
        strcat(v1_names, controllers[c]);
    }

    struct raw_isolation raw_iso;
    r = raw_isolation_init(&raw_iso);
    if (r < 0) {
        fprintf(stderr, "bench-spawn: cannot make the isolated variant's box: %s\n",
                strerror(-r));
        return 1;
    }
    cg_fs_view *view = NULL;
    if ((r = make_view(&raw_iso, &view, &err)) < 0) {
        fprintf(stderr, "bench-spawn: %s\n", err.message);
        raw_isolation_cleanup(&raw_iso);
        return 1;
    }
    const char *passed[] = {raw_iso.notify, NULL};
    const char *read_only[] = {raw_iso.build, NULL};
    isolation iso = {.view = view, .passed = passed, .read_only = read_only};
    struct raw_target iso_target = target;
    iso_target.isolation = &raw_iso;

    uint64_t *layer = calloc(n, sizeof(uint64_t)), *raw = calloc(n, sizeof(uint64_t)),
             *plain = calloc(n, sizeof(uint64_t)), *iso_layer = calloc(n, sizeof(uint64_t)),
             *iso_raw = calloc(n, sizeof(uint64_t));
    unsigned per_round = n / ROUNDS, done = 0;
    for (unsigned round = 0; r == 0 && round < ROUNDS; round++) {
        for (unsigned i = 0; r == 0 && i < per_round; i++) {
            unsigned k = done + i;
            uint64_t t0 = act_now_usec();
            r = layer_cycle(root, exec_fd, k, NULL, &err);
            uint64_t t1 = act_now_usec();
            if (r == 0 && (r = raw_cycle(&target, k)) < 0)
                snprintf(err.message, sizeof(err.message), "raw cycle: %s", strerror(-r));
            uint64_t t2 = act_now_usec();
            if (r == 0 && (r = fork_exec_cycle(SPAWN_TINY_APP)) < 0)
                snprintf(err.message, sizeof(err.message), "fork+exec: %s", strerror(-r));
            uint64_t t3 = act_now_usec();
            if (r == 0)
                r = layer_cycle(root, exec_fd, k, &iso, &err);
            uint64_t t4 = act_now_usec();
            if (r == 0 && (r = raw_cycle(&iso_target, n + k)) < 0)
                snprintf(err.message, sizeof(err.message), "isolated raw cycle: %s",
                         strerror(-r));
            uint64_t t5 = act_now_usec();
            layer[k] = t1 - t0;
            raw[k] = t2 - t1;
            plain[k] = t3 - t2;
            iso_layer[k] = t4 - t3;
            iso_raw[k] = t5 - t4;
        }
        done += per_round;
    }
    act_error cleanup_err = {0};
    cg_leaf_remove(keeper, &cleanup_err);
    cg_leaf_free(keeper);
    if (cg_root_destroy_throwaway(root, &cleanup_err) < 0)
        fprintf(stderr, "bench-spawn: cleanup: %s\n", cleanup_err.message);
    close(exec_fd);
    cg_fs_view_free(view);
    raw_isolation_cleanup(&raw_iso);
    if (r < 0) {
        fprintf(stderr, "bench-spawn: %s\n", err.message);
        return 1;
    }
    double m_layer = median_usec(layer, n), m_raw = median_usec(raw, n),
           m_plain = median_usec(plain, n);
    printf("bench-spawn: %u cycles per variant in %d interleaved rounds; tiny static app\n", n,
           ROUNDS);
    printf("  cgroup v1 mirrors on this host:%s\n", v1_names[0] ? v1_names : " none (pure v2)");
    printf("  layer    (cg_leaf_create, cg_spawn, waitid pidfd, prove empty, remove): median %8.1f us\n",
           m_layer);
    printf("  baseline (mkdir, clone3 CLONE_PIDFD|INTO_CGROUP, waitid, cgroup.events, rmdir): "
           "median %8.1f us\n",
           m_raw);
    printf("  context  (fork + execve + waitpid, no cgroup):                     median %8.1f us\n",
           m_plain);
    printf("RATIO layer/baseline = %.3f (target <= 1.15)\n", m_layer / m_raw);
    double m_iso_layer = median_usec(iso_layer, n), m_iso_raw = median_usec(iso_raw, n);
    printf("  isolated layer    (the same, in a filesystem view):                median %8.1f "
           "us\n",
           m_iso_layer);
    printf("  isolated baseline (the same, unshare + mounts by hand in the child): median "
           "%8.1f us\n",
           m_iso_raw);
    printf("RATIO isolated layer/baseline = %.3f (target <= 1.15)\n", m_iso_layer / m_iso_raw);
    free(iso_layer);
    free(iso_raw);
    free(layer);
    free(raw);
    free(plain);
    return 0;
}
