/* ExecRestore= under the real daemon: a small shell script appends one line
 * per run ("HOST CHECKPOINT GENERATION STATE_DIRECTORY") to a file, and the
 * test sets the claim's state.checkpoint.
 *   - it runs once per new checkpoint: not again for the same checkpoint on a
 *     later wake, again when the claim names a new one;
 *   - it does not run again when an attempt is retried;
 *   - a restore that fails execs nothing, records no checkpoint, and so runs
 *     again on the next wake;
 *   - it runs on the first wake of a host, whose state directory does not
 *     exist yet;
 *   - an executable script named directly in ExecRestore= runs (operators'
 *     helpers are often scripts);
 *   - a wake refused by the checks of its build (a hold on another
 *     version, a failed pin with nothing to stand in) leaves the state
 *     directory byte for byte as it was: the restore never ran;
 *   - a state another build last ran against is said (event and log,
 *     naming both), and with RestoreRequiresSameBuild=yes refused before
 *     the restore, leaving the state as it was. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "harness.h"

typedef struct restore_paths {
    char script[PATH_MAX];
    char runs[PATH_MAX];
    char fail_flag[PATH_MAX];
} restore_paths;

static void write_restore_script(dh_daemon *d, restore_paths *paths)
{
    const char *dir = dh_helper_dir(d);
    snprintf(paths->script, sizeof(paths->script), "%s/restore.sh", dir);
    snprintf(paths->runs, sizeof(paths->runs), "%s/restores", dir);
    snprintf(paths->fail_flag, sizeof(paths->fail_flag), "%s/fail-restore", dir);
    FILE *f = fopen(paths->script, "we");
    DH_CHECK(d, f, "cannot write %s: %s", paths->script, strerror(errno));
    fprintf(f,
            "#!/bin/sh\n"
            "echo \"$ACTIVATOR_HOST $ACTIVATOR_CHECKPOINT $ACTIVATOR_GENERATION $STATE_DIRECTORY\" "
            ">> %s\n"
            "if [ -e %s ]; then exit 3; fi\n"
            "echo \"$ACTIVATOR_CHECKPOINT\" > \"$STATE_DIRECTORY/restored-to\"\n"
            "exit 0\n",
            paths->runs, paths->fail_flag);
    fclose(f);
    chmod(paths->script, 0755);
    /* The script runs as the host's user, which may append to this file
     * but not create one in the test's directory. */
    int fd = open(paths->runs, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    DH_CHECK(d, fd >= 0 && fchmod(fd, 0666) == 0, "cannot create %s: %s", paths->runs,
             strerror(errno));
    close(fd);
}

/* The lines of the runs file, in order; returns how many. */
static size_t restore_runs(const restore_paths *paths, char lines[][256], size_t max)
{
    char *text = dh_read_text(paths->runs);
    size_t n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < max; line = strtok(NULL, "\n"))
        snprintf(lines[n++], 256, "%s", line);
    free(text);
    return n;
}

/* A host that already has its state directory (it served on this box
 * before), so a test of the restore's bookkeeping does not depend on the
 * first-wake case, which test_restore_on_a_fresh_host covers. */
static void make_state_directory(dh_daemon *d)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/demo/state", d->drv.state_dir);
    act_error err = {0};
    /* Search permission on the way, as the daemon's own directories have:
     * the host's user must reach its state directory. */
    DH_CHECK(d, act_mkdir_p(path, 0711, &err) == 0, "mkdir %s: %s", path, err.message);
}

static void set_checkpoint(dh_daemon *d, const char *checkpoint)
{
    claim c;
    if (!dh_claim_get(d, "demo", &c))
        dh_claim_assigned("demo", DH_BOX, &c);
    snprintf(c.state.checkpoint, sizeof(c.state.checkpoint), "%s", checkpoint);
    dh_claim_put(d, &c);
}

