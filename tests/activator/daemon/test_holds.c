/* The two moments a wake re-checks the claim, driven through the daemon's
 * test hooks on the dir store or a real etcd (argv[1]):
 *   - the gate, just before exec: ACTIVATOR_TEST_HOLD=gate:<path> pauses the
 *     wake there; the test hands the claim to another box and lets it go on.
 *     Nothing may be exec'd and the reason is not_owner.
 *   - publication, after ready: ACTIVATOR_TEST_HOLD=publish:<path> pauses it
 *     there; the test changes the admission (a newer session) and lets it go
 *     on. The generation must be retired with proof and the reason is
 *     publish_lost, and the claim is left as the other writer made it.
 *   - the early start, beside the admission: ACTIVATOR_TEST_HOLD=admitted:
 *     <path> holds the admission's answer; the generation is reserved and
 *     its child held in the leaf, not exec'd. Let go, that child is the app;
 *     with the claim taken by another box meanwhile, it never runs the app
 *     and nothing is left.
 *   - the admission, on the claim the daemon saw last instead of one read:
 *     ACTIVATOR_TEST_HOLD=admit:<path> pauses the wake before it; the test
 *     writes another admission naming this box, then another box's claim.
 *     The first wake is admitted on the store's claim, the second refused
 *     not_owner, each as a wake that had read that claim would be.
 * And, on the dir store, a wake that waits for the store (another process
 * holds its lock) leaves the daemon answering: its loop never blocks on a
 * claim's file work. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "harness.h"

static dh_store_kind store_kind = DH_STORE_DIR;

static void touch(dh_daemon *d, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    DH_CHECK(d, fd >= 0, "cannot create %s: %s", path, strerror(errno));
    close(fd);
}

/* Starts demo's daemon holding step until <dir>/hold-go exists, with an
 * assigned claim; returns the hold's path in hold. */
static void start_with_hold(dh_daemon *d, const char *step, char *hold, size_t size)
{
    dh_setup(d, store_kind, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    claim assigned;
    dh_claim_assigned("demo", DH_BOX, &assigned);
    dh_claim_put(d, &assigned);
    dh_hold_path(d, "hold-go", hold, size);
    dh_start_holding(d, step, hold);
    dh_events_mark(d);
}

/* The held wake is let go and must be refused not_owner with nothing
 * exec'd: no exec event, the app's runs still runs_before, no leaf left. */
static void expect_refusal(dh_daemon *d, const char *hold, dh_async *wake, size_t runs_before)
{
    touch(d, hold);
    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "not_owner") == 0,
             "wake after the takeover: expected not_owner, got %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    dh_events_pump(d, 200);
    DH_CHECK(d, dh_events_count(d, "demo", "exec") == 0, "an exec event despite the takeover");
    pid_t pids[8];
    size_t runs = dh_marker_pids(d, "demo", pids, 8);
    DH_CHECK(d, runs == runs_before, "the app ran %zu time(s) after the takeover",
             runs > runs_before ? runs - runs_before : 0);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "%zu generation leaves left",
             dh_leaf_count(d, "demo"));
}

/* Another box takes the claim of the wake held at the gate, the hold is
 * let go, and the wake must be refused (expect_refusal). Returns the
 * revision the other box wrote. */
static uint64_t take_over_and_expect_refusal(dh_daemon *d, const char *hold, dh_async *wake,
                                             size_t runs_before)
{
    claim admitted, taken;
    DH_CHECK(d, dh_claim_get(d, "demo", &admitted), "no claim after admission");
    DH_CHECK(d, strcmp(admitted.holder.box, DH_BOX) == 0, "the admission did not name " DH_BOX);
    dh_claim_taken_by_other_box(&admitted, &taken);
    uint64_t taken_revision = dh_claim_put(d, &taken);
    expect_refusal(d, hold, wake, runs_before);
    return taken_revision;
}

