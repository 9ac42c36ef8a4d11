/* Moves between real boxes on one etcd: the host leaves box-1 with its
 * state (a counter the app keeps in its state directory) and serves on
 * box-2, never on both at once (both cgroup roots sampled all along); a
 * probe that fails, and an operator's abort, roll it back to the source,
 * which serves the same counter; a box whose daemon is gone is left with
 * --force from the last checkpoint; a daemon killed at any step of its part
 * finishes it after its restart; and what cannot be moved is refused with
 * nothing changed.
 *
 * Run as fleet-move-registry (argv[1] "registry"), the boxes share no
 * checkpoint directory: Checkpoints=docker:// names a real registry
 * (docker-registry) on loopback, and the moves that carry state through it
 * run again, a blob changed in the registry's storage among them. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/daemon/fleet/claim_waits.h"
#include "common/clock.h"
#include "common/json_fields.h"
#include "fleet.h"
#include "image/artifact.h"
#include "tests/image/registry_harness.h"

/* Tight bounds, so a failing step fails the test in seconds. */
#define MOVE_HOST_LINES "ProbeTimeoutSec=8\nMaxStarts=1\n"
#define MOVE_TIMEOUT_MS 20000

/* The shared checkpoint directory every box mounts (and where the tests'
 * hold files go). */
static char checkpoints[PATH_MAX];
/* Or, as fleet-move-registry, the registry the checkpoints go to. */
static bool through_registry;
static reg_harness registry;

static void setup_fleet_with(fl_fleet *fl, size_t n_boxes, const char *extra)
{
    /* Made before the boxes, named by every box's configuration. */
    char dir[] = "/tmp/act-move-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(checkpoints, sizeof(checkpoints), "%s", dir);
    char conf[PATH_MAX + 256];
    if (through_registry)
        snprintf(conf, sizeof(conf),
                 "Checkpoints=docker://%s/checkpoints\nRegistryInsecure=%s\n",
                 registry.address, registry.address);
    else
        snprintf(conf, sizeof(conf), "Checkpoints=dir://%s\n", checkpoints);
    if (extra)
        snprintf(conf + strlen(conf), sizeof(conf) - strlen(conf), "%s", extra);
    fl_setup(fl, n_boxes, conf);
}

static void setup_fleet(fl_fleet *fl, size_t n_boxes)
{
    setup_fleet_with(fl, n_boxes, NULL);
}

static void remove_checkpoints(void)
{
    char command[PATH_MAX + 16];
    snprintf(command, sizeof(command), "rm -rf %s", checkpoints);
    if (checkpoints[0] && system(command) != 0)
        print_error("cannot remove %s\n", checkpoints);
}

/* Starts move id of web to box as activatorctl would (the draining CAS on
 * the claim as it is now), leaving the rest to the daemons. */
static void begin_move(fl_fleet *fl, const char *box, const char *id)
{
    claim current = fl_claim_of(fl, "web"), draining;
    act_error err = {0};
    if (claim_move_start("web", &current, box, id, false, 1, &draining, &err) != 0)
        fail_msg("move %s of web to %s: %s", id, box, err.message);
    uint64_t revision = 0;
    if (claims_cas(fl->store, "web", current.revision, &draining, &revision, NULL, &err) != 0)
        fail_msg("move %s of web to %s, its CAS: %s", id, box, err.message);
}

/* Lets a daemon held at ACTIVATOR_TEST_HOLD's point go on. */
static void release_hold(const char *hold)
{
    FILE *f = fopen(hold, "w");
    assert_non_null(f);
    fclose(f);
}

/* The counter box index answers with once it serves again (after a
 * rollback or an abort), or -1 when it does not within 5 s. */
static long counter_when_back(fl_fleet *fl, size_t index, int port)
{
    dh_waiting_for("%s to answer on port %d again (up to 5 s)", fl_box_name(index), port);
    uint64_t deadline = dd_now_ms() + 5000;
    long counter = -1;
    while ((counter = fl_counter_at(fl, index, port)) < 0 && dd_now_ms() < deadline)
        usleep(25 * 1000);
    return counter;
}

/* Every box stopped and proven clean, and the checkpoints gone. */
static void stop_fleet(fl_fleet *fl)
{
    dh_step("the fleet's clean stop");
    for (size_t i = 0; i < fl->n_boxes; i++)
        dh_stop_and_check_clean(&fl->boxes[i]);
    remove_checkpoints();
}

/* web on box-1 with --counter, serving, its counter at 3. */
static int start_web_on_box_1(fl_fleet *fl, size_t n_boxes)
{
    dh_step("web's start on box-1");
    setup_fleet(fl, n_boxes);
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES);
    fl_assign(fl, "web", fl_box_name(0));
    fl_start(fl);
    for (long want = 1; want <= 3; want++)
        DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == want, "box-1 does not count to %ld",
                 want);
    /* The app answers once ready; its publication follows. */
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web is not published on box-1");
    return port;
}

