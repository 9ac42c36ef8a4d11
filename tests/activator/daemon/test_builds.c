/* Builds that fail safe, scripts, gc and release work off the loop, with the
 * real daemon:
 *   - a swap to a crashing build fails and N serves on; the claim's pin
 *     records the failure, the box, the time and the build that served;
 *     after a park a plain connection wakes that build, never the failed
 *     pin, and the pin.fallback event says so; unpin, then promote, then a
 *     wake runs the promoted build;
 *   - a daemon that never ran the host falls back to the pin the failed
 *     swap replaced;
 *   - a failed pin with no build to stand in refuses a wake with
 *     pin_failed, until a promote of another version clears the pin;
 *   - a "#!" shell script, and a script whose interpreter is inside the
 *     build, wake and answer; a script whose interpreter is missing fails
 *     with a message naming it;
 *   - gc (after a promote, and activatorctl gc) never removes a version in
 *     use while a generation runs an old one;
 *   - staging, promoting and swapping while another host wakes: the wakes
 *     complete while the release work is still held in flight on its worker
 *     (ACTIVATOR_TEST_RELEASE_HOLD), so none of it runs on the loop.
 *
 * NOTE for the per-generation mount namespace (iso-fs): the script whose
 * interpreter is inside the build names it by its path in the release store
 * (<state>/releases/demo/in1/bin/sh); that path must stay visible, read-only,
 * inside the generation for the test to pass there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tests/image/registry_harness.h"

/* Crashing at once is what /bin/false does with any arguments. */
#define CRASHING_BUILD "/bin/false"

static void write_file(dh_daemon *d, const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    DH_CHECK(d, fd >= 0, "cannot create %s: %s", path, strerror(errno));
    size_t len = strlen(text);
    DH_CHECK(d, write(fd, text, len) == (ssize_t)len, "cannot write %s", path);
    DH_CHECK(d, fchmod(fd, mode) == 0, "cannot chmod %s", path);
    close(fd);
}

/* Copies src to dst with mode, then appends extra_bytes zero bytes (an ELF
 * executable runs the same with them: the loader reads only its segments). */
static void copy_file(dh_daemon *d, const char *src, const char *dst, mode_t mode,
                      size_t extra_bytes)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    DH_CHECK(d, in >= 0 && out >= 0, "cannot copy %s to %s: %s", src, dst, strerror(errno));
    static char block[1 << 16];
    ssize_t n;
    while ((n = read(in, block, sizeof(block))) > 0)
        DH_CHECK(d, write(out, block, (size_t)n) == n, "cannot write %s", dst);
    memset(block, 0, sizeof(block));
    for (size_t left = extra_bytes; left > 0;) {
        size_t chunk = left < sizeof(block) ? left : sizeof(block);
        DH_CHECK(d, write(out, block, chunk) == (ssize_t)chunk, "cannot write %s", dst);
        left -= chunk;
    }
    DH_CHECK(d, fchmod(out, mode) == 0, "cannot chmod %s", dst);
    close(in);
    close(out);
}

static void touch(dh_daemon *d, const char *path)
{
    write_file(d, path, "", 0644);
}

/* reply, when it says ok; else the test fails, with reply put first: a
 * failed check leaves the test at once, and LeakSanitizer would add the
 * reply it left behind to the failure's report. */
static json_object *request_ok(dh_daemon *d, const char *what, json_object *reply)
{
    if (!dh_reply_ok(reply)) {
        char text[4096];
        snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
        json_object_put(reply);
        DH_CHECK(d, false, "%s: %s", what, text);
    }
    return reply;
}

/* Stages the directory src as host/version with exec_path its executable,
 * straight into the daemon's release store. */
static void stage_dir(dh_daemon *d, const char *host, const char *version, const char *src,
                      const char *exec_path, bool promote)
{
    char releases[PATH_MAX];
    snprintf(releases, sizeof(releases), "%s/releases", d->drv.state_dir);
    rel_store *store = NULL;
    act_error err = {0};
    DH_CHECK(d, rel_store_open(releases, &store, &err) == 0, "%s", err.message);
    int r = rel_stage(store, host, version, src, exec_path, NULL, &err);
    if (r == 0 && promote)
        r = rel_promote(store, host, version, &err);
    rel_store_free(store);
    DH_CHECK(d, r == 0, "staging %s as %s/%s: %s", src, host, version, err.message);
}

