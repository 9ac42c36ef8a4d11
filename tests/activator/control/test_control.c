/* The control server over real NNG ipc sockets: bad requests get error
 * replies and the server keeps serving, a long request does not block status,
 * a peer without a role is refused, a viewer may only read, and activatorctl
 * reports an absent daemon with exit status 3. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <nng/nng.h>

#include "activator/control/ipc_heal.h"
#include "common/clock.h"
#include "control_harness.h"
#include "tests/driver/daemon_driver.h"

static const char *activatorctl;

/* Parses a reply and checks ok and (for failures) the error code. */
static void expect_reply(const char *reply, bool ok, const char *code)
{
    json_object *obj = json_tokener_parse(reply);
    if (!obj)
        fail_msg("reply is not JSON: %s", reply);
    json_object *ok_value, *error, *code_value, *message;
    assert_true(json_object_object_get_ex(obj, "ok", &ok_value));
    if (json_object_get_boolean(ok_value) != ok)
        fail_msg("reply %s: wanted ok=%d", reply, ok);
    if (!ok) {
        assert_true(json_object_object_get_ex(obj, "error", &error));
        assert_true(json_object_object_get_ex(error, "code", &code_value));
        assert_true(json_object_object_get_ex(error, "message", &message));
        if (strcmp(json_object_get_string(code_value), code) != 0)
            fail_msg("reply %s: wanted code %s", reply, code);
        assert_true(strlen(json_object_get_string(message)) > 10);
    }
    json_object_put(obj);
}

static void expect_status_ok(const char *url)
{
    char *reply = NULL;
    const char *status = "{\"v\":1,\"op\":\"status\"}";
    assert_int_equal(dd_request_nng(url, status, strlen(status), 5000, &reply), 0);
    expect_reply(reply, true, NULL);
    assert_non_null(strstr(reply, "\"web1\""));
    free(reply);
}

/* A REQ peer's exchange on a plain connection to url's socket file: its SP
 * header, then the header of a message of announced bytes (type 1, then
 * the length, 64 bits big-endian: NNG's IPC framing) and payload (the
 * message, or the start of one). Returns how many bytes came back before
 * the server closed the connection (*closed) or timeout_ms passed; the
 * server's own SP header is the first 8. Not an NNG client: one whose
 * connection is dropped loses its dialer and pipe now and then (NNG
 * 1.5.2), which LeakSanitizer would report as ours. */
static size_t raw_exchange(const char *url, uint64_t announced, const void *payload, size_t n,
                           int timeout_ms, bool *closed)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    const char *path = url + strlen("ipc://");
    assert_true(strlen(path) < sizeof(addr.sun_path));
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    uint8_t head[8 + 9] = {0, 'S', 'P', 0, 0, 0x30, 0, 0, 1};
    for (int i = 0; i < 8; i++)
        head[9 + i] = (uint8_t)(announced >> (56 - 8 * i));
    /* The server may close before it took all of it. */
    (void)!write(fd, head, sizeof(head));
    (void)!write(fd, payload, n);
    size_t got = 0;
    char buf[4096];
    *closed = false;
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = act_now_usec();
        if (now >= deadline || poll(&pfd, 1, (int)((deadline - now) / 1000) + 1) <= 0)
            break;
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r <= 0) {
            *closed = true;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    return got;
}

/* Above the transport limit the server drops the connection, answering
 * nothing; the same framing within the limit is answered (so the drop is
 * the size's). */
static void expect_oversized_message_dropped(const char *url)
{
    static const char status[] = "{\"v\":1,\"op\":\"status\"}";
    uint8_t request[4 + sizeof(status) - 1] = {0x80, 0, 0, 1}; /* a REQ request id */
    memcpy(request + 4, status, sizeof(status) - 1);
    bool closed;
    size_t got = raw_exchange(url, sizeof(request), request, sizeof(request), 2000, &closed);
    assert_true(got > 8 + 9 + 4);
    got = raw_exchange(url, CTRL_RECV_MAX_BYTES + 1024, request, sizeof(request), 5000, &closed);
    assert_true(closed);
    assert_true(got <= 8);
}

/* A fresh client's status is answered within a heal of the listener: a
 * connection dropped mid-message can wedge NNG 1.5.2's IPC listener, which
 * the server notices and replaces within a probe's period and timeout
 * (ipc_heal.h); the rest is slack for a loaded machine. A wedged listener
 * takes a request and never answers it, so each try waits 1 s. */