/* The moves a client sees: every answer, from whichever box answered. */
typedef struct client {
    fl_fleet *fl;
    claim_store *store; /* its own: a store's synchronous calls are one thread's */
    int port;
    pthread_t thread;
    atomic_bool stop;
    long last;          /* the last counter answered */
    long last_on[2];    /* the last counter each box answered */
    atomic_uint answers;
    atomic_uint backwards; /* answers lower than one before */
} client;

static void *client_run(void *arg)
{
    client *cl = arg;
    while (!atomic_load(&cl->stop)) {
        /* A router reading the claim: ask the box that it names. */
        claim c = {0};
        act_error err = {0};
        if (claims_read(cl->store, "web", &c, &err) <= 0) {
            usleep(1000); /* the store is not hammered while it cannot answer */
            continue;
        }
        size_t index = strcmp(claim_executor(&c), fl_box_name(1)) == 0 ? 1 : 0;
        long counter = fl_counter_at(cl->fl, index, cl->port);
        if (counter < 0) {
            usleep(1000);
            continue;
        }
        if (counter <= cl->last)
            atomic_fetch_add(&cl->backwards, 1);
        cl->last = counter;
        cl->last_on[index] = counter;
        atomic_fetch_add(&cl->answers, 1);
    }
    return NULL;
}

/* Waits up to 10 s for the client's answers to reach count. */
static bool client_answered(client *cl, unsigned count)
{
    dh_waiting_for("the client's answers to reach %u (up to 10 s)", count);
    uint64_t deadline = dd_now_ms() + 10000;
    while (atomic_load(&cl->answers) < count && dd_now_ms() < deadline)
        usleep(1000);
    return atomic_load(&cl->answers) >= count;
}

static void test_move_under_a_client_keeps_the_counter_and_never_runs_twice(void **state)
{
    fl_fleet *fl = *state;
    int port = start_web_on_box_1(fl, 2);
    client cl = {.fl = fl, .port = port, .last = 3};
    act_error err = {0};
    if (claims_store_open(fl->store_url, NULL, &cl.store, &err) < 0)
        fail_msg("the client's store: %s", err.message);
    fl_overlap_start(fl, "web");
    assert_int_equal(pthread_create(&cl.thread, NULL, client_run, &cl), 0);
    bool answered = client_answered(&cl, 5);
    if (!answered) {
        atomic_store(&cl.stop, true);
        pthread_join(cl.thread, NULL);
        claims_store_free(cl.store);
    }
    DH_CHECK(&fl->boxes[0], answered, "the client got %u answers from box-1 before the move",
             atomic_load(&cl.answers));

    char out[8192];
    int status = fl_ctl(fl, 0, out, sizeof(out), "move", "web", "box-2", "--timeout", "30", NULL);
    DH_CHECK(&fl->boxes[1], status == 0, "move web box-2 exited %d: %s", status, out);
    DH_CHECK(&fl->boxes[0], strstr(out, "draining") && strstr(out, "moving") &&
                                strstr(out, "serves on box box-2"),
             "move did not print its phases: %s", out);
    unsigned before = atomic_load(&cl.answers);
    answered = client_answered(&cl, before + 5);
    atomic_store(&cl.stop, true);
    pthread_join(cl.thread, NULL);
    claims_store_free(cl.store);
    DH_CHECK(&fl->boxes[1], answered, "the client got %u answers after the move, %u before it",
             atomic_load(&cl.answers) - before, before);
    unsigned samples = 0;
    size_t most = fl_overlap_stop(fl, &samples);
    DH_CHECK(&fl->boxes[0], most == 1, "web ran on %zu boxes at once (%u samples)", most,
             samples);
    DH_CHECK(&fl->boxes[1], fl_serves_on(fl, "web", 1, 5000), "web does not serve on box-2 alone");
    /* The state came along: the target counts on from where the source
     * stopped, and no answer ever went back. */
    DH_CHECK(&fl->boxes[1], cl.last_on[1] > cl.last_on[0] && cl.last_on[0] >= 3,
             "box-1 counted to %ld, box-2 to %ld", cl.last_on[0], cl.last_on[1]);
    DH_CHECK(&fl->boxes[1], atomic_load(&cl.backwards) == 0,
             "%u answers counted lower than one before", atomic_load(&cl.backwards));
    claim c = fl_claim_of(fl, "web");
    DH_CHECK(&fl->boxes[1], c.state.checkpoint[0] && strcmp(c.state.box, "box-1") == 0,
             "the claim names checkpoint '%s' by '%s'", c.state.checkpoint, c.state.box);
    /* The build that wrote the state went with it; the target runs that
     * build, so its restore had nothing to say. */
    DH_CHECK(&fl->boxes[1],
             strcmp(c.state.build_version, "v1") == 0 && strlen(c.state.build_digest) == 64,
             "the moved state names build '%s' ('%s'); expected v1", c.state.build_version,
             c.state.build_digest);
    DH_CHECK(&fl->boxes[1], dh_events_count(&fl->boxes[1], "web", "state.other_build") == 0,
             "box-2 said another build wrote the state it restored");
    DH_CHECK(&fl->boxes[1], dh_event_wait(&fl->boxes[1], "web", "move.done", 5000, NULL),
             "box-2 published no move.done");
    /* box-1 drained web and handed it over: nothing of it is open there. */
    size_t open_dirs = dd_host_dir_fds(&fl->boxes[0].drv, "web");
    DH_CHECK(&fl->boxes[0], open_dirs == 0,
             "box-1 holds %zu fds on web's directory after the move", open_dirs);
    stop_fleet(fl);
}