static bool version_staged(dh_daemon *d, const char *host, const char *version)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/releases/%s/%s", d->drv.state_dir, host, version);
    return access(path, F_OK) == 0;
}

/* ---- pins fail safe -------------------------------------------------------- */

static void test_failed_swap_falls_back_to_the_build_that_served(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, "MaxStarts=1\n");
    dh_wake(d, "demo");
    dh_expect_version(d, port, "v1");

    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, false, NULL);
    json_object *reply =
        dh_request(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}");
    DH_CHECK(d, !dh_reply_ok(reply), "a swap to a crashing build served: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    dh_expect_version(d, port, "v1");

    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim after the failed swap");
    DH_CHECK(d,
             c.has_pin && strcmp(c.pin.version, "v2") == 0 && c.pin.failure_reason[0] &&
                 strcmp(c.pin.failure_box, DH_BOX) == 0 && c.pin.failure_usec > 0 &&
                 strcmp(c.pin.fallback_version, "v1") == 0 && c.pin.fallback_digest[0],
             "after the failed swap the pin is %s failed \"%s\" on \"%s\" at %" PRIu64
             ", fallback \"%s\"; expected v2 failed on %s, fallback v1",
             c.has_pin ? c.pin.version : "(none)", c.pin.failure_reason, c.pin.failure_box,
             c.pin.failure_usec, c.pin.fallback_version, DH_BOX);

    /* Parked, then a plain connection: the build that served answers. */
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    dh_events_mark(d);
    dh_expect_version(d, port, "v1");
    dh_event fallback;
    DH_CHECK(d, dh_event_wait(d, "demo", "pin.fallback", 10000, &fallback),
             "no pin.fallback event for the wake");
    DH_CHECK(d, strcmp(fallback.version, "v1") == 0 && strstr(fallback.reason, "v2"),
             "pin.fallback names version %s (%s); expected v1, with the failed pin v2",
             fallback.version, fallback.reason);

    /* unpin, then promote, then a wake runs the promoted build. */
    dh_park(d, "demo");
    json_object_put(request_ok(
        d, "unpin demo", dh_request(d, 30000, "{\"v\":1,\"op\":\"unpin\",\"host\":\"demo\"}")));
    DH_CHECK(d, dh_claim_get(d, "demo", &c) && !c.has_pin, "unpin left the pin");
    dh_stage(d, "demo", "v3", false, NULL);
    json_object_put(request_ok(
        d, "promote demo v3",
        dh_request(d, 60000, "{\"v\":1,\"op\":\"promote\",\"host\":\"demo\",\"version\":\"v3\"}")));
    dh_wake(d, "demo");
    dh_expect_version(d, port, "v3");
    dh_stop_and_check_clean(d);
}

/* A daemon that never ran the host knows no build that served: the pin the
 * swap replaces, which served (its swap succeeded), is the fallback. */
static void test_a_fresh_daemon_falls_back_to_the_replaced_pin(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, "MaxStarts=1\n");
    dh_wake(d, "demo");
    dh_stage(d, "demo", "v2", false, NULL);
    json_object_put(request_ok(
        d, "swap demo v2",
        dh_request(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}")));
    dh_expect_version(d, port, "v2");
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_stop(d) == 0, "the daemon did not stop cleanly");
    dh_start(d, NULL);

    dh_stage_file(d, "demo", "v3", CRASHING_BUILD, false, NULL);
    dh_swap_fails_to(d, "demo", "v3", "v2");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo is not parked");
    dh_cold_wake_runs_fallback(d, "demo", port, "v2");
    dh_stop_and_check_clean(d);
}

/* The generation a restarted daemon resumed served: once it is parked, a
 * failed swap falls back to its build (the soak's slow host had none, and
 * every wake after was refused pin_failed). */