static uint64_t wake_expect(dh_daemon *d, const char *code)
{
    json_object *reply = dh_wake_reply(d, "demo", 60000);
    bool as_expected = strcmp(dh_reply_code(reply), code) == 0;
    uint64_t generation = dh_json_u64(dh_reply_result(reply), "generation");
    char text[2048];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, as_expected, "wake: expected %s, got %s", code, text);
    return generation;
}

static void park(dh_daemon *d)
{
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
}

/* Sets up the daemon with one host "demo" whose ExecRestore= runs the
 * restore script (through /bin/sh, or named directly when through_sh is
 * false), staged and live, with checkpoint cp-1 in its claim. app_args and
 * host_lines (may be NULL) go to dh_add_app_host; with_state_directory
 * makes the host's state directory first. The daemon is not started. */
static void setup_demo(dh_daemon *d, restore_paths *paths, bool through_sh, const char *app_args,
                       const char *host_lines, bool with_state_directory)
{
    dh_setup(d, DH_STORE_DIR, NULL);
    write_restore_script(d, paths);
    char extra[2 * PATH_MAX + 160];
    snprintf(extra, sizeof(extra), "ExecRestore=%s%s\n%s%s", through_sh ? "/bin/sh " : "",
             paths->script, dh_helper_dir_line(d), host_lines ? host_lines : "");
    dh_add_app_host(d, "demo", app_args, extra);
    if (with_state_directory)
        make_state_directory(d);
    set_checkpoint(d, "cp-1");
}

static void check_run(dh_daemon *d, const char *line, const char *checkpoint, uint64_t generation)
{
    char expected[512];
    snprintf(expected, sizeof(expected), "demo %s %" PRIu64 " %s/hosts/demo/state", checkpoint,
             generation, d->drv.state_dir);
    DH_CHECK(d, strcmp(line, expected) == 0, "restore ran with \"%s\", expected \"%s\"", line,
             expected);
}

static void test_restore_once_per_checkpoint(void **state)
{
    dh_daemon *d = *state;
    restore_paths paths;
    setup_demo(d, &paths, true, NULL, NULL, true);
    dh_start(d, NULL);

    uint64_t first = wake_expect(d, "ok");
    char lines[8][256];
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 1, "the first wake did not restore exactly once");
    check_run(d, lines[0], "cp-1", first);
    DH_CHECK(d, !dh_leaf_exists(d, "demo", "restore-1"), "the restore's leaf is left");

    /* Same checkpoint: the state directory is already there. */
    park(d);
    wake_expect(d, "ok");
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 1,
             "a wake with the checkpoint already restored ran the restore again");

    /* A new checkpoint: restored again, once. */
    park(d);
    set_checkpoint(d, "cp-2");
    uint64_t third = wake_expect(d, "ok");
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 2, "a new checkpoint was not restored once");
    check_run(d, lines[1], "cp-2", third);
    dh_stop_and_check_clean(d);
}

static void test_restore_not_repeated_on_retry(void **state)
{
    dh_daemon *d = *state;
    restore_paths paths;
    setup_demo(d, &paths, true, "--never-ready", "ReadyTimeoutSec=1\nMaxStarts=2\n", true);
    dh_start(d, NULL);

    wake_expect(d, "ready_timeout");
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 2, "expected two attempts of the app");
    char lines[8][256];
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 1,
             "the restore ran %zu times for one wake with a retried attempt",
             restore_runs(&paths, lines, 8));
    dh_stop_and_check_clean(d);
}

static void test_failed_restore_execs_nothing_and_runs_again(void **state)
{
    dh_daemon *d = *state;
    restore_paths paths;
    setup_demo(d, &paths, true, NULL, NULL, true);
    FILE *flag = fopen(paths.fail_flag, "we");
    DH_CHECK(d, flag, "cannot create %s", paths.fail_flag);
    fclose(flag);
    dh_start(d, NULL);
    dh_events_mark(d);

    wake_expect(d, "restore_failed");
    dh_events_pump(d, 200);
    DH_CHECK(d, dh_events_count(d, "demo", "exec") == 0, "an exec event after a failed restore");
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 0, "the app ran after a failed restore");
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "leaves left after a failed restore");

    /* Nothing was recorded, so the next wake restores again, and serves. */
    unlink(paths.fail_flag);
    wake_expect(d, "ok");
    char lines[8][256];
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 2,
             "after a failed restore the next wake did not restore again");
    dh_stop_and_check_clean(d);
}