static void test_a_probe_that_crashes_rolls_back_to_the_same_counter(void **state)
{
    fl_fleet *fl = *state;
    setup_fleet(fl, 2);
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES);
    /* box-2's build crashes at once. */
    dh_write_app_host_at(&fl->boxes[1], "web", fl_box_address(1), port,
                         "--counter --exit-immediately 3", MOVE_HOST_LINES);
    fl_assign(fl, "web", fl_box_name(0));
    fl_start(fl);
    for (long want = 1; want <= 3; want++)
        DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == want, "box-1 does not count");
    fl_overlap_start(fl, "web");
    char out[8192];
    int status = fl_ctl(fl, -1, out, sizeof(out), "move", "web", "box-2", "--timeout", "30", NULL);
    DH_CHECK(&fl->boxes[1], status == 1 && strstr(out, "failed in phase probing on box box-2") &&
                                strstr(out, "crashed") && strstr(out, "runs on box box-1"),
             "move web box-2 exited %d: %s", status, out);
    /* The rollback's failure went with box-1's next admission; its event
     * stays. */
    claim c = fl_claim_of(fl, "web");
    DH_CHECK(&fl->boxes[0], c.op.kind == CLAIM_OP_SERVING && strcmp(c.op.exec, "box-1") == 0,
             "after the rollback the claim is %s/%s on %s", claim_op_kind_to_string(c.op.kind),
             c.op.phase, c.op.exec);
    dh_event rolled = {0};
    DH_CHECK(&fl->boxes[1], dh_event_wait(&fl->boxes[1], "web", "move.rolled_back", 5000, &rolled),
             "box-2 published no move.rolled_back");
    /* Once box-2 released what it admitted, box-1 serves the same count. */
    long counter = counter_when_back(fl, 0, port);
    DH_CHECK(&fl->boxes[0], counter == 4, "box-1 answers counter %ld after the rollback",
             counter);
    size_t most = fl_overlap_stop(fl, NULL);
    DH_CHECK(&fl->boxes[0], most == 1, "web ran on %zu boxes at once", most);
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web does not serve on box-1 alone");
    /* box-2's part ended with the rollback: nothing of web is open there. */
    size_t open_dirs = dd_host_dir_fds(&fl->boxes[1].drv, "web");
    DH_CHECK(&fl->boxes[1], open_dirs == 0,
             "box-2 holds %zu fds on web's directory after the rollback", open_dirs);
    stop_fleet(fl);
}

/* A probe that never gets ready is given up at ProbeTimeoutSec= of its
 * first exec, before the ready window would close. */
static void test_a_probe_past_its_deadline_rolls_back(void **state)
{
    fl_fleet *fl = *state;
    setup_fleet(fl, 2);
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES);
    dh_write_app_host_at(&fl->boxes[1], "web", fl_box_address(1), port, "--counter --never-ready",
                         "ProbeTimeoutSec=1\nReadyTimeoutSec=20\nMaxStarts=1\n");
    fl_assign(fl, "web", fl_box_name(0));
    fl_start(fl);
    DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == 1, "box-1 does not count");
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web is not published on box-1");
    char out[8192];
    uint64_t started = act_now_usec();
    int status = fl_ctl(fl, 0, out, sizeof(out), "move", "web", "box-2", "--timeout", "20", NULL);
    uint64_t took_ms = (act_now_usec() - started) / 1000;
    DH_CHECK(&fl->boxes[1], status == 1 && strstr(out, "probe_timeout") &&
                                strstr(out, "runs on box box-1"),
             "move web box-2: %d %s", status, out);
    DH_CHECK(&fl->boxes[1], took_ms < 10000, "the probe was given up after %llu ms",
             (unsigned long long)took_ms);
    long counter = counter_when_back(fl, 0, port);
    DH_CHECK(&fl->boxes[0], counter == 2, "box-1 answers %ld after the rollback", counter);
    stop_fleet(fl);
}

