/* Roots, leaves, limits, stats and enumeration against real cgroups. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "tests/cgroup/cgt.h"

#define SEC 1000000ULL

static void read_first_line(const char *dir, const char *file, char *buf, size_t size)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "re");
    if (!f)
        print_error("cannot open %s\n", path);
    assert_non_null(f);
    assert_non_null(fgets(buf, (int)size, f));
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static bool hybrid_memory(cg_root *root)
{
    cg_leaf *probe = cgt_leaf(root, "probe", "g-0", &(cg_limits){.memory_max = 32 << 20});
    bool v1 = cg_leaf_v1_path(probe, "memory") != NULL;
    act_error err = {0};
    assert_int_equal(cg_leaf_remove(probe, &err), 0);
    cg_leaf_free(probe);
    return v1;
}

static void limits_land_where_the_host_enforces_them(void **state)
{
    cg_limits limits = {.memory_max = 32 << 20,
                        .pids_max = 32,
                        .cpu_quota_percent = 200,
                        .cpu_weight = 50};
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-1", &limits);
    char value[128];
    const char *mem = cg_leaf_v1_path(leaf, "memory");
    read_first_line(mem ? mem : cg_leaf_path(leaf), mem ? "memory.limit_in_bytes" : "memory.max",
                    value, sizeof(value));
    assert_string_equal(value, "33554432");
    const char *pids = cg_leaf_v1_path(leaf, "pids");
    read_first_line(pids ? pids : cg_leaf_path(leaf), "pids.max", value, sizeof(value));
    assert_string_equal(value, "32");
    const char *cpu = cg_leaf_v1_path(leaf, "cpu");
    if (cpu) {
        read_first_line(cpu, "cpu.cfs_quota_us", value, sizeof(value));
        assert_string_equal(value, "200000");
        read_first_line(cpu, "cpu.shares", value, sizeof(value));
        assert_string_equal(value, "512");
    } else {
        read_first_line(cg_leaf_path(leaf), "cpu.max", value, sizeof(value));
        assert_string_equal(value, "200000 100000");
        read_first_line(cg_leaf_path(leaf), "cpu.weight", value, sizeof(value));
        assert_string_equal(value, "50");
    }
    act_error err = {0};
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
}

static void limits_that_cannot_apply_are_errors(void **state)
{
    act_error err = {0};
    cg_leaf *leaf = NULL;
    char leaf_path[4096];
    snprintf(leaf_path, sizeof(leaf_path), "%s/hosts/web1/g-2", cg_root_path(*state));
    cg_limits high = {.memory_high = 16 << 20};
    if (hybrid_memory(*state)) {
        assert_int_equal(cg_leaf_create(*state, "web1", "g-2", &high, &leaf, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err.message, "MemoryHigh"));
        assert_null(leaf);
        assert_true(cgt_gone(leaf_path));
    } else {
        assert_int_equal(cg_leaf_create(*state, "web1", "g-2", &high, &leaf, &err), 0);
        assert_int_equal(cg_leaf_remove(leaf, &err), 0);
        cg_leaf_free(leaf);
        leaf = NULL;
    }
    cg_limits bad_weight = {.cpu_weight = 20000};
    assert_int_equal(cg_leaf_create(*state, "web1", "g-2", &bad_weight, &leaf, &err), -EINVAL);
    assert_non_null(strstr(err.message, "CPUWeight"));
    assert_true(cgt_gone(leaf_path));
}

/* A leaf without limits has no v1 mirror, so that a spawn into it joins
 * its cgroups by CLONE_INTO_CGROUP alone: a v1 join would make every spawn
 * wait out an RCU grace period. */
static void a_leaf_without_limits_is_free_at_spawn(void **state)
{
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-3", NULL);
    assert_null(cg_leaf_v1_path(leaf, "memory"));
    assert_null(cg_leaf_v1_path(leaf, "pids"));
    assert_null(cg_leaf_v1_path(leaf, "cpu"));
    assert_true(cg_limits_free_at_spawn(*state, NULL));
    act_error err = {0};
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    cg_leaf_free(leaf);
    /* A limit only v1 enforces is not free; one v2 enforces is. */
    cg_limits pids = {.pids_max = 64};
    cg_leaf *limited = cgt_leaf(*state, "web1", "g-5", &pids);
    bool via_v1 = cg_leaf_v1_path(limited, "pids") != NULL;
    assert_int_equal(cg_limits_free_at_spawn(*state, &pids), !via_v1);
    assert_int_equal(cg_leaf_remove(limited, &err), 0);
    cg_leaf_free(limited);
}

/* The limit in force for controller's file: the v1 mirror's when the host
 * handles it through v1, else the v2 leaf's. */