static void test_a_resumed_generation_is_the_fallback(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, "MaxStarts=1\n");
    dh_served served = dh_wake(d, "demo");
    dh_kill(d);
    dh_start(d, NULL);
    DH_CHECK(d, dh_answer_pid(port) == served.pid, "the restarted daemon did not resume demo");
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");

    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, false, NULL);
    dh_swap_fails_to(d, "demo", "v2", "v1");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo is not parked");
    dh_expect_version(d, port, "v1");
    dh_stop_and_check_clean(d);
}

static void test_failed_pin_without_fallback_is_refused_until_a_promote(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, "MaxStarts=1\n");
    dh_wake(d, "demo");
    dh_park(d, "demo");

    /* A pin that failed where no build had served (another box's swap of a
     * host parked there, say): nothing may stand in for it. */
    rel_identity v2;
    dh_stage(d, "demo", "v2", false, &v2);
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim");
    c.has_pin = true;
    c.pin = (claim_pin){0};
    snprintf(c.pin.version, sizeof(c.pin.version), "v2");
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", v2.build_digest);
    snprintf(c.pin.failure_reason, sizeof(c.pin.failure_reason), "crashed");
    snprintf(c.pin.failure_message, sizeof(c.pin.failure_message), "v2 exited before ready");
    dh_claim_put(d, &c);

    json_object *reply = dh_wake_reply(d, "demo", 30000);
    char text[1024];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    bool refused = !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "pin_failed") == 0 &&
                   strstr(text, "activatorctl unpin demo");
    json_object_put(reply);
    DH_CHECK(d, refused, "a wake under a failed pin without a fallback: %s", text);
    pid_t pids[4];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 4) == 1, "the refused wake ran something");

    /* A promote of another version clears the pin. */
    reply = request_ok(
        d, "promote demo v1",
        dh_request(d, 60000, "{\"v\":1,\"op\":\"promote\",\"host\":\"demo\",\"version\":\"v1\"}"));
    bool unpinned = strcmp(dh_json_str(dh_reply_result(reply), "unpinned"), "v2") == 0;
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, unpinned, "promote did not say it cleared the pin v2: %s", text);
    DH_CHECK(d, dh_claim_get(d, "demo", &c) && !c.has_pin, "the promote left the pin");
    dh_wake(d, "demo");
    dh_expect_version(d, port, "v1");
    dh_stop_and_check_clean(d);
}

/* ---- scripts --------------------------------------------------------------- */