/* The probe's health check fails after its publication: the claim named
 * box-2 serving for a moment, and the move still rolls back to box-1. */
static void test_a_probe_that_fails_its_health_check_rolls_back(void **state)
{
    fl_fleet *fl = *state;
    setup_fleet(fl, 2);
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES);
    dh_write_app_host_at(&fl->boxes[1], "web", fl_box_address(1), port, "--counter",
                         MOVE_HOST_LINES "HealthCheck=tcp:127.0.0.3:1\nReadyTimeoutSec=1\n");
    fl_assign(fl, "web", fl_box_name(0));
    fl_start(fl);
    DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == 1, "box-1 does not count");
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web is not published on box-1");
    fl_overlap_start(fl, "web");
    char out[8192];
    int status = fl_ctl(fl, -1, out, sizeof(out), "move", "web", "box-2", "--timeout", "30", NULL);
    DH_CHECK(&fl->boxes[1], status == 1 && strstr(out, "unhealthy") &&
                                strstr(out, "runs on box box-1"),
             "move web box-2: %d %s", status, out);
    long counter = counter_when_back(fl, 0, port);
    DH_CHECK(&fl->boxes[0], counter == 2, "box-1 answers %ld after the rollback", counter);
    size_t most = fl_overlap_stop(fl, NULL);
    DH_CHECK(&fl->boxes[0], most == 1, "web ran on %zu boxes at once", most);
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web does not serve on box-1 alone");
    stop_fleet(fl);
}

/* The probe passes its health check (the app's own port) before its
 * publication, and that publication ends the move: box-2 serves, counting
 * on from box-1's state. */
static void test_a_probe_that_passes_its_health_check_ends_the_move(void **state)
{
    fl_fleet *fl = *state;
    setup_fleet(fl, 2);
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES);
    char lines[512];
    snprintf(lines, sizeof(lines), MOVE_HOST_LINES "HealthCheck=tcp:%s:%d\n", fl_box_address(1),
             port);
    dh_write_app_host_at(&fl->boxes[1], "web", fl_box_address(1), port, "--counter", lines);
    fl_assign(fl, "web", fl_box_name(0));
    fl_start(fl);
    DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == 1, "box-1 does not count");
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web is not published on box-1");
    char out[8192];
    int status = fl_ctl(fl, -1, out, sizeof(out), "move", "web", "box-2", "--timeout", "30", NULL);
    DH_CHECK(&fl->boxes[1], status == 0 && strstr(out, "serves on box box-2"),
             "move web box-2: %d %s", status, out);
    DH_CHECK(&fl->boxes[1], fl_serves_on(fl, "web", 1, 5000), "web does not serve on box-2");
    DH_CHECK(&fl->boxes[1], dh_event_wait(&fl->boxes[1], "web", "move.done", 5000, NULL),
             "box-2 published no move.done");
    /* The health check's own connection counted too: any number past
     * box-1's says the state came along. */
    long counter = fl_counter_at(fl, 1, port);
    DH_CHECK(&fl->boxes[1], counter >= 2, "box-2 answers %ld after the move", counter);
    stop_fleet(fl);
}

/* A move through a box that holds as many claim waits as it takes is
 * followed all the same: each round reads the claim after a pause. */
static void test_a_move_through_a_busy_box_is_followed_all_the_same(void **state)
{
    fl_fleet *fl = *state;
    start_web_on_box_1(fl, 2);
    /* Waits past a revision the claim never reaches: open until box-1 stops. */
    dh_async *waits[AD_CLAIM_WAITS_MAX];
    for (size_t i = 0; i < AD_CLAIM_WAITS_MAX; i++)
        waits[i] = dh_request_start(&fl->boxes[0], 60000,
                                    "{\"v\":1,\"op\":\"claim.wait\",\"host\":\"web\","
                                    "\"revision\":1099511627776,\"wait\":60}");
    for (int i = 0; dh_open_claim_waits(&fl->boxes[0]) < AD_CLAIM_WAITS_MAX; i++) {
        DH_CHECK(&fl->boxes[0], i < 1000, "box-1 holds %" PRIu64 " claim waits after 20 s",
                 dh_open_claim_waits(&fl->boxes[0]));
        usleep(20 * 1000);
    }
    char out[8192];
    int status = fl_ctl(fl, 0, out, sizeof(out), "move", "web", "box-2", "--timeout", "30", NULL);
    DH_CHECK(&fl->boxes[1], status == 0 && strstr(out, "serves on box box-2"),
             "move web box-2 through a busy box-1: exit %d: %s", status, out);
    stop_fleet(fl);
    for (size_t i = 0; i < AD_CLAIM_WAITS_MAX; i++) {
        json_object *reply = dh_request_finish(&fl->boxes[0], waits[i]);
        DH_CHECK(&fl->boxes[0], strcmp(dh_reply_code(reply), "stopping") == 0,
                 "a claim wait open at box-1's stop: %s", json_object_to_json_string(reply));
        json_object_put(reply);
    }
}

