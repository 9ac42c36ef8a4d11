/* Claims that tell the truth, on the real daemon with the dir store or a real
 * etcd (argv[1]): what a reader of the claim alone sees of a host.
 *   - a served wake says serving with the handle; an operator park, an idle
 *     park and a generation that exits 0 say parked with no handle;
 *   - a wake that gives up (a build that crashes, MaxStarts=2) says failed
 *     with reason crashed and 2 attempts; the next wake that serves clears it;
 *   - during a swap (held before N+1's publication) the claim still names N
 *     serving on N's handle, with N+1 as the starting generation; after it,
 *     N+1; a swap whose N+1 dies after its publication names N again;
 *   - a swap whose daemon is killed after N+1 failed and before the claim
 *     named N again (held at swap_failed): the next daemon resumes N, names
 *     it again, records the pin's failure with N's build as its fallback,
 *     and a cold wake runs that build;
 *   - a daemon killed during a swap (N+1 held before publication) or after
 *     a failed one resumes N;
 *   - a parked write-back never lands over a newer admission or another
 *     box's claim;
 *   - a clean stop leaves the claim parked. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static dh_store_kind store_kind = DH_STORE_DIR;

/* A build that exits 1 at once: every start of it crashes before ready. */
#define CRASHING_BUILD "/bin/false"

static void touch(dh_daemon *d, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    DH_CHECK(d, fd >= 0, "cannot create %s: %s", path, strerror(errno));
    close(fd);
}

/* The claim of a served wake: this box, the generation that serves, its
 * handle naming the host's port, nothing starting, no failure. */
static claim check_serving(dh_daemon *d, uint64_t generation, int port)
{
    claim c;
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "serving", 5000, &c),
             "the claim says %s, expected serving", c.op.phase);
    char port_text[16];
    snprintf(port_text, sizeof(port_text), ":%d", port);
    DH_CHECK(d,
             strcmp(c.holder.box, DH_BOX) == 0 && c.holder.generation == generation &&
                 strstr(c.holder.handle, port_text) && c.holder.starting_generation == 0 &&
                 !c.has_failure,
             "serving claim: box %s generation %" PRIu64 " (expected %" PRIu64
             ") handle \"%s\" (expected port %d) starting %" PRIu64 " failure \"%s\"",
             c.holder.box, c.holder.generation, generation, c.holder.handle, port,
             c.holder.starting_generation, c.has_failure ? c.failure.reason : "");
    return c;
}

/* demo started (extra_host_lines in its [Host]) and served by one wake;
 * returns the serving claim, with the wake in served (may be NULL). */
static claim start_serving(dh_daemon *d, const char *extra_host_lines, dh_served *served)
{
    int port = dh_start_with_host(d, store_kind, "demo", NULL, extra_host_lines);
    dh_served woken = dh_wake(d, "demo");
    if (served)
        *served = woken;
    return check_serving(d, woken.generation, port);
}

/* After a park: the same admission (box, session, generation), parked, with
 * no handle a router could follow. */
static void check_parked_after(dh_daemon *d, const claim *serving)
{
    claim c;
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "parked", 10000, &c),
             "the claim says %s after the park, expected parked", c.op.phase);
    DH_CHECK(d,
             c.holder.handle[0] == '\0' && strcmp(c.holder.box, DH_BOX) == 0 &&
                 c.holder.session == serving->holder.session &&
                 c.holder.generation == serving->holder.generation && !c.has_failure,
             "parked claim: handle \"%s\" box %s session %" PRIu64 " (was %" PRIu64
             ") generation %" PRIu64 " (was %" PRIu64 ")",
             c.holder.handle, c.holder.box, c.holder.session, serving->holder.session,
             c.holder.generation, serving->holder.generation);
}

static void test_operator_park_says_parked(void **state)
{
    dh_daemon *d = *state;
    claim serving = start_serving(d, NULL, NULL);
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    check_parked_after(d, &serving);
    dh_stop_and_check_clean(d);
}

