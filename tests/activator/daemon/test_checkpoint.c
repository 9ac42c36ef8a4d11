/* Checkpoints under the real daemon, with act-testapp --counter keeping a
 * count of its requests in its state directory:
 *   - `activatorctl checkpoint` parks the host, writes an archive into
 *     Checkpoints= and names it on the claim; `activatorctl checkpoints`
 *     lists it as the named one;
 *   - with the state directory wiped and the local record gone (a box that
 *     never had it), the next wake restores the claim's checkpoint and the
 *     counter goes on from where it was;
 *   - a tampered archive: the wake fails with restore_failed, and the state
 *     directory is as it was;
 *   - CheckpointsKeep= prunes, sparing the checkpoint the claim names;
 *   - CheckpointEverySec= names a checkpoint again and again while the
 *     host serves a client, none of whose requests fails;
 *   - bad input changes nothing and says why: an unknown host, a viewer
 *     asking for a checkpoint, a box without Checkpoints=, a State=none
 *     host, a bad Checkpoints= URL or State= value, Checkpoints= changed by
 *     a reload. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "harness.h"

#ifndef DH_ACTIVATORCTL
#error "DH_ACTIVATORCTL must name the activatorctl executable"
#endif
#ifndef DH_ACTIVATORD
#error "DH_ACTIVATORD must name the activatord executable"
#endif

/* The checkpoint directory the fleet would share: outside the daemon's
 * temp dir, as it would be on a box. */
typedef struct shared_dir {
    char path[64];
} shared_dir;

static void shared_dir_make(dh_daemon *d, shared_dir *shared)
{
    snprintf(shared->path, sizeof(shared->path), "/tmp/act-checkpoints-XXXXXX");
    DH_CHECK(d, mkdtemp(shared->path), "mkdtemp: %s", strerror(errno));
}

static void shared_dir_remove(shared_dir *shared)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", shared->path);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", shared->path);
}

static int ctl(dh_daemon *d, char *out, size_t size, const char *a, const char *b)
{
    char *const argv[] = {(char *)DH_ACTIVATORCTL,
                          (char *)"--connect",
                          d->drv.control_url,
                          (char *)"--no-color",
                          (char *)a,
                          (char *)b,
                          NULL};
    return dh_run(argv, out, size);
}

/* The counter=N of one GET; -1 when there is none. */
static long get_counter(dh_daemon *d, int port)
{
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "the host does not answer");
    const char *at = strstr(body, "counter=");
    return at ? strtol(at + strlen("counter="), NULL, 10) : -1;
}

/* Writes an ExecCheckpoint= hook, the shell script that format and its
 * arguments print, at <dir>/checkpoint.sh, and adds host demo
 * (act-testapp --counter) that runs it, with the host lines after it; the
 * host's port. */
__attribute__((format(printf, 3, 4))) static int add_hooked_host(dh_daemon *d, const char *after,
                                                                 const char *format, ...)
{
    char script[PATH_MAX], host_lines[2 * PATH_MAX + 128];
    snprintf(script, sizeof(script), "%s/checkpoint.sh", dh_helper_dir(d));
    FILE *f = fopen(script, "we");
    DH_CHECK(d, f, "cannot write %s", script);
    va_list ap;
    va_start(ap, format);
    vfprintf(f, format, ap);
    va_end(ap);
    fclose(f);
    chmod(script, 0755);
    snprintf(host_lines, sizeof(host_lines), "ExecCheckpoint=/bin/sh %s\n%s%s", script,
             dh_helper_dir_line(d), after);
    return dh_add_app_host(d, "demo", "--counter", host_lines);
}

static void state_path(dh_daemon *d, const char *rel, char *out, size_t size)
{
    snprintf(out, size, "%s/hosts/demo/state%s%s", d->drv.state_dir, rel[0] ? "/" : "", rel);
}

/* The state directory emptied and the host's record of what it restored
 * removed: what a box that never ran the host has. */
