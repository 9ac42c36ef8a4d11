/* activatord end to end, on the dir store or on a real etcd, plain or over
 * TLS with client certificates (argv[1]: dir, etcd, etcd-tls): stage
 * a build, assign the claim, wake the host, and check everything that says
 * it serves: the app answers over HTTP, the claim names this box, the phase
 * and the generation, the build state names the build, the events of the
 * wake arrive in order with no sequence gap, and a SIGTERM stops the daemon
 * with nothing left behind, also while a host serves or wakes. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static dh_store_kind store_kind = DH_STORE_DIR;

/* Parses "demo version=V generation=G pid=P" as act-testapp answers. */
static void parse_answer(dh_daemon *d, const char *body, char *version, size_t version_size,
                         uint64_t *generation, int64_t *pid)
{
    char version_buf[80] = "";
    unsigned long long gen = 0;
    long long p = 0;
    DH_CHECK(d,
             sscanf(body, "demo version=%79s generation=%llu pid=%lld", version_buf, &gen, &p) == 3,
             "unexpected answer from the app: %s", body);
    snprintf(version, version_size, "%s", version_buf);
    *generation = gen;
    *pid = p;
}

static bool pid_in_leaf(dh_daemon *d, const char *host, uint64_t generation, int64_t pid)
{
    char path[PATH_MAX + 200];
    snprintf(path, sizeof(path), "%s/hosts/%s/g-%" PRIu64 "/cgroup.procs", d->drv.cgroup_path, host,
             generation);
    char *procs = dh_read_text(path);
    bool found = false;
    for (char *line = procs ? strtok(procs, "\n") : NULL; line; line = strtok(NULL, "\n"))
        found = found || atoll(line) == pid;
    free(procs);
    return found;
}

static void check_build_state(dh_daemon *d, const char *host, const char *version,
                              const char *build_digest, uint64_t generation)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/%s/build-state.json", d->drv.state_dir, host);
    char *text = dh_read_text(path);
    DH_CHECK(d, text, "%s does not exist while the host serves", path);
    json_object *state = json_tokener_parse(text);
    DH_CHECK(d, state, "%s is not JSON: %s", path, text);
    json_object *build = NULL;
    DH_CHECK(d, json_object_object_get_ex(state, "build", &build), "%s has no build: %s", path,
             text);
    DH_CHECK(d, strcmp(dh_json_str(build, "version"), version) == 0,
             "%s names version %s, expected %s", path, dh_json_str(build, "version"), version);
    DH_CHECK(d, strcmp(dh_json_str(build, "build_digest"), build_digest) == 0,
             "%s names build digest %s, expected %s", path, dh_json_str(build, "build_digest"),
             build_digest);
    DH_CHECK(d, dh_json_u64(state, "generation") == generation,
             "%s names generation %" PRIu64 ", expected %" PRIu64, path,
             dh_json_u64(state, "generation"), generation);
    json_object_put(state);
    free(text);
}

/* Stage and assign through the control socket, wake, and check every place
 * that says the host serves. */