static void test_scripts_run_from_their_verified_fd(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_free_port();
    dh_write_app_host(d, "demo", port, NULL, "MaxStarts=1\n");

    /* A shell script, run by the box's /bin/sh. The app it execs is in its
     * build: a generation's view shows the build it runs, not the build
     * tree the test runs from (which may be under /tmp). */
    char script[PATH_MAX], text[PATH_MAX + 128];
    char src[PATH_MAX / 2], bin[PATH_MAX / 2 + 8], path[PATH_MAX];
    snprintf(src, sizeof(src), "%s/sh1-src", d->drv.dir);
    DH_CHECK(d, mkdir(src, 0755) == 0, "mkdir %s: %s", src, strerror(errno));
    snprintf(path, sizeof(path), "%s/app", src);
    copy_file(d, DH_E2E_APP, path, 0755, 0);
    snprintf(path, sizeof(path), "%s/run", src);
    snprintf(text, sizeof(text), "#!/bin/sh\nexec %s/releases/demo/sh1/app \"$@\"\n",
             d->drv.state_dir);
    write_file(d, path, text, 0755);
    stage_dir(d, "demo", "sh1", src, "run", true);
    dh_start(d, NULL);
    dh_wake(d, "demo");
    dh_expect_version(d, port, "sh1");
    dh_park(d, "demo");

    /* A script whose interpreter is inside the build (a copy of dash). */
    snprintf(src, sizeof(src), "%s/in1-src", d->drv.dir);
    snprintf(bin, sizeof(bin), "%s/bin", src);
    DH_CHECK(d, mkdir(src, 0755) == 0 && mkdir(bin, 0755) == 0, "mkdir %s: %s", bin,
             strerror(errno));
    snprintf(path, sizeof(path), "%s/sh", bin);
    copy_file(d, "/bin/dash", path, 0755, 0);
    snprintf(path, sizeof(path), "%s/app", src);
    copy_file(d, DH_E2E_APP, path, 0755, 0);
    snprintf(path, sizeof(path), "%s/run", src);
    snprintf(text, sizeof(text),
             "#!%s/releases/demo/in1/bin/sh\nexec %s/releases/demo/in1/app \"$@\"\n",
             d->drv.state_dir, d->drv.state_dir);
    write_file(d, path, text, 0755);
    stage_dir(d, "demo", "in1", src, "run", true);
    dh_wake(d, "demo");
    dh_expect_version(d, port, "in1");
    dh_park(d, "demo");

    /* The most common wrapper: a script in bin/ that execs the app beside
     * its build's root through $0. Its $0 is its path in the release store,
     * not /dev/fd/N, so dirname finds the build. */
    snprintf(src, sizeof(src), "%s/rel1-src", d->drv.dir);
    snprintf(bin, sizeof(bin), "%s/bin", src);
    DH_CHECK(d, mkdir(src, 0755) == 0 && mkdir(bin, 0755) == 0, "mkdir %s: %s", bin,
             strerror(errno));
    snprintf(path, sizeof(path), "%s/app", src);
    copy_file(d, DH_E2E_APP, path, 0755, 0);
    snprintf(path, sizeof(path), "%s/run.sh", bin);
    write_file(d, path, "#!/bin/sh\nexec \"$(dirname \"$0\")/../app\" \"$@\"\n", 0755);
    stage_dir(d, "demo", "rel1", src, "bin/run.sh", true);
    dh_wake(d, "demo");
    dh_expect_version(d, port, "rel1");
    dh_park(d, "demo");

    /* A script whose interpreter is missing: the failure names it. */
    snprintf(script, sizeof(script), "%s/broken.sh", d->drv.dir);
    write_file(d, script, "#!/nonexistent/act-interpreter -e\nexit 0\n", 0755);
    dh_stage_file(d, "demo", "bad1", script, true, NULL);
    json_object *reply = dh_wake_reply(d, "demo", 30000);
    char reply_text[1024];
    snprintf(reply_text, sizeof(reply_text), "%s",
             json_object_to_json_string_ext(reply, JSON_C_TO_STRING_NOSLASHESCAPE));
    bool named = !dh_reply_ok(reply) && strstr(reply_text, "/nonexistent/act-interpreter");
    json_object_put(reply);
    DH_CHECK(d, named, "a script with a missing interpreter: %s", reply_text);
    dh_stop_and_check_clean(d);
}

/* ---- gc -------------------------------------------------------------------- */

static json_object *names_of(json_object *result, const char *key)
{
    json_object *array = NULL;
    json_object_object_get_ex(result, key, &array);
    return array;
}

static bool names_contain(json_object *array, const char *name)
{
    for (size_t i = 0; array && i < json_object_array_length(array); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(array, i)), name) == 0)
            return true;
    return false;
}