static void forget_state(dh_daemon *d, const char *counter_value)
{
    char cmd[PATH_MAX * 2], path[PATH_MAX];
    state_path(d, "", path, sizeof(path));
    snprintf(cmd, sizeof(cmd), "rm -rf %s/* %s/hosts/demo/checkpoint.json", path, d->drv.state_dir);
    DH_CHECK(d, system(cmd) == 0, "%s failed", cmd);
    if (counter_value) {
        state_path(d, "counter", path, sizeof(path));
        FILE *f = fopen(path, "we");
        DH_CHECK(d, f, "cannot write %s", path);
        fprintf(f, "%s\n", counter_value);
        fclose(f);
    }
}

static char *read_counter_file(dh_daemon *d)
{
    char path[PATH_MAX];
    state_path(d, "counter", path, sizeof(path));
    return dh_read_text(path);
}

/* `activatorctl checkpoint demo`, expected to succeed; the claim's state. */
static claim_state checkpoint_now(dh_daemon *d)
{
    char out[4096];
    int status = ctl(d, out, sizeof(out), "checkpoint", "demo");
    DH_CHECK(d, status == 0 && strstr(out, "named on the claim") && strstr(out, "parked first"),
             "activatorctl checkpoint demo exited %d:\n%s", status, out);
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    DH_CHECK(d,
             c.state.checkpoint[0] && strlen(c.state.sha256) == 64 && c.state.size > 0 &&
                 strcmp(c.state.box, DH_BOX) == 0 && c.state.stamp_usec > 0,
             "the claim's state does not name the checkpoint: \"%s\" sha256 \"%s\" size %" PRIu64
             " box \"%s\"",
             c.state.checkpoint, c.state.sha256, c.state.size, c.state.box);
    DH_CHECK(d, strstr(out, c.state.checkpoint), "the output does not name %s:\n%s",
             c.state.checkpoint, out);
    return c.state;
}

static int start_demo_keeping(dh_daemon *d, shared_dir *shared, const char *keep)
{
    shared_dir_make(d, shared);
    char conf[256];
    snprintf(conf, sizeof(conf), "Checkpoints=dir://%s\n%s", shared->path, keep ? keep : "");
    dh_setup(d, DH_STORE_DIR, conf);
    int port = dh_add_app_host(d, "demo", "--counter", NULL);
    dh_start(d, NULL);
    return port;
}

static int start_demo(dh_daemon *d, shared_dir *shared)
{
    return start_demo_keeping(d, shared, NULL);
}

static bool archive_exists(const shared_dir *shared, const char *id)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/demo/%s.tar.zst", shared->path, id);
    return access(path, F_OK) == 0;
}

/* CheckpointsKeep=1: each write keeps the newest, and spares the one the
 * claim names at the time (the one before it). */
static void test_pruning_spares_the_named_one(void **state)
{
    dh_daemon *d = *state;
    shared_dir shared;
    int port = start_demo_keeping(d, &shared, "CheckpointsKeep=1\n");
    claim_state written[3];
    for (int i = 0; i < 3; i++) {
        DH_CHECK(d, get_counter(d, port) == i + 1, "the counter does not count");
        written[i] = checkpoint_now(d);
    }
    DH_CHECK(d, !archive_exists(&shared, written[0].checkpoint),
             "the oldest checkpoint %s was kept with CheckpointsKeep=1", written[0].checkpoint);
    DH_CHECK(d, archive_exists(&shared, written[1].checkpoint),
             "checkpoint %s, which the claim named while %s was written, was pruned",
             written[1].checkpoint, written[2].checkpoint);
    DH_CHECK(d, archive_exists(&shared, written[2].checkpoint), "the newest checkpoint is gone");
    dh_stop_and_check_clean(d);
    shared_dir_remove(&shared);
}