static void test_gate_refuses_when_another_box_took_the_claim(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX], waiting[PATH_MAX + 32];
    start_with_hold(d, "gate", hold, sizeof(hold));
    dh_async *wake = dh_wake_start(d, "demo", 30000);

    DH_CHECK(d, dh_event_wait(d, "demo", "admitted", 10000, NULL), "no admitted event");
    /* The wake must really be paused at the gate, not merely admitted. */
    snprintf(waiting, sizeof(waiting), "waiting for %s", hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 10000), "the wake never paused at the gate hook");
    uint64_t taken_revision = take_over_and_expect_refusal(d, hold, wake, 0);

    /* The other box's claim is theirs: the refusal wrote nothing over it. */
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after), "the claim disappeared");
    DH_CHECK(d,
             after.revision == taken_revision && strcmp(claim_executor(&after), DH_OTHER_BOX) == 0,
             "the daemon changed the other box's claim (revision %" PRIu64 " -> %" PRIu64
             ", executor %s)",
             taken_revision, after.revision, claim_executor(&after));

    /* Status tells an operator why the wake did not serve. */
    json_object *status = dh_status(d, "demo");
    bool says_not_owner = strcmp(dh_json_str(status, "reason"), "not_owner") == 0;
    char status_text[1024];
    snprintf(status_text, sizeof(status_text), "%s", json_object_to_json_string(status));
    json_object_put(status);
    DH_CHECK(d, says_not_owner, "status does not say not_owner: %s", status_text);
    dh_stop_and_check_clean(d);
}

/* A second wake of the same build takes the gate's fast path (the record's
 * write and the claim's read together, build-state.json unchanged): a claim
 * another box took after the admission still stops the exec. */
static void test_gate_fast_path_refuses_when_another_box_took_the_claim(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX];
    start_with_hold(d, "gate", hold, sizeof(hold));
    touch(d, hold);
    dh_wake(d, "demo");
    dh_park(d, "demo");
    DH_CHECK(d, unlink(hold) == 0, "cannot remove %s: %s", hold, strerror(errno));
    dh_events_mark(d);
    pid_t before[4];
    size_t runs = dh_marker_pids(d, "demo", before, 4);

    /* The first wake paused at the gate too: the second's pause is the
     * next line that says so. */
    char waiting[PATH_MAX + 32];
    snprintf(waiting, sizeof(waiting), "waiting for %s", hold);
    size_t pauses = dh_log_count(d, waiting);
    dh_async *wake = dh_wake_start(d, "demo", 30000);
    /* Admitted, and held before the gate until the hold exists again: the
     * takeover must come while it is paused there, or the claim watch may
     * end the wake before it reaches the gate. */
    DH_CHECK(d, dh_event_wait(d, "demo", "admitted", 10000, NULL), "no admitted event");
    DH_CHECK(d, dh_log_wait_count(d, waiting, pauses + 1, 10000),
             "the second wake never paused at the gate hook");
    uint64_t taken_revision = take_over_and_expect_refusal(d, hold, wake, runs);
    DH_CHECK(d, dh_log_wait(d, "host demo: gate: build state unchanged", 10000),
             "the second wake did not take the gate's fast path");
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after) && after.revision == taken_revision,
             "the refusal wrote over the other box's claim");
    dh_stop_and_check_clean(d);
}