static void read_limit(cg_leaf *leaf, const char *controller, const char *v1_file,
                       const char *v2_file, char *value, size_t size)
{
    const char *v1 = cg_leaf_v1_path(leaf, controller);
    read_first_line(v1 ? v1 : cg_leaf_path(leaf), v1 ? v1_file : v2_file, value, size);
}

/* systemctl set-property on a running leaf: the new limits land at once, a
 * limit that was not set before (a v1 cpu mirror the leaf never had) takes
 * the leaf's process along, and a limit lifted goes back to the default. */
static void limits_of_a_running_leaf_are_rewritten(void **state)
{
    cg_limits first = {.memory_max = 32 << 20, .pids_max = 32};
    cg_leaf *leaf = cgt_leaf(*state, "web1", "g-4", &first);
    cg_process proc;
    int out;
    act_error err = {0};
    const char *args[] = {"0", "wait", NULL};
    assert_int_equal(cgt_spawn(leaf, "cg-probe", args, NULL, NULL, &proc, &out, &err), 0);
    free(cgt_read_until(out, "end\n", 10000));

    cg_limits second = {.memory_max = 64 << 20, .pids_max = 64, .cpu_quota_percent = 50};
    assert_int_equal(cg_leaf_set_limits(leaf, &second, &err), 0);
    char value[128];
    read_limit(leaf, "memory", "memory.limit_in_bytes", "memory.max", value, sizeof(value));
    assert_string_equal(value, "67108864");
    read_limit(leaf, "pids", "pids.max", "pids.max", value, sizeof(value));
    assert_string_equal(value, "64");
    const char *cpu = cg_leaf_v1_path(leaf, "cpu");
    if (cpu) {
        read_first_line(cpu, "cpu.cfs_quota_us", value, sizeof(value));
        assert_string_equal(value, "50000");
        assert_true(cgt_pid_in_cgroup(cpu, proc.pid));
    } else {
        read_first_line(cg_leaf_path(leaf), "cpu.max", value, sizeof(value));
        assert_string_equal(value, "50000 100000");
    }

    /* Lifted: the defaults, not the old values. */
    assert_int_equal(cg_leaf_set_limits(leaf, &(cg_limits){.pids_max = 8}, &err), 0);
    read_limit(leaf, "memory", "memory.limit_in_bytes", "memory.max", value, sizeof(value));
    assert_true(strcmp(value, "max") == 0 || strtoull(value, NULL, 10) > (1ULL << 40));
    read_limit(leaf, "pids", "pids.max", "pids.max", value, sizeof(value));
    assert_string_equal(value, "8");
    read_limit(leaf, "cpu", "cpu.cfs_quota_us", "cpu.max", value, sizeof(value));
    assert_true(strcmp(value, "-1") == 0 || strcmp(value, "max 100000") == 0);

    /* What the host cannot enforce changes nothing. */
    cg_limits bad = {.memory_max = 16 << 20, .cpu_weight = 20000};
    assert_int_equal(cg_leaf_set_limits(leaf, &bad, &err), -EINVAL);
    assert_non_null(strstr(err.message, "CPUWeight"));
    read_limit(leaf, "pids", "pids.max", "pids.max", value, sizeof(value));
    assert_string_equal(value, "8");

    assert_int_equal(syscall(SYS_pidfd_send_signal, proc.pidfd, SIGKILL, NULL, 0), 0);
    cgt_reap(proc.pidfd, NULL);
    close(out);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    if (cpu)
        assert_true(cgt_gone(cpu));
    cg_leaf_free(leaf);
}

static void bad_names_are_refused_and_nothing_is_created(void **state)
{
    const char *bad[] = {"..", "../etc", "a/b", "", ".hidden", "x y"};
    char hosts[4096];
    snprintf(hosts, sizeof(hosts), "%s/hosts", cg_root_path(*state));
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        cg_leaf *leaf = NULL;
        act_error err = {0};
        assert_int_equal(cg_leaf_create(*state, bad[i], "g-1", NULL, &leaf, &err), -EINVAL);
        assert_non_null(strstr(err.message, "host name"));
        assert_int_equal(cg_leaf_create(*state, "web1", bad[i], NULL, &leaf, &err), -EINVAL);
        assert_non_null(strstr(err.message, "cgroup leaf name"));
        assert_int_equal(cg_leaf_open(*state, bad[i], "g-1", &leaf, &err), -EINVAL);
        assert_null(leaf);
    }
    DIR *dir = opendir(hosts);
    assert_non_null(dir);
    struct dirent *de;
    int subdirs = 0;
    while ((de = readdir(dir)))
        subdirs += de->d_type == DT_DIR && de->d_name[0] != '.';
    closedir(dir);
    assert_int_equal(subdirs, 0);
}

