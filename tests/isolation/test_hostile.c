/* A hostile tenant on a real daemon: act-hostile runs as a host
 * beside an ordinary one (act-testapp), both as the daemon runs any host
 * (no User=, the defaults), and the scenario of hostile_check.c must end
 * with every attempt failed:
 *   N tried, 0 succeeded
 * but for PidsMax=: the hostile host's is HOSTILE_PIDS_MAX, low enough for
 * its fork bomb to reach on a slow box (one forked only 2,400 to 3,400
 * processes in 8 s, short of the default 4096). That the default 4096 is in
 * force for a host without PidsMax= is daemon-isolation's to check. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostile_check.h"
#include "tests/activator/daemon/harness.h"

#ifndef ACT_HOSTILE
#error "ACT_HOSTILE must name the act-hostile executable"
#endif
#ifndef ACT_TESTAPP
#error "ACT_TESTAPP must name the act-testapp executable"
#endif

/* The hostile host's PidsMax=: the cap its fork bomb drives. */
#define HOSTILE_PIDS_MAX 512

typedef struct log_places {
    dh_daemon *d;
    const char *host;
} log_places;

static bool file_has(const char *path, const char *text)
{
    char *content = dh_read_text(path);
    bool found = content && strstr(content, text);
    free(content);
    return found;
}

/* Every regular file below dir, a few levels down: where a host's output
 * goes when it has a file of its own rather than the daemon's stream. */
static bool tree_has(const char *dir, const char *text, int depth)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *entry;
    while (!found && (entry = readdir(d))) {
        if (entry->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
        if (entry->d_type == DT_REG)
            found = file_has(path, text);
        else if (entry->d_type == DT_DIR && depth > 0)
            found = tree_has(path, text, depth - 1);
    }
    closedir(d);
    return found;
}

/* The ordinary host's output: in the daemon's log (its stream when it has
 * none of its own) or in files of the host's state. */
static bool log_has(const char *text, int timeout_ms, void *userdata)
{
    log_places *places = userdata;
    char host_dir[PATH_MAX];
    snprintf(host_dir, sizeof(host_dir), "%s/hosts/%s", places->d->drv.state_dir, places->host);
    for (int waited = 0; waited <= timeout_ms; waited += 100) {
        if (file_has(places->d->drv.log_path, text) || tree_has(host_dir, text, 3))
            return true;
        dd_sleep_ms(100);
    }
    return false;
}

static void test_hostile_tenant(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    /* The daemon at the level a box runs it (info): at debug, every STATUS=
     * of the flood is a log line, which is the test's choice, not the
     * daemon's work. */
    d->drv.verbose = false;
    /* ACT_KEEP=1 leaves the daemon's dir (its log, the hosts' state) to look at. */
    d->drv.keep_dir = getenv("ACT_KEEP") != NULL;
    int ordinary_port = dh_free_port(), hostile_port = dh_free_port();
    dh_write_host(d, "ordinary",
                  "[Host]\nExec=act-testapp --log-requests\nReady=notify\nReadyTimeoutSec=10\n"
                  "StopTimeoutSec=2\nIdleTimeoutSec=0\n[Listen]\nListenStream=127.0.0.1:%d\n",
                  ordinary_port);
    dh_write_host(d, "hostile",
                  "[Host]\nExec=act-hostile\nReady=notify\nReadyTimeoutSec=10\n"
                  "ExecReplicate=/bin/sleep infinity\n"
                  "StopTimeoutSec=2\nIdleTimeoutSec=0\n[Listen]\nListenStream=127.0.0.1:%d\n"
                  "[Limits]\nPidsMax=%d\n",
                  hostile_port, HOSTILE_PIDS_MAX);
    dh_stage_file(d, "ordinary", "v1", ACT_TESTAPP, true, NULL);
    dh_stage_file(d, "hostile", "v1", ACT_HOSTILE, true, NULL);
    dh_start(d, NULL);
    dh_wake(d, "ordinary");
    dh_wake(d, "hostile");

    log_places places = {.d = d, .host = "ordinary"};
    hostile_setup setup = {
        .control_url = d->drv.control_url,
        .events_url = d->drv.events_url,
        .state_dir = d->drv.state_dir,
        .runtime_dir = d->drv.runtime_dir,
        .hostile_host = "hostile",
        .hostile_port = hostile_port,
        .ordinary_host = "ordinary",
        .ordinary_port = ordinary_port,
        .pids_max = HOSTILE_PIDS_MAX,
        .flood_ms = 10000,
        .log_has = log_has,
        .userdata = &places,
    };
    hostile_outcome outcome;
    int r = hostile_run(&setup, &outcome, stdout);
    DH_CHECK(d, r == 0,
             "the hostile tenant got through: %u of %u attempts succeeded (%s), %u untried, "
             "%u controls failed, %u problems",
             outcome.succeeded, outcome.tried, outcome.succeeded_names, outcome.untried,
             outcome.controls_failed, outcome.problems);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int skip = dh_check_can_run("isolation", DH_STORE_DIR);
    if (skip)
        return skip;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_hostile_tenant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