static void test_idle_park_says_parked(void **state)
{
    dh_daemon *d = *state;
    claim serving = start_serving(d, "IdleTimeoutSec=1\n", NULL);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park when idle");
    check_parked_after(d, &serving);
    dh_stop_and_check_clean(d);
}

static void test_exit_zero_says_parked(void **state)
{
    dh_daemon *d = *state;
    dh_served served;
    claim serving = start_serving(d, NULL, &served);
    /* The app ends by itself, cleanly: an idle park. */
    DH_CHECK(d, kill(served.pid, SIGTERM) == 0, "cannot signal the app: %s", strerror(errno));
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park after its exit");
    check_parked_after(d, &serving);
    dh_stop_and_check_clean(d);
}

static void test_give_up_says_failed_until_a_wake_serves(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, store_kind, "demo", NULL, "MaxStarts=2\n");
    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, true, NULL);
    json_object *reply = dh_wake_reply(d, "demo", 30000);
    char reply_text[1024];
    snprintf(reply_text, sizeof(reply_text), "%s", json_object_to_json_string(reply));
    bool crashed = !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "crashed") == 0;
    json_object_put(reply);
    DH_CHECK(d, crashed, "wake of a crashing build: expected crashed, got %s", reply_text);

    claim failed;
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "failed", 10000, &failed),
             "the claim says %s after the wake gave up, expected failed", failed.op.phase);
    DH_CHECK(d,
             failed.has_failure && strcmp(failed.failure.reason, "crashed") == 0 &&
                 failed.failure.attempts == 2 && failed.failure.message[0] &&
                 failed.failure.stamp_usec > 0,
             "the failed claim says reason \"%s\", %" PRIu64 " attempts, message \"%s\"; "
             "expected crashed after 2",
             failed.failure.reason, failed.failure.attempts, failed.failure.message);
    DH_CHECK(d, failed.holder.handle[0] == '\0' && strcmp(failed.holder.box, DH_BOX) == 0,
             "the failed claim names handle \"%s\" and box %s", failed.holder.handle,
             failed.holder.box);

    /* A build that serves: its admission and publication clear the failure. */
    dh_stage(d, "demo", "v3", true, NULL);
    dh_served served = dh_wake(d, "demo");
    claim serving = check_serving(d, served.generation, port);
    DH_CHECK(d, serving.holder.session > failed.holder.session,
             "the serving claim's session %" PRIu64 " did not grow past %" PRIu64,
             serving.holder.session, failed.holder.session);
    dh_stop_and_check_clean(d);
}

/* demo served as N by a daemon that holds every wake before publication
 * while <dir>/publish-go is missing (it exists for N's own wake), with v2
 * staged to swap to. The hold's path goes to hold, demo's port to port
 * (may be NULL). */
static dh_served start_for_swap(dh_daemon *d, char *hold, size_t hold_size, claim *serving,
                                int *port_out)
{
    dh_setup(d, store_kind, NULL);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_stage(d, "demo", "v2", false, NULL);
    dh_hold_path(d, "publish-go", hold, hold_size);
    touch(d, hold);
    dh_start_holding(d, "publish", hold);
    dh_served served = dh_wake(d, "demo");
    *serving = check_serving(d, served.generation, port);
    if (port_out)
        *port_out = port;
    DH_CHECK(d, unlink(hold) == 0, "cannot remove %s: %s", hold, strerror(errno));
    dh_events_mark(d);
    return served;
}

/* Starts the swap to v2 and waits until N+1 runs and waits for publication.
 * Returns N+1's exec event. */
static dh_event swap_until_publication(dh_daemon *d, const char *hold, dh_async **swap)
{
    *swap = dh_request_start(d, 60000,
                             "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}");
    dh_event exec;
    DH_CHECK(d, dh_event_wait(d, "demo", "exec", 10000, &exec), "the swap exec'd nothing");
    char waiting[PATH_MAX + 64];
    snprintf(waiting, sizeof(waiting), "step publish held: waiting for %s", hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 10000), "the swap never paused before publication");
    return exec;
}

