/* The daemon's control socket and activatorctl, against the real daemon:
 *   - every bad request gets an error reply naming what is wrong, and the
 *     daemon then still answers status (and still wakes a host);
 *   - activatorctl drives the daemon: wake and status exit 0, a refused wake
 *     exits 1 with the reason;
 *   - activatorctl against a daemon that is not there exits 3, saying which
 *     URL it tried;
 *   - activatorctl watch interrupted while it still connects (to a peer that
 *     accepts the connection and never answers) exits 0, as any interrupted
 *     watch does, not by the signal;
 *   - remote control over TLS (ControlListen=): a client certificate of
 *     TLSClientCA= whose CN is in ControlOperators= drives the daemon, one in
 *     ControlViewers= may only read, one in neither list may do nothing;
 *     one of another CA is refused, and so is a daemon whose certificate the
 *     client's CA did not sign;
 *   - a client that sends its SP header and closes before reading the
 *     daemon's (NNG 1.5.2 can wedge an IPC listener so) leaves neither the
 *     control socket nor the events socket deaf: status is answered and a
 *     new subscriber gets events within the listener probe's period. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/req.h>

#include "activator/control/ipc_heal.h"
#include "common/clock.h"

#ifndef DH_ACTIVATORCTL
#error "DH_ACTIVATORCTL must name the activatorctl executable"
#endif

static void expect_status_answers(dh_daemon *d, const char *after)
{
    char *text = NULL;
    static const char request[] = "{\"v\":1,\"op\":\"status\"}";
    int rv = dh_request_raw(d->drv.control_url, request, sizeof(request) - 1, 10000, &text);
    DH_CHECK(d, rv == 0, "status after %s: %s", after, nng_strerror(rv));
    json_object *reply = json_tokener_parse(text);
    bool ok = reply && dh_reply_ok(reply);
    json_object_put(reply);
    DH_CHECK(d, ok, "status after %s: %s", after, text);
    free(text);
}

/* Sends body (len bytes) and checks the error reply's code. */
static void expect_error(dh_daemon *d, const char *what, const void *body, size_t len,
                         const char *code)
{
    char *text = NULL;
    int rv = dh_request_raw(d->drv.control_url, body, len, 10000, &text);
    DH_CHECK(d, rv == 0, "%s: no reply (%s)", what, nng_strerror(rv));
    json_object *reply = json_tokener_parse(text);
    DH_CHECK(d, reply, "%s: the reply is not JSON: %s", what, text);
    json_object *error = NULL;
    json_object_object_get_ex(reply, "error", &error);
    bool as_expected = !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), code) == 0 &&
                       strlen(dh_json_str(error, "message")) > 10;
    json_object_put(reply);
    DH_CHECK(d, as_expected, "%s: expected an error %s with a message, got %s", what, code, text);
    free(text);
    expect_status_answers(d, what);
}