static void test_gc_never_removes_a_version_in_use(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, "ReleasesKeep=1\n");
    dh_served served = dh_wake(d, "demo"); /* v1 runs, and stays old */
    const char *versions[] = {"v2", "v3", "v4", "v5"};
    for (size_t i = 0; i < 4; i++)
        dh_stage(d, "demo", versions[i], false, NULL);

    /* A dry run with nothing kept but what is in use names the rest. */
    json_object *reply = request_ok(
        d, "gc --dry-run",
        dh_request(d, 60000,
                   "{\"v\":1,\"op\":\"gc\",\"host\":\"demo\",\"keep\":0,\"dry_run\":true}"));
    json_object *result = dh_reply_result(reply);
    json_object *would = names_of(result, "would_remove");
    bool planned = would && json_object_array_length(would) == 4 && !names_contain(would, "v1") &&
                   names_contain(names_of(result, "in_use"), "v1");
    char text[1024];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, planned, "gc --dry-run --keep 0: %s", text);
    for (size_t i = 0; i < 4; i++)
        DH_CHECK(d, version_staged(d, "demo", versions[i]), "the dry run removed %s", versions[i]);

    /* A promote collects, keeping ReleasesKeep=1 (v5, live now) and v1,
     * which the serving generation runs. */
    json_object_put(request_ok(
        d, "promote demo v5",
        dh_request(d, 60000, "{\"v\":1,\"op\":\"promote\",\"host\":\"demo\",\"version\":\"v5\"}")));
    DH_CHECK(d, dh_log_wait(d, "gc removed version v2", 10000), "no gc after the promote");
    DH_CHECK(d, dh_log_wait(d, "gc removed version v4", 10000), "the gc kept v4");
    DH_CHECK(d, !version_staged(d, "demo", "v3"), "the gc kept v3");
    DH_CHECK(d, version_staged(d, "demo", "v1") && version_staged(d, "demo", "v5"),
             "the gc removed the running v1 or the live v5");

    /* activatorctl gc with nothing to keep removes nothing in use. */
    reply =
        request_ok(d, "gc --keep 0",
                   dh_request(d, 60000, "{\"v\":1,\"op\":\"gc\",\"host\":\"demo\",\"keep\":0}"));
    json_object *removed = names_of(dh_reply_result(reply), "removed");
    bool nothing = removed && json_object_array_length(removed) == 0;
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, nothing, "gc --keep 0 removed a version in use: %s", text);
    DH_CHECK(d, version_staged(d, "demo", "v1"), "gc removed the running v1");
    json_object *status = dh_status(d, "demo");
    bool still = dh_json_u64(status, "generation") == served.generation;
    json_object_put(status);
    DH_CHECK(d, still, "the generation running v1 did not serve on through the gc");
    dh_expect_version(d, port, "v1");
    dh_stop_and_check_clean(d);
}

/* ---- release work off the loop ---------------------------------------------- */

/* Lets the held release work go, waits for request's reply, and makes the
 * hold hold again. */
static void release_and_finish(dh_daemon *d, const char *hold, dh_async *request, const char *what)
{
    touch(d, hold);
    json_object *reply = dh_request_finish(d, request);
    request_ok(d, what, reply);
    json_object_put(reply);
    DH_CHECK(d, unlink(hold) == 0, "cannot remove %s: %s", hold, strerror(errno));
}

/* While big's release work is in flight, demo wakes and serves. */
static void wake_beside(dh_daemon *d, const char *what)
{
    char held[160];
    snprintf(held, sizeof(held), "release work %s of host big held", what);
    DH_CHECK(d, dh_log_wait(d, held, 20000), "the %s of big never reached its worker", what);
    dh_events_mark(d);
    dh_wake(d, "demo");
    DH_CHECK(d, dh_event_wait(d, "demo", "serving", 10000, NULL), "demo did not serve");
    dh_park(d, "demo");
}

static void test_release_work_leaves_the_loop_to_the_wakes(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    int big_port = dh_add_app_host(d, "big", NULL, NULL);
    char hold[PATH_MAX], env[PATH_MAX + 64];
    snprintf(hold, sizeof(hold), "%s/release-go", d->drv.dir);
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_RELEASE_HOLD=%s", hold);
    const char *const extra_env[] = {env, NULL};
    dh_start(d, extra_env);

    /* A large build: the app with 64 MiB of zeros after it, which the
     * stage, the promote, the swap and every wake of big hash in full. */
    char large[PATH_MAX];
    snprintf(large, sizeof(large), "%s/act-e2e-app", d->drv.dir);
    copy_file(d, DH_E2E_APP, large, 0755, 64u << 20);

    dh_async *request = dh_request_start(
        d, 120000, "{\"v\":1,\"op\":\"stage\",\"host\":\"big\",\"version\":\"v2\",\"path\":\"%s\"}",
        large);
    wake_beside(d, "stage");
    release_and_finish(d, hold, request, "stage big v2");

    request = dh_request_start(d, 120000,
                               "{\"v\":1,\"op\":\"promote\",\"host\":\"big\",\"version\":\"v2\"}");
    wake_beside(d, "promote");
    release_and_finish(d, hold, request, "promote big v2");
    /* The gc after the promote waits at the hold too; let it pass. */
    touch(d, hold);
    dh_wake(d, "big");
    dh_expect_version(d, big_port, "v2");
    DH_CHECK(d, unlink(hold) == 0, "cannot remove %s: %s", hold, strerror(errno));

    request = dh_request_start(d, 120000,
                               "{\"v\":1,\"op\":\"swap\",\"host\":\"big\",\"version\":\"v1\"}");
    wake_beside(d, "swap-verify");
    release_and_finish(d, hold, request, "swap big v1");
    touch(d, hold);
    dh_expect_version(d, big_port, "v1");
    dh_stop_and_check_clean(d);
}

