/* ExecReplicate= under the real daemon: it starts once the generation is
 * ready, runs beside the app in the generation's own cgroup leaf (so the
 * generation's proof of empty covers it), sees the host's environment, and
 * is stopped with the generation when the host parks. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The pids listed in the generation leaf's cgroup.procs. */
static size_t leaf_pids(dh_daemon *d, const char *host, uint64_t generation, pid_t *pids,
                        size_t max)
{
    char path[PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/hosts/%s/g-%" PRIu64 "/cgroup.procs", d->drv.cgroup_path,
             host, generation);
    char *text = dh_read_text(path);
    size_t n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < max; line = strtok(NULL, "\n"))
        pids[n++] = (pid_t)atoi(line);
    free(text);
    return n;
}

static void test_replicate_runs_in_the_generation_and_stops_with_it(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char script[PATH_MAX], seen[PATH_MAX];
    snprintf(script, sizeof(script), "%s/replicate.sh", d->drv.dir);
    /* In the host's state directory: the replicator runs as the host's
     * user, which may write nowhere else. */
    snprintf(seen, sizeof(seen), "%s/hosts/demo/state/replicated", d->drv.state_dir);
    FILE *f = fopen(script, "we");
    DH_CHECK(d, f, "cannot write %s: %s", script, strerror(errno));
    /* Long-running, as a replicator is: it reports who it is, then waits. */
    fprintf(f,
            "#!/bin/sh\n"
            "echo \"$$ $ACTIVATOR_HOST $ACTIVATOR_GENERATION $STATE_DIRECTORY\" > %s.tmp\n"
            "mv %s.tmp %s\n"
            "exec sleep 600\n",
            seen, seen, seen);
    fclose(f);
    chmod(script, 0755);
    char extra[PATH_MAX + 32];
    snprintf(extra, sizeof(extra), "ExecReplicate=%s\n", script);
    dh_add_app_host(d, "demo", NULL, extra);
    dh_start(d, NULL);

    dh_served served = dh_wake(d, "demo");
    uint64_t generation = served.generation;
    pid_t app = served.pid;

    char *report = NULL;
    for (int i = 0; i < 250 && !(report = dh_read_text(seen)); i++)
        usleep(20 * 1000);
    DH_CHECK(d, report, "ExecReplicate= did not run within 5 s of serving");
    int replicator = 0;
    char host[80] = "", state_dir[PATH_MAX] = "";
    unsigned long long reported_generation = 0;
    DH_CHECK(d, sscanf(report, "%d %79s %llu %4095s", &replicator, host, &reported_generation,
                       state_dir) == 4,
             "unexpected replicator report: %s", report);
    free(report);
    DH_CHECK(d, strcmp(host, "demo") == 0 && reported_generation == generation,
             "the replicator saw host %s generation %llu, expected demo %" PRIu64, host,
             reported_generation, generation);
    DH_CHECK(d, strstr(state_dir, "/hosts/demo/state") != NULL, "STATE_DIRECTORY=%s", state_dir);

    /* Both the app and the replicator live in the generation's leaf. */
    pid_t pids[16];
    size_t n = leaf_pids(d, "demo", generation, pids, 16);
    bool has_app = false, has_replicator = false;
    for (size_t i = 0; i < n; i++) {
        has_app = has_app || pids[i] == app;
        has_replicator = has_replicator || pids[i] == replicator;
    }
    DH_CHECK(d, has_app && has_replicator,
             "the leaf holds %zu pids; app %d %s, replicator %d %s", n, (int)app,
             has_app ? "in" : "missing", replicator, has_replicator ? "in" : "missing");

    /* A park retires the generation: the replicator goes with it. */
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_pid_gone((pid_t)replicator), "the replicator (pid %d) outlived its generation",
             replicator);
    DH_CHECK(d, !dh_leaf_exists(d, "demo", "g-1"), "the generation's leaf is left");
    dh_stop_and_check_clean(d);
}

/* A replicator whose pid host's report names, once it runs. */
static pid_t start_replicator(dh_daemon *d, const char *host, const char *host_lines)
{
    char script[PATH_MAX], seen[PATH_MAX];
    snprintf(script, sizeof(script), "%s/%s-replicate.sh", d->drv.dir, host);
    snprintf(seen, sizeof(seen), "%s/hosts/%s/state/replicator", d->drv.state_dir, host);
    FILE *f = fopen(script, "we");
    DH_CHECK(d, f, "cannot write %s: %s", script, strerror(errno));
    fprintf(f, "#!/bin/sh\necho $$ > %s.tmp\nmv %s.tmp %s\nexec sleep 600\n", seen, seen, seen);
    fclose(f);
    chmod(script, 0755);
    char extra[2 * PATH_MAX];
    snprintf(extra, sizeof(extra), "ExecReplicate=%s\n%s", script, host_lines);
    dh_add_app_host(d, host, NULL, extra);
    return 0;
}

static pid_t replicator_pid(dh_daemon *d, const char *host)
{
    char seen[PATH_MAX];
    snprintf(seen, sizeof(seen), "%s/hosts/%s/state/replicator", d->drv.state_dir, host);
    char *report = NULL;
    for (int i = 0; i < 250 && !(report = dh_read_text(seen)); i++)
        usleep(20 * 1000);
    DH_CHECK(d, report, "%s's ExecReplicate= did not run within 5 s of serving", host);
    pid_t pid = (pid_t)atoi(report);
    free(report);
    return pid;
}

/* A helper runs as its host, so the host's processes see it in /proc; it
 * runs in the host's filesystem view too, so its root shows them nothing
 * more than theirs: not the hosts directory, where every host's file (its
 * Environment= secrets) lies. The control: with FilesystemView=box it
 * does. */
static void test_the_box_is_not_read_through_a_helper(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    start_replicator(d, "viewed", "");
    start_replicator(d, "boxed", "FilesystemView=box\n");
    dh_start(d, NULL);
    const char *hosts[] = {"viewed", "boxed"};
    int expected[] = {ENOENT, 0};
    for (size_t i = 0; i < 2; i++) {
        pid_t app = dh_wake(d, hosts[i]).pid;
        pid_t helper = replicator_pid(d, hosts[i]);
        uid_t uid = dh_uid_of(d, app);
        DH_CHECK(d, dh_uid_of(d, helper) == uid, "%s's helper runs as %u, its app as %u", hosts[i],
                 (unsigned)dh_uid_of(d, helper), (unsigned)uid);
        char path[PATH_MAX + 64];
        snprintf(path, sizeof(path), "/proc/%d/root%s/%s.conf", (int)helper, d->drv.hosts_dir,
                 hosts[i]);
        int e = dh_open_as(uid, path, O_RDONLY);
        DH_CHECK(d, e == expected[i], "%s: the host's uid opening %s: %s, expected %s", hosts[i],
                 path, e ? strerror(e) : "ok", expected[i] ? strerror(expected[i]) : "ok");
    }
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-replicate", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_replicate_runs_in_the_generation_and_stops_with_it),
        DH_TEST(test_the_box_is_not_read_through_a_helper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