static void test_bad_requests_get_errors_and_the_daemon_keeps_serving(void **state)
{
    dh_daemon *d = *state;
    int port = dh_start_with_host(d, DH_STORE_DIR, "demo", NULL, NULL);

    static const char not_json[] = "this is not JSON";
    expect_error(d, "not JSON", not_json, sizeof(not_json) - 1, "bad_json");
    static const char truncated[] = "{\"v\":1,\"op\":\"sta";
    expect_error(d, "truncated JSON", truncated, sizeof(truncated) - 1, "bad_json");
    static const char array[] = "[1,2,3]";
    expect_error(d, "a JSON array", array, sizeof(array) - 1, "bad_type");
    static const char unknown_op[] = "{\"v\":1,\"op\":\"frobnicate\"}";
    expect_error(d, "unknown op", unknown_op, sizeof(unknown_op) - 1, "unknown_op");
    static const char bad_version[] = "{\"v\":2,\"op\":\"status\"}";
    expect_error(d, "protocol version 2", bad_version, sizeof(bad_version) - 1,
                 "bad_protocol_version");
    static const char missing[] = "{\"v\":1,\"op\":\"wake\"}";
    expect_error(d, "wake without host", missing, sizeof(missing) - 1, "missing_field");
    static const char wrong_type[] = "{\"v\":1,\"op\":\"wake\",\"host\":7}";
    expect_error(d, "host as a number", wrong_type, sizeof(wrong_type) - 1, "bad_type");
    static const char unknown_field[] = "{\"v\":1,\"op\":\"wake\",\"host\":\"demo\",\"hots\":1}";
    expect_error(d, "unknown field", unknown_field, sizeof(unknown_field) - 1, "unknown_field");
    static const char traversal[] = "{\"v\":1,\"op\":\"wake\",\"host\":\"../../etc\"}";
    expect_error(d, "host name with ..", traversal, sizeof(traversal) - 1, "bad_name");
    static const char unknown_host[] = "{\"v\":1,\"op\":\"wake\",\"host\":\"nosuchhost\"}";
    expect_error(d, "unconfigured host", unknown_host, sizeof(unknown_host) - 1, "unknown_host");
    static const char relative_path[] =
        "{\"v\":1,\"op\":\"stage\",\"host\":\"demo\",\"version\":\"v9\",\"path\":\"rel/path\"}";
    expect_error(d, "stage with a relative path", relative_path, sizeof(relative_path) - 1,
                 "bad_value");
    expect_error(d, "empty body", "", 0, "bad_json");

    /* A 1 MiB body: a valid-looking request padded with spaces. */
    size_t big_len = 1024 * 1024;
    char *big = malloc(big_len);
    assert_non_null(big);
    memset(big, ' ', big_len);
    static const char head[] = "{\"v\":1,\"op\":\"status\"}";
    memcpy(big, head, sizeof(head) - 1);
    expect_error(d, "a 1 MiB body", big, big_len, "too_large");
    free(big);

    /* Nothing of that changed what the daemon does. */
    dh_wake(d, "demo");
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "demo does not answer");
    dh_stop_and_check_clean(d);
}

static int ctl(dh_daemon *d, char *out, size_t size, const char *a, const char *b, const char *c)
{
    char *const argv[] = {(char *)DH_ACTIVATORCTL,
                          (char *)"--connect",
                          d->drv.control_url,
                          (char *)"--no-color",
                          (char *)a,
                          (char *)b,
                          (char *)c,
                          NULL};
    return dh_run(argv, out, size);
}

static void test_activatorctl_drives_the_daemon(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_add_app_host(d, "other", NULL, NULL);
    claim elsewhere;
    dh_claim_assigned("other", DH_OTHER_BOX, &elsewhere);
    dh_claim_put(d, &elsewhere);
    dh_start(d, NULL);

    char out[16384];
    int status = ctl(d, out, sizeof(out), "wake", "demo", NULL);
    DH_CHECK(d, status == 0, "activatorctl wake demo exited %d:\n%s", status, out);
    status = ctl(d, out, sizeof(out), "status", "demo", NULL);
    DH_CHECK(d, status == 0 && strstr(out, "serving"), "activatorctl status demo exited %d:\n%s",
             status, out);
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "demo does not answer");

    status = ctl(d, out, sizeof(out), "wake", "other", NULL);
    DH_CHECK(d, status == 1 && strstr(out, "not_owner"),
             "activatorctl wake of a host claimed elsewhere: exit %d (expected 1 with not_owner):"
             "\n%s",
             status, out);
    status = ctl(d, out, sizeof(out), "wake", "../x", NULL);
    DH_CHECK(d, status == 2 || status == 1,
             "activatorctl wake ../x: exit %d (expected a usage error or a refusal):\n%s", status,
             out);
    pid_t pids[2];
    DH_CHECK(d, dh_marker_pids(d, "other", pids, 2) == 0, "the refused host ran");
    dh_stop_and_check_clean(d);
}

static void test_activatorctl_without_a_daemon_exits_3(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char out[16384];

    /* Never started: no socket file at all. */
    int status = ctl(d, out, sizeof(out), "status", NULL, NULL);
    DH_CHECK(d, status == 3 && strstr(out, d->drv.control_url),
             "activatorctl with no daemon: exit %d (expected 3, naming %s):\n%s", status,
             d->drv.control_url, out);

    /* Started and stopped: what an operator meets after a stop. */
    dh_write_app_host(d, "demo", dh_free_port(), NULL, NULL);
    dh_start(d, NULL);
    status = ctl(d, out, sizeof(out), "status", NULL, NULL);
    DH_CHECK(d, status == 0, "activatorctl status against the running daemon exited %d:\n%s",
             status, out);
    dh_stop_and_check_clean(d);
    status = ctl(d, out, sizeof(out), "status", NULL, NULL);
    DH_CHECK(d, status == 3 && strstr(out, d->drv.control_url),
             "activatorctl against a stopped daemon: exit %d (expected 3, naming %s):\n%s", status,
             d->drv.control_url, out);
    status = ctl(d, out, sizeof(out), "wake", "demo", NULL);
    DH_CHECK(d, status == 3, "activatorctl wake against a stopped daemon: exit %d:\n%s", status,
             out);
}