/* prepare's file work (resolve, open, digest) does not wait for the
 * admission: it is begun as the admission's compare-and-swap goes out, and
 * prepare then takes its answer. The order of the daemon's log says so. */
static void test_the_build_is_resolved_beside_the_admission(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);
    dh_wake(d, "demo");
    dh_expect_version(d, port, "v1");
    char *log = dh_read_text(d->drv.log_path);
    DH_CHECK(d, log, "cannot read %s", d->drv.log_path);
    const char *begun = strstr(log, "host demo: resolving its build beside the admission");
    const char *admitted = strstr(log, "host demo: admitted");
    const char *taken = strstr(log, "host demo: prepare takes the build resolved beside");
    const char *prepare = strstr(log, "host demo: step prepare");
    bool in_order = begun && admitted && taken && prepare && begun < admitted &&
                    admitted < prepare && prepare < taken;
    free(log);
    DH_CHECK(d, in_order,
             "the build was not resolved beside the admission and taken by prepare (begun %d, "
             "admitted %d, prepare %d, taken %d)",
             begun != NULL, admitted != NULL, prepare != NULL, taken != NULL);
    dh_stop_and_check_clean(d);
}

/* Stages image as demo's v1, promoted; checks the reply names the image
 * resolved to its digest (source_prefix, up to "@sha256:"), wakes demo and
 * checks v1 serves on port. */
static void stage_image_and_serve(dh_daemon *d, int port, const char *image,
                                  const char *source_prefix)
{
    json_object *reply = dh_request(d, 60000,
                                    "{\"v\":1,\"op\":\"stage\",\"host\":\"demo\",\"version\":"
                                    "\"v1\",\"path\":\"%s\",\"promote\":true}",
                                    image);
    DH_CHECK(d, dh_reply_ok(reply), "stage from %s: %s", image, json_object_to_json_string(reply));
    const char *source = dh_json_str(dh_reply_result(reply), "source");
    DH_CHECK(d, source && strncmp(source, source_prefix, strlen(source_prefix)) == 0,
             "the staged build's source is %s, not the image resolved to its digest",
             source ? source : "(none)");
    json_object_put(reply);
    dh_wake(d, "demo");
    dh_expect_version(d, port, "v1");
}

/* A build staged from an OCI image layout (made by umoci): its layers
 * applied, the tree staged with the image's digest as its source, and
 * served; an image the layout lacks is refused with nothing left behind. */
static void test_a_build_staged_from_an_image_layout_serves(void **state)
{
    dh_daemon *d = *state;
    if (system("command -v umoci >/dev/null") != 0)
        skip(); /* scripts/install-deps.sh installs it */
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_free_port();
    dh_write_app_host(d, "demo", port, NULL, NULL);
    dh_make_image_layout(d);
    dh_start(d, NULL);

    char image[PATH_MAX + 16], expected[PATH_MAX + 16];
    snprintf(image, sizeof(image), "oci:%s/img:v1", d->drv.dir);
    snprintf(expected, sizeof(expected), "oci:%s/img@sha256:", d->drv.dir);
    json_object *reply;
    stage_image_and_serve(d, port, image, expected);

    reply = dh_request(d, 60000,
                       "{\"v\":1,\"op\":\"stage\",\"host\":\"demo\",\"version\":\"v2\","
                       "\"path\":\"oci:%s/img:nope\"}",
                       d->drv.dir);
    DH_CHECK(
        d, !dh_reply_ok(reply) && strstr(json_object_to_json_string(reply), "no image tagged nope"),
        "a tag the layout lacks: %s", json_object_to_json_string(reply));
    json_object_put(reply);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/releases/demo/v2", d->drv.state_dir);
    DH_CHECK(d, access(path, F_OK) != 0, "a refused image left %s", path);
    DIR *dir = opendir(d->drv.state_dir);
    DH_CHECK(d, dir, "cannot read %s", d->drv.state_dir);
    struct dirent *de;
    while ((de = readdir(dir)))
        DH_CHECK(d, strncmp(de->d_name, ".image-", 7) != 0, "a stage left its work directory %s",
                 de->d_name);
    closedir(dir);
    dh_stop_and_check_clean(d);
}