/* Appends a byte to checkpoint id's archive: its SHA-256 no longer fits. */
/* The blob of checkpoint id of host in the registry's storage: its layer,
 * as the registry's filesystem driver lays blobs out. */
static void registry_blob_path(const char *host, const char *id, char *out, size_t size)
{
    char repository[300];
    snprintf(repository, sizeof(repository), "docker://%s/checkpoints/%s", registry.address,
             host);
    const char *insecure[] = {registry.address};
    img_registry_options options = {.insecure = insecure, .n_insecure = 1};
    json_object *manifest = NULL, *layers;
    char digest[IMG_DIGEST_SIZE];
    act_error err = {0};
    if (img_artifact_manifest(repository, id, &options, &manifest, digest, &err) < 0)
        fail_msg("checkpoint %s of %s in the registry: %s", id, host, err.message);
    assert_true(json_object_object_get_ex(manifest, "layers", &layers));
    const char *layer = json_object_get_string(
        json_object_object_get(json_object_array_get_idx(layers, 0), "digest"));
    snprintf(out, size, "%s/docker/registry/v2/blobs/sha256/%.2s/%s/data", registry.storage,
             layer + 7, layer + 7);
    json_object_put(manifest);
}

static void tamper(const char *host, const char *id)
{
    char path[PATH_MAX + 200];
    if (through_registry)
        registry_blob_path(host, id, path, sizeof(path));
    else
        snprintf(path, sizeof(path), "%s/%s/%s.tar.zst", checkpoints, host, id);
    FILE *f = fopen(path, "a");
    if (!f)
        fail_msg("cannot open the archive %s", path);
    fputc('x', f);
    fclose(f);
}

static void test_a_tampered_checkpoint_is_refused_and_rolled_back(void **state)
{
    fl_fleet *fl = *state;
    char hold[PATH_MAX + 32], env[PATH_MAX + 128];
    setup_fleet(fl, 2);
    snprintf(hold, sizeof(hold), "%s/checkpointed", checkpoints);
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_HOLD=checkpointed:%s", hold);
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES);
    fl_assign(fl, "web", fl_box_name(0));
    dh_start(&fl->boxes[0], (const char *const[]){env, NULL});
    dh_start(&fl->boxes[1], NULL);
    for (long want = 1; want <= 3; want++)
        DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == want, "box-1 does not count");
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web is not published on box-1");

    /* The move, held once box-1 has written its checkpoint. */
    begin_move(fl, "box-2", "move-tampered");
    dh_event written = {0};
    DH_CHECK(&fl->boxes[0],
             dh_event_wait(&fl->boxes[0], "web", "move.checkpointed", 10000, &written),
             "box-1 wrote no checkpoint");
    DH_CHECK(&fl->boxes[0], dh_log_wait(&fl->boxes[0], "checkpointed held", 10000),
             "box-1 did not hold after its checkpoint");
    tamper("web", written.reason);
    release_hold(hold);

    DH_CHECK(&fl->boxes[1], dh_event_wait(&fl->boxes[1], "web", "move.rolled_back", 15000, NULL),
             "box-2 did not roll the move back");
    DH_CHECK(&fl->boxes[1], dh_log_wait(&fl->boxes[1], "restore_failed", 5000),
             "box-2 did not refuse the restore");
    /* box-1 wrote that checkpoint from the state it still has: it serves
     * on with the same count. */
    long counter = counter_when_back(fl, 0, port);
    DH_CHECK(&fl->boxes[0], counter == 4, "box-1 answers counter %ld after the rollback",
             counter);
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web does not serve on box-1 alone");
    DH_CHECK(&fl->boxes[1], fl_running(fl, "web", NULL) == 1, "web runs on two boxes");
    stop_fleet(fl);
}