static void test_a_watch_interrupted_while_it_connects_exits_0(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* A listener that never accepts: the kernel completes the connection
     * and nothing ever answers NNG's handshake (it gives up after 10 s), so
     * the watch's subscription is still being set up when the interrupt
     * comes: the interrupt is sent once the connection is there. */
    int port = 0;
    int listener = dh_listen_loopback(d, &port);
    char url[64];
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
    pid_t pid = fork();
    DH_CHECK(d, pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execl(DH_ACTIVATORCTL, DH_ACTIVATORCTL, "--events", url, "--no-color", "watch",
              (char *)NULL);
        _exit(127);
    }
    /* The pending connection makes the listener readable. */
    struct pollfd pending = {.fd = listener, .events = POLLIN};
    int ready = poll(&pending, 1, 30000);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    close(listener);
    DH_CHECK(d, ready == 1, "activatorctl watch did not connect within 30 s");
    DH_CHECK(d, WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "activatorctl watch interrupted while it connected %s %d (expected exit 0)",
             WIFSIGNALED(status) ? "died by signal" : "exited",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static int ctl_tls(const char *url, const char *certs, const char *client, const char *ca,
                   char *out, size_t size, const char *op, const char *host)
{
    char cert[PATH_MAX], key[PATH_MAX], ca_file[PATH_MAX];
    snprintf(cert, sizeof(cert), "%s/%s.crt", certs, client);
    snprintf(key, sizeof(key), "%s/%s.key", certs, client);
    snprintf(ca_file, sizeof(ca_file), "%s/%s.crt", certs, ca);
    char *const argv[] = {(char *)DH_ACTIVATORCTL, (char *)"--connect", (char *)url,
                          (char *)"--tls-cert", cert, (char *)"--tls-key", key,
                          (char *)"--tls-ca", ca_file, (char *)"--no-color", (char *)op,
                          (char *)host, NULL};
    return dh_run(argv, out, size);
}

static void test_remote_control_over_tls_with_client_certificates(void **state)
{
    dh_daemon *d = *state;
    char certs[] = "/tmp/act-tls-XXXXXX";
    assert_non_null(mkdtemp(certs));
    assert_true(dh_make_tls_certs(certs));
    int tls_port = dh_free_port();
    char conf[4 * PATH_MAX], url[64];
    snprintf(url, sizeof(url), "tls+tcp://127.0.0.1:%d", tls_port);
    /* The client certificate's CN has spaces: the list quotes it. */
    snprintf(conf, sizeof(conf),
             "ControlListen=%s\nTLSCertificate=%s/server.crt\nTLSKey=%s/server.key\n"
             "TLSClientCA=%s/ca.crt\nControlOperators=\"activator test client\"\n"
             "ControlViewers=viewer-1\n",
             url, certs, certs, certs);
    dh_setup(d, DH_STORE_DIR, conf);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);

    char out[16384];
    int status = ctl_tls(url, certs, "client", "ca", out, sizeof(out), "wake", "demo");
    DH_CHECK(d, status == 0, "activatorctl wake over TLS exited %d:\n%s", status, out);
    status = ctl_tls(url, certs, "client", "ca", out, sizeof(out), "status", "demo");
    DH_CHECK(d, status == 0 && strstr(out, "serving"),
             "activatorctl status over TLS exited %d:\n%s", status, out);
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "demo does not answer");

    /* A viewer's certificate reads, and is refused what changes anything. */
    status = ctl_tls(url, certs, "viewer", "ca", out, sizeof(out), "status", "demo");
    DH_CHECK(d, status == 0 && strstr(out, "serving"), "status as a viewer exited %d:\n%s",
             status, out);
    status = ctl_tls(url, certs, "viewer", "ca", out, sizeof(out), "park", "demo");
    DH_CHECK(d,
             status == 1 &&
                 strstr(out, "op park needs the operator role; this peer (the TLS client "
                             "CN=viewer-1) is a viewer (ControlViewers=)") &&
                 strstr(out, "[forbidden]"),
             "park as a viewer: exit %d (expected 1, refused):\n%s", status, out);
    /* A certificate of the same CA in neither list may not even read. */
    status = ctl_tls(url, certs, "stranger", "ca", out, sizeof(out), "status", "demo");
    DH_CHECK(d,
             status == 1 && strstr(out, "this peer (the TLS client CN=stranger-1) has no role") &&
                 strstr(out, "neither ControlOperators= (operators) nor ControlViewers=") &&
                 strstr(out, "[forbidden]"),
             "status with an unlisted certificate: exit %d (expected 1, refused):\n%s", status,
             out);
    status = ctl_tls(url, certs, "stranger", "ca", out, sizeof(out), "park", "demo");
    DH_CHECK(d, status == 1 && strstr(out, "op park needs the operator role"),
             "park with an unlisted certificate: exit %d (expected 1, refused):\n%s", status,
             out);

    status = ctl_tls(url, certs, "other-client", "ca", out, sizeof(out), "park", "demo");
    DH_CHECK(d, status == 3 && strstr(out, url),
             "a client certificate of another CA: exit %d (expected 3, naming %s):\n%s", status,
             url, out);
    status = ctl_tls(url, certs, "client", "other-ca", out, sizeof(out), "park", "demo");
    DH_CHECK(d, status == 3 && strstr(out, url),
             "a daemon whose certificate the client's CA did not sign: exit %d (expected 3):\n%s",
             status, out);
    /* Neither refused client parked it. */
    json_object *after = dh_status(d, "demo");
    bool serving = strcmp(dh_json_str(after, "state"), "serving") == 0;
    json_object_put(after);
    DH_CHECK(d, serving, "a refused TLS client changed the host's state");

    /* The operator's certificate parks it. */
    status = ctl_tls(url, certs, "client", "ca", out, sizeof(out), "park", "demo");
    DH_CHECK(d, status == 0, "park as an operator over TLS exited %d:\n%s", status, out);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo is not parked after park");
    dh_stop_and_check_clean(d);
    char rm[64];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", certs);
    assert_int_equal(system(rm), 0);
}