static void test_stage_assign_wake_serves(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    int port = dh_free_port();
    dh_write_app_host(d, "demo", port, NULL, NULL);
    dh_start(d, NULL);

    json_object *reply =
        dh_request(d, 30000,
                   "{\"v\":1,\"op\":\"stage\",\"host\":\"demo\",\"version\":\"v1\",\"path\":\"%s\","
                   "\"promote\":true}",
                   DH_E2E_APP);
    DH_CHECK(d, dh_reply_ok(reply), "stage: %s", json_object_to_json_string(reply));
    char digest[80];
    snprintf(digest, sizeof(digest), "%s", dh_json_str(dh_reply_result(reply), "digest"));
    DH_CHECK(d, strlen(digest) == 64, "stage reply has no build digest: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);

    reply = dh_request(
        d, 30000, "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"demo\",\"box\":\"" DH_BOX "\"}");
    DH_CHECK(d, dh_reply_ok(reply), "claim.assign: %s", json_object_to_json_string(reply));
    json_object_put(reply);

    reply = dh_request(d, 30000, "{\"v\":1,\"op\":\"version\"}");
    DH_CHECK(d, dh_reply_ok(reply), "version: %s", json_object_to_json_string(reply));
    char incarnation[80];
    snprintf(incarnation, sizeof(incarnation), "%s",
             dh_json_str(dh_reply_result(reply), "incarnation"));
    json_object_put(reply);

    reply = dh_wake_reply(d, "demo", 30000);
    DH_CHECK(d, dh_reply_ok(reply), "wake: %s", json_object_to_json_string(reply));
    json_object *result = dh_reply_result(reply);
    uint64_t generation = dh_json_u64(result, "generation");
    int64_t pid = (int64_t)dh_json_u64(result, "pid");
    DH_CHECK(d, strcmp(dh_json_str(result, "state"), "serving") == 0 && generation > 0 && pid > 0,
             "wake reply does not describe a serving generation: %s",
             json_object_to_json_string(reply));
    DH_CHECK(d,
             strcmp(dh_json_str(result, "version"), "v1") == 0 &&
                 strcmp(dh_json_str(result, "digest"), digest) == 0,
             "wake reply names another build: %s", json_object_to_json_string(reply));
    json_object_put(reply);

    /* The app itself answers, and says which generation it is. */
    char body[1024], version[80];
    int n = dh_http_get(port, body, sizeof(body));
    DH_CHECK(d, n > 0, "GET http://127.0.0.1:%d/: %s", port, strerror(-n));
    uint64_t answered_generation;
    int64_t answered_pid;
    parse_answer(d, body, version, sizeof(version), &answered_generation, &answered_pid);
    DH_CHECK(d,
             strcmp(version, "v1") == 0 && answered_generation == generation && answered_pid == pid,
             "the app answered \"%s\", expected version v1 generation %" PRIu64 " pid %" PRId64,
             body, generation, pid);

    /* The claim: serving, this box, this daemon's incarnation, the generation. */
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "no claim for demo after the wake");
    DH_CHECK(d, strcmp(c.op.phase, "serving") == 0, "claim phase is %s, expected serving",
             c.op.phase);
    DH_CHECK(d, strcmp(claim_executor(&c), DH_BOX) == 0 && strcmp(c.holder.box, DH_BOX) == 0,
             "claim executor %s, holder %s; expected " DH_BOX, claim_executor(&c), c.holder.box);
    DH_CHECK(d, c.holder.generation == generation,
             "claim names generation %" PRIu64 ", the app is generation %" PRIu64,
             c.holder.generation, generation);
    DH_CHECK(d, strcmp(c.holder.incarnation, incarnation) == 0,
             "claim names incarnation %s, the daemon is %s", c.holder.incarnation, incarnation);
    char port_text[16];
    snprintf(port_text, sizeof(port_text), ":%d", port);
    DH_CHECK(d, strstr(c.holder.handle, port_text), "claim handle %s does not name port %d",
             c.holder.handle, port);

    check_build_state(d, "demo", "v1", digest, generation);

    /* One attempt ran, in the generation's own leaf, with its record. */
    pid_t pids[8];
    DH_CHECK(d, dh_marker_pids(d, "demo", pids, 8) == 1 && pids[0] == pid,
             "the app should have run once as pid %" PRId64, pid);
    DH_CHECK(d, pid_in_leaf(d, "demo", generation, pid),
             "pid %" PRId64 " is not in leaf g-%" PRIu64, pid, generation);
    DH_CHECK(d, dh_generation_records(d, "demo") == 1, "expected one generation record, found %zu",
             dh_generation_records(d, "demo"));

    dh_stop_and_check_clean(d);
    DH_CHECK(d, dh_generation_records(d, "demo") == 0,
             "generation records left after a clean stop: %zu", dh_generation_records(d, "demo"));
}

