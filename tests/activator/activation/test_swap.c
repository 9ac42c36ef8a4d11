/* Zero-downtime swaps under load, on the real daemon:
 *   - a swap while clients make requests continuously (over 2,000, each on
 *     a new connection): none fails or is refused; generation N is retired
 *     and its leaf removed; the claim names N+1 and pins the new build; every
 *     answer after the swap comes from the new build;
 *   - a swap to a build that never becomes ready: N serves every request
 *     before, during and after; swap.failed says ready_timeout; the claim
 *     keeps N and records the pin's failure. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activation.h"

#ifndef AH_NEVER_READY_BUILD
#error "AH_NEVER_READY_BUILD must name the act-never-ready-build executable"
#endif

/* The app answers each request 20 ms after it arrived, so that a generation
 * always has requests in flight when it is retired (only its grace period
 * lets them finish), and 16 client threads keep about 800 requests a second
 * going. */
#define APP_ARGS "--slow-response-ms 20"
#define LOAD_THREADS 16
#define MIN_REQUESTS 2000

static void check_no_failures(dh_daemon *d, const ah_sample *samples, size_t n)
{
    size_t failures = 0;
    for (size_t i = 0; i < n; i++)
        failures += samples[i].error != 0;
    if (failures)
        ah_print_failures(samples, n);
    DH_CHECK(d, failures == 0, "%zu of %zu requests failed", failures, n);
}

static void leaf_name(uint64_t generation, char *out, size_t size)
{
    snprintf(out, size, "g-%" PRIu64, generation);
}

