/* Bad configuration against the real binary:
 *   - `activatord --check-config` reports each bad key or value of the daemon
 *     file and of every host file as FILE:LINE: KEY: ..., exits non-zero,
 *     and says nothing about the good files; a good configuration passes;
 *   - a daemon started with one bad host file serves the good hosts, does not
 *     know the bad one, and says in its log which file was skipped and why. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#ifndef DH_ACTIVATORD
#error "DH_ACTIVATORD must name the activatord executable"
#endif

static int check_config(const char *path, char *out, size_t size)
{
    char *const argv[] = {(char *)DH_ACTIVATORD, (char *)"--check-config", (char *)"--config",
                          (char *)path, NULL};
    return dh_run(argv, out, size);
}

/* out must hold a line starting with "<dir>/<file>:<line>: <key>:" followed
 * by an explanation. */
static void expect_reported(dh_daemon *d, const char *out, const char *dir, const char *file,
                            unsigned line, const char *key)
{
    char where[PATH_MAX + 128];
    snprintf(where, sizeof(where), "%s/%s:%u: %s:", dir, file, line, key);
    const char *found = strstr(out, where);
    DH_CHECK(d, found && (found == out || found[-1] == '\n'),
             "--check-config did not report \"%s\"; it printed:\n%s", where, out);
    const char *end = strchr(found, '\n');
    size_t explanation = (end ? (size_t)(end - found) : strlen(found)) - strlen(where);
    DH_CHECK(d, explanation > 10, "the report \"%s\" does not say what is wrong", where);
}

static void test_check_config_reports_file_and_line(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    char out[16384];

    /* A good configuration passes. */
    dh_write_app_host(d, "demo", dh_free_port(), NULL, NULL);
    int status = check_config(d->drv.config_path, out, sizeof(out));
    DH_CHECK(d, status == 0, "--check-config of a good configuration exited %d:\n%s", status, out);

    /* The daemon file: a bad name, a bad number, an unknown key. */
    char bad_daemon[PATH_MAX];
    snprintf(bad_daemon, sizeof(bad_daemon), "%s/bad-daemon.conf", d->drv.dir);
    FILE *f = fopen(bad_daemon, "we");
    DH_CHECK(d, f, "cannot write %s", bad_daemon);
    fprintf(f,
            "[Activator]\n"              /* 1 */
            "Box=bad/box\n"              /* 2 */
            "StateDirectory=%s\n"        /* 3 */
            "MaxConcurrentStarts=lots\n" /* 4 */
            "Bogus=1\n"                  /* 5 */
            "MetricsListen=no\n",        /* 6 */
            d->drv.state_dir);
    fclose(f);
    status = check_config(bad_daemon, out, sizeof(out));
    DH_CHECK(d, status != 0, "--check-config of a bad daemon file exited 0:\n%s", out);
    expect_reported(d, out, d->drv.dir, "bad-daemon.conf", 2, "Box");
    expect_reported(d, out, d->drv.dir, "bad-daemon.conf", 4, "MaxConcurrentStarts");
    expect_reported(d, out, d->drv.dir, "bad-daemon.conf", 5, "Bogus");

    /* Host files: values out of range, an unknown key, a bad address, a bad
     * probe, a bad size; and a file whose name is not a host name. */
    dh_write_host(d, "bad1",
                  "[Host]\n"                        /* 1 */
                  "Exec=act-e2e-app\n"              /* 2 */
                  "ReadyTimeoutSec=60\n"            /* 3 */
                  "MaxStarts=9\n"                   /* 4 */
                  "Frobnicate=yes\n"                /* 5 */
                  "[Listen]\n"                      /* 6 */
                  "ListenStream=not-an-address\n"); /* 7 */
    dh_write_host(d, "bad2",
                  "[Host]\n"               /* 1 */
                  "Exec=act-e2e-app\n"     /* 2 */
                  "Ready=carrier-pigeon\n" /* 3 */
                  "[Limits]\n"             /* 4 */
                  "MemoryMax=lots\n");     /* 5 */
    dh_write_host(d, "bad name", "[Host]\nExec=act-e2e-app\n");
    status = check_config(d->drv.config_path, out, sizeof(out));
    DH_CHECK(d, status != 0, "--check-config with bad host files exited 0:\n%s", out);
    expect_reported(d, out, d->drv.hosts_dir, "bad1.conf", 3, "ReadyTimeoutSec");
    expect_reported(d, out, d->drv.hosts_dir, "bad1.conf", 4, "MaxStarts");
    expect_reported(d, out, d->drv.hosts_dir, "bad1.conf", 5, "Frobnicate");
    expect_reported(d, out, d->drv.hosts_dir, "bad1.conf", 7, "ListenStream");
    expect_reported(d, out, d->drv.hosts_dir, "bad2.conf", 3, "Ready");
    expect_reported(d, out, d->drv.hosts_dir, "bad2.conf", 5, "MemoryMax");
    DH_CHECK(d, strstr(out, "bad name.conf"), "the badly named host file is not reported:\n%s",
             out);
    DH_CHECK(d, !strstr(out, "demo.conf") && !strstr(out, DH_BEACON_HOST ".conf"),
             "--check-config reported a good host file:\n%s", out);
}