/* Issue 6: a subscriber sees every event of a wake, in order, from this box,
 * with consecutive sequence numbers. */
static void test_wake_events_in_order_without_gaps(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    claim assigned;
    dh_claim_assigned("demo", DH_BOX, &assigned);
    dh_claim_put(d, &assigned);
    dh_start(d, NULL);

    dh_events_mark(d);
    uint64_t mark = d->mark;
    dh_served served = dh_wake(d, "demo");
    uint64_t generation = served.generation;
    int64_t pid = served.pid;
    DH_CHECK(d, dh_event_wait(d, "demo", "serving", 5000, NULL), "no serving event");

    static const char *const expected[] = {"waking", "admitted",  "exec",
                                           "ready",  "published", "serving"};
    size_t next = 0;
    uint64_t previous_seq = mark, previous_time = 0;
    for (size_t i = 0; i < d->n_events; i++) {
        const dh_event *event = &d->events[i];
        if (event->seq <= mark)
            continue;
        DH_CHECK(d, event->seq == previous_seq + 1,
                 "sequence gap: event %s of %s has seq %" PRIu64 " after %" PRIu64, event->name,
                 event->host, event->seq, previous_seq);
        DH_CHECK(d, strcmp(event->box, DH_BOX) == 0, "event %s names box \"%s\"", event->name,
                 event->box);
        DH_CHECK(d, event->time_usec >= previous_time, "event %s goes back in time", event->name);
        previous_seq = event->seq;
        previous_time = event->time_usec;
        if (strcmp(event->host, "demo") != 0 || strcmp(event->name, "claim.changed") == 0)
            continue;
        DH_CHECK(d, next < 6 && strcmp(event->name, expected[next]) == 0,
                 "event %zu of the wake is %s, expected %s", next, event->name,
                 next < 6 ? expected[next] : "(nothing more)");
        if (next >= 2) {
            DH_CHECK(d, event->generation == generation && strcmp(event->version, "v1") == 0,
                     "event %s names generation %" PRIu64 " version %s, expected %" PRIu64 " v1",
                     event->name, event->generation, event->version, generation);
            DH_CHECK(d, event->pid == pid, "event %s names pid %" PRId64 ", expected %" PRId64,
                     event->name, event->pid, pid);
        }
        next++;
    }
    DH_CHECK(d, next == 6, "only %zu of the 6 events of a wake arrived", next);
    dh_stop_and_check_clean(d);
}

/* A SIGTERM while an app serves: the daemon retires it with proof, exits 0,
 * and the app's port stops answering. */
static void test_sigterm_while_serving(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, store_kind, "demo", NULL, NULL);
    dh_wake(d, "demo");
    char body[1024];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "the app does not answer");

    dh_stop_and_check_clean(d);
    int n = dh_http_get(port, body, sizeof(body));
    DH_CHECK(d, n == -ECONNREFUSED, "port %d still answers after the daemon stopped (%d: %s)", port,
             n, n > 0 ? body : strerror(-n));
}

/* A SIGTERM while a wake is in flight (the app takes its time to be ready):
 * the started generation is retired with proof too. */
static void test_sigterm_while_waking(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, store_kind, "demo", "--ready-delay-ms 4000", NULL);
    dh_events_mark(d);
    dh_wake_started(d, "demo");
    DH_CHECK(d, dh_event_wait(d, "demo", "exec", 10000, NULL), "no exec event");
    DH_CHECK(d, dh_marker_wait(d, "demo", 1, 5000), "the app did not start");
    dh_stop_and_check_clean(d);
}

/* What systemd sees: the listening sockets kept in its FD store by name, and
 * STATUS= counting hosts by state as they change. */