/* While N+1 starts, a router reading the claim alone still reaches N. */
static void check_names_n_while_n_plus_1_starts(dh_daemon *d, const claim *n,
                                                const dh_event *exec)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim during the swap");
    DH_CHECK(d, exec->generation > n->holder.generation, "N+1 runs as generation %" PRIu64,
             exec->generation);
    DH_CHECK(d,
             strcmp(c.op.phase, "serving") == 0 && c.holder.generation == n->holder.generation &&
                 strcmp(c.holder.handle, n->holder.handle) == 0 &&
                 c.holder.starting_generation == exec->generation &&
                 c.holder.session > n->holder.session,
             "during the swap the claim says %s, generation %" PRIu64 " handle \"%s\" starting "
             "%" PRIu64 " session %" PRIu64 "; expected serving N = %" PRIu64
             " on \"%s\", starting %" PRIu64 ", a session above %" PRIu64,
             c.op.phase, c.holder.generation, c.holder.handle, c.holder.starting_generation,
             c.holder.session, n->holder.generation, n->holder.handle, exec->generation,
             n->holder.session);
}

static void test_swap_names_n_until_n_plus_1_is_published(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX];
    claim n;
    start_for_swap(d, hold, sizeof(hold), &n, NULL);
    dh_async *swap;
    dh_event exec = swap_until_publication(d, hold, &swap);
    check_names_n_while_n_plus_1_starts(d, &n, &exec);

    touch(d, hold);
    json_object *reply = dh_request_finish(d, swap);
    DH_CHECK(d, dh_reply_ok(reply), "the swap: %s", json_object_to_json_string(reply));
    json_object_put(reply);
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim after the swap");
    DH_CHECK(d,
             strcmp(c.op.phase, "serving") == 0 && c.holder.generation == exec.generation &&
                 c.holder.handle[0] && c.holder.starting_generation == 0 && c.has_pin &&
                 strcmp(c.pin.version, "v2") == 0,
             "after the swap the claim says %s, generation %" PRIu64 " handle \"%s\" starting "
             "%" PRIu64 "; expected serving N+1 = %" PRIu64 " pinned to v2",
             c.op.phase, c.holder.generation, c.holder.handle, c.holder.starting_generation,
             exec.generation);
    dh_stop_and_check_clean(d);
}

/* N+1 dies after it was ready, before its publication: it is published, then
 * fails its check of health, and N serves on. The claim names N again. */
static void test_failed_swap_names_n_again(void **state)
{
    dh_daemon *d = *state;
    char hold[PATH_MAX];
    claim n;
    dh_served served = start_for_swap(d, hold, sizeof(hold), &n, NULL);
    dh_async *swap;
    dh_event exec = swap_until_publication(d, hold, &swap);
    check_names_n_while_n_plus_1_starts(d, &n, &exec);

    /* Dead before its publication is let go, so the daemon knows it by then:
     * the publication's claim write takes a loop iteration or more. */
    DH_CHECK(d, dh_kill_and_wait_exit((pid_t)exec.pid), "cannot kill N+1 (pid %" PRId64 "): %s",
             exec.pid, strerror(errno));
    touch(d, hold);
    json_object *reply = dh_request_finish(d, swap);
    char reply_text[1024];
    snprintf(reply_text, sizeof(reply_text), "%s", json_object_to_json_string(reply));
    bool ok = dh_reply_ok(reply);
    json_object_put(reply);
    DH_CHECK(d, !ok, "a swap whose N+1 died succeeded: %s", reply_text);
    DH_CHECK(d, dh_events_count(d, "demo", "published") == 1,
             "N+1 was not published before it failed (%zu published events)",
             dh_events_count(d, "demo", "published"));

    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim after the failed swap");
    DH_CHECK(d,
             strcmp(c.op.phase, "serving") == 0 && c.holder.generation == n.holder.generation &&
                 strcmp(c.holder.handle, n.holder.handle) == 0 &&
                 c.holder.starting_generation == 0 && c.has_pin &&
                 strcmp(c.pin.version, "v2") == 0 && c.pin.failure_reason[0],
             "after the failed swap the claim says %s, generation %" PRIu64 " handle \"%s\" "
             "starting %" PRIu64 " pin failure \"%s\"; expected serving N = %" PRIu64
             " on \"%s\" with the pin's failure",
             c.op.phase, c.holder.generation, c.holder.handle, c.holder.starting_generation,
             c.pin.failure_reason, n.holder.generation, n.holder.handle);
    json_object *status = dh_status(d, "demo");
    bool serving_n = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                     dh_json_u64(status, "generation") == served.generation;
    json_object_put(status);
    DH_CHECK(d, serving_n, "N does not serve on after the failed swap");
    dh_stop_and_check_clean(d);
}