static void a_leaf_name_is_used_once_and_hosts_go_with_their_last_leaf(void **state)
{
    cg_leaf *first = cgt_leaf(*state, "web1", "g-1", NULL);
    cg_leaf *second = cgt_leaf(*state, "web1", "restore-2", NULL);
    cg_leaf *again = NULL;
    act_error err = {0};
    assert_int_equal(cg_leaf_create(*state, "web1", "g-1", NULL, &again, &err), -EEXIST);
    assert_non_null(strstr(err.message, "already exists"));
    char host_path[4096];
    snprintf(host_path, sizeof(host_path), "%s/hosts/web1", cg_root_path(*state));
    assert_int_equal(cg_leaf_remove(first, &err), 0);
    assert_false(cgt_gone(host_path));
    assert_int_equal(cg_leaf_remove(second, &err), 0);
    assert_true(cgt_gone(host_path));
    cg_leaf_free(first);
    cg_leaf_free(second);
}

struct found {
    char host[3][64], leaf[3][64];
    pid_t pid[3];
    int pidfd[3];
    size_t n;
};

static int collect(const char *host, const char *leaf_name, cg_found_process *procs, size_t n,
                   void *userdata)
{
    struct found *found = userdata;
    assert_true(found->n < 3);
    snprintf(found->host[found->n], 64, "%s", host);
    snprintf(found->leaf[found->n], 64, "%s", leaf_name);
    found->pid[found->n] = n ? procs[0].pid : 0;
    found->pidfd[found->n] = n ? procs[0].pidfd : -1;
    if (n)
        procs[0].pidfd = -1; /* taken */
    assert_true(n <= 1);
    found->n++;
    return 0;
}

static void enumerate_finds_leaves_processes_and_pidfds(void **state)
{
    cg_leaf *a = cgt_leaf(*state, "web1", "g-3", NULL);
    cg_leaf *b = cgt_leaf(*state, "api", "g-9", NULL);
    cg_leaf *empty = cgt_leaf(*state, "api", "restore-10", NULL);
    cg_process pa, pb;
    int out_a, out_b;
    act_error err = {0};
    const char *args[] = {"0", "wait", NULL};
    assert_int_equal(cgt_spawn(a, "cg-probe", args, NULL, NULL, &pa, &out_a, &err), 0);
    assert_int_equal(cgt_spawn(b, "cg-probe", args, NULL, NULL, &pb, &out_b, &err), 0);
    free(cgt_read_until(out_a, "end\n", 10000));
    free(cgt_read_until(out_b, "end\n", 10000));

    struct found found = {0};
    assert_int_equal(cg_enumerate(*state, collect, &found, &err), 0);
    assert_int_equal(found.n, 3);
    int seen = 0;
    for (size_t i = 0; i < found.n; i++) {
        if (strcmp(found.host[i], "web1") == 0 && strcmp(found.leaf[i], "g-3") == 0) {
            assert_int_equal(found.pid[i], pa.pid);
            seen |= 1;
        } else if (strcmp(found.host[i], "api") == 0 && strcmp(found.leaf[i], "g-9") == 0) {
            assert_int_equal(found.pid[i], pb.pid);
            seen |= 2;
        } else {
            assert_string_equal(found.leaf[i], "restore-10");
            assert_int_equal(found.pidfd[i], -1);
            seen |= 4;
            continue;
        }
        /* The pidfd is live and names the process: SIGTERM through it ends it. */
        assert_int_equal(syscall(SYS_pidfd_send_signal, found.pidfd[i], SIGTERM, NULL, 0), 0);
        close(found.pidfd[i]);
    }
    assert_int_equal(seen, 7);
    cgt_reap(pa.pidfd, NULL);
    cgt_reap(pb.pidfd, NULL);
    close(out_a);
    close(out_b);
    cg_leaf_free(a);
    cg_leaf_free(b);
    cg_leaf_free(empty);
}

static void an_existing_leaf_reopens_with_stats(void **state)
{
    /* With limits, so that a hybrid host mirrors the leaf in v1, where its
     * memory and pids stats are. */
    cg_leaf *created =
        cgt_leaf(*state, "web1", "g-4", &(cg_limits){.memory_max = 64 << 20, .pids_max = 64});
    cg_process proc;
    int out_fd;
    act_error err = {0};
    const char *args[] = {"0", "wait", NULL};
    cgt_start(created, "cg-probe", args, "end\n", &proc, &out_fd);
    cg_leaf_free(created); /* as a daemon restart would */

    cg_leaf *leaf = NULL;
    assert_int_equal(cg_leaf_open(*state, "web1", "g-4", &leaf, &err), 0);
    bool populated = false;
    assert_int_equal(cg_leaf_populated(leaf, &populated, &err), 0);
    assert_true(populated);
    cg_stats stats;
    assert_int_equal(cg_leaf_stats(leaf, &stats, &err), 0);
    assert_true(stats.has_memory);
    assert_true(stats.memory_current > 0);
    assert_true(stats.has_pids);
    assert_int_equal(stats.pids_current, 1);
    assert_true(stats.cpu_usage_usec > 0);

    cg_leaf *missing = NULL;
    assert_int_equal(cg_leaf_open(*state, "web1", "g-404", &missing, &err), -ENOENT);
    assert_non_null(strstr(err.message, "g-404"));
    assert_int_equal(cg_retire_blocking(leaf, proc.pidfd, 10 * SEC, 10 * SEC, &err), 0);
    cgt_reap(proc.pidfd, NULL);
    assert_int_equal(cg_leaf_remove(leaf, &err), 0);
    close(out_fd);
    cg_leaf_free(leaf);
}