static void test_notify_socket_fd_store_and_status(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, store_kind, "demo", NULL, NULL);

    char names[512], status[256];
    unsigned stored = dh_notify_stored_fds(d, names, sizeof(names));
    DH_CHECK(d, stored == 1 && strcmp(names, "demo/0") == 0,
             "expected demo's one socket in the FD store as demo/0, got %u fds named \"%s\"",
             stored, names);
    DH_CHECK(d, dh_notify_status_wait(d, "0 serving", 1000, status, sizeof(status)),
             "STATUS= after start: \"%s\"", status);

    dh_wake(d, "demo");
    DH_CHECK(d, dh_notify_status_wait(d, "1 serving", 2000, status, sizeof(status)),
             "STATUS= does not count the serving host: \"%s\"", status);
    dh_stop_and_check_clean(d);
}

/* Many hosts: a start stores their sockets in runs, and every one of them,
 * in order and once, reaches the FD store before READY=1 (40: two runs of
 * 16 and what is left for the last). */
static void test_every_socket_reaches_the_fd_store(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    char expected[512] = "";
    for (int i = 0; i < 40; i++) {
        char host[8];
        snprintf(host, sizeof(host), "w%02d", i);
        dh_write_host(d, host, "[Host]\nExec=bin/x\n[Listen]\nListenStream=%s/%s.sock\n",
                      d->drv.dir, host);
        snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "%s%s/0",
                 i ? " " : "", host);
    }
    dh_start(d, NULL);
    char names[512];
    unsigned stored = dh_notify_stored_fds(d, names, sizeof(names));
    DH_CHECK(d, stored == 40 && strcmp(names, expected) == 0,
             "expected the 40 sockets in the FD store at READY=1 as \"%s\", got %u fds named "
             "\"%s\"",
             expected, stored, names);
    dh_stop_and_check_clean(d);
}

/* Another box named executor under a serving host: the local generation is
 * retired with proof at once, and the other box's claim is left alone. */
static void test_claim_taken_while_serving_retires_the_generation(void **state)
{
    dh_daemon *d = *state;
    dh_start_with_host(d, store_kind, "demo", NULL, NULL);
    int64_t pid = dh_wake(d, "demo").pid;
    dh_events_mark(d);

    claim serving;
    DH_CHECK(d, dh_claim_get(d, "demo", &serving), "no claim while serving");
    claim taken;
    dh_claim_taken_by_other_box(&serving, &taken);
    uint64_t taken_revision = dh_claim_put(d, &taken);

    DH_CHECK(d, dh_event_wait(d, "demo", "retired", 10000, NULL),
             "the generation was not retired after another box took the claim");
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo did not park");
    DH_CHECK(d, dh_leaf_count(d, "demo") == 0, "the retired generation's leaf is left");
    DH_CHECK(d, kill((pid_t)pid, 0) < 0 && errno == ESRCH,
             "the retired generation's app (pid %" PRId64 ") still runs", pid);
    claim after;
    DH_CHECK(d, dh_claim_get(d, "demo", &after), "the claim disappeared");
    DH_CHECK(d, after.revision == taken_revision,
             "the daemon wrote over the other box's claim (revision %" PRIu64 " -> %" PRIu64 ")",
             taken_revision, after.revision);
    dh_stop_and_check_clean(d);
}

int main(int argc, char **argv)
{
    store_kind = dh_store_kind_from(argc > 1 ? argv[1] : NULL);
    char suite[64];
    snprintf(suite, sizeof(suite), "daemon-e2e-%s", argc > 1 ? argv[1] : "dir");
    int r = dh_check_can_run(suite, store_kind);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_stage_assign_wake_serves),
        DH_TEST(test_wake_events_in_order_without_gaps),
        DH_TEST(test_notify_socket_fd_store_and_status),
        DH_TEST(test_every_socket_reaches_the_fd_store),
        DH_TEST(test_sigterm_while_serving),
        DH_TEST(test_sigterm_while_waking),
        DH_TEST(test_claim_taken_while_serving_retires_the_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
