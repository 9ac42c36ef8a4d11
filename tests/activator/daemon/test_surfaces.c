/* Where a host meets the daemon, under the real daemon with real apps:
 *   - a Ready=exec: probe runs as the host's user, in the generation's leaf,
 *     with the generation's environment;
 *   - the notify socket is the host user's alone (another uid gets EACCES),
 *     a datagram from outside the generation is ignored, counted, and
 *     logged once; a flood of it from inside leaves the daemon answering;
 *   - without journald, a host's output goes to a file of its own, rotated
 *     by size;
 *   - the metrics server holds a bounded number of connections. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define HOST_UID 65534

/* A world-writable temp dir for what the host's user writes. */
static void make_shared_dir(dh_daemon *d, char *out, size_t size)
{
    snprintf(out, size, "/tmp/act-surfaces-XXXXXX");
    DH_CHECK(d, mkdtemp(out), "mkdtemp: %s", strerror(errno));
    chmod(out, 0777);
}

/* The daemon's dirs are 0700; the host's user passes through to its state
 * directory (its working directory). */
static void open_path_to_state(dh_daemon *d)
{
    chmod(d->drv.dir, 0711);
    chmod(d->drv.state_dir, 0711);
    char hosts[PATH_MAX];
    snprintf(hosts, sizeof(hosts), "%s/hosts", d->drv.state_dir);
    mkdir(hosts, 0711);
    chmod(hosts, 0711);
}

static void write_script(dh_daemon *d, const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    DH_CHECK(d, f, "cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
}

static void test_ready_exec_probe_runs_as_the_host_in_its_leaf(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    open_path_to_state(d);
    char shared[64], script[128], out[160];
    make_shared_dir(d, shared, sizeof(shared));
    snprintf(script, sizeof(script), "%s/probe.sh", shared);
    snprintf(out, sizeof(out), "%s/probe.out", shared);
    write_script(d, script,
                 "#!/bin/sh\n"
                 "{ echo \"uid=$(id -u)\"; echo \"gen=$ACTIVATOR_GENERATION\";\n"
                 "  echo \"env=$PROBE_MARK\"; cat /proc/self/cgroup; } > \"$PROBE_OUT.tmp\"\n"
                 "mv \"$PROBE_OUT.tmp\" \"$PROBE_OUT\"\n");
    int port = dh_free_port();
    dh_write_host(d, "probed",
                  "[Host]\n"
                  "Exec=act-e2e-app\n"
                  "User=%d\n"
                  "Group=%d\n"
                  "Environment=PROBE_OUT=%s PROBE_MARK=from-the-host-file\n"
                  "Ready=exec:%s\n"
                  "ReadyTimeoutSec=10\n"
                  "StopTimeoutSec=1\n"
                  "[Listen]\n"
                  "ListenStream=127.0.0.1:%d\n",
                  HOST_UID, HOST_UID, out, script, port);
    dh_stage(d, "probed", "v1", true, NULL);
    dh_start(d, NULL);
    dh_served served = dh_wake(d, "probed");

    char *text = dh_read_text(out);
    DH_CHECK(d, text, "the probe wrote nothing to %s", out);
    char expected_leaf[64];
    snprintf(expected_leaf, sizeof(expected_leaf), "/hosts/probed/g-%" PRIu64 "\n",
             served.generation);
    char expected_gen[32];
    snprintf(expected_gen, sizeof(expected_gen), "gen=%" PRIu64 "\n", served.generation);
    bool as_host = strstr(text, "uid=65534\n") != NULL;
    bool in_leaf = strstr(text, expected_leaf) != NULL;
    bool with_env = strstr(text, expected_gen) && strstr(text, "env=from-the-host-file\n");
    char copy[2048];
    snprintf(copy, sizeof(copy), "%s", text);
    free(text);
    DH_CHECK(d, as_host, "the probe did not run as uid %d: %s", HOST_UID, copy);
    DH_CHECK(d, in_leaf, "the probe did not run in the leaf %s: %s", expected_leaf, copy);
    DH_CHECK(d, with_env, "the probe did not get the generation's environment: %s", copy);

    dh_stop_and_check_clean(d);
    unlink(out);
    unlink(script);
    rmdir(shared);
}

int main(void)
{
    int r = dh_check_can_run("daemon-surfaces", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_ready_exec_probe_runs_as_the_host_in_its_leaf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