static void test_good_hosts_served_beside_a_bad_one(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_write_host(d, "bad1",
                  "[Host]\n"
                  "Exec=act-e2e-app\n"
                  "MaxStarts=9\n"
                  "[Listen]\n"
                  "ListenStream=127.0.0.1:%d\n",
                  dh_free_port());
    dh_start(d, NULL);

    char skipped[PATH_MAX + 64];
    snprintf(skipped, sizeof(skipped), "%s/bad1.conf:3: MaxStarts:", d->drv.hosts_dir);
    DH_CHECK(d, dh_log_wait(d, skipped, 2000),
             "the log does not say which host file was skipped "
             "and why (expected \"%s\")",
             skipped);

    dh_wake(d, "demo");
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "the good host does not answer");

    json_object *reply = dh_wake_reply(d, "bad1", 10000);
    DH_CHECK(d, strcmp(dh_reply_code(reply), "unknown_host") == 0,
             "wake of the host whose file is bad: %s", json_object_to_json_string(reply));
    json_object_put(reply);

    reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"status\"}");
    const char *text = json_object_to_json_string(reply);
    DH_CHECK(d, dh_reply_ok(reply) && strstr(text, "\"demo\"") && !strstr(text, "\"bad1\""),
             "status should list demo and not bad1: %s", text);
    json_object_put(reply);
    dh_stop_and_check_clean(d);
}

/* The command line is input too: a wrong option or a stray argument is a
 * usage error (exit 2) with the usage shown, and a missing config file is
 * named. Nothing starts. */
static void test_bad_command_lines_are_refused(void **state)
{
    dh_daemon *d = *state;
    char out[4096];
    char *const bogus[] = {(char *)DH_ACTIVATORD, (char *)"--bogus", NULL};
    DH_CHECK(d, dh_run(bogus, out, sizeof(out)) == 2 && strstr(out, "Usage: activatord"),
             "activatord --bogus: %s", out);
    char *const stray[] = {(char *)DH_ACTIVATORD, (char *)"start", NULL};
    DH_CHECK(d, dh_run(stray, out, sizeof(out)) == 2 && strstr(out, "unexpected argument 'start'"),
             "activatord start: %s", out);
    DH_CHECK(d, check_config("/nonexistent/activatord.conf", out, sizeof(out)) == 1 &&
                    strstr(out, "/nonexistent/activatord.conf"),
             "--check-config of a missing file: %s", out);
}

int main(void)
{
    int r = dh_check_can_run("daemon-config", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_check_config_reports_file_and_line),
        DH_TEST(test_good_hosts_served_beside_a_bad_one),
        DH_TEST(test_bad_command_lines_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