static void test_restore_script_named_directly(void **state)
{
    dh_daemon *d = *state;
    restore_paths paths;
    setup_demo(d, &paths, false, NULL, NULL, true);
    dh_start(d, NULL);

    uint64_t generation = wake_expect(d, "ok");
    char lines[8][256];
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 1, "the script did not run once");
    check_run(d, lines[0], "cp-1", generation);
    dh_stop_and_check_clean(d);
}

/* The first wake of a host on this box: its state directory does not exist
 * yet, and filling it is exactly the restore's job. */
static void test_restore_on_a_fresh_host(void **state)
{
    dh_daemon *d = *state;
    restore_paths paths;
    setup_demo(d, &paths, true, NULL, NULL, false);
    dh_start(d, NULL);

    uint64_t generation = wake_expect(d, "ok");
    char lines[8][256];
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 1, "the restore did not run once");
    check_run(d, lines[0], "cp-1", generation);
    dh_stop_and_check_clean(d);
}

/* ---- a refused wake restores nothing ------------------------------------ */

/* FNV-1a over every path, mode, size and byte under the state directory,
 * in nftw's order (which does not change while nothing does). */
static uint64_t tree_hash;
static size_t tree_prefix;

static void hash_bytes(const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; i++)
        tree_hash = (tree_hash ^ p[i]) * 1099511628211ull;
}

static int hash_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    hash_bytes(path + tree_prefix, strlen(path + tree_prefix) + 1);
    hash_bytes(&st->st_mode, sizeof(st->st_mode));
    hash_bytes(&st->st_size, sizeof(st->st_size));
    if (type == FTW_F) {
        char *text = dh_read_text(path);
        if (text) {
            hash_bytes(text, strlen(text));
            free(text);
        }
    }
    return 0;
}

static uint64_t state_hash(dh_daemon *d)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/demo/state", d->drv.state_dir);
    tree_hash = 1469598103934665603ull;
    tree_prefix = strlen(path);
    DH_CHECK(d, nftw(path, hash_entry, 16, FTW_PHYS) == 0, "cannot walk %s: %s", path,
             strerror(errno));
    return tree_hash;
}

static void write_state_file(dh_daemon *d, const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/demo/state/%s", d->drv.state_dir, name);
    FILE *f = fopen(path, "we");
    DH_CHECK(d, f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

static void edit_claim(dh_daemon *d, const char *held, bool failed_pin)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim of demo");
    snprintf(c.held, sizeof(c.held), "%s", held);
    c.has_pin = failed_pin;
    c.pin = (claim_pin){0};
    if (failed_pin) {
        rel_identity v2;
        dh_stage(d, "demo", "v2", false, &v2);
        snprintf(c.pin.version, sizeof(c.pin.version), "v2");
        snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", v2.build_digest);
        snprintf(c.pin.failure_reason, sizeof(c.pin.failure_reason), "crashed");
        snprintf(c.pin.failure_message, sizeof(c.pin.failure_message), "v2 exited");
    }
    dh_claim_put(d, &c);
}

static void test_a_refused_wake_leaves_the_state_as_it_was(void **state)
{
    dh_daemon *d = *state;
    restore_paths paths;
    setup_demo(d, &paths, true, NULL, NULL, true);
    write_state_file(d, "data", "what the host wrote before\n");
    dh_start(d, NULL);
    uint64_t before = state_hash(d);

    /* Held on a version that is not the one the wake would run. */
    edit_claim(d, "v9", false);
    wake_expect(d, "held_mismatch");
    char lines[8][256];
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 0, "a wake refused held_mismatch restored");
    DH_CHECK(d, state_hash(d) == before, "a wake refused held_mismatch changed the state");

    /* A failed pin with no fallback. */
    edit_claim(d, "", true);
    wake_expect(d, "pin_failed");
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 0, "a wake refused pin_failed restored");
    DH_CHECK(d, state_hash(d) == before, "a wake refused pin_failed changed the state");

    /* The control: allowed, the same wake restores, and the state changes. */
    edit_claim(d, "", false);
    wake_expect(d, "ok");
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 1, "the allowed wake did not restore");
    DH_CHECK(d, state_hash(d) != before, "the restore left the state as it was");
    dh_stop_and_check_clean(d);
}