static void test_checkpoint_then_restore_continues_the_counter(void **state)
{
    dh_daemon *d = *state;
    shared_dir shared;
    int port = start_demo(d, &shared);
    dh_wake(d, "demo");
    for (long i = 1; i <= 3; i++)
        DH_CHECK(d, get_counter(d, port) == i, "the counter does not count");

    claim_state written = checkpoint_now(d);
    DH_CHECK(d, strcmp(written.build_version, "v1") == 0 && strlen(written.build_digest) == 64,
             "the checkpoint names build \"%s\" (digest \"%s\"); expected v1, the build that ran "
             "against the state",
             written.build_version, written.build_digest);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 5000), "demo is not parked after checkpoint");
    /* Parked and written: nothing of demo is open (a box's parked hosts
     * hold no fd each). */
    size_t open_dirs = dh_host_dir_fds(d, "demo");
    DH_CHECK(d, open_dirs == 0, "the daemon holds %zu fds on demo's directory after its checkpoint",
             open_dirs);
    char archive[PATH_MAX];
    snprintf(archive, sizeof(archive), "%s/demo/%s.tar.zst", shared.path, written.checkpoint);
    DH_CHECK(d, access(archive, F_OK) == 0, "%s is missing", archive);

    char out[4096];
    int status = ctl(d, out, sizeof(out), "checkpoints", "demo");
    DH_CHECK(d, status == 0 && strstr(out, written.checkpoint) && strstr(out, "*"),
             "activatorctl checkpoints demo exited %d without the named one:\n%s", status, out);

    /* Its own record names it: a wake here restores nothing, and counts on. */
    DH_CHECK(d, get_counter(d, port) == 4, "the counter did not go on after the checkpoint");
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 5000), "demo did not park");

    /* A box without it: restored on the next wake, the count where it was
     * at the checkpoint. */
    forget_state(d, "1000");
    dh_events_mark(d);
    DH_CHECK(d, get_counter(d, port) == 4, "the restored counter did not continue from 3");
    DH_CHECK(d, dh_log_wait(d, "state restored to checkpoint", 5000),
             "the daemon did not say it restored");
    /* The same build wrote the state as runs now: nothing to say. */
    DH_CHECK(d, dh_events_count(d, "demo", "state.other_build") == 0,
             "a restore of v1's state under v1 said another build wrote it");
    dh_stop_and_check_clean(d);
    shared_dir_remove(&shared);
}

static void test_tampered_checkpoint_fails_the_wake_and_changes_nothing(void **state)
{
    dh_daemon *d = *state;
    shared_dir shared;
    int port = start_demo(d, &shared);
    dh_wake(d, "demo");
    DH_CHECK(d, get_counter(d, port) == 1, "the counter does not count");
    claim_state written = checkpoint_now(d);

    char archive[PATH_MAX];
    snprintf(archive, sizeof(archive), "%s/demo/%s.tar.zst", shared.path, written.checkpoint);
    int fd = open(archive, O_WRONLY | O_CLOEXEC);
    DH_CHECK(d, fd >= 0, "cannot open %s: %s", archive, strerror(errno));
    DH_CHECK(d, pwrite(fd, "X", 1, 16) == 1, "cannot tamper with %s", archive);
    close(fd);
    forget_state(d, "50");

    json_object *reply = dh_wake_reply(d, "demo", 30000);
    const char *code = dh_reply_code(reply);
    char text[2048];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    DH_CHECK(d,
             strcmp(code, "restore_failed") == 0 && strstr(text, "changed or damaged") &&
                 strstr(text, written.checkpoint),
             "the wake of a tampered checkpoint: %s", text);
    json_object_put(reply);
    _cleanup_free_ char *counter = read_counter_file(d);
    DH_CHECK(d, counter && strcmp(counter, "50\n") == 0,
             "the state directory changed after a refused restore: counter is %s",
             counter ? counter : "(missing)");

    /* A missing archive is as clear. */
    DH_CHECK(d, unlink(archive) == 0, "cannot remove %s", archive);
    reply = dh_wake_reply(d, "demo", 30000);
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    DH_CHECK(d, strcmp(dh_reply_code(reply), "restore_failed") == 0 && strstr(text, "missing"),
             "the wake of a missing checkpoint: %s", text);
    json_object_put(reply);
    dh_stop_and_check_clean(d);
    shared_dir_remove(&shared);
}

static int check_config(const char *path, char *out, size_t size)
{
    char *const argv[] = {(char *)DH_ACTIVATORD, (char *)"--check-config", (char *)"--config",
                          (char *)path, NULL};
    return dh_run(argv, out, size);
}

#define VIEWER_GID 60001
static const gid_t viewer_groups[] = {65534, VIEWER_GID};

