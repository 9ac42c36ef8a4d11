/* ExecReplicate= under the real daemon: it starts once the generation is
 * ready, runs beside the app in the generation's own cgroup leaf (so the
 * generation's proof of empty covers it), sees the host's environment, and
 * is stopped with the generation when the host parks. Its replica is
 * supervised: a replica that dies is told (replica.exited, the journal,
 * activator_replica_exits_total) and restarted as ReplicateRestart= says,
 * its restarts in a row bounded, and with ReplicateRequired=yes one that
 * stays down fails its generation as a crash does. A retirement's kill is
 * never told as a replica's exit, nor restarted. */
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
    snprintf(path, sizeof(path), "%s/hosts/%s/g-%" PRIu64 "/cgroup.procs", d->drv.cgroup_path, host,
             generation);
    char *text = dh_read_text(path);
    size_t n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < max; line = strtok(NULL, "\n"))
        pids[n++] = (pid_t)atoi(line);
    free(text);
    return n;
}

/* A new executable script at path, open for its text; the caller closes
 * it. */
static FILE *new_script(dh_daemon *d, const char *path)
{
    FILE *f = fopen(path, "we");
    DH_CHECK(d, f && fchmod(fileno(f), 0755) == 0, "cannot write %s: %s", path, strerror(errno));
    return f;
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
    FILE *f = new_script(d, script);
    /* Long-running, as a replicator is: it reports who it is, then waits. */
    fprintf(f,
            "#!/bin/sh\n"
            "echo \"$$ $ACTIVATOR_HOST $ACTIVATOR_GENERATION $STATE_DIRECTORY\" > %s.tmp\n"
            "mv %s.tmp %s\n"
            "exec sleep 600\n",
            seen, seen, seen);
    fclose(f);
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
    DH_CHECK(d,
             sscanf(report, "%d %79s %llu %4095s", &replicator, host, &reported_generation,
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
    DH_CHECK(d, has_app && has_replicator, "the leaf holds %zu pids; app %d %s, replicator %d %s",
             n, (int)app, has_app ? "in" : "missing", replicator,
             has_replicator ? "in" : "missing");

    /* A park retires the generation: the replicator goes with it. */
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_pid_gone((pid_t)replicator), "the replicator (pid %d) outlived its generation",
             replicator);
    DH_CHECK(d, !dh_leaf_exists(d, "demo", "g-1"), "the generation's leaf is left");
    dh_stop_and_check_clean(d);
}

/* How a test's replicator behaves after its first run. */
typedef enum replicator_kind {
    RUNS_ON,             /* every run reports its pid and runs on */
    FAILS_AGAIN,         /* the later runs exit with status 3 at once */
    FAILS_AT_ONCE,       /* every run exits with status 3 at once, reporting nothing */
    DIES_WHEN_TOLD,      /* exits with status 3 once the file "die" is in the state directory */
    ENDS_WELL_WHEN_TOLD, /* removes the file "die" once it is there, and exits with status 0 */
} replicator_kind;

/* host as dh_add_app_host makes it, with host_lines, and an ExecReplicate=
 * whose runs report their pid in the host's state directory (where the
 * host's user may write), which replicator_pid reads. Returns the app's
 * port. */
static int add_replicated_host(dh_daemon *d, const char *host, replicator_kind kind,
                               const char *host_lines)
{
    char script[PATH_MAX], seen[PATH_MAX];
    snprintf(script, sizeof(script), "%s/%s-replicate.sh", d->drv.dir, host);
    snprintf(seen, sizeof(seen), "%s/hosts/%s/state/replicator", d->drv.state_dir, host);
    FILE *f = new_script(d, script);
    fprintf(f, "#!/bin/sh\n");
    if (kind == FAILS_AGAIN)
        fprintf(f, "[ -e %s ] && exit 3\n", seen);
    if (kind == FAILS_AT_ONCE)
        fprintf(f, "exit 3\n");
    fprintf(f, "echo $$ > %s.tmp\nmv %s.tmp %s\n", seen, seen, seen);
    if (kind == DIES_WHEN_TOLD)
        fprintf(f, "while [ ! -e %s/hosts/%s/state/die ]; do sleep 0.01; done\nexit 3\n",
                d->drv.state_dir, host);
    else if (kind == ENDS_WELL_WHEN_TOLD)
        fprintf(f,
                "while [ ! -e %s/hosts/%s/state/die ]; do sleep 0.01; done\n"
                "rm -f %s/hosts/%s/state/die\nexit 0\n",
                d->drv.state_dir, host, d->drv.state_dir, host);
    else
        fprintf(f, "exec sleep 600\n");
    fclose(f);
    char extra[2 * PATH_MAX];
    snprintf(extra, sizeof(extra), "ExecReplicate=%s\n%s", script, host_lines);
    return dh_add_app_host(d, host, NULL, extra);
}

/* The pid the host's replicator reported last, once it is not stale (0:
 * any will do), waiting up to 10 s for it. */
static pid_t replicator_pid(dh_daemon *d, const char *host, pid_t stale)
{
    char seen[PATH_MAX];
    snprintf(seen, sizeof(seen), "%s/hosts/%s/state/replicator", d->drv.state_dir, host);
    dh_waiting_for("%s's replicator to report a pid other than %d", host, (int)stale);
    pid_t pid = 0;
    for (int i = 0; i < 500 && (pid == 0 || pid == stale); i++) {
        char *report = dh_read_text(seen);
        pid = report ? (pid_t)atoi(report) : 0;
        free(report);
        if (pid == 0 || pid == stale)
            usleep(20 * 1000);
    }
    DH_CHECK(d, pid != 0 && pid != stale, "%s's ExecReplicate= did not report a new pid in 10 s",
             host);
    return pid;
}

static bool in_leaf(dh_daemon *d, const char *host, uint64_t generation, pid_t pid)
{
    pid_t pids[16];
    size_t n = leaf_pids(d, host, generation, pids, 16);
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* Waits for demo's next replica.exited, which must be about pid of
 * generation and begin with reason. */
static dh_event expect_replica_exited(dh_daemon *d, pid_t pid, uint64_t generation,
                                      const char *reason)
{
    dh_event exited;
    DH_CHECK(d, dh_event_wait(d, "demo", "replica.exited", 10000, &exited),
             "no replica.exited event within 10 s of the replica's death");
    DH_CHECK(d,
             exited.pid == pid && exited.generation == generation &&
                 strncmp(exited.reason, reason, strlen(reason)) == 0,
             "replica.exited names pid %" PRId64 " generation %" PRIu64 " reason \"%s\"; "
             "expected pid %d generation %" PRIu64 " reason \"%s...\"",
             exited.pid, exited.generation, exited.reason, (int)pid, generation, reason);
    return exited;
}

/* One sample of the daemon's metrics. */
static double metric(dh_daemon *d, int port, const char *sample)
{
    dh_metrics *scraped = calloc(1, sizeof(*scraped));
    DH_CHECK(d, scraped, "out of memory");
    dh_metrics_scrape(d, port, scraped);
    double value = dh_metrics_sample(d, scraped, sample);
    free(scraped);
    return value;
}

/* demo parks, and the retirement's kill of its replica is neither told
 * nor restarted: the events up to parked, all of which have arrived once
 * parked has, say nothing of the replica. */
static void park_quietly(dh_daemon *d, pid_t replicator)
{
    dh_events_mark(d);
    dh_park(d, "demo");
    DH_CHECK(d, dh_event_wait(d, "demo", "parked", 10000, NULL), "demo did not park");
    DH_CHECK(d, dh_pid_gone(replicator), "the replicator (pid %d) outlived its generation",
             (int)replicator);
    DH_CHECK(d,
             dh_events_count(d, "demo", "replica.exited") == 0 &&
                 dh_events_count(d, "demo", "replica.restarted") == 0,
             "the park's kill was told as the replica's exit (%zu replica.exited, %zu "
             "replica.restarted)",
             dh_events_count(d, "demo", "replica.exited"),
             dh_events_count(d, "demo", "replica.restarted"));
}

/* The generation served fails for its replica, as a crashed one does: the
 * failed event with replicate_failed, its retirement with proof, the host
 * parked with a failure streak, the failure park counted. */
static void expect_failed_for_its_replica(dh_daemon *d, int metrics_port, dh_served served)
{
    dh_event failed;
    DH_CHECK(d, dh_event_wait(d, "demo", "failed", 20000, &failed),
             "generation %" PRIu64 " did not fail for its replica", served.generation);
    DH_CHECK(
        d, strcmp(failed.reason, "replicate_failed") == 0 && failed.generation == served.generation,
        "the failed event says reason %s generation %" PRIu64
        ", expected replicate_failed %" PRIu64,
        failed.reason, failed.generation, served.generation);
    DH_CHECK(d, dh_event_wait(d, "demo", "parked", 10000, NULL), "demo did not park");
    DH_CHECK(d, dh_pid_gone(served.pid), "the failed generation's app (pid %d) still runs",
             (int)served.pid);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "the failed generation's leaf is left");
    dh_expect_parked_for(d, "demo", "replicate_failed", 1);
    DH_CHECK(
        d,
        metric(d, metrics_port, "activator_failure_parks_total{reason=\"replicate_failed\"}") == 1,
        "the failure park is not counted for replicate_failed");
}

/* What each test of a replica's death starts from: a daemon serving its
 * metrics, demo (with a replicator of kind, and host_lines) served, its
 * replicator reported, and killed. */
typedef struct replica_death {
    int port;         /* demo's app */
    int metrics_port; /* the daemon's metrics */
    dh_served served;
    pid_t killed; /* the replicator */
} replica_death;

static replica_death serve_then_kill_the_replicator(dh_daemon *d, replicator_kind kind,
                                                    const char *host_lines)
{
    replica_death r = {.metrics_port = dh_setup_with_metrics(d)};
    r.port = add_replicated_host(d, "demo", kind, host_lines);
    dh_start(d, NULL);
    r.served = dh_wake(d, "demo");
    r.killed = replicator_pid(d, "demo", 0);
    dh_events_mark(d);
    DH_CHECK(d, dh_kill_and_wait_exit(r.killed), "cannot kill the replicator (pid %d)",
             (int)r.killed);
    return r;
}

static void test_a_killed_replica_is_restarted_and_told(void **state)
{
    dh_daemon *d = *state;
    replica_death r = serve_then_kill_the_replicator(d, RUNS_ON, "ReplicateRestartSec=10ms\n");
    expect_replica_exited(d, r.killed, r.served.generation, "restarting: was killed by signal 9");
    dh_event restarted;
    DH_CHECK(d, dh_event_wait(d, "demo", "replica.restarted", 10000, &restarted),
             "no replica.restarted event");
    pid_t second = replicator_pid(d, "demo", r.killed);
    DH_CHECK(d, restarted.pid == second && restarted.generation == r.served.generation,
             "replica.restarted names pid %" PRId64 " generation %" PRIu64
             "; the new replicator is %d of %" PRIu64,
             restarted.pid, restarted.generation, (int)second, r.served.generation);
    DH_CHECK(d, in_leaf(d, "demo", r.served.generation, second),
             "the restarted replicator (pid %d) is not in the generation's leaf", (int)second);
    char said[160];
    snprintf(said, sizeof(said),
             "generation %" PRIu64 "'s replica (pid %d) was killed by signal 9; restarting it in "
             "10 ms (restart 1 of at most 5 in a row)",
             r.served.generation, (int)r.killed);
    DH_CHECK(d, dh_log_wait(d, said, 5000), "the log does not say: %s", said);
    DH_CHECK(d,
             metric(d, r.metrics_port,
                    "activator_replica_exits_total{host=\"demo\",outcome=\"restarting\"}") == 1,
             "the replica's exit is not counted as restarting");

    /* The generation served on all along. */
    json_object *status = dh_status(d, "demo");
    bool serving = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                   dh_json_u64(status, "generation") == r.served.generation;
    json_object_put(status);
    DH_CHECK(d, serving, "demo no longer serves generation %" PRIu64, r.served.generation);
    park_quietly(d, second);
    dh_stop_and_check_clean(d);
}

/* The daemon dies (SIGKILL) with demo serving: the next one resumes the
 * generation and watches its replica on, from the pid the record names,
 * both the one the first daemon started and one it restarted. */
static void test_the_next_daemon_watches_a_resumed_generations_replica(void **state)
{
    dh_daemon *d = *state;
    replica_death r = serve_then_kill_the_replicator(d, RUNS_ON, "ReplicateRestartSec=10ms\n");
    expect_replica_exited(d, r.killed, r.served.generation, "restarting: was killed by signal 9");
    pid_t second = replicator_pid(d, "demo", r.killed);
    /* The restart's record is written off the loop: wait for it to name the
     * new replica before the daemon dies. */
    char record_path[PATH_MAX], wanted[48];
    snprintf(record_path, sizeof(record_path), "%s/hosts/demo/generations/%" PRIu64 ".json",
             d->drv.state_dir, r.served.generation);
    snprintf(wanted, sizeof(wanted), "\"replica_pid\":%d", (int)second);
    dh_waiting_for("generation %" PRIu64 "'s record to name replica %d", r.served.generation,
                   (int)second);
    bool named = false;
    for (int i = 0; i < 500 && !named; i++) {
        char *text = dh_read_text(record_path);
        named = text && strstr(text, wanted);
        free(text);
        if (!named)
            usleep(20 * 1000);
    }
    DH_CHECK(d, named, "the record never named the restarted replica %d", (int)second);

    dh_kill(d);
    dh_start(d, NULL);
    DH_CHECK(d, dh_answer_pid(r.port) == r.served.pid, "the next daemon did not resume demo");
    dh_events_mark(d);
    DH_CHECK(d, dh_kill_and_wait_exit(second), "cannot kill the replicator (pid %d)", (int)second);
    expect_replica_exited(d, second, r.served.generation,
                          "restarting: ended (started by the previous daemon");
    pid_t third = replicator_pid(d, "demo", second);
    DH_CHECK(d, in_leaf(d, "demo", r.served.generation, third),
             "the replicator the next daemon restarted (pid %d) is not in the generation's leaf",
             (int)third);
    park_quietly(d, third);
    dh_stop_and_check_clean(d);
}

static void test_with_restart_no_a_dead_replica_is_told_and_left_down(void **state)
{
    dh_daemon *d = *state;
    replica_death r = serve_then_kill_the_replicator(d, RUNS_ON, "ReplicateRestart=no\n");
    expect_replica_exited(d, r.killed, r.served.generation, "stopped: was killed by signal 9");
    DH_CHECK(
        d,
        dh_log_wait(d, "not restarted (ReplicateRestart=no); the host serves on without it", 5000),
        "the log does not say the replica is left down");
    DH_CHECK(d,
             metric(d, r.metrics_port,
                    "activator_replica_exits_total{host=\"demo\",outcome=\"stopped\"}") == 1,
             "the replica's exit is not counted as stopped");
    /* Not required: the app serves on, and nothing runs beside it. */
    DH_CHECK(d, dh_answer_pid(r.port) == r.served.pid, "the app (pid %d) no longer answers",
             (int)r.served.pid);
    pid_t pids[16];
    size_t n = leaf_pids(d, "demo", r.served.generation, pids, 16);
    DH_CHECK(d, n == 1 && pids[0] == r.served.pid,
             "the leaf holds %zu processes, expected the app (pid %d) alone", n, (int)r.served.pid);
    /* No restart came before the park (its events arrive in order). */
    DH_CHECK(d, dh_events_count(d, "demo", "replica.restarted") == 0, "the replica was restarted");
    park_quietly(d, r.killed);
    dh_stop_and_check_clean(d);
}

static void test_a_required_replica_that_dies_fails_its_generation(void **state)
{
    dh_daemon *d = *state;
    replica_death r =
        serve_then_kill_the_replicator(d, RUNS_ON, "ReplicateRestart=no\nReplicateRequired=yes\n");
    expect_replica_exited(d, r.killed, r.served.generation, "stopped: was killed by signal 9");
    expect_failed_for_its_replica(d, r.metrics_port, r.served);
    char said[160];
    snprintf(said, sizeof(said), "ReplicateRequired=yes, so generation %" PRIu64 " fails",
             r.served.generation);
    DH_CHECK(d, dh_log_wait(d, said, 5000), "the log does not say: %s", said);

    /* A failure park, not the end: the next wake serves with a replica. */
    dh_served next = dh_wake(d, "demo");
    DH_CHECK(d, next.generation > r.served.generation, "no new generation served");
    pid_t again = replicator_pid(d, "demo", r.killed);
    park_quietly(d, again);
    dh_stop_and_check_clean(d);
}

/* ReplicateRestart=always restarts a replica that ended well, which
 * on-failure leaves down. */
static void test_always_restarts_a_replica_that_ended_well(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    add_replicated_host(d, "demo", ENDS_WELL_WHEN_TOLD,
                        "ReplicateRestart=always\nReplicateRestartSec=10ms\n");
    dh_start(d, NULL);
    dh_served served = dh_wake(d, "demo");
    pid_t first = replicator_pid(d, "demo", 0);
    dh_events_mark(d);
    char die[PATH_MAX];
    snprintf(die, sizeof(die), "%s/hosts/demo/state/die", d->drv.state_dir);
    FILE *f = fopen(die, "we");
    DH_CHECK(d, f && fclose(f) == 0, "cannot create %s", die);
    expect_replica_exited(d, first, served.generation, "restarting: exited with status 0");
    DH_CHECK(d, dh_event_wait(d, "demo", "replica.restarted", 10000, NULL),
             "the replica that ended well was not restarted");
    pid_t second = replicator_pid(d, "demo", first);
    DH_CHECK(d, in_leaf(d, "demo", served.generation, second),
             "the restarted replicator (pid %d) is not in the generation's leaf", (int)second);
    park_quietly(d, second);
    dh_stop_and_check_clean(d);
}

/* A replica that fails each time it is restarted stops after 5 restarts in
 * a row, each waiting twice as long as the one before; required, it then
 * fails its generation. */
static void test_a_replica_that_keeps_failing_exhausts_its_restarts(void **state)
{
    dh_daemon *d = *state;
    replica_death r = serve_then_kill_the_replicator(
        d, FAILS_AGAIN, "ReplicateRestartSec=10ms\nReplicateRequired=yes\n");
    expect_failed_for_its_replica(d, r.metrics_port, r.served);
    size_t exits = dh_events_count(d, "demo", "replica.exited");
    size_t restarts = dh_events_count(d, "demo", "replica.restarted");
    DH_CHECK(d, exits == 6 && restarts == 5,
             "%zu replica.exited and %zu replica.restarted events, expected 6 and 5", exits,
             restarts);
    const char *outcomes[] = {"restarting", "exhausted"};
    double counted[2];
    for (size_t i = 0; i < 2; i++) {
        char sample[128];
        snprintf(sample, sizeof(sample),
                 "activator_replica_exits_total{host=\"demo\",outcome=\"%s\"}", outcomes[i]);
        counted[i] = metric(d, r.metrics_port, sample);
    }
    DH_CHECK(d, counted[0] == 5 && counted[1] == 1,
             "exits counted: %.0f restarting, %.0f exhausted; expected 5 and 1", counted[0],
             counted[1]);
    DH_CHECK(d,
             dh_log_wait(d,
                         "exited with status 3; not restarted (its 5 restarts in a row are "
                         "exhausted); ReplicateRequired=yes",
                         5000),
             "the log does not say the restarts are exhausted");
    dh_stop_and_check_clean(d);
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
    add_replicated_host(d, "viewed", RUNS_ON, "");
    add_replicated_host(d, "boxed", RUNS_ON, "FilesystemView=box\n");
    dh_start(d, NULL);
    const char *hosts[] = {"viewed", "boxed"};
    int expected[] = {ENOENT, 0};
    for (size_t i = 0; i < 2; i++) {
        pid_t app = dh_wake(d, hosts[i]).pid;
        pid_t helper = replicator_pid(d, hosts[i], 0);
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

/* demo's wake ended without its generation serving on: its required
 * replica stayed down. */
static void expect_no_service_without_the_replica(dh_daemon *d)
{
    dh_event exited, failed;
    DH_CHECK(d, dh_event_wait(d, "demo", "replica.exited", 10000, &exited),
             "no replica.exited event");
    DH_CHECK(d, strcmp(exited.reason, "stopped: exited with status 3") == 0,
             "replica.exited says \"%s\"", exited.reason);
    DH_CHECK(d, dh_event_wait(d, "demo", "failed", 10000, &failed), "no failed event");
    DH_CHECK(d, strcmp(failed.reason, "replicate_failed") == 0, "the failed event says %s",
             failed.reason);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    dh_expect_parked_for(d, "demo", "replicate_failed", 1);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "the failed generation's leaf is left");
}

/* A required replica that dies at once, before its generation is
 * published (publication waits on the store; the replica's exit does
 * not): the `healthy` step finds it and the wake fails. Were its death
 * heard later, the next test's path would fail the generation: either
 * way it does not serve on. */
static void test_a_required_replica_dead_at_once_fails_the_wake(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    add_replicated_host(d, "demo", FAILS_AT_ONCE, "ReplicateRestart=no\nReplicateRequired=yes\n");
    dh_start(d, NULL);
    json_object_put(dh_wake_reply(d, "demo", 20000));
    expect_no_service_without_the_replica(d);
    dh_stop_and_check_clean(d);
}

/* One that dies while the health check runs, after `healthy` looked: the
 * check passes only once the daemon has reaped the replica, so the host
 * serves with its replica already down, and fails as soon as its
 * supervision starts. */
static void test_a_required_replica_dead_during_the_health_check_fails_at_once(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char probe[PATH_MAX], lines[PATH_MAX + 128], state_dir[PATH_MAX];
    snprintf(probe, sizeof(probe), "%s/health.sh", d->drv.dir);
    snprintf(state_dir, sizeof(state_dir), "%s/hosts/demo/state", d->drv.state_dir);
    FILE *f = new_script(d, probe);
    fprintf(f,
            "#!/bin/sh\n"
            "[ -e %s/die ] && ! kill -0 \"$(cat %s/replicator)\" 2>/dev/null && exit 0\n"
            "touch %s/die\nexit 1\n",
            state_dir, state_dir, state_dir);
    fclose(f);
    snprintf(lines, sizeof(lines),
             "ReplicateRestart=no\nReplicateRequired=yes\nHealthCheck=exec:%s\n", probe);
    add_replicated_host(d, "demo", DIES_WHEN_TOLD, lines);
    dh_start(d, NULL);
    json_object_put(dh_wake_reply(d, "demo", 20000));
    expect_no_service_without_the_replica(d);
    DH_CHECK(d, dh_events_count(d, "demo", "serving") == 1,
             "the generation did not serve before it failed: the check passed too early");
    dh_stop_and_check_clean(d);
}

/* A replica killed while its generation is frozen (ParkMode=freeze): its
 * restart waits for the thaw, since a process started into a frozen leaf
 * would freeze before its exec and hold the daemon's spawn; the
 * connection that thaws the generation brings the replica back. */
static void test_a_replica_killed_while_frozen_restarts_at_the_thaw(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, "FreezeMemoryPressure=no\n");
    int port = add_replicated_host(d, "demo", RUNS_ON,
                                   "ParkMode=freeze\nIdleTimeoutSec=1\nReplicateRestartSec=10ms\n");
    dh_start(d, NULL);
    dh_served served = dh_wake(d, "demo");
    pid_t first = replicator_pid(d, "demo", 0);
    DH_CHECK(d, dh_event_wait(d, "demo", "frozen", 15000, NULL), "demo did not freeze");

    dh_events_mark(d);
    DH_CHECK(d, dh_kill_and_wait_exit(first), "cannot kill the frozen replicator (pid %d)",
             (int)first);
    expect_replica_exited(d, first, served.generation, "restarting: was killed by signal 9");
    DH_CHECK(d, dh_log_wait(d, "its replica restarts once it is thawed", 10000),
             "the restart did not wait for the thaw");
    json_object *status = dh_status(d, "demo");
    bool frozen = strcmp(dh_json_str(status, "state"), "frozen") == 0;
    json_object_put(status);
    DH_CHECK(d, frozen && dh_events_count(d, "demo", "replica.restarted") == 0,
             "the replica was restarted into a frozen generation");

    DH_CHECK(d, dh_answer_pid(port) == served.pid, "the thawed app (pid %d) did not answer",
             (int)served.pid);
    dh_event restarted;
    DH_CHECK(d, dh_event_wait(d, "demo", "replica.restarted", 10000, &restarted),
             "the thaw did not restart the replica");
    DH_CHECK(d, restarted.pid > 0 && in_leaf(d, "demo", served.generation, (pid_t)restarted.pid),
             "the restarted replicator (pid %" PRId64 ") is not in the generation's leaf",
             restarted.pid);
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
        DH_TEST(test_a_killed_replica_is_restarted_and_told),
        DH_TEST(test_always_restarts_a_replica_that_ended_well),
        DH_TEST(test_the_next_daemon_watches_a_resumed_generations_replica),
        DH_TEST(test_with_restart_no_a_dead_replica_is_told_and_left_down),
        DH_TEST(test_a_required_replica_that_dies_fails_its_generation),
        DH_TEST(test_a_replica_that_keeps_failing_exhausts_its_restarts),
        DH_TEST(test_a_required_replica_dead_at_once_fails_the_wake),
        DH_TEST(test_a_required_replica_dead_during_the_health_check_fails_at_once),
        DH_TEST(test_a_replica_killed_while_frozen_restarts_at_the_thaw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