static void test_swap_under_steady_load_refuses_nothing(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_add_app_host(d, "web", APP_ARGS, NULL);
    rel_identity v2;
    ah_stage_variant(d, "web", "v2", false, &v2);
    dh_start(d, NULL);
    uint64_t old_gen;
    pid_t old_pid;
    ah_wake_serving(d, "web", &old_gen, &old_pid);

    ah_load *load = ah_current_load = ah_load_start(port, LOAD_THREADS);
    DH_CHECK(d, ah_load_wait(load, 700, 30000), "the load made too few requests before the swap");
    dh_events_mark(d);
    uint64_t mark = d->mark;
    json_object *reply =
        dh_request(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"web\",\"version\":\"v2\"}");
    bool swapped = dh_reply_ok(reply);
    char reply_text[2048];
    snprintf(reply_text, sizeof(reply_text), "%s", json_object_to_json_string(reply));
    json_object_put(reply);
    DH_CHECK(d, swapped, "swap web v2: %s", reply_text);
    bool done = dh_event_wait(d, "web", "swap.done", 10000, NULL);
    DH_CHECK(d, done, "no swap.done event after the swap replied ok");
    /* As many requests again after the swap, and 2,000 in all. */
    size_t after_swap = ah_load_done(load) + 700;
    bool enough = ah_load_wait(load, after_swap > MIN_REQUESTS ? after_swap : MIN_REQUESTS, 60000);
    size_t n = 0;
    const ah_sample *samples = ah_load_stop(load, &n);
    DH_CHECK(d, enough, "only %zu requests were made across the swap", n);
    dh_events_pump(d, 100);

    const dh_event *started = ah_find_event(d, "web", "swap.started", 0, mark);
    const dh_event *finished = ah_find_event(d, "web", "swap.done", 0, mark);
    const dh_event *exec = ah_find_event(d, "web", "exec", 0, mark);
    const dh_event *retired = ah_find_event(d, "web", "retired", old_gen, mark);
    DH_CHECK(d, started && finished && exec, "the swap's events are missing");
    uint64_t new_gen = exec->generation;
    DH_CHECK(d, new_gen == old_gen + 1 && strcmp(exec->version, "v2") == 0,
             "the swap started generation %" PRIu64 " of %s, expected %" PRIu64 " of v2", new_gen,
             exec->version, old_gen + 1);
    DH_CHECK(d, retired && retired->seq < finished->seq,
             "generation %" PRIu64 " was not retired before swap.done", old_gen);

    check_no_failures(d, samples, n);
    size_t during = 0, from_new = 0;
    for (size_t i = 0; i < n; i++) {
        const ah_sample *s = &samples[i];
        bool is_old =
            strcmp(s->version, "v1") == 0 && s->generation == old_gen && s->pid == old_pid;
        bool is_new = strcmp(s->version, "v2") == 0 && s->generation == new_gen;
        DH_CHECK(d, is_old || is_new,
                 "request %zu was answered by version %s generation %" PRIu64 " pid %d", i,
                 s->version, s->generation, s->pid);
        if (s->end_usec < started->time_usec)
            DH_CHECK(d, is_old, "request %zu, before the swap, was answered by the new build", i);
        if (s->start_usec > finished->time_usec)
            DH_CHECK(d, is_new,
                     "request %zu, %.3f s after swap.done, was answered by the old generation", i,
                     ((double)s->start_usec - (double)finished->time_usec) / 1e6);
        during += s->end_usec >= started->time_usec && s->start_usec <= finished->time_usec;
        from_new += is_new;
    }
    fprintf(stderr, "%zu requests, %zu during the swap (%.3f s), %zu answered by v2\n", n, during,
            ((double)finished->time_usec - (double)started->time_usec) / 1e6, from_new);
    DH_CHECK(d, during > 0, "no request was in flight during the swap: the test proves nothing");

    /* N is gone with its leaf; N+1 serves in its own. */
    char leaf[32];
    leaf_name(old_gen, leaf, sizeof(leaf));
    DH_CHECK(d, !dh_leaf_exists(d, "web", leaf), "the retired generation's leaf %s is left", leaf);
    DH_CHECK(d, kill(old_pid, 0) < 0 && errno == ESRCH,
             "the retired generation's app (pid %d) still runs", (int)old_pid);
    leaf_name(new_gen, leaf, sizeof(leaf));
    DH_CHECK(d, dh_leaf_exists(d, "web", leaf) && dh_leaf_count(d, "web") == 1,
             "expected the one leaf %s, found %zu leaves", leaf, dh_leaf_count(d, "web"));

    /* The claim names N+1 and pins the new build. */
    claim c;
    DH_CHECK(d, dh_claim_get(d, "web", &c), "no claim after the swap");
    char port_text[16];
    snprintf(port_text, sizeof(port_text), ":%d", port);
    DH_CHECK(d,
             c.holder.generation == new_gen && strcmp(c.op.phase, "serving") == 0 &&
                 strstr(c.holder.handle, port_text),
             "the claim names generation %" PRIu64 " in phase %s with handle \"%s\", expected "
             "%" PRIu64 " serving on port %d",
             c.holder.generation, c.op.phase, c.holder.handle, new_gen, port);
    DH_CHECK(d,
             c.has_pin && strcmp(c.pin.version, "v2") == 0 &&
                 strcmp(c.pin.digest, v2.build_digest) == 0 && c.pin.failure_reason[0] == '\0',
             "the claim's pin is %s %s (failure \"%s\"), expected v2 %s",
             c.has_pin ? c.pin.version : "(none)", c.pin.digest, c.pin.failure_reason,
             v2.build_digest);
    json_object *status = dh_status(d, "web");
    bool serving_new = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                       dh_json_u64(status, "generation") == new_gen &&
                       strcmp(dh_json_str(status, "version"), "v2") == 0;
    char status_text[1024];
    snprintf(status_text, sizeof(status_text), "%s", json_object_to_json_string(status));
    json_object_put(status);
    DH_CHECK(d, serving_new, "status after the swap: %s", status_text);
    dh_stop_and_check_clean(d);
}