/* A wedged listener is listening again within a probe's period and timeout;
 * the rest is slack for a loaded machine. */
#define HEAL_DEADLINE_MS ((int)((IPC_HEAL_PERIOD_USEC + IPC_HEAL_TIMEOUT_USEC) / 1000) + 3500)

/* Connects to the socket file of url, sends the SP header of protocol (REQ
 * 0x30, SUB 0x21) and closes without reading the daemon's header. */
static void send_header_and_close(const char *url, uint8_t protocol)
{
    const char *path = url + strlen("ipc://");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    /* Refused only in the instant a healing listener is away: nothing to
     * wedge then. */
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
        const uint8_t header[8] = {0, 'S', 'P', 0, 0, protocol, 0, 0};
        ssize_t n = write(fd, header, sizeof(header));
        (void)n;
    }
    close(fd);
}

/* Milliseconds until a fresh client's status is answered, or -1 past
 * deadline_ms. A wedged listener takes the request and never answers it, so
 * each try waits 1 s and a new one starts. */
static int ms_until_status_answers(dh_daemon *d, int deadline_ms)
{
    static const char request[] = "{\"v\":1,\"op\":\"status\"}";
    uint64_t start = act_now_usec();
    for (;;) {
        int elapsed = (int)((act_now_usec() - start) / 1000);
        if (elapsed > deadline_ms)
            return -1;
        char *text = NULL;
        int rv = dh_request_raw(d->drv.control_url, request, sizeof(request) - 1, 1000, &text);
        if (rv == 0) {
            json_object *reply = json_tokener_parse(text);
            bool ok = reply && dh_reply_ok(reply);
            json_object_put(reply);
            DH_CHECK(d, ok, "status: %s", text);
            free(text);
            return (int)((act_now_usec() - start) / 1000);
        }
        if (rv != NNG_ETIMEDOUT)
            nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
    }
}

/* Whether a new subscriber gets an event within deadline_ms: the beacon's
 * claim is written again and again (each write publishes claim.changed). */