/* Each refusal says why and changes nothing. */
static void refused(fl_fleet *fl, int via, const char *want, const char *box)
{
    claim before = fl_claim_of(fl, "web");
    char out[8192];
    int status = fl_ctl(fl, via, out, sizeof(out), "move", "web", box, "--timeout", "5", NULL);
    claim after = fl_claim_of(fl, "web");
    DH_CHECK(&fl->boxes[0], status == 1 && strstr(out, want),
             "move web %s exited %d without \"%s\": %s", box, status, want, out);
    DH_CHECK(&fl->boxes[0], after.revision == before.revision,
             "move web %s changed the claim (revision %llu to %llu)", box,
             (unsigned long long)before.revision, (unsigned long long)after.revision);
}

static void test_what_cannot_move_is_refused_with_nothing_changed(void **state)
{
    fl_fleet *fl = *state;
    char hold[PATH_MAX + 16], env[PATH_MAX + 128];
    setup_fleet(fl, 2);
    snprintf(hold, sizeof(hold), "%s/drained", checkpoints);
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_HOLD=drained:%s", hold);
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES);
    fl_assign(fl, "web", fl_box_name(0));
    dh_start(&fl->boxes[0], (const char *const[]){env, NULL});
    dh_start(&fl->boxes[1], NULL);
    DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == 1, "box-1 does not serve");
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web is not published on box-1");

    refused(fl, 0, "box box-9 is not known", "box-9");
    refused(fl, -1, "already runs on box box-1", "box-1");
    char out[8192];
    DH_CHECK(&fl->boxes[0], fl_ctl(fl, 0, out, sizeof(out), "hold", "web", "v1", NULL) == 0,
             "hold: %s", out);
    refused(fl, 0, "held on version v1", "box-2");
    DH_CHECK(&fl->boxes[0], fl_ctl(fl, 0, out, sizeof(out), "unhold", "web", NULL) == 0,
             "unhold: %s", out);
    /* --force while box-1 lives: it can drain, so it must. */
    claim before = fl_claim_of(fl, "web");
    int status = fl_ctl(fl, -1, out, sizeof(out), "move", "web", "box-2", "--force", NULL);
    DH_CHECK(&fl->boxes[0], status == 1 && strstr(out, "source_live"), "--force: %d %s", status,
             out);
    assert_int_equal(fl_claim_of(fl, "web").revision, before.revision);

    /* A move held where box-1 has drained: another move is refused, an
     * abort rolls it back, and box-1's drain then writes nothing. */
    begin_move(fl, "box-2", "move-test");
    DH_CHECK(&fl->boxes[0], dh_log_wait(&fl->boxes[0], "point drained held", 10000),
             "box-1 did not drain");
    DH_CHECK(&fl->boxes[0], fl_running(fl, "web", NULL) == 0, "web still runs while drained");
    json_object *shown = dh_status(&fl->boxes[0], "web");
    DH_CHECK(&fl->boxes[0], shown && strcmp(dh_json_str(shown, "move"), "draining for box box-2") == 0,
             "status shows move '%s'", shown ? dh_json_str(shown, "move") : "(none)");
    json_object_put(shown);
    refused(fl, -1, "move move-test from box-1 to box-2 is in flight", "box-3");
    /* The same move again follows it; its --timeout rolls it back. */
    status = fl_ctl(fl, 0, out, sizeof(out), "move", "web", "box-2", "--timeout", "1", NULL);
    DH_CHECK(&fl->boxes[0], status == 1 && strstr(out, "resumed") &&
                                strstr(out, "not done within 1 s") && strstr(out, "rolled back"),
             "move with --timeout 1: %d %s", status, out);
    /* Nothing is left to abort. */
    claim rolled = fl_claim_of(fl, "web");
    status = fl_ctl(fl, -1, out, sizeof(out), "move", "--abort", "web", NULL);
    DH_CHECK(&fl->boxes[0], status == 1 && strstr(out, "no move is in flight"), "abort: %d %s",
             status, out);
    assert_int_equal(fl_claim_of(fl, "web").revision, rolled.revision);
    release_hold(hold);
    claim back = fl_claim_of(fl, "web");
    DH_CHECK(&fl->boxes[0], strcmp(back.failure.reason, "aborted") == 0 &&
                                strcmp(back.op.exec, "box-1") == 0,
             "after the abort: exec %s, failure %s", back.op.exec, back.failure.reason);
    /* The count goes on where it was. */
    long counter = counter_when_back(fl, 0, port);
    DH_CHECK(&fl->boxes[0], counter == 2, "box-1 answers %ld after the abort", counter);
    stop_fleet(fl);
}