static void test_bad_input_changes_nothing(void **state)
{
    dh_daemon *d = *state;
    shared_dir shared;
    shared_dir_make(d, &shared);
    char conf[256];
    snprintf(conf, sizeof(conf), "Checkpoints=dir://%s\nViewerGroup=%d\n", shared.path, VIEWER_GID);
    dh_setup(d, DH_STORE_DIR, conf);
    dh_add_app_host(d, "demo", "--counter", NULL);
    dh_add_app_host(d, "plain", NULL, "State=none\n");
    dh_start(d, NULL);
    dh_wake(d, "demo");
    claim before;
    DH_CHECK(d, dh_claim_get(d, "demo", &before), "demo has no claim");
    char out[4096];

    int status = ctl(d, out, sizeof(out), "checkpoint", "nohost");
    DH_CHECK(d, status == 1 && strstr(out, "nohost is not configured"),
             "checkpoint of an unknown host: exit %d:\n%s", status, out);

    status = ctl(d, out, sizeof(out), "checkpoint", "plain");
    DH_CHECK(d, status == 1 && strstr(out, "State=none") && strstr(out, "[stateless]"),
             "checkpoint of a State=none host: exit %d:\n%s", status, out);

    /* A viewer may list, not write. */
    chmod(d->drv.dir, 0711);
    chmod(d->drv.runtime_dir, 0711);
    const char *argv[] = {
        DH_ACTIVATORCTL, "--connect", d->drv.control_url, "--no-color", "checkpoint", "demo", NULL};
    status =
        dd_run_as_groups((char *const *)argv, 65534, 65534, viewer_groups, 2, out, sizeof(out));
    DH_CHECK(d,
             status == 1 && strstr(out, "op checkpoint needs the operator role") &&
                 strstr(out, "[forbidden]"),
             "checkpoint as a viewer: exit %d:\n%s", status, out);
    argv[4] = "checkpoints";
    status =
        dd_run_as_groups((char *const *)argv, 65534, 65534, viewer_groups, 2, out, sizeof(out));
    DH_CHECK(d, status == 0 && strstr(out, "CHECKPOINT"), "checkpoints as a viewer: exit %d:\n%s",
             status, out);

    /* None of that touched the host or its claim. */
    DH_CHECK(d, dh_wait_state(d, "demo", "serving", 1000), "demo stopped serving");
    claim after;
    DH_CHECK(d,
             dh_claim_get(d, "demo", &after) && after.revision == before.revision &&
                 !after.state.checkpoint[0],
             "the claim changed: revision %" PRIu64 " -> %" PRIu64, before.revision,
             after.revision);
    char listing[PATH_MAX];
    snprintf(listing, sizeof(listing), "%s/demo", shared.path);
    DH_CHECK(d, access(listing, F_OK) < 0, "a refused checkpoint left %s", listing);

    /* Checkpoints= is fixed while the daemon runs: a reload refuses it by
     * name and changes nothing. */
    char *text = dh_read_text(d->drv.config_path);
    DH_CHECK(d, text, "cannot read %s", d->drv.config_path);
    char *at = strstr(text, shared.path);
    DH_CHECK(d, at, "Checkpoints= is not in %s", d->drv.config_path);
    /* Another directory: mkdtemp's last letter may already be the one we
     * would write, which would leave the key unchanged. */
    char *last = at + strlen(shared.path) - 1;
    *last = *last == 'Z' ? 'Y' : 'Z';
    FILE *f = fopen(d->drv.config_path, "we");
    fputs(text, f);
    fclose(f);
    free(text);
    status = ctl(d, out, sizeof(out), "reload", NULL);
    DH_CHECK(d, status == 1 && strstr(out, "Checkpoints: cannot change while activatord runs"),
             "a reload changing Checkpoints=: exit %d:\n%s", status, out);
    dh_stop_and_check_clean(d);

    /* Bad values, reported on their lines by --check-config. */
    char bad[PATH_MAX];
    snprintf(bad, sizeof(bad), "%s/bad.conf", d->drv.dir);
    f = fopen(bad, "we");
    fprintf(f,
            "[Activator]\nBox=box-1\nStateDirectory=%s\nCheckpoints=nfs://server/x\n"
            "CheckpointsKeep=0\nMetricsListen=no\n",
            d->drv.state_dir);
    fclose(f);
    status = check_config(bad, out, sizeof(out));
    DH_CHECK(d,
             status != 0 && strstr(out, "bad.conf:4: Checkpoints:") && strstr(out, "dir:///PATH") &&
                 strstr(out, "bad.conf:5: CheckpointsKeep:"),
             "--check-config of a bad Checkpoints=: exit %d:\n%s", status, out);
    dh_write_host(d, "badstate", "[Host]\nExec=act-e2e-app\nState=tmpfs\nCheckpointLive=yes\n");
    dh_write_host(d, "norestore", "[Host]\nExec=act-e2e-app\nExecCheckpoint=/bin/true\n");
    status = check_config(d->drv.config_path, out, sizeof(out));
    DH_CHECK(d,
             status != 0 && strstr(out, "badstate.conf:3: State: is not dir or none") &&
                 strstr(out, "badstate.conf:4: CheckpointLive:") &&
                 strstr(out, "norestore.conf:3: ExecCheckpoint: set without ExecRestore="),
             "--check-config of a bad State=: exit %d:\n%s", status, out);
    shared_dir_remove(&shared);
}

