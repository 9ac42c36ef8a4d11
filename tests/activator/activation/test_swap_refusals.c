/* Swaps that must not run, or must run one way only, on the real
 * daemon:
 *   - to a version that is not staged, or whose staged file was tampered
 *     with, or whose name is a path: refused before anything starts (no exec,
 *     no new leaf, the claim untouched, N serving on);
 *   - a second swap while one is in flight: refused as busy;
 *   - an app that cannot run twice: an overlap swap fails (N serves on), a
 *     stop-first swap retires N before N+1 starts, with no refused request. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activation.h"

#ifndef AH_SINGLE_INSTANCE_BUILD
#error "AH_SINGLE_INSTANCE_BUILD must name the act-single-instance-build executable"
#endif

/* Sends a swap and returns its error code ("ok" for a success), with the
 * whole reply in text. */
static void swap(dh_daemon *d, const char *host, const char *version, const char *mode, char *code,
                 size_t code_size, char *text, size_t text_size)
{
    json_object *reply =
        dh_request(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"%s\",\"version\":\"%s\"%s%s%s}",
                   host, version, mode ? ",\"mode\":\"" : "", mode ? mode : "", mode ? "\"" : "");
    snprintf(code, code_size, "%s", dh_reply_code(reply));
    snprintf(text, text_size, "%s", json_object_to_json_string(reply));
    json_object_put(reply);
}

static void flip_a_byte(dh_daemon *d, const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    DH_CHECK(d, fd >= 0, "open %s: %s", path, strerror(errno));
    unsigned char byte;
    /* Far enough in to be code, not the ELF header. */
    off_t at = 4096 + 123;
    DH_CHECK(d, pread(fd, &byte, 1, at) == 1, "read %s: %s", path, strerror(errno));
    byte ^= 0x01;
    DH_CHECK(d, pwrite(fd, &byte, 1, at) == 1, "write %s: %s", path, strerror(errno));
    close(fd);
}

static void check_serves_as(dh_daemon *d, int port, const char *version, uint64_t generation,
                            pid_t pid)
{
    ah_sample s;
    int r = ah_get(port, &s);
    DH_CHECK(d, r == 0, "a request failed at %s: %s", s.failed_at, strerror(r));
    DH_CHECK(d, strcmp(s.version, version) == 0 && s.generation == generation && s.pid == pid,
             "answered by %s generation %" PRIu64 " pid %d, expected %s generation %" PRIu64
             " pid %d",
             s.version, s.generation, s.pid, version, generation, (int)pid);
}