static void test_publish_lost_when_the_admission_changed(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX], waiting[PATH_MAX + 32];
    start_with_hold(d, "publish", hold, sizeof(hold));
    dh_async *wake = dh_wake_start(d, "demo", 30000);

    dh_event ready;
    DH_CHECK(d, dh_event_wait(d, "demo", "ready", 10000, &ready), "no ready event");
    snprintf(waiting, sizeof(waiting), "waiting for %s", hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 10000), "the wake never paused at the publish hook");
    DH_CHECK(d, dh_marker_wait(d, "demo", 1, 5000), "the app did not run");
    pid_t pids[4];
    dh_marker_pids(d, "demo", pids, 4);

    claim admitted;
    DH_CHECK(d, dh_claim_get(d, "demo", &admitted), "no claim after admission");
    DH_CHECK(d, admitted.holder.generation == ready.generation,
             "the admission names generation %" PRIu64 ", ready was for %" PRIu64,
             admitted.holder.generation, ready.generation);
    /* Another admission happened in between: a newer session. */
    claim changed = admitted;
    changed.holder.session = admitted.holder.session + 1;
    uint64_t changed_revision = dh_claim_put(d, &changed);
    touch(d, hold);

    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "publish_lost") == 0,
             "wake after the admission changed: expected publish_lost, got %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_event_wait(d, "demo", "retired", 10000, NULL), "no retired event");
    dh_event failed;
    DH_CHECK(d,
             dh_event_wait(d, "demo", "failed", 5000, &failed) &&
                 strcmp(failed.reason, "publish_lost") == 0,
             "no failed event with reason publish_lost");
    DH_CHECK(d,
             dh_events_count(d, "demo", "published") == 0 &&
                 dh_events_count(d, "demo", "serving") == 0,
             "the lost generation was announced as published or serving");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "the retired generation's leaf is left");
    DH_CHECK(d, kill(pids[0], 0) < 0 && errno == ESRCH,
             "the retired generation's app (pid %d) still runs", (int)pids[0]);

    /* Nothing after ready is retried blindly: one attempt, one app. */
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 1, "the lost generation was retried");
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after), "the claim disappeared");
    DH_CHECK(d, after.revision == changed_revision && strcmp(after.op.phase, "serving") != 0,
             "the daemon published over the changed admission (revision %" PRIu64 " -> %" PRIu64
             ", phase %s)",
             changed_revision, after.revision, after.op.phase);
    dh_stop_and_check_clean(d);
}

/* The one process in a generation leaf of host (the held child of an
 * early start), or 0 when there is none or more than one. */
static pid_t only_process_in_a_leaf(dh_daemon *d, const char *host)
{
    char dir[PATH_MAX + 80];
    snprintf(dir, sizeof(dir), "%s/hosts/%s", d->drv.cgroup_path, host);
    DIR *leaves = opendir(dir);
    if (!leaves)
        return 0;
    pid_t found = 0;
    size_t n = 0;
    struct dirent *entry;
    while ((entry = readdir(leaves))) {
        if (strncmp(entry->d_name, "g-", 2) != 0)
            continue;
        char procs[PATH_MAX + 400];
        snprintf(procs, sizeof(procs), "%s/%s/cgroup.procs", dir, entry->d_name);
        FILE *f = fopen(procs, "re");
        int pid;
        while (f && fscanf(f, "%d", &pid) == 1) {
            found = (pid_t)pid;
            n++;
        }
        if (f)
            fclose(f);
    }
    closedir(leaves);
    return n == 1 ? found : 0;
}

/* The executable pid runs, as /proc shows it; "" when unreadable. */
static void exe_of(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, buf, size - 1);
    buf[n < 0 ? 0 : n] = '\0';
}

/* How many starts demo's output log marks ("-- activatord: host demo,
 * generation N starts --"): a held child that never ran marks none. */
static size_t start_marks(dh_daemon *d)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/demo/log/output.log", d->drv.state_dir);
    char *text = dh_read_text(path);
    size_t n = 0;
    for (const char *p = text; p && (p = strstr(p, " starts --\n")); p++)
        n++;
    free(text);
    return n;
}

/* Holds demo's admission answer, wakes it, and waits for the early start:
 * the generation reserved and its child held in the leaf, not exec'd (it
 * still runs the daemon's executable, the app has not run). Returns the
 * held child's pid. */
static pid_t wake_until_held_beside_the_admission(dh_daemon *d, char *hold, size_t size,
                                                  dh_async **wake)
{
    start_with_hold(d, "admitted", hold, size);
    *wake = dh_wake_start(d, "demo", 30000);
    DH_CHECK(d, dh_log_wait(d, "point admitted held", 10000),
             "the admission's answer was never held");
    DH_CHECK(d, dh_log_wait(d, "made ready beside the admission, held before its exec", 10000),
             "no early start while the admission's answer was held");
    pid_t held = only_process_in_a_leaf(d, "demo");
    DH_CHECK(d, held > 0, "no single process in demo's generation leaf during the early start");
    char held_exe[PATH_MAX], daemon_exe[PATH_MAX];
    exe_of(held, held_exe, sizeof(held_exe));
    exe_of(d->drv.pid, daemon_exe, sizeof(daemon_exe));
    DH_CHECK(d, strcmp(held_exe, daemon_exe) == 0,
             "the held child (pid %d) runs %s before the admission is taken", (int)held, held_exe);
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 0, "the app ran before its admission");
    DH_CHECK(d, dh_events_count(d, "demo", "admitted") == 0, "admitted before the answer");
    return held;
}