/* Without Checkpoints= or ExecCheckpoint=, there is nowhere to write. */
static void test_no_transport_is_refused(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, DH_STORE_DIR, "demo", "--counter", NULL);
    dh_wake(d, "demo");
    char out[4096];
    int status = ctl(d, out, sizeof(out), "checkpoint", "demo");
    DH_CHECK(d,
             status == 1 && strstr(out, "no checkpoint transport") &&
                 strstr(out, "Checkpoints=dir:///PATH"),
             "checkpoint without a transport: exit %d:\n%s", status, out);
    DH_CHECK(d, dh_wait_state(d, "demo", "serving", 1000), "demo stopped serving");
    status = ctl(d, out, sizeof(out), "checkpoints", "demo");
    DH_CHECK(d, status == 1 && strstr(out, "no_transport"),
             "checkpoints without a transport: exit %d:\n%s", status, out);
    dh_stop_and_check_clean(d);
}

/* ExecCheckpoint= with CheckpointLive=yes: the host's own program (here a
 * tar of the state directory) snapshots it while it serves; its answer is
 * parsed strictly, and a bad one changes nothing. */
static void test_exec_checkpoint_live(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* The hook runs as the host's dynamic user, in its view: it writes
     * into the helpers' directory, which the host may write. */
    char markers[PATH_MAX], flag[PATH_MAX];
    snprintf(markers, sizeof(markers), "%s", dh_helper_dir(d));
    snprintf(flag, sizeof(flag), "%s/garble", dh_helper_dir(d));
    int port = add_hooked_host(d, "CheckpointLive=yes\nExecRestore=/bin/true\n",
                               "#!/bin/sh\n"
                               "set -e\n"
                               "if [ -e %s ]; then echo 'not an answer'; exit 0; fi\n"
                               "id=cp-$ACTIVATOR_GENERATION-$(date +%%s%%N)\n"
                               "tar -C \"$STATE_DIRECTORY\" -cf %s/$id.tar .\n"
                               "sha=$(sha256sum %s/$id.tar | cut -d' ' -f1)\n"
                               "echo \"$id $sha\"\n",
                               flag, markers, markers);
    dh_start(d, NULL);
    dh_wake(d, "demo");
    DH_CHECK(d, get_counter(d, port) == 1, "the counter does not count");

    char out[4096];
    int status = ctl(d, out, sizeof(out), "checkpoint", "demo");
    DH_CHECK(d, status == 0 && strstr(out, "named on the claim") && !strstr(out, "parked"),
             "a live ExecCheckpoint=: exit %d:\n%s", status, out);
    DH_CHECK(d, dh_wait_state(d, "demo", "serving", 1000), "demo stopped serving");
    claim c;
    DH_CHECK(d,
             dh_claim_get(d, "demo", &c) && strncmp(c.state.checkpoint, "cp-", 3) == 0 &&
                 strlen(c.state.sha256) == 64,
             "the claim does not name the program's checkpoint: \"%s\"", c.state.checkpoint);
    DH_CHECK(d, get_counter(d, port) == 2, "the host did not serve on through the checkpoint");

    FILE *f = fopen(flag, "we");
    DH_CHECK(d, f, "cannot write %s", flag);
    fclose(f);
    status = ctl(d, out, sizeof(out), "checkpoint", "demo");
    DH_CHECK(d, status == 1 && strstr(out, "not \"ID SHA256\""), "a garbled answer: exit %d:\n%s",
             status, out);
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after) && after.revision == c.revision,
             "a garbled answer changed the claim");
    DH_CHECK(d, !dh_leaf_exists(d, "demo", "checkpoint-1"), "the program's leaf is left");
    dh_stop_and_check_clean(d);
}