/* The claim's checkpoint says build v0 (another digest) last ran against it. */
static void name_the_states_build(dh_daemon *d, const char *checkpoint, const char *digest)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim of demo");
    snprintf(c.state.checkpoint, sizeof(c.state.checkpoint), "%s", checkpoint);
    snprintf(c.state.build_version, sizeof(c.state.build_version), "v0");
    snprintf(c.state.build_digest, sizeof(c.state.build_digest), "%s", digest);
    dh_claim_put(d, &c);
}

static void test_a_state_of_another_build_is_said_and_can_be_refused(void **state)
{
    dh_daemon *d = *state;
    restore_paths paths;
    setup_demo(d, &paths, true, NULL, "RestoreRequiresSameBuild=yes\n", true);
    write_state_file(d, "data", "what v0 wrote\n");
    dh_start(d, NULL);
    uint64_t before = state_hash(d);
    char other[65];
    memset(other, 'a', 64);
    other[64] = '\0';

    name_the_states_build(d, "cp-1", other);
    dh_events_mark(d);
    wake_expect(d, "state_build_mismatch");
    dh_event said;
    DH_CHECK(d, dh_event_wait(d, "demo", "state.other_build", 10000, &said),
             "no state.other_build event");
    DH_CHECK(d, strstr(said.reason, "v0") && strstr(said.reason, "v1"),
             "state.other_build says \"%s\"; expected both v0 and v1 named", said.reason);
    char lines[8][256];
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 0, "the refused wake restored");
    DH_CHECK(d, state_hash(d) == before, "the refused wake changed the state");

    /* Without the requirement (a reload), the same wake says so and restores. */
    char conf[PATH_MAX];
    snprintf(conf, sizeof(conf), "%s/demo.conf", d->drv.hosts_dir);
    char *text = dh_read_text(conf);
    DH_CHECK(d, text, "cannot read %s", conf);
    char *line = strstr(text, "RestoreRequiresSameBuild=yes");
    DH_CHECK(d, line, "the host file lost its RestoreRequiresSameBuild=yes");
    memcpy(line, "RestoreRequiresSameBuild=no ", strlen("RestoreRequiresSameBuild=yes"));
    FILE *f = fopen(conf, "we");
    DH_CHECK(d, f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", conf);
    free(text);
    json_object *reloaded = dh_request(d, 30000, "{\"v\":1,\"op\":\"reload\"}");
    bool ok = dh_reply_ok(reloaded);
    json_object_put(reloaded);
    DH_CHECK(d, ok, "the reload was refused");
    dh_events_mark(d);
    wake_expect(d, "ok");
    DH_CHECK(d, dh_event_wait(d, "demo", "state.other_build", 10000, NULL),
             "no state.other_build event for the restore that went on");
    DH_CHECK(d, restore_runs(&paths, lines, 8) == 1, "the allowed wake did not restore");
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-restore", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_restore_once_per_checkpoint),
        DH_TEST(test_restore_not_repeated_on_retry),
        DH_TEST(test_failed_restore_execs_nothing_and_runs_again),
        DH_TEST(test_restore_on_a_fresh_host),
        DH_TEST(test_restore_script_named_directly),
        DH_TEST(test_a_refused_wake_leaves_the_state_as_it_was),
        DH_TEST(test_a_state_of_another_build_is_said_and_can_be_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
