/* The daemon's control socket and activatorctl, against the real daemon:
 *   - every bad request gets an error reply naming what is wrong, and the
 *     daemon then still answers status (and still wakes a host);
 *   - activatorctl drives the daemon: wake and status exit 0, a refused wake
 *     exits 1 with the reason;
 *   - activatorctl against a daemon that is not there exits 3, saying which
 *     URL it tried;
 *   - remote control over TLS (ControlListen=): a client certificate of
 *     TLSClientCA= whose CN is in ControlOperators= drives the daemon, one in
 *     ControlViewers= may only read, one in neither list may do nothing;
 *     one of another CA is refused, and so is a daemon whose certificate the
 *     client's CA did not sign. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

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

int main(void)
{
    int r = dh_check_can_run("daemon-control", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_bad_requests_get_errors_and_the_daemon_keeps_serving),
        DH_TEST(test_activatorctl_drives_the_daemon),
        DH_TEST(test_activatorctl_without_a_daemon_exits_3),
        DH_TEST(test_remote_control_over_tls_with_client_certificates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
