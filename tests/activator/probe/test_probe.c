/* Probes on a real loop against real sockets and commands. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/probe/probe.h"
#include "common/cleanup.h"
#include "common/clock.h"

typedef struct outcome {
    bool finished;
    bool ok;
    char why[256];
} outcome;

static void on_done(probe_run *probe, bool ok, const char *why, void *userdata)
{
    outcome *result = userdata;
    result->finished = true;
    result->ok = ok;
    snprintf(result->why, sizeof(result->why), "%s", why ? why : "");
}

static outcome run_probe_every(const char *text, uint64_t timeout_usec, uint64_t interval_usec)
{
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    probe_spec spec;
    act_error err = {0};
    assert_int_equal(probe_parse(text, "test", &spec, &err), 0);
    outcome result = {0};
    probe_run *probe = NULL;
    assert_int_equal(probe_start(loop, &spec, NULL, timeout_usec, interval_usec, on_done, &result,
                                 &probe, &err),
                     0);
    while (!result.finished)
        assert_true(sd_event_run(loop, UINT64_MAX) >= 0);
    probe_free(probe);
    probe_spec_clear(&spec);
    sd_event_unref(loop);
    return result;
}

static outcome run_probe(const char *text, uint64_t timeout_usec)
{
    return run_probe_every(text, timeout_usec, 20000);
}

static uint16_t listening_port(int *fd_out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    assert_int_equal(bind(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&address, &len), 0);
    *fd_out = fd;
    return ntohs(address.sin_port);
}

static void tcp_probe_succeeds_once_something_listens(void **state)
{
    (void)state;
    _cleanup_close_ int fd = -1;
    uint16_t port = listening_port(&fd);
    assert_int_equal(listen(fd, 4), 0);
    char text[64];
    snprintf(text, sizeof(text), "tcp:127.0.0.1:%u", port);
    outcome result = run_probe(text, 2000000);
    assert_true(result.ok);
}

static void tcp_probe_times_out_on_a_closed_port(void **state)
{
    (void)state;
    _cleanup_close_ int fd = -1;
    uint16_t port = listening_port(&fd); /* bound, never listening: refused */
    char text[64];
    snprintf(text, sizeof(text), "tcp:127.0.0.1:%u", port);
    uint64_t start = act_now_usec();
    outcome result = run_probe(text, 200000);
    assert_false(result.ok);
    assert_non_null(strstr(result.why, "Connection refused"));
    assert_true(act_now_usec() - start >= 200000);
}

static void exec_probe_reports_status(void **state)
{
    (void)state;
    assert_true(run_probe("exec:/bin/true", 1000000).ok);
    outcome failed = run_probe("exec:/bin/sh -c exit\\ 3", 100000);
    assert_false(failed.ok);
    /* The command line is split as Exec= is: quotes keep a word together. */
    assert_true(run_probe("exec:/bin/sh -c 'test \"$0\" = \"a b\"' \"a b\"", 1000000).ok);
    outcome slow = run_probe("exec:/bin/sleep 5", 200000);
    assert_false(slow.ok);
    assert_non_null(strstr(slow.why, "timed out"));
}

/* An interval as long as the timeout is one try: a failure is known at
 * once, not at the deadline, and the command ran once. */
static void one_try_fails_as_soon_as_it_fails(void **state)
{
    (void)state;
    char dir[] = "/tmp/act-probe-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char text[512], count[64];
    snprintf(count, sizeof(count), "%s/tries", dir);
    snprintf(text, sizeof(text), "exec:/bin/sh -c 'echo >>%s; exit 1'", count);
    uint64_t start = act_now_usec();
    outcome failed = run_probe_every(text, 5000000, 5000000);
    assert_false(failed.ok);
    assert_non_null(strstr(failed.why, "exited with status 1"));
    assert_true(act_now_usec() - start < 4000000);
    _cleanup_free_ char *tries = NULL;
    size_t size = 0;
    FILE *file = fopen(count, "r");
    assert_non_null(file);
    assert_true(getdelim(&tries, &size, '\0', file) >= 0);
    fclose(file);
    assert_string_equal(tries, "\n");
    unlink(count);
    rmdir(dir);

    /* It still succeeds, and a try that hangs is bounded by the timeout. */
    assert_true(run_probe_every("exec:/bin/true", 1000000, 1000000).ok);
    outcome slow = run_probe_every("exec:/bin/sleep 5", 200000, 200000);
    assert_false(slow.ok);
    assert_non_null(strstr(slow.why, "timed out"));
}

static void bad_specs_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {"http://x",       "tcp:",  "tcp:/path",
                         "unix:relative",  "exec:", "exec:sh -c 1",
                         "exec:/bin/sh 'x", "ready"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        probe_spec spec;
        act_error err = {0};
        assert_true(probe_parse(bad[i], "web1.conf:4: Ready", &spec, &err) < 0);
        assert_non_null(strstr(err.message, "web1.conf:4: Ready"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tcp_probe_succeeds_once_something_listens),
        cmocka_unit_test(tcp_probe_times_out_on_a_closed_port),
        cmocka_unit_test(exec_probe_reports_status),
        cmocka_unit_test(one_try_fails_as_soon_as_it_fails),
        cmocka_unit_test(bad_specs_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