static void test_swap_to_unstaged_or_tampered_version_starts_nothing(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_add_app_host(d, "web", NULL, NULL);
    dh_stage(d, "web", "v2", false, NULL);
    char staged[PATH_MAX];
    dh_staged_exec_path(d, "web", "v2", staged, sizeof(staged));
    flip_a_byte(d, staged);
    dh_start(d, NULL);
    uint64_t gen;
    pid_t pid;
    ah_wake_serving(d, "web", &gen, &pid);
    claim before;
    DH_CHECK(d, dh_claim_get(d, "web", &before), "no claim while serving");
    dh_events_mark(d);

    static const struct {
        const char *version;
        const char *code; /* NULL: any refusal */
    } cases[] = {
        {"v9", "not_staged"},
        {"v2", "digest_mismatch"},
        {"..", NULL},
        {"../v1", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char code[64], text[2048];
        swap(d, "web", cases[i].version, NULL, code, sizeof(code), text, sizeof(text));
        DH_CHECK(d, strcmp(code, "ok") != 0, "a swap to %s was accepted: %s", cases[i].version,
                 text);
        if (cases[i].code)
            DH_CHECK(d, strcmp(code, cases[i].code) == 0,
                     "a swap to %s was refused with %s, expected %s: %s", cases[i].version, code,
                     cases[i].code, text);
        DH_CHECK(d, strstr(text, "\"message\""), "the refusal says nothing: %s", text);
    }

    /* Nothing started, nothing was written, N serves on. */
    dh_events_pump(d, 300);
    DH_CHECK(d, dh_events_count(d, "web", "exec") == 0, "a refused swap exec'd something");
    DH_CHECK(d, dh_events_count(d, "web", "swap.started") == 0, "a refused swap started");
    DH_CHECK(d, dh_leaf_count(d, "web") == 1, "a refused swap made a leaf (%zu leaves)",
             dh_leaf_count(d, "web"));
    pid_t pids[8];
    DH_CHECK(d, dh_marker_pids(d, "web", pids, 8) == 1, "a refused swap ran the app");
    claim after;
    DH_CHECK(d, dh_claim_get(d, "web", &after), "the claim disappeared");
    DH_CHECK(d, after.revision == before.revision && !after.has_pin,
             "a refused swap changed the claim (revision %" PRIu64 " -> %" PRIu64 ", pin %s)",
             before.revision, after.revision, after.has_pin ? after.pin.version : "none");
    check_serves_as(d, port, "v1", gen, pid);
    dh_stop_and_check_clean(d);
}

static void test_second_swap_in_flight_is_busy(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* N+1 takes 1.5 s to be ready: the first swap is in flight that long. */
    int port = dh_add_app_host(d, "web", "--ready-delay-ms 1500", NULL);
    rel_identity v2;
    ah_stage_variant(d, "web", "v2", false, &v2);
    ah_stage_variant(d, "web", "v3", false, NULL);
    dh_start(d, NULL);
    uint64_t gen;
    pid_t pid;
    ah_wake_serving(d, "web", &gen, &pid);
    dh_events_mark(d);

    dh_async *first =
        dh_request_start(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"web\",\"version\":\"v2\"}");
    dh_event exec;
    DH_CHECK(d, dh_event_wait(d, "web", "exec", 10000, &exec), "the first swap exec'd nothing");
    char code[64], text[2048];
    swap(d, "web", "v3", NULL, code, sizeof(code), text, sizeof(text));
    DH_CHECK(d, strcmp(code, "busy") == 0, "a second swap during the first: expected busy, got %s",
             text);
    swap(d, "web", "v2", "stop-first", code, sizeof(code), text, sizeof(text));
    DH_CHECK(d, strcmp(code, "busy") == 0,
             "a stop-first swap during the first: expected busy, got %s", text);
    json_object *reply = dh_request_finish(d, first);
    DH_CHECK(d, dh_reply_ok(reply), "the first swap: %s", json_object_to_json_string(reply));
    json_object_put(reply);

    dh_events_pump(d, 300);
    DH_CHECK(d, dh_events_count(d, "web", "exec") == 1,
             "%zu generations started; the refused swaps must start none",
             dh_events_count(d, "web", "exec"));
    claim c;
    DH_CHECK(d, dh_claim_get(d, "web", &c), "no claim after the swap");
    DH_CHECK(d,
             c.has_pin && strcmp(c.pin.version, "v2") == 0 &&
                 strcmp(c.pin.digest, v2.build_digest) == 0 &&
                 c.holder.generation == exec.generation,
             "the claim pins %s and names generation %" PRIu64 ", expected v2 and %" PRIu64,
             c.has_pin ? c.pin.version : "(none)", c.holder.generation, exec.generation);
    check_serves_as(d, port, "v2", exec.generation, (pid_t)exec.pid);
    dh_stop_and_check_clean(d);
}

static void test_stop_first_for_an_app_that_cannot_run_twice(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_free_port();
    dh_write_app_host(d, "single", port, NULL, "MaxStarts=1\n");
    dh_stage_file(d, "single", "v1", AH_SINGLE_INSTANCE_BUILD, true, NULL);
    dh_stage_file(d, "single", "v2", AH_SINGLE_INSTANCE_BUILD, false, NULL);
    dh_start(d, NULL);
    uint64_t gen;
    pid_t pid;
    ah_wake_serving(d, "single", &gen, &pid);

    /* The app really cannot run twice: beside N, N+1 exits at once, the
     * overlap swap fails and N serves on. */
    dh_events_mark(d);
    char code[64], text[2048];
    swap(d, "single", "v2", "overlap", code, sizeof(code), text, sizeof(text));
    DH_CHECK(d, strcmp(code, "ok") != 0,
             "an overlap swap of an app that cannot run twice succeeded: %s", text);
    DH_CHECK(d, dh_event_wait(d, "single", "swap.failed", 5000, NULL), "no swap.failed event");
    check_serves_as(d, port, "v1", gen, pid);

    /* stop-first: N is retired, then N+1 starts; clients wait meanwhile. */
    ah_load *load = ah_current_load = ah_load_start(port, 1);
    DH_CHECK(d, ah_load_wait(load, 100, 30000), "the load made too few requests");
    dh_events_mark(d);
    uint64_t mark = d->mark;
    swap(d, "single", "v2", "stop-first", code, sizeof(code), text, sizeof(text));
    DH_CHECK(d, strcmp(code, "ok") == 0, "stop-first swap: %s", text);
    DH_CHECK(d, dh_event_wait(d, "single", "swap.done", 10000, NULL), "no swap.done event");
    DH_CHECK(d, ah_load_wait(load, ah_load_done(load) + 200, 30000),
             "the load made too few requests after the swap");
    size_t n = 0;
    const ah_sample *samples = ah_load_stop(load, &n);
    dh_events_pump(d, 100);

    const dh_event *retired = ah_find_event(d, "single", "retired", gen, mark);
    const dh_event *exec = ah_find_event(d, "single", "exec", 0, mark);
    DH_CHECK(d, retired && exec, "stop-first: no retired event of N or no exec of N+1");
    /* N's processes are proven gone (retired) before N+1's process exists
     * (exec): the two lifetimes do not overlap. */
    DH_CHECK(d, retired->seq < exec->seq && retired->time_usec <= exec->time_usec,
             "stop-first started generation %" PRIu64 " (pid %" PRId64 ") before generation "
             "%" PRIu64 " (pid %" PRId64 ") was retired",
             exec->generation, exec->pid, gen, retired->pid);
    DH_CHECK(d, retired->pid == pid, "the retired event names pid %" PRId64 ", N was pid %d",
             retired->pid, (int)pid);
    DH_CHECK(d, dh_events_count(d, "single", "exec") == 1,
             "N+1 was started %zu times (it fails when N still runs)",
             dh_events_count(d, "single", "exec"));
    size_t failures = 0;
    for (size_t i = 0; i < n; i++)
        failures += samples[i].error != 0;
    if (failures)
        ah_print_failures(samples, n);
    DH_CHECK(d, failures == 0, "%zu of %zu requests failed across the stop-first swap", failures,
             n);

    check_serves_as(d, port, "v2", exec->generation, (pid_t)exec->pid);
    DH_CHECK(d, kill(pid, 0) < 0 && errno == ESRCH, "N's app (pid %d) still runs", (int)pid);
    char leaf[32];
    snprintf(leaf, sizeof(leaf), "g-%" PRIu64, gen);
    DH_CHECK(d, !dh_leaf_exists(d, "single", leaf), "N's leaf %s is left", leaf);
    claim c;
    DH_CHECK(d, dh_claim_get(d, "single", &c), "no claim after the swap");
    DH_CHECK(d,
             c.holder.generation == exec->generation && c.has_pin &&
                 strcmp(c.pin.version, "v2") == 0 && c.pin.failure_reason[0] == '\0',
             "the claim names generation %" PRIu64 " and pin %s (failure \"%s\"), expected "
             "%" PRIu64 " and v2 without a failure",
             c.holder.generation, c.has_pin ? c.pin.version : "(none)", c.pin.failure_reason,
             exec->generation);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("activation-swap-refusals", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        AH_LOAD_TEST(test_swap_to_unstaged_or_tampered_version_starts_nothing),
        AH_LOAD_TEST(test_second_swap_in_flight_is_busy),
        AH_LOAD_TEST(test_stop_first_for_an_app_that_cannot_run_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