static bool swap_written_back(const claim *c)
{
    return c->holder.starting_generation == 0 && claim_pin_failed(c);
}

/* Swaps demo to v2 without waiting for its end (no_wait). */
static void start_swap_to_v2(dh_daemon *d)
{
    json_object *reply = dh_request(d, 30000,
                                    "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\","
                                    "\"version\":\"v2\",\"no_wait\":true}");
    DH_CHECK(d, dh_reply_ok(reply), "the swap did not start: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
}

/* N's own process answers on port after a restart or handover (when). */
static void expect_n_answers(dh_daemon *d, int port, const dh_served *n, const char *when)
{
    DH_CHECK(d, dh_answer_pid(port) == n->pid, "after %s pid %" PRId64 " answers, not N's %d",
             when, dh_answer_pid(port), (int)n->pid);
}

/* Waits for the restarted daemon to write the interrupted swap back. */
static claim wait_swap_written_back(dh_daemon *d)
{
    claim c;
    DH_CHECK(d, dh_claim_wait(d, "demo", swap_written_back, 10000, &c),
             "the restarted daemon did not write the swap back: generation %" PRIu64
             " starting %" PRIu64 " pin failure \"%s\"",
             c.holder.generation, c.holder.starting_generation, c.pin.failure_reason);
    return c;
}

static void test_swap_failed_before_its_write_back_resumes_n(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    int port = dh_add_app_host(d, "demo", NULL, "MaxStarts=1\n");
    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, false, NULL);
    char hold[PATH_MAX], waiting[PATH_MAX + 64];
    dh_hold_path(d, "write-back-go", hold, sizeof(hold));
    dh_start_holding(d, "swap_failed", hold);
    dh_served served = dh_wake(d, "demo");
    claim n = check_serving(d, served.generation, port);

    dh_step("swap demo to the crashing v2, held before the claim names N again");
    start_swap_to_v2(d);
    snprintf(waiting, sizeof(waiting), "point swap_failed held: waiting for %s", hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 30000),
             "the swap to v2 did not fail, or its write-back was not held");
    claim during;
    DH_CHECK(d, dh_claim_get(d, "demo", &during), "no claim after the swap failed");
    DH_CHECK(d,
             during.holder.generation == n.holder.generation &&
                 during.holder.starting_generation > n.holder.generation &&
                 during.holder.session > n.holder.session && during.has_pin &&
                 strcmp(during.pin.version, "v2") == 0 && !claim_pin_failed(&during) &&
                 strcmp(during.pin.fallback_version, "v1") == 0,
             "before the write-back the claim names generation %" PRIu64 " starting %" PRIu64
             " pin %s (failure \"%s\", fallback \"%s\"); expected N = %" PRIu64
             " with N+1 starting, and the pin v2 not failed with its fallback v1",
             during.holder.generation, during.holder.starting_generation,
             during.has_pin ? during.pin.version : "(none)", during.pin.failure_reason,
             during.pin.fallback_version, n.holder.generation);

    dh_step("kill the daemon before the write-back, and start it again");
    dh_kill(d);
    dh_start(d, NULL);
    expect_n_answers(d, port, &served, "the restart");
    json_object *status = dh_status(d, "demo");
    bool serving_n = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                     dh_json_u64(status, "generation") == served.generation;
    json_object_put(status);
    DH_CHECK(d, serving_n, "the restarted daemon does not serve N = %" PRIu64, served.generation);
    claim c = wait_swap_written_back(d);
    DH_CHECK(d,
             strcmp(c.op.phase, "serving") == 0 && c.holder.generation == n.holder.generation &&
                 strcmp(c.holder.handle, n.holder.handle) == 0 &&
                 strcmp(c.pin.version, "v2") == 0 && strcmp(c.pin.fallback_version, "v1") == 0 &&
                 strcmp(c.pin.fallback_digest, during.pin.fallback_digest) == 0 &&
                 strcmp(c.pin.failure_box, DH_BOX) == 0,
             "after the restart the claim says %s, generation %" PRIu64 " handle \"%s\", pin %s "
             "failed on \"%s\" with fallback \"%s\"; expected serving N = %" PRIu64
             " on \"%s\", v2 failed here with fallback v1",
             c.op.phase, c.holder.generation, c.holder.handle, c.pin.version, c.pin.failure_box,
             c.pin.fallback_version, n.holder.generation, n.holder.handle);

    dh_step("hand over: the next daemon resumes N too");
    dh_hand_over(d);
    dh_start(d, NULL);
    expect_n_answers(d, port, &served, "the handover");

    dh_step("park, then a cold wake by a connection runs the fallback");
    dh_park(d, "demo");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    dh_cold_wake_runs_fallback(d, "demo", port, "v1");
    dh_stop_and_check_clean(d);
}