static void test_force_moves_off_a_dead_box_from_its_last_checkpoint(void **state)
{
    fl_fleet *fl = *state;
    int port = start_web_on_box_1(fl, 2);
    char out[8192];
    int status = fl_ctl(fl, 0, out, sizeof(out), "move", "web", "box-2", NULL);
    DH_CHECK(&fl->boxes[1], status == 0, "move web box-2: %d %s", status, out);
    DH_CHECK(&fl->boxes[1], fl_counter_at(fl, 1, port) == 4, "box-2 does not count on");
    /* box-2 goes away (its record with it); what it counted after the
     * checkpoint is lost with it. */
    dh_stop_and_check_clean(&fl->boxes[1]);
    refused(fl, -1, "has no live lease", "box-1");
    status = fl_ctl(fl, -1, out, sizeof(out), "move", "web", "box-1", "--force", NULL);
    DH_CHECK(&fl->boxes[0], status == 0 && strstr(out, "--force: from checkpoint") &&
                                strstr(out, "ago by box box-1"),
             "move --force: %d %s", status, out);
    DH_CHECK(&fl->boxes[0], fl_serves_on(fl, "web", 0, 5000), "web does not serve on box-1");
    DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == 4,
             "box-1 does not count on from the checkpoint");
    dh_stop_and_check_clean(&fl->boxes[0]);
    remove_checkpoints();
}

/* CheckpointEverySec= bounds what a box's power cut loses: web counts on
 * box-1, whose state is checkpointed every second; box-1 loses its daemon
 * and every process of its cgroup root at once; once its lease lapsed,
 * move --force brings web up on box-2 from the last checkpoint, which
 * holds every count up to one answered before it was stamped. */
static void test_periodic_checkpoints_bound_what_a_power_cut_loses(void **state)
{
    fl_fleet *fl = *state;
    dh_step("web on box-1, checkpointed every second");
    setup_fleet_with(fl, 2, "BoxLeaseSec=2\n");
    int port = fl_add_host(fl, "web", "--counter", MOVE_HOST_LINES "CheckpointEverySec=1\n");
    fl_assign(fl, "web", fl_box_name(0));
    fl_start(fl);
    for (long want = 1; want <= 5; want++)
        DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == want, "box-1 does not count to %ld",
                 want);
    uint64_t counted_usec = act_wallclock_usec();
    dh_waiting_for("a checkpoint of web stamped after its fifth request (up to 10 s)");
    uint64_t deadline = dd_now_ms() + 10000;
    claim c = fl_claim_of(fl, "web");
    while (c.state.stamp_usec <= counted_usec && dd_now_ms() < deadline) {
        usleep(20 * 1000);
        c = fl_claim_of(fl, "web");
    }
    DH_CHECK(&fl->boxes[0], c.state.stamp_usec > counted_usec,
             "no checkpoint of web was named after its fifth request");
    /* Counted after it: a later checkpoint may or may not hold these. */
    for (long want = 6; want <= 7; want++)
        DH_CHECK(&fl->boxes[0], fl_counter_at(fl, 0, port) == want, "box-1 does not count to %ld",
                 want);

    dh_step("box-1's power cut");
    fl_power_cut(fl, 0);
    DH_CHECK(&fl->boxes[0], fl_wait_dead(fl, 0, 15000), "box-1's lease does not lapse");
    char out[8192];
    int status = fl_ctl(fl, -1, out, sizeof(out), "move", "web", "box-2", "--force", NULL);
    DH_CHECK(&fl->boxes[1], status == 0 && strstr(out, "--force: from checkpoint"),
             "move --force: %d %s", status, out);
    DH_CHECK(&fl->boxes[1], fl_serves_on(fl, "web", 1, 10000), "web does not serve on box-2");
    long counter = fl_counter_at(fl, 1, port);
    DH_CHECK(&fl->boxes[1], counter >= 6 && counter <= 8,
             "box-2 counted %ld after the power cut; 6 to 8 would have held the last checkpoint",
             counter);
    dh_stop_and_check_clean(&fl->boxes[1]);
    remove_checkpoints();
}

/* Kills the daemon of box index at the move's hold point, restarts it, and
 * checks the move finishes there: web serves on to alone. */