static void configured_root_paths_are_checked(void **state)
{
    const char *throwaway = cg_root_path(*state);
    char path[4096];
    snprintf(path, sizeof(path), "%s/configured", throwaway);
    cg_root *root = NULL;
    act_error err = {0};
    assert_int_equal(cg_root_open(path, &root, &err), 0);
    assert_string_equal(cg_root_path(root), path);
    snprintf(path, sizeof(path), "%s/configured/hosts", throwaway);
    assert_false(cgt_gone(path));
    /* Not ours to delete: it was opened, not created as a throwaway. */
    assert_int_equal(cg_root_destroy_throwaway(root, &err), -EPERM);
    assert_false(cgt_gone(path));

    const char *bad[] = {"/etc/activator", "a/../../b", "a//b", "", "./x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        root = NULL;
        assert_int_equal(cg_root_open(bad[i], &root, &err), -EINVAL);
        assert_null(root);
    }
    assert_non_null(strstr(err.message, "./x"));
}

/* "auto" in a child placed in its own cgroup: it moves itself into
 * supervisor and the root becomes that cgroup. */
static void auto_root_moves_the_caller_into_supervisor(void **state)
{
    char own[4096];
    snprintf(own, sizeof(own), "%s/delegated", cg_root_path(*state));
    assert_int_equal(mkdir(own, 0755), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char procs[4200];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", own);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            _exit(2);
        close(fd);
        cg_root *root = NULL;
        act_error err = {0};
        if (cg_root_open("auto", &root, &err) < 0) {
            fprintf(stderr, "auto: %s\n", err.message);
            _exit(3);
        }
        int ok = strcmp(cg_root_path(root), own) == 0;
        char cg[4096] = "";
        FILE *f = fopen("/proc/self/cgroup", "re");
        while (f && fgets(cg, sizeof(cg), f) && strncmp(cg, "0::", 3) != 0)
            ;
        if (f)
            fclose(f);
        ok = ok && strstr(cg, "/delegated/supervisor\n") != NULL;
        cg_root_free(root);
        /* A second open from inside supervisor finds the same root. */
        if (ok && cg_root_open("auto", &root, &err) == 0) {
            ok = strcmp(cg_root_path(root), own) == 0;
            cg_root_free(root);
        } else {
            ok = 0;
        }
        _exit(ok ? 0 : 4);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    char supervisor[4200];
    snprintf(supervisor, sizeof(supervisor), "%s/supervisor", own);
    assert_false(cgt_gone(supervisor));
}

static void auto_root_refuses_the_machine_root(void **state)
{
    (void)state;
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[4096] = "";
    while (f && fgets(line, sizeof(line), f) && strncmp(line, "0::", 3) != 0)
        ;
    if (f)
        fclose(f);
    if (strcmp(line, "0::/\n") != 0) {
        print_message("not in the cgroup2 root; nothing to refuse here\n");
        skip();
    }
    cg_root *root = NULL;
    act_error err = {0};
    assert_int_equal(cg_root_open("auto", &root, &err), -EPERM);
    assert_non_null(strstr(err.message, "whole machine"));
}

int main(void)
{
    int r = cgt_check_can_run("cgroup root");
    if (r != 0)
        return r;
#define T(f) cmocka_unit_test_setup_teardown(f, cgt_setup_root, cgt_teardown_root)
    const struct CMUnitTest tests[] = {
        T(limits_land_where_the_host_enforces_them),
        T(limits_that_cannot_apply_are_errors),
        T(limits_of_a_running_leaf_are_rewritten),
        T(a_leaf_without_limits_is_free_at_spawn),
        T(bad_names_are_refused_and_nothing_is_created),
        T(a_leaf_name_is_used_once_and_hosts_go_with_their_last_leaf),
        T(enumerate_finds_leaves_processes_and_pidfds),
        T(an_existing_leaf_reopens_with_stats),
        T(configured_root_paths_are_checked),
        T(auto_root_moves_the_caller_into_supervisor),
        T(auto_root_refuses_the_machine_root),
    };
    return cmocka_run_group_tests_name("cgroup root", tests, NULL, NULL);
}