/* Serves demo (N, whose claim goes to n, its port to port), then swaps it
 * to v2 and waits until N+1 (exec) is ready and held before publication. */
static dh_served swap_held_before_publication(dh_daemon *d, claim *n, int *port, dh_event *exec)
{
    char hold[PATH_MAX], waiting[PATH_MAX + 64];
    dh_served served = start_for_swap(d, hold, sizeof(hold), n, port);
    start_swap_to_v2(d);
    DH_CHECK(d, dh_event_wait(d, "demo", "exec", 10000, exec), "the swap exec'd nothing");
    snprintf(waiting, sizeof(waiting), "step publish held: waiting for %s", hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 10000), "the swap never paused before publication");
    return served;
}

/* The daemon is killed while N+1 of a swap runs, ready and held before
 * its publication: N+1 was never published, so the next daemon retires it,
 * resumes N and names it again, and records the pin as failed
 * (interrupted), its fallback the build N runs. */
static void test_swap_interrupted_before_publication_resumes_n(void **state)
{
    dh_daemon *d = *state;
    claim n;
    int port = 0;
    dh_event exec;
    dh_served served = swap_held_before_publication(d, &n, &port, &exec);
    check_names_n_while_n_plus_1_starts(d, &n, &exec);

    dh_step("kill the daemon while N+1 waits for its publication, and start it again");
    dh_kill(d);
    dh_start(d, NULL);
    expect_n_answers(d, port, &served, "the restart");
    DH_CHECK(d, dh_pid_gone((pid_t)exec.pid), "N+1 (pid %" PRId64 ") was not retired", exec.pid);
    claim c = wait_swap_written_back(d);
    DH_CHECK(d,
             strcmp(c.op.phase, "serving") == 0 && c.holder.generation == n.holder.generation &&
                 strcmp(c.pin.version, "v2") == 0 &&
                 strcmp(c.pin.failure_reason, "interrupted") == 0 &&
                 strcmp(c.pin.fallback_version, "v1") == 0,
             "after the restart the claim says %s, generation %" PRIu64 ", pin %s failed \"%s\" "
             "with fallback \"%s\"; expected serving N = %" PRIu64 ", v2 interrupted, "
             "fallback v1",
             c.op.phase, c.holder.generation, c.pin.version, c.pin.failure_reason,
             c.pin.fallback_version, n.holder.generation);
    dh_stop_and_check_clean(d);
}