static void test_swap_to_never_ready_build_keeps_n_serving(void **state)
{
    dh_daemon *d = *state;
    enum { MAX_STARTS = 2 };
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_add_app_host(d, "web", APP_ARGS, "ReadyTimeoutSec=1\nMaxStarts=2\n");
    rel_identity v2;
    dh_stage_file(d, "web", "v2", AH_NEVER_READY_BUILD, false, &v2);
    dh_start(d, NULL);
    uint64_t gen;
    pid_t pid;
    ah_wake_serving(d, "web", &gen, &pid);

    ah_load *load = ah_current_load = ah_load_start(port, LOAD_THREADS);
    DH_CHECK(d, ah_load_wait(load, 300, 30000), "the load made too few requests before the swap");
    dh_events_mark(d);
    uint64_t mark = d->mark;
    json_object *reply =
        dh_request(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"web\",\"version\":\"v2\"}");
    char reply_text[2048];
    snprintf(reply_text, sizeof(reply_text), "%s", json_object_to_json_string(reply));
    bool refused_ready_timeout =
        !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "ready_timeout") == 0;
    json_object_put(reply);
    dh_event failed;
    bool published = dh_event_wait(d, "web", "swap.failed", 10000, &failed);
    /* Requests go on after the failure: N must still serve them. */
    bool enough = ah_load_wait(load, ah_load_done(load) + 500, 30000);
    size_t n = 0;
    const ah_sample *samples = ah_load_stop(load, &n);
    DH_CHECK(d, refused_ready_timeout,
             "swap to a never-ready build: expected ready_timeout, got %s", reply_text);
    DH_CHECK(d, published, "no swap.failed event");
    DH_CHECK(d, strcmp(failed.reason, "ready_timeout") == 0,
             "swap.failed says reason \"%s\", expected ready_timeout", failed.reason);
    DH_CHECK(d, enough, "the load made too few requests after the failed swap");
    dh_events_pump(d, 100);
    const dh_event *started = ah_find_event(d, "web", "swap.started", 0, mark);
    DH_CHECK(d, started, "no swap.started event");

    /* Every request was answered, and by N once the swap had failed. While
     * N+1 ran it shared N's sockets, and this build serves without being
     * ready, so it may have answered some then. */
    check_no_failures(d, samples, n);
    size_t from_n_plus_1 = 0;
    for (size_t i = 0; i < n; i++) {
        const ah_sample *s = &samples[i];
        bool from_n = strcmp(s->version, "v1") == 0 && s->generation == gen && s->pid == pid;
        from_n_plus_1 += !from_n;
        if (s->end_usec < started->time_usec || s->start_usec > failed.time_usec)
            DH_CHECK(d, from_n,
                     "request %zu, outside the swap, was answered by version %s generation "
                     "%" PRIu64 " pid %d instead of N (v1, generation %" PRIu64 ", pid %d)",
                     i, s->version, s->generation, s->pid, gen, (int)pid);
    }
    fprintf(stderr, "%zu requests, %zu answered by the never-ready generation while it ran\n", n,
            from_n_plus_1);

    /* Each attempt of N+1 ran, timed out and was retired with proof. */
    size_t execs = dh_events_count(d, "web", "exec");
    DH_CHECK(d, execs == MAX_STARTS, "%zu attempts of the swap ran, expected %d", execs,
             MAX_STARTS);
    const dh_event *exec = ah_find_event(d, "web", "exec", 0, mark);
    DH_CHECK(d, exec->generation != gen && strcmp(exec->version, "v2") == 0,
             "the swap's attempt ran generation %" PRIu64 " of %s", exec->generation,
             exec->version);
    DH_CHECK(d, ah_find_event(d, "web", "retired", exec->generation, mark),
             "the never-ready generation was not retired with proof");
    char leaf[32];
    leaf_name(gen, leaf, sizeof(leaf));
    DH_CHECK(d, dh_leaf_exists(d, "web", leaf) && dh_leaf_count(d, "web") == 1,
             "expected only N's leaf %s, found %zu leaves", leaf, dh_leaf_count(d, "web"));
    DH_CHECK(d, kill(pid, 0) == 0, "N's app (pid %d) is gone", (int)pid);

    /* The claim keeps N and records the pin's failure. */
    claim c;
    DH_CHECK(d, dh_claim_get(d, "web", &c), "no claim after the failed swap");
    char port_text[16];
    snprintf(port_text, sizeof(port_text), ":%d", port);
    DH_CHECK(d,
             c.holder.generation == gen && strcmp(c.op.phase, "serving") == 0 &&
                 strstr(c.holder.handle, port_text),
             "the claim names generation %" PRIu64 " in phase %s with handle \"%s\", expected "
             "N = %" PRIu64 " serving on port %d",
             c.holder.generation, c.op.phase, c.holder.handle, gen, port);
    DH_CHECK(d,
             c.has_pin && strcmp(c.pin.version, "v2") == 0 &&
                 strcmp(c.pin.failure_reason, "ready_timeout") == 0 && c.pin.failure_message[0],
             "the claim does not record the pin's failure: pin %s, failure \"%s\" (\"%s\")",
             c.has_pin ? c.pin.version : "(none)", c.pin.failure_reason, c.pin.failure_message);
    json_object *status = dh_status(d, "web");
    bool serving_n = strcmp(dh_json_str(status, "state"), "serving") == 0 &&
                     dh_json_u64(status, "generation") == gen &&
                     strcmp(dh_json_str(status, "version"), "v1") == 0;
    char status_text[1024];
    snprintf(status_text, sizeof(status_text), "%s", json_object_to_json_string(status));
    json_object_put(status);
    DH_CHECK(d, serving_n, "status after the failed swap: %s", status_text);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("activation-swap", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        AH_LOAD_TEST(test_swap_under_steady_load_refuses_nothing),
        AH_LOAD_TEST(test_swap_to_never_ready_build_keeps_n_serving),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