/* The child held beside the admission is the one that runs, once the
 * admission is taken and the gate has passed. */
static void test_early_start_execs_the_child_it_held(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX];
    dh_async *wake = NULL;
    pid_t held = wake_until_held_beside_the_admission(d, hold, sizeof(hold), &wake);
    touch(d, hold);
    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, dh_reply_ok(reply), "the wake failed: %s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_marker_wait(d, "demo", 1, 5000), "the app did not run");
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 1 && pids[0] == held,
             "the app runs as pid %d, not as the held child %d", (int)pids[0], (int)held);
    DH_CHECK(d, dh_log_wait(d, "prepare takes the build resolved beside the admission", 1000),
             "prepare did not take the early answer");
    DH_CHECK(d, start_marks(d) == 1, "the output log marks %zu starts for one", start_marks(d));
    dh_stop_and_check_clean(d);
}

/* A claim another box takes while the early start waits: the held child is
 * killed without ever running the app, and no leaf is left. */
static void test_early_start_is_let_go_when_another_box_takes_the_claim(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX];
    dh_async *wake = NULL;
    pid_t held = wake_until_held_beside_the_admission(d, hold, sizeof(hold), &wake);
    claim admitted, taken;
    DH_CHECK(d, dh_claim_get(d, "demo", &admitted), "no claim after admission");
    dh_claim_taken_by_other_box(&admitted, &taken);
    dh_claim_put(d, &taken);
    touch(d, hold);
    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, !dh_reply_ok(reply), "the wake served a claim another box took: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    dh_events_pump(d, 200);
    DH_CHECK(d, dh_events_count(d, "demo", "exec") == 0, "an exec event despite the takeover");
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 0, "the app ran after the takeover");
    DH_CHECK(d, kill(held, 0) < 0 && errno == ESRCH, "the held child %d is left", (int)held);
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "%zu generation leaves left",
             dh_leaf_count(d, "demo"));
    DH_CHECK(d, start_marks(d) == 0, "the output log marks %zu starts, none ran", start_marks(d));
    dh_stop_and_check_clean(d);
}

/* Waits until the wake is paused at the admit hook (its nth pause), and
 * checks that its read took the claim the daemon saw last. */
static void paused_before_the_admission(dh_daemon *d, const char *hold, size_t nth)
{
    char waiting[PATH_MAX + 32];
    snprintf(waiting, sizeof(waiting), "waiting for %s", hold);
    DH_CHECK(d, dh_log_wait_count(d, waiting, nth, 10000),
             "the wake never paused before its admission");
    DH_CHECK(d, dh_log_count(d, "admitting on the claim this box saw last") >= nth,
             "the wake read the claim instead of admitting on the one the daemon saw last");
}

/* A wake admits on the claim the daemon saw last, without reading it. When
 * the store has moved past that claim before the admission (here: another
 * admission naming this box, then another box's), the compare-and-swap's
 * answer is taken as the read: the wake is admitted on it, or refused for
 * what it says, as if it had read it. */