static void expect_status_ok_within_a_heal(const char *url)
{
    const char *status = "{\"v\":1,\"op\":\"status\"}";
    uint64_t deadline = act_now_usec() + IPC_HEAL_PERIOD_USEC + IPC_HEAL_TIMEOUT_USEC +
                        3500 * 1000ull;
    char *reply = NULL;
    int rv;
    while ((rv = dd_request_nng(url, status, strlen(status), 1000, &reply)) != 0 &&
           act_now_usec() < deadline)
        ;
    if (rv != 0)
        fail_msg("status after a dropped connection: %s, still past a heal of the listener",
                 nng_strerror(rv));
    expect_reply(reply, true, NULL);
    assert_non_null(strstr(reply, "\"web1\""));
    free(reply);
}

static void test_bad_requests_then_status(void **state)
{
    harness h;
    assert_int_equal(harness_start(&h, NULL), 0);
    static const struct {
        const char *body;
        const char *code;
    } cases[] = {
        {"not json at all", "bad_json"},
        {"{\"v\":1,\"op\":\"status\"", "bad_json"},
        {"[]", "bad_type"},
        {"{\"v\":1,\"op\":42}", "bad_type"},
        {"{\"v\":1,\"op\":\"wake\",\"host\":true}", "bad_type"},
        {"{\"v\":1,\"op\":\"explode\"}", "unknown_op"},
        {"{\"v\":1,\"op\":\"wake\"}", "missing_field"},
        {"{\"op\":\"status\"}", "missing_field"},
        {"{\"v\":1,\"op\":\"wake\",\"host\":\"../../etc/passwd\"}", "bad_name"},
        {"{\"v\":1,\"op\":\"swap\",\"host\":\"web1\",\"version\":\"a/b\"}", "bad_name"},
        {"{\"v\":9,\"op\":\"status\"}", "bad_protocol_version"},
        {"{\"v\":1,\"op\":\"status\",\"extra\":1}", "unknown_field"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *reply = NULL;
        int rv = dd_request_nng(h.url, cases[i].body, strlen(cases[i].body), 5000, &reply);
        if (rv != 0)
            fail_msg("request %s: %s", cases[i].body, nng_strerror(rv));
        expect_reply(reply, false, cases[i].code);
        free(reply);
        expect_status_ok(h.url);
    }

    /* A 1 MiB body is answered with too_large, not just dropped. */
    size_t big = 1024 * 1024;
    char *body = malloc(big);
    memset(body, 'x', big);
    char *reply = NULL;
    assert_int_equal(dd_request_nng(h.url, body, big, 10000, &reply), 0);
    expect_reply(reply, false, "too_large");
    assert_non_null(strstr(reply, "1048576 bytes"));
    free(reply);

    /* Above the transport limit the connection is dropped; the server keeps
     * serving everyone else (within a heal, when the drop wedged NNG's
     * listener). */
    free(body);
    expect_oversized_message_dropped(h.url);
    expect_status_ok_within_a_heal(h.url);

    /* A peer that sends garbage at the socket level: nothing breaks. */
    expect_status_ok(h.url);
    harness_stop(&h);
}

typedef struct slow_client {
    const char *url;
    atomic_bool done;
    int rv;
    char *reply;
} slow_client;

static void *send_slow_wake(void *arg)
{
    slow_client *c = arg;
    const char *wake = "{\"v\":1,\"op\":\"wake\",\"host\":\"slow\"}";
    c->rv = dd_request_nng(c->url, wake, strlen(wake), 10000, &c->reply);
    atomic_store(&c->done, true);
    return NULL;
}

static void test_long_request_does_not_block_status(void **state)
{
    harness h;
    assert_int_equal(harness_start(&h, NULL), 0);
    slow_client clients[3] = {{.url = h.url}, {.url = h.url}, {.url = h.url}};
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, send_slow_wake, &clients[i]), 0);
    /* The wakes reached the server and occupy their contexts. */
    assert_true(harness_wait_slow_wakes(&h, 3, 5000));
    for (int i = 0; i < 20; i++)
        expect_status_ok(h.url);
    /* Every status was answered while the wakes (1.5 s each) were still
     * waiting: they hold three contexts and block none of the others. */
    for (int i = 0; i < 3; i++)
        assert_false(atomic_load(&clients[i].done));
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(clients[i].rv, 0);
        expect_reply(clients[i].reply, true, NULL);
        assert_non_null(strstr(clients[i].reply, "\"generation\":7"));
        free(clients[i].reply);
    }
    harness_stop(&h);
}