static void kill_at(fl_fleet *fl, size_t index, const char *point, size_t from, size_t to)
{
    char hold[PATH_MAX + 32], env[PATH_MAX + 128];
    snprintf(hold, sizeof(hold), "%s/hold-%s", checkpoints, point);
    snprintf(env, sizeof(env), "ACTIVATOR_TEST_HOLD=%s:%s", point, hold);
    unlink(hold);
    dh_daemon *box = &fl->boxes[index];
    dh_step("the move of web from %s to %s, %s's daemon killed at %s: the handover before it",
            fl_box_name(from), fl_box_name(to), fl_box_name(index), point);
    /* A handover: what runs on the box keeps running into the next daemon,
     * which holds the point. Its last wake has ended first (its record
     * written), so there is nothing in flight to hand over. */
    DH_CHECK(&fl->boxes[from], dh_wait_state(&fl->boxes[from], "web", "serving", 10000),
             "%s does not say it serves web", fl_box_name(from));
    dh_hand_over(box);
    dh_start(box, (const char *const[]){env, NULL});
    char id[64];
    snprintf(id, sizeof(id), "kill-%s-%zu", point, index);
    dh_step("the move of web from %s to %s, %s's daemon killed at %s: the move up to %s",
            fl_box_name(from), fl_box_name(to), fl_box_name(index), point, point);
    begin_move(fl, fl_box_name(to), id);
    char held[96];
    snprintf(held, sizeof(held), "%s held", point);
    DH_CHECK(box, dh_log_wait(box, held, 15000), "%s: never held at %s", fl_box_name(index),
             point);
    dh_step("the move of web from %s to %s, %s's daemon killed at %s: the kill, the restart, "
            "and the rest of the move",
            fl_box_name(from), fl_box_name(to), fl_box_name(index), point);
    dh_kill(box);
    release_hold(hold);
    dh_start(box, (const char *const[]){env, NULL});
    DH_CHECK(box, fl_serves_on(fl, "web", to, MOVE_TIMEOUT_MS),
             "killed at %s on %s: web does not serve on %s alone", point, fl_box_name(index),
             fl_box_name(to));
    DH_CHECK(box, atomic_load(&fl->overlap.most_running) <= 1,
             "killed at %s: web ran on two boxes at once", point);
}

static void test_a_daemon_killed_at_each_step_finishes_its_part(void **state)
{
    fl_fleet *fl = *state;
    int port = start_web_on_box_1(fl, 2);
    fl_overlap_start(fl, "web");
    /* The source, killed when drained and when checkpointed; the target,
     * killed before the probe's exec and before its publication. */
    kill_at(fl, 0, "drained", 0, 1);
    kill_at(fl, 1, "drained", 1, 0);
    kill_at(fl, 0, "checkpointed", 0, 1);
    kill_at(fl, 0, "exec", 1, 0);
    kill_at(fl, 1, "publish", 0, 1);
    size_t most = fl_overlap_stop(fl, NULL);
    DH_CHECK(&fl->boxes[0], most == 1, "web ran on %zu boxes at once", most);
    /* Five moves, each a checkpoint of the one before: the count held. */
    DH_CHECK(&fl->boxes[1], fl_counter_at(fl, 1, port) == 4, "box-2 does not count on");
    stop_fleet(fl);
}

int main(int argc, char **argv)
{
    through_registry = argc > 1 && strcmp(argv[1], "registry") == 0;
    int r = fl_check_can_run(through_registry ? "fleet-move-registry" : "fleet-move");
    if (r)
        return r;
    if (through_registry) {
        if (!reg_harness_available()) {
            fprintf(stderr, "fleet-move-registry: docker-registry is missing "
                            "(scripts/install-deps.sh); skipped\n");
            return 77;
        }
        act_error err = {0};
        if (reg_harness_start(&registry, false, false, &err) < 0) {
            fprintf(stderr, "fleet-move-registry: cannot start the registry: %s\n", err.message);
            return 1;
        }
        /* The moves that carry state through the registry. */
        const struct CMUnitTest carried[] = {
            FL_TEST(test_move_under_a_client_keeps_the_counter_and_never_runs_twice),
            FL_TEST(test_a_tampered_checkpoint_is_refused_and_rolled_back),
            FL_TEST(test_force_moves_off_a_dead_box_from_its_last_checkpoint),
        };
        r = cmocka_run_group_tests(carried, NULL, NULL);
        reg_harness_stop(&registry);
        return r;
    }
    const struct CMUnitTest tests[] = {
        FL_TEST(test_move_under_a_client_keeps_the_counter_and_never_runs_twice),
        FL_TEST(test_a_probe_that_crashes_rolls_back_to_the_same_counter),
        FL_TEST(test_a_probe_past_its_deadline_rolls_back),
        FL_TEST(test_a_probe_that_fails_its_health_check_rolls_back),
        FL_TEST(test_a_probe_that_passes_its_health_check_ends_the_move),
        FL_TEST(test_a_move_through_a_busy_box_is_followed_all_the_same),
        FL_TEST(test_a_tampered_checkpoint_is_refused_and_rolled_back),
        FL_TEST(test_what_cannot_move_is_refused_with_nothing_changed),
        FL_TEST(test_force_moves_off_a_dead_box_from_its_last_checkpoint),
        FL_TEST(test_periodic_checkpoints_bound_what_a_power_cut_loses),
        FL_TEST(test_a_daemon_killed_at_each_step_finishes_its_part),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