/* While a checkpoint is written, a wake is refused with checkpointing
 * (nothing may write the state meanwhile), and the claim does not call the
 * host failed for it. ExecCheckpoint= without CheckpointLive= waits for
 * the test's word, so the checkpoint is in flight for as long as needed. */
static void test_wakes_wait_for_the_checkpoint(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char started[PATH_MAX], release[PATH_MAX];
    /* Written by the hook, as the host's dynamic user. */
    snprintf(started, sizeof(started), "%s/started", dh_helper_dir(d));
    snprintf(release, sizeof(release), "%s/release", dh_helper_dir(d));
    int port = add_hooked_host(d, "ExecRestore=/bin/true\n",
                               "#!/bin/sh\n"
                               "echo $$ > %s.tmp; mv %s.tmp %s\n"
                               "while [ ! -e %s ]; do sleep 0.05; done\n"
                               "echo 'held-1 %064d'\n",
                               started, started, started, release, 0);
    dh_start(d, NULL);
    DH_CHECK(d, get_counter(d, port) == 1, "the counter does not count");

    dh_async *request =
        dh_request_start(d, 30000, "{\"v\":1,\"op\":\"checkpoint\",\"host\":\"demo\"}");
    for (int i = 0; i < 200 && access(started, F_OK) < 0; i++)
        usleep(25000);
    DH_CHECK(d, access(started, F_OK) == 0, "ExecCheckpoint= did not start");
    /* The hook runs as the host, so the host's processes reach its
     * /proc/<pid>/fd, as the control shows: its stdin, /dev/null, opens.
     * Its answer goes to a socket, which cannot be opened there (ENXIO),
     * whoever made it. */
    char *pid_text = dh_read_text(started);
    pid_t hook = pid_text ? (pid_t)atoi(pid_text) : 0;
    free(pid_text);
    uid_t uid = dh_uid_of(d, hook);
    char answer[64], log[64];
    snprintf(answer, sizeof(answer), "/proc/%d/fd/1", (int)hook);
    snprintf(log, sizeof(log), "/proc/%d/fd/0", (int)hook);
    int e = dh_open_as(uid, answer, O_WRONLY);
    DH_CHECK(d, e != 0, "the host's uid opened the hook's answer %s", answer);
    e = dh_open_as(uid, log, O_WRONLY);
    DH_CHECK(d, e == 0, "the host's uid cannot open the hook's stdin %s: %s", log, strerror(e));
    json_object *reply = dh_wake_reply(d, "demo", 10000);
    char text[2048];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    DH_CHECK(d, strcmp(dh_reply_code(reply), "checkpointing") == 0,
             "a wake during the checkpoint: %s", text);
    json_object_put(reply);

    FILE *f = fopen(release, "we");
    fclose(f);
    reply = dh_request_finish(d, request);
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(reply));
    DH_CHECK(d, dh_reply_ok(reply), "the checkpoint: %s", text);
    json_object_put(reply);
    claim c;
    DH_CHECK(d,
             dh_claim_get(d, "demo", &c) && strcmp(c.state.checkpoint, "held-1") == 0 &&
                 !c.has_failure && strcmp(c.op.phase, "failed") != 0,
             "the claim after a refused wake: checkpoint \"%s\", phase %s, failure %d",
             c.state.checkpoint, c.op.phase, c.has_failure);
    DH_CHECK(d, get_counter(d, port) == 2, "the host does not wake after the checkpoint");
    dh_stop_and_check_clean(d);
}

/* The claim's state once it names a checkpoint stamped after after_usec
 * (wall clock), within timeout_ms. */