/* A build pulled from a registry (docker-registry, fed by skopeo), over
 * plain http as RegistryInsecure= allows: staged with the image's digest
 * as its source, and served; with the registry gone, a stage is refused
 * saying so, with nothing left behind. */
static reg_harness registry;

static int stop_registry(void **state)
{
    reg_harness_stop(&registry);
    return dh_fixture_teardown(state);
}

static void test_a_build_pulled_from_a_registry_serves(void **state)
{
    dh_daemon *d = *state;
    if (!reg_harness_available() || system("command -v umoci >/dev/null") != 0)
        skip(); /* scripts/install-deps.sh installs them */
    act_error err = {0};
    DH_CHECK(d, reg_harness_start(&registry, false, false, &err) == 0, "registry: %s", err.message);
    char conf[128];
    snprintf(conf, sizeof(conf), "RegistryInsecure=%s\n", registry.address);
    dh_setup(d, DH_STORE_DIR, conf);
    int port = dh_free_port();
    dh_write_app_host(d, "demo", port, NULL, NULL);
    dh_make_image_layout(d);
    char layout[PATH_MAX];
    snprintf(layout, sizeof(layout), "%s/img", d->drv.dir);
    DH_CHECK(d, reg_harness_push(&registry, layout, "v1", "demo/app", &err) == 0, "push: %s",
             err.message);
    dh_start(d, NULL);

    char image[128], expected[128];
    snprintf(image, sizeof(image), "docker://%s/demo/app:v1", registry.address);
    snprintf(expected, sizeof(expected), "docker://%s/demo/app@sha256:", registry.address);
    json_object *reply;
    stage_image_and_serve(d, port, image, expected);

    char address[64];
    snprintf(address, sizeof(address), "%s", registry.address);
    reg_harness_stop(&registry);
    reply = dh_request(d, 60000,
                       "{\"v\":1,\"op\":\"stage\",\"host\":\"demo\",\"version\":\"v2\","
                       "\"path\":\"docker://%s/demo/app:v1\"}",
                       address);
    DH_CHECK(d,
             !dh_reply_ok(reply) && strstr(json_object_to_json_string(reply), "is the registry up"),
             "a stage from a registry that is gone: %s", json_object_to_json_string(reply));
    json_object_put(reply);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/releases/demo/v2", d->drv.state_dir);
    DH_CHECK(d, access(path, F_OK) != 0, "a refused pull left %s", path);
    dh_stop_and_check_clean(d);
}

int main(int argc, char **argv)
{
    int skip = dh_check_can_run("daemon-builds", DH_STORE_DIR);
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_failed_swap_falls_back_to_the_build_that_served),
        DH_TEST(test_a_fresh_daemon_falls_back_to_the_replaced_pin),
        DH_TEST(test_a_resumed_generation_is_the_fallback),
        DH_TEST(test_failed_pin_without_fallback_is_refused_until_a_promote),
        DH_TEST(test_scripts_run_from_their_verified_fd),
        DH_TEST(test_a_build_staged_from_an_image_layout_serves),
        cmocka_unit_test_setup_teardown(test_a_build_pulled_from_a_registry_serves,
                                        dh_fixture_setup, stop_registry),
        DH_TEST(test_the_build_is_resolved_beside_the_admission),
        DH_TEST(test_gc_never_removes_a_version_in_use),
        DH_TEST(test_release_work_leaves_the_loop_to_the_wakes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