static bool new_subscriber_gets_events(dh_daemon *d, int deadline_ms)
{
    claim beacon;
    dh_claim_beacon(d, DH_BEACON_BOX, &beacon);
    uint64_t start = act_now_usec();
    while ((int)((act_now_usec() - start) / 1000) <= deadline_ms) {
        nng_socket sub;
        assert_int_equal(nng_sub0_open(&sub), 0);
        nng_socket_set(sub, NNG_OPT_SUB_SUBSCRIBE, "", 0);
        nng_socket_set_ms(sub, NNG_OPT_RECVTIMEO, 250);
        bool got = false;
        if (nng_dial(sub, d->drv.events_url, NULL, 0) == 0) {
            for (int i = 0; i < 4 && !got; i++) {
                dh_claim_put(d, &beacon);
                char *buf = NULL;
                size_t len;
                if (nng_recv(sub, &buf, &len, NNG_FLAG_ALLOC) == 0) {
                    nng_free(buf, len);
                    got = true;
                }
            }
        } else {
            nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
        }
        nng_close(sub);
        if (got)
            return true;
    }
    return false;
}

static unsigned log_count(dh_daemon *d, const char *text)
{
    FILE *log = fopen(d->drv.log_path, "r");
    if (!log)
        return 0;
    unsigned n = 0;
    char line[4096];
    while (fgets(line, sizeof(line), log))
        n += strstr(line, text) != NULL;
    fclose(log);
    return n;
}

/* Starts d with LSAN_OPTIONS naming a copy of the suppressions in force
 * plus NNG's own objects: NNG 1.5.2 loses a wedged listener's objects (not
 * its descriptors) when the listener closes, now and then, and this daemon
 * is wedged on purpose. Every other test keeps judging NNG's leaks. */
static void start_excusing_wedged_listeners(dh_daemon *d)
{
    const char *options = getenv("LSAN_OPTIONS");
    const char *given = options ? strstr(options, "suppressions=") : NULL;
    char path[PATH_MAX], copy[PATH_MAX + 64];
    snprintf(copy, sizeof(copy), "%s/lsan.supp", d->drv.dir);
    FILE *out = fopen(copy, "w");
    assert_non_null(out);
    if (given) {
        snprintf(path, sizeof(path), "%.*s", (int)strcspn(given + 13, ":"), given + 13);
        FILE *in = fopen(path, "r");
        char line[1024];
        while (in && fgets(line, sizeof(line), in))
            fputs(line, out);
        if (in)
            fclose(in);
    }
    fputs("leak:libnng.so\n", out);
    fclose(out);
    char *saved = options ? strdup(options) : NULL;
    char lsan[PATH_MAX + 80];
    snprintf(lsan, sizeof(lsan), "suppressions=%s", copy);
    setenv("LSAN_OPTIONS", lsan, 1);
    dh_start(d, NULL);
    if (saved)
        setenv("LSAN_OPTIONS", saved, 1);
    else
        unsetenv("LSAN_OPTIONS");
    free(saved);
}

/* One request and its reply on an open REQ socket; 0 or NNG's error. */
static int kept_request(nng_socket kept, const char *body, size_t size)
{
    int rv = nng_send(kept, (void *)body, size, 0);
    char *buf = NULL;
    size_t len = 0;
    if (rv == 0)
        rv = nng_recv(kept, &buf, &len, NNG_FLAG_ALLOC);
    if (rv == 0)
        nng_free(buf, len);
    return rv;
}