static void test_socket_mode(void **state)
{
    harness h;
    assert_int_equal(harness_start(&h, NULL), 0);
    char path[200];
    snprintf(path, sizeof(path), "%s/control.ipc", h.dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    harness_stop(&h);
}

/* activatorctl ARGS... as uid 65534 (primary group 65534) holding the n
 * supplementary groups; its exit status, with its output in out. */
static int ctl_as_nobody(const harness *h, const gid_t *groups, size_t n, const char *const *args,
                         char *out, size_t size)
{
    const char *argv[16] = {activatorctl, "--connect", h->url};
    size_t argc = 3;
    for (; *args && argc < 15; args++)
        argv[argc++] = *args;
    argv[argc] = NULL;
    return dd_run_as_groups((char *const *)argv, 65534, 65534, groups, n, out, size);
}

static const gid_t nobody_only[] = {65534};

static void test_unprivileged_peer_refused(void **state)
{
    if (geteuid() != 0) {
        print_message("skipped: switching to uid 65534 needs root\n");
        skip();
    }
    /* Mode 0666 lets uid 65534 connect at all, so the role check (not the
     * file mode) is what refuses it. */
    ctrl_options open_mode = {.ipc_permissions = 0666};
    harness h;
    assert_int_equal(harness_start(&h, &open_mode), 0);
    char out[4096];
    int status = ctl_as_nobody(&h, nobody_only, 1, (const char *const[]){"status", NULL}, out,
                               sizeof(out));
    if (status != 1 || !strstr(out, "op status needs the viewer role") ||
        !strstr(out, "this peer (uid 65534) has no role here") ||
        !strstr(out, "neither ControlGroup= nor ViewerGroup= is set") || !strstr(out, "[forbidden]"))
        fail_msg("activatorctl as uid 65534: status %d, output:\n%s", status, out);
    /* root still gets through. */
    expect_status_ok(h.url);
    harness_stop(&h);

    /* With ControlGroup=65534 the same peer is admitted, as an operator. */
    ctrl_options with_group = {
        .ipc_permissions = 0666, .access = {.control_group = "65534", .control_gid = 65534}};
    assert_int_equal(harness_start(&h, &with_group), 0);
    status = ctl_as_nobody(&h, nobody_only, 1, (const char *const[]){"status", NULL}, out,
                           sizeof(out));
    if (status != 0 || !strstr(out, "web1"))
        fail_msg("activatorctl as a ControlGroup member: status %d, output:\n%s", status, out);

    /* An op of role root (stage) is refused to the member by the server
     * itself, before the dispatcher, which would answer "unsupported". */
    char build[200];
    snprintf(build, sizeof(build), "%s/build", h.dir);
    FILE *f = fopen(build, "we");
    assert_non_null(f);
    fclose(f);
    chmod(build, 0644);
    status = ctl_as_nobody(&h, nobody_only, 1,
                           (const char *const[]){"stage", "web1", "v1", build, NULL}, out,
                           sizeof(out));
    unlink(build);
    if (status != 1 || !strstr(out, "op stage needs the root role") ||
        !strstr(out, "only root may stage") ||
        !strstr(out, "this peer (uid 65534) is an operator (ControlGroup=65534)") ||
        !strstr(out, "[forbidden]"))
        fail_msg("stage as a ControlGroup member: status %d, output:\n%s", status, out);
    harness_stop(&h);
}

/* Group membership is the peer process's own: the groups it holds besides
 * its primary one, which is not either group here. */
static void test_viewers_read_and_operators_act(void **state)
{
    if (geteuid() != 0) {
        print_message("skipped: switching to uid 65534 needs root\n");
        skip();
    }
    ctrl_options roles = {.ipc_permissions = 0666,
                          .access = {.control_group = "60002",
                                     .control_gid = 60002,
                                     .viewer_group = "60001",
                                     .viewer_gid = 60001}};
    harness h;
    assert_int_equal(harness_start(&h, &roles), 0);
    char out[4096];
    static const gid_t viewer[] = {65534, 60001}, operator[] = {65534, 60002};

    int status =
        ctl_as_nobody(&h, viewer, 2, (const char *const[]){"status", NULL}, out, sizeof(out));
    if (status != 0 || !strstr(out, "web1"))
        fail_msg("status as a ViewerGroup member: status %d, output:\n%s", status, out);
    status = ctl_as_nobody(&h, viewer, 2, (const char *const[]){"wake", "web1", NULL}, out,
                           sizeof(out));
    if (status != 1 ||
        !strstr(out, "op wake needs the operator role; this peer (uid 65534) is a viewer "
                     "(ViewerGroup=60001); operators are root and the members of "
                     "ControlGroup=60002") ||
        !strstr(out, "[forbidden]"))
        fail_msg("wake as a ViewerGroup member: status %d, output:\n%s", status, out);

    /* The operator's wake reaches the dispatcher, which refuses it for a
     * reason of its own. */
    status = ctl_as_nobody(&h, operator, 2, (const char *const[]){"wake", "web1", NULL}, out,
                           sizeof(out));
    if (status != 1 || !strstr(out, "[not_owner]"))
        fail_msg("wake as a ControlGroup member: status %d, output:\n%s", status, out);

    /* In neither group: nothing, not even status. */
    status = ctl_as_nobody(&h, nobody_only, 1, (const char *const[]){"status", NULL}, out,
                           sizeof(out));
    if (status != 1 ||
        !strstr(out, "only root, members of ControlGroup=60002 (operators) and of "
                     "ViewerGroup=60001 (viewers) have one") ||
        !strstr(out, "[forbidden]"))
        fail_msg("status in neither group: status %d, output:\n%s", status, out);
    harness_stop(&h);
}

static void test_activatorctl_no_daemon(void **state)
{
    char dir[] = "/tmp/act-ctl-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char url[128], out[4096];
    snprintf(url, sizeof(url), "ipc://%s/control.ipc", dir);
    char *argv[] = {(char *)activatorctl, "--connect", url, "status", NULL};
    int status = dd_run_as(argv, (uid_t)-1, 0, out, sizeof(out));
    if (status != 3 || !strstr(out, url) || !strstr(out, "hint:"))
        fail_msg("activatorctl without a daemon: status %d, output:\n%s", status, out);

    /* A stale socket file (daemon died) is reported the same way. */
    harness h;
    assert_int_equal(harness_start(&h, NULL), 0);
    char *argv2[] = {(char *)activatorctl, "--connect", h.url, "--timeout", "5", "wake", "web1",
                     NULL};
    harness_stop(&h);
    status = dd_run_as(argv2, (uid_t)-1, 0, out, sizeof(out));
    if (status != 3 || !strstr(out, h.url))
        fail_msg("activatorctl after the daemon stopped: status %d, output:\n%s", status, out);
    rmdir(dir);
}

static void test_activatorctl_against_server(void **state)
{
    harness h;
    assert_int_equal(harness_start(&h, NULL), 0);
    char out[8192];

    char *status[] = {(char *)activatorctl, "--connect", h.url, "status", NULL};
    int rc = dd_run_as(status, (uid_t)-1, 0, out, sizeof(out));
    if (rc != 0 || !strstr(out, "HOST") || !strstr(out, "web1") || !strstr(out, "12 MiB") ||
        strstr(out, "\033["))
        fail_msg("status: rc %d, output:\n%s", rc, out);

    char *json[] = {(char *)activatorctl, "--connect", h.url, "--json", "status", NULL};
    rc = dd_run_as(json, (uid_t)-1, 0, out, sizeof(out));
    json_object *parsed = json_tokener_parse(out);
    if (rc != 0 || !parsed)
        fail_msg("--json status: rc %d, output:\n%s", rc, out);
    json_object_put(parsed);

    char *refused[] = {(char *)activatorctl, "--connect", h.url, "wake", "web1", NULL};
    rc = dd_run_as(refused, (uid_t)-1, 0, out, sizeof(out));
    if (rc != 1 || !strstr(out, "claim names box b2") || !strstr(out, "[not_owner]"))
        fail_msg("refused wake: rc %d, output:\n%s", rc, out);

    char *slow[] = {(char *)activatorctl, "--connect", h.url, "wake", "slow", NULL};
    rc = dd_run_as(slow, (uid_t)-1, 0, out, sizeof(out));
    if (rc != 0 || !strstr(out, "slow: serving"))
        fail_msg("slow wake: rc %d, output:\n%s", rc, out);

    char *usage[] = {(char *)activatorctl, "--connect", h.url, "wake", NULL};
    rc = dd_run_as(usage, (uid_t)-1, 0, out, sizeof(out));
    if (rc != 2 || !strstr(out, "Try 'activatorctl wake --help'"))
        fail_msg("wake without HOST: rc %d, output:\n%s", rc, out);

    char *bad_name[] = {(char *)activatorctl, "--connect", h.url, "park", "../x", NULL};
    rc = dd_run_as(bad_name, (uid_t)-1, 0, out, sizeof(out));
    if (rc != 2 || !strstr(out, "host name"))
        fail_msg("park ../x: rc %d, output:\n%s", rc, out);

    static const char *const commands[] = {"status",  "wake",     "park",  "swap",
                                           "stage",   "promote",  "releases", "claim",
                                           "watch",   "stats",    "version", "reload",
                                           "checkpoint", "checkpoints"};
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        char *help[] = {(char *)activatorctl, (char *)commands[i], "--help", NULL};
        rc = dd_run_as(help, (uid_t)-1, 0, out, sizeof(out));
        if (rc != 0 || !strstr(out, "Usage: activatorctl"))
            fail_msg("%s --help: rc %d, output:\n%s", commands[i], rc, out);
    }
    harness_stop(&h);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-ACTIVATORCTL\n", argv[0]);
        return 2;
    }
    activatorctl = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_requests_then_status),
        cmocka_unit_test(test_long_request_does_not_block_status),
        cmocka_unit_test(test_socket_mode),
        cmocka_unit_test(test_unprivileged_peer_refused),
        cmocka_unit_test(test_viewers_read_and_operators_act),
        cmocka_unit_test(test_activatorctl_no_daemon),
        cmocka_unit_test(test_activatorctl_against_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