static bool parked_with_the_pin_interrupted(const claim *c)
{
    return strcmp(c->op.phase, "parked") == 0 && claim_pin_failed(c);
}

/* The same, but N dies with the daemon (N and N+1 killed too): nothing is
 * left to resume, so the next daemon writes the claim parked and the pin
 * failed (interrupted) with N's build as its fallback, which a cold wake
 * runs instead of the unproven pin. */
static void test_swap_interrupted_with_n_dead_falls_back(void **state)
{
    dh_daemon *d = *state;
    claim n;
    int port = 0;
    dh_event exec;
    dh_served served = swap_held_before_publication(d, &n, &port, &exec);

    dh_step("kill the daemon, N and N+1, and start the daemon again");
    dh_kill(d);
    DH_CHECK(d,
             kill(served.pid, SIGKILL) == 0 && kill((pid_t)exec.pid, SIGKILL) == 0 &&
                 dh_pid_gone(served.pid) && dh_pid_gone((pid_t)exec.pid),
             "cannot kill N (pid %d) and N+1 (pid %" PRId64 ")", (int)served.pid, exec.pid);
    dh_start(d, NULL);
    claim c;
    DH_CHECK(d, dh_claim_wait(d, "demo", parked_with_the_pin_interrupted, 10000, &c),
             "after the restart the claim says %s with pin %s failed \"%s\"", c.op.phase,
             c.pin.version, c.pin.failure_reason);
    DH_CHECK(d,
             strcmp(c.pin.version, "v2") == 0 && strcmp(c.pin.failure_reason, "interrupted") == 0 &&
                 strcmp(c.pin.fallback_version, "v1") == 0 && !c.holder.starting_generation,
             "the pin is %s failed \"%s\" with fallback \"%s\", starting %" PRIu64
             "; expected v2 interrupted, fallback v1, nothing starting",
             c.pin.version, c.pin.failure_reason, c.pin.fallback_version,
             c.holder.starting_generation);
    dh_cold_wake_runs_fallback(d, "demo", port, "v1");
    dh_stop_and_check_clean(d);
}

/* A swap failed and wrote back (the claim names N under the swap's newer
 * session, its pin failed), then the daemon is killed: the next daemon
 * resumes N rather than retire it for a session its record does not name. */
static void test_failed_swap_then_a_kill_resumes_n(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    int port = dh_add_app_host(d, "demo", NULL, "MaxStarts=1\n");
    dh_stage_file(d, "demo", "v2", CRASHING_BUILD, false, NULL);
    dh_start(d, NULL);
    dh_served served = dh_wake(d, "demo");
    claim n = check_serving(d, served.generation, port);
    json_object *reply =
        dh_request(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}");
    DH_CHECK(d, !dh_reply_ok(reply), "a swap to a crashing build served: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    claim c;
    DH_CHECK(d, dh_claim_wait(d, "demo", swap_written_back, 10000, &c),
             "the failed swap was not written back");
    DH_CHECK(d, c.holder.generation == n.holder.generation && c.holder.session > n.holder.session,
             "after the failed swap the claim names generation %" PRIu64 " session %" PRIu64
             "; expected N = %" PRIu64 " under the swap's session, above %" PRIu64,
             c.holder.generation, c.holder.session, n.holder.generation, n.holder.session);

    dh_kill(d);
    dh_start(d, NULL);
    expect_n_answers(d, port, &served, "the restart");
    dh_expect_version(d, port, "v1");
    dh_stop_and_check_clean(d);
}

/* The host parks, and its parked write-back is attempted but finds the claim
 * moved past our admission (to what, written at revision): it is left. */
static void check_left_alone(dh_daemon *d, uint64_t revision, const char *what)
{
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_log_wait(d, "moved past our admission", 10000),
             "the parked write-back was not attempted, or did not see %s", what);
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after), "the claim disappeared");
    DH_CHECK(d, after.revision == revision && strcmp(after.op.phase, "parked") != 0,
             "the parked write-back changed %s (revision %" PRIu64 " -> %" PRIu64 ", phase %s)",
             what, revision, after.revision, after.op.phase);
}