static void test_a_wake_admits_on_the_claim_it_saw_last(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX];
    start_with_hold(d, "admit", hold, sizeof(hold));
    dh_async *wake = dh_wake_start(d, "demo", 30000);
    paused_before_the_admission(d, hold, 1);
    claim seen, newer;
    DH_CHECK(d, dh_claim_get(d, "demo", &seen), "no claim");
    newer = seen;
    snprintf(newer.holder.box, sizeof(newer.holder.box), "%s", DH_BOX);
    snprintf(newer.holder.incarnation, sizeof(newer.holder.incarnation),
             "0123456789abcdef0123456789abcdef");
    newer.holder.session = seen.holder.session + 5;
    dh_claim_put(d, &newer);
    touch(d, hold);
    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, dh_reply_ok(reply), "the wake over a claim the store moved past failed: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_log_wait(d, "admitting on the store's", 1000),
             "the wake did not say it admitted on the store's claim");
    claim served;
    DH_CHECK(d, dh_claim_get(d, "demo", &served), "no claim after the wake");
    DH_CHECK(d,
             served.holder.session > newer.holder.session &&
                 strcmp(served.holder.incarnation, newer.holder.incarnation) != 0,
             "the serving claim's session %" PRIu64 " is not past the store's %" PRIu64,
             served.holder.session, newer.holder.session);

    dh_park(d, "demo");
    DH_CHECK(d, unlink(hold) == 0, "cannot remove %s: %s", hold, strerror(errno));
    dh_events_mark(d);
    wake = dh_wake_start(d, "demo", 30000);
    paused_before_the_admission(d, hold, 2);
    claim parked, taken;
    DH_CHECK(d, dh_claim_get(d, "demo", &parked), "no claim after the park");
    dh_claim_taken_by_other_box(&parked, &taken);
    pid_t pids[8];
    size_t runs = dh_marker_pids(d, "demo", pids, 8);
    dh_claim_put(d, &taken);
    expect_refusal(d, hold, wake, runs);
    dh_stop_and_check_clean(d);
}

static void test_daemon_answers_while_a_wake_waits_for_the_store(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_write_app_host(d, "other", dh_free_port(), NULL, NULL);
    claim assigned;
    dh_claim_assigned("demo", DH_BOX, &assigned);
    dh_claim_put(d, &assigned);
    dh_start(d, NULL);
    dh_events_mark(d);

    /* The store's lock, held as another process (activatorctl, a second
     * daemon) would hold it: through its own open file. */
    char lock_path[PATH_MAX];
    snprintf(lock_path, sizeof(lock_path), "%s/claims/.lock", d->drv.state_dir);
    int held = open(lock_path, O_RDWR | O_CLOEXEC);
    DH_CHECK(d, held >= 0, "cannot open %s: %s", lock_path, strerror(errno));
    DH_CHECK(d, flock(held, LOCK_EX) == 0, "cannot lock %s: %s", lock_path, strerror(errno));

    dh_async *wake = dh_wake_start(d, "demo", 30000);
    DH_CHECK(d, dh_event_wait(d, "demo", "waking", 10000, NULL), "no waking event");
    /* The admission's CAS now waits for the lock; the daemon still answers,
     * about the waking host and about any other. */
    json_object *status = dh_status(d, "demo");
    DH_CHECK(d, strcmp(dh_json_str(status, "state"), "waking") == 0,
             "demo is %s while its admission waits for the store", dh_json_str(status, "state"));
    json_object_put(status);
    status = dh_status(d, "other");
    DH_CHECK(d, strcmp(dh_json_str(status, "state"), "parked") == 0, "other is %s",
             dh_json_str(status, "state"));
    json_object_put(status);

    flock(held, LOCK_UN);
    close(held);
    json_object *reply = dh_request_finish(d, wake);
    DH_CHECK(d, dh_reply_ok(reply), "the wake failed once the store was free: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, dh_wait_state(d, "demo", "serving", 10000), "demo does not serve");
    dh_stop_and_check_clean(d);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "etcd") == 0)
        store_kind = DH_STORE_ETCD;
    int r = dh_check_can_run(store_kind == DH_STORE_ETCD ? "daemon-holds-etcd" : "daemon-holds-dir",
                             store_kind);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_gate_refuses_when_another_box_took_the_claim),
        DH_TEST(test_gate_fast_path_refuses_when_another_box_took_the_claim),
        DH_TEST(test_publish_lost_when_the_admission_changed),
        DH_TEST(test_early_start_execs_the_child_it_held),
        DH_TEST(test_early_start_is_let_go_when_another_box_takes_the_claim),
        /* Last, so the etcd run can leave it out: the lock is the dir store's. */
        DH_TEST(test_a_wake_admits_on_the_claim_it_saw_last),
        DH_TEST(test_daemon_answers_while_a_wake_waits_for_the_store),
    };
    size_t n_tests = sizeof(tests) / sizeof(tests[0]) - (store_kind == DH_STORE_ETCD ? 1 : 0);
    return _cmocka_run_group_tests("daemon holds", tests, n_tests, NULL, NULL);
}
