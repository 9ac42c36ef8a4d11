/* ExecReplicate= under the real daemon: it starts once the generation is
 * ready, runs beside the app in the generation's own cgroup leaf (so the
 * generation's proof of empty covers it), sees the host's environment, and
 * is stopped with the generation when the host parks. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int main(void)
{
    int r = dh_check_can_run("daemon-replicate", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_replicate_runs_in_the_generation_and_stops_with_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