/* Another daemon start on this box admitted itself (a newer session) while
 * ours still served: our park's write-back finds the claim moved on and
 * leaves it as it is. */
static void test_parked_write_leaves_a_newer_admission(void **state)
{
    dh_daemon *d = *state;
    claim serving = start_serving(d, NULL, NULL);
    claim newer = serving;
    snprintf(newer.holder.incarnation, sizeof(newer.holder.incarnation), "0123456789abcdef");
    newer.holder.session = serving.holder.session + 1;
    newer.holder.stamp_usec = serving.holder.stamp_usec + 1;
    uint64_t newer_revision = dh_claim_put(d, &newer);

    dh_park(d, "demo");
    check_left_alone(d, newer_revision, "a newer admission");
    dh_stop_and_check_clean(d);
}

/* Another box took the claim while our park was retiring the generation
 * (held before `failed`): the park's write-back leaves that box's claim. */
static void test_parked_write_leaves_another_box_claim(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    char hold[PATH_MAX], waiting[PATH_MAX + 64];
    dh_hold_path(d, "retire-go", hold, sizeof(hold));
    dh_start_holding(d, "failed", hold);
    dh_served served = dh_wake(d, "demo");
    claim serving = check_serving(d, served.generation, port);

    dh_park(d, "demo");
    snprintf(waiting, sizeof(waiting), "step failed held: waiting for %s", hold);
    DH_CHECK(d, dh_log_wait(d, waiting, 10000), "the park never paused before retiring");
    claim taken;
    dh_claim_taken_by_other_box(&serving, &taken);
    uint64_t taken_revision = dh_claim_put(d, &taken);
    touch(d, hold);
    check_left_alone(d, taken_revision, "another box's claim");
    dh_stop_and_check_clean(d);
}

/* A clean stop parks every host and waits for the claims to say so. */
static void test_clean_stop_leaves_the_claim_parked(void **state)
{
    dh_daemon *d = *state;
    claim serving = start_serving(d, NULL, NULL);
    dh_stop_and_check_clean(d);
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after), "the claim disappeared");
    DH_CHECK(d,
             strcmp(after.op.phase, "parked") == 0 && after.holder.handle[0] == '\0' &&
                 after.holder.session == serving.holder.session,
             "after a clean stop the claim says %s with handle \"%s\"", after.op.phase,
             after.holder.handle);
}

int main(int argc, char **argv)
{
    store_kind = dh_store_kind_from(argc > 1 ? argv[1] : NULL);
    char suite[64];
    snprintf(suite, sizeof(suite), "daemon-claim-truth-%s", argc > 1 ? argv[1] : "dir");
    int r = dh_check_can_run(suite, store_kind);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_operator_park_says_parked),
        DH_TEST(test_idle_park_says_parked),
        DH_TEST(test_exit_zero_says_parked),
        DH_TEST(test_give_up_says_failed_until_a_wake_serves),
        DH_TEST(test_swap_names_n_until_n_plus_1_is_published),
        DH_TEST(test_failed_swap_names_n_again),
        DH_TEST(test_swap_failed_before_its_write_back_resumes_n),
        DH_TEST(test_swap_interrupted_before_publication_resumes_n),
        DH_TEST(test_swap_interrupted_with_n_dead_falls_back),
        DH_TEST(test_failed_swap_then_a_kill_resumes_n),
        DH_TEST(test_parked_write_leaves_a_newer_admission),
        DH_TEST(test_parked_write_leaves_another_box_claim),
        DH_TEST(test_clean_stop_leaves_the_claim_parked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