static void test_a_client_that_hangs_up_early_does_not_deafen_the_sockets(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    start_excusing_wedged_listeners(d);

    /* A client connected before: healing must not close its connection
     * (it would not reconnect, as activatorctl's requests do not). */
    nng_socket kept;
    assert_int_equal(nng_req0_open(&kept), 0);
    nng_socket_set_ms(kept, NNG_OPT_RECONNMINT, 3600 * 1000);
    nng_socket_set_ms(kept, NNG_OPT_RECONNMAXT, 3600 * 1000);
    nng_socket_set_ms(kept, NNG_OPT_RECVTIMEO, 10000);
    nng_socket_set_ms(kept, NNG_OPT_SENDTIMEO, 10000);
    assert_int_equal(nng_dial(kept, d->drv.control_url, NULL, 0), 0);
    /* nng_dial returns once the client has the daemon's SP header, which
     * the daemon sends before it reads the client's: a hang-up in that
     * instant would wedge the listener with this connection not yet
     * delivered, and no healing delivers such a one (ipc_heal.h). An answer
     * proves it joined. */
    static const char status[] = "{\"v\":1,\"op\":\"status\"}";
    int rv = kept_request(kept, status, sizeof(status) - 1);
    DH_CHECK(d, rv == 0, "status on a fresh connection: %s", nng_strerror(rv));

    /* A new listener makes the socket file anew, as the daemon's start does. */
    struct stat made;
    assert_int_equal(stat(d->drv.control_url + strlen("ipc://"), &made), 0);

    /* The wedge is a matter of timing: most tries hit it here (14 to 19 of
     * 20), fewer on another machine, so the tries go on until it was met
     * and healed (at least CONTROL_TRIES of them, at most CONTROL_TRIES_MAX). */
    enum { CONTROL_TRIES = 8, CONTROL_TRIES_MAX = 64, EVENTS_TRIES = 3 };
    int slowest = 0, tries = 0;
    for (int i = 0; i < CONTROL_TRIES || (i < CONTROL_TRIES_MAX && !log_count(d, "Control=ipc://"));
         i++) {
        tries = i + 1;
        send_header_and_close(d->drv.control_url, 0x30);
        int ms = ms_until_status_answers(d, HEAL_DEADLINE_MS);
        DH_CHECK(d, ms >= 0,
                 "status is not answered %d ms after try %d of a client that sent its SP header "
                 "and hung up: the control listener is wedged",
                 HEAL_DEADLINE_MS, i + 1);
        if (ms > slowest)
            slowest = ms;
    }
    unsigned healed = log_count(d, "Control=ipc://");
    struct stat now;
    assert_int_equal(stat(d->drv.control_url + strlen("ipc://"), &now), 0);
    DH_CHECK(d,
             S_ISSOCK(now.st_mode) && now.st_mode == made.st_mode && now.st_uid == made.st_uid &&
                 now.st_gid == made.st_gid,
             "the socket file is mode %o owner %u:%u after healing, was %o %u:%u",
             (unsigned)now.st_mode, (unsigned)now.st_uid, (unsigned)now.st_gid,
             (unsigned)made.st_mode, (unsigned)made.st_uid, (unsigned)made.st_gid);
    print_message("control: %d tries, %u times listening again, status within %d ms at worst\n",
                  tries, healed, slowest);
    DH_CHECK(d, healed > 0,
             "%d clients that sent their SP header and hung up never wedged the control "
             "listener: nothing was healed, so this test proved nothing (a fixed NNG?)",
             tries);
    rv = kept_request(kept, status, sizeof(status) - 1);
    DH_CHECK(d, rv == 0, "status on a connection made before the listener healed %u times: %s",
             healed, nng_strerror(rv));
    nng_close(kept);

    for (int i = 0; i < EVENTS_TRIES; i++) {
        send_header_and_close(d->drv.events_url, 0x21);
        DH_CHECK(d, new_subscriber_gets_events(d, HEAL_DEADLINE_MS),
                 "a new subscriber gets no event %d ms after try %d of a client that sent its SP "
                 "header and hung up: the events listener is wedged",
                 HEAL_DEADLINE_MS, i + 1);
    }
    print_message("events: %d tries, %u times listening again\n", EVENTS_TRIES,
                  log_count(d, "Events=ipc://"));
    /* The subscriber the harness made at the start was connected all along. */
    dh_events_mark(d);
    claim beacon;
    dh_claim_beacon(d, DH_BEACON_BOX, &beacon);
    dh_claim_put(d, &beacon);
    DH_CHECK(d, dh_event_wait(d, DH_BEACON_HOST, "claim.changed", 10000, NULL),
             "the subscriber connected before the listener healed lost its connection");
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-control", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_bad_requests_get_errors_and_the_daemon_keeps_serving),
        DH_TEST(test_activatorctl_drives_the_daemon),
        DH_TEST(test_activatorctl_without_a_daemon_exits_3),
        DH_TEST(test_a_watch_interrupted_while_it_connects_exits_0),
        DH_TEST(test_remote_control_over_tls_with_client_certificates),
        DH_TEST(test_a_client_that_hangs_up_early_does_not_deafen_the_sockets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