static bool named_after(dh_daemon *d, uint64_t after_usec, int timeout_ms, claim_state *out)
{
    dh_waiting_for("a periodic checkpoint named on demo's claim (up to %d ms)", timeout_ms);
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    do {
        claim c;
        if (dh_claim_get(d, "demo", &c) && c.state.checkpoint[0] &&
            c.state.stamp_usec > after_usec) {
            *out = c.state;
            return true;
        }
        usleep(20 * 1000);
    } while (dd_now_ms() < deadline);
    return false;
}

/* CheckpointEverySec=1: while demo serves a client, its state is
 * checkpointed and named on the claim again and again, each archive a count
 * the client was answered, and no request fails: the freeze holds the
 * clients in the backlog. The pause is measured. A box that then loses the
 * state directory restores the last one, and a reload that drops the key
 * stops them from the next serve. */
static void test_periodic_checkpoints_pause_the_host_not_its_clients(void **state)
{
    dh_daemon *d = *state;
    shared_dir shared;
    shared_dir_make(d, &shared);
    int metrics_port = dh_free_port();
    char conf[256];
    snprintf(conf, sizeof(conf), "Checkpoints=dir://%s\nMetricsListen=127.0.0.1:%d\n", shared.path,
             metrics_port);
    dh_setup(d, DH_STORE_DIR, conf);
    int port = dh_add_app_host(d, "demo", "--counter", "CheckpointEverySec=1\n");
    dh_start(d, NULL);

    /* A client asks on and on while three checkpoints are named: every
     * request is answered, each with the next count. */
    long counted = 0;
    claim_state last = {0};
    int named = 0;
    dh_waiting_for("three periodic checkpoints named while a client asks (up to 20 s)");
    uint64_t deadline = dd_now_ms() + 20000;
    while (named < 3 && dd_now_ms() < deadline) {
        long counter = get_counter(d, port);
        DH_CHECK(d, counter == counted + 1, "request %ld was answered %ld", counted + 1, counter);
        counted = counter;
        claim c;
        if (dh_claim_get(d, "demo", &c) && c.state.checkpoint[0] &&
            strcmp(c.state.checkpoint, last.checkpoint) != 0) {
            last = c.state;
            named++;
        }
    }
    DH_CHECK(d, named == 3, "%d periodic checkpoints named in 20 s (%ld requests)", named, counted);
    /* The next one holds every count answered before it. */
    claim_state final;
    DH_CHECK(d, named_after(d, act_wallclock_usec(), 10000, &final),
             "no checkpoint was named after request %ld", counted);
    dh_metrics *scraped = malloc(sizeof(*scraped));
    DH_CHECK(d, scraped, "out of memory");
    dh_metrics_scrape(d, metrics_port, scraped);
    double named_count =
        dh_metrics_sample(d, scraped, "activator_periodic_checkpoints_total{outcome=\"named\"}");
    double pauses = dh_metrics_sample(d, scraped, "activator_checkpoint_pause_seconds_count");
    double paused = dh_metrics_sample(d, scraped, "activator_checkpoint_pause_seconds_sum");
    free(scraped);
    DH_CHECK(d, named_count >= 3 && pauses >= named_count, "metrics: %.0f named, %.0f pauses",
             named_count, pauses);
    print_message("%.0f periodic checkpoints, %.1f ms paused on average\n", pauses,
                  1000 * paused / pauses);

    /* The last one holds what was counted by its time: a box without the
     * state directory restores it and counts on. */
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 5000), "demo did not park");
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    forget_state(d, "1000");
    long restored = get_counter(d, port);
    DH_CHECK(d, restored == counted + 1,
             "after restoring checkpoint %s the counter answered %ld, not %ld", c.state.checkpoint,
             restored, counted + 1);
    dh_stop_and_check_clean(d);
    shared_dir_remove(&shared);
}

int main(void)
{
    int r = dh_check_can_run("daemon-checkpoint", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_checkpoint_then_restore_continues_the_counter),
        DH_TEST(test_tampered_checkpoint_fails_the_wake_and_changes_nothing),
        DH_TEST(test_pruning_spares_the_named_one),
        DH_TEST(test_bad_input_changes_nothing),
        DH_TEST(test_no_transport_is_refused),
        DH_TEST(test_exec_checkpoint_live),
        DH_TEST(test_wakes_wait_for_the_checkpoint),
        DH_TEST(test_periodic_checkpoints_pause_the_host_not_its_clients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
