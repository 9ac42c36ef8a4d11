/* What the tests look at besides the daemon's own answers: the claim store,
 * the app over HTTP, the apps' markers, cgroup leaves, records, and other
 * programs' exit codes and output. */
#include "harness.h"
#include "harness_internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

bool dh_claim_get(dh_daemon *d, const char *host, claim *out)
{
    act_error err = {0};
    int r = claims_read(d->store, host, out, &err);
    DH_CHECK(d, r >= 0, "reading the claim of %s: %s", host, err.message);
    return r == 1;
}

bool dh_claim_wait_phase(dh_daemon *d, const char *host, const char *phase, int timeout_ms,
                         claim *out)
{
    dh_waiting_for("host %s's claim in phase %s (up to %d ms)", host, phase, timeout_ms);
    uint64_t deadline = dh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        bool found = dh_claim_get(d, host, out);
        if (found && strcmp(out->op.phase, phase) == 0)
            return true;
        if (!found)
            memset(out, 0, sizeof(*out));
        if (dh_now_ms() >= deadline)
            return false;
        dh_sleep_ms(20);
    }
}

bool dh_claim_wait(dh_daemon *d, const char *host, bool (*done)(const claim *c), int timeout_ms,
                   claim *out)
{
    dh_waiting_for("host %s's claim to be written back (up to %d ms)", host, timeout_ms);
    uint64_t deadline = dh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (!dh_claim_get(d, host, out))
            memset(out, 0, sizeof(*out));
        else if (done(out))
            return true;
        if (dh_now_ms() >= deadline)
            return false;
        dh_sleep_ms(20);
    }
}

uint64_t dh_claim_put(dh_daemon *d, const claim *c)
{
    for (int i = 0; i < 20; i++) {
        claim current;
        uint64_t expected = dh_claim_get(d, c->host, &current) ? current.revision : 0;
        uint64_t revision = 0;
        act_error err = {0};
        int r = claims_cas(d->store, c->host, expected, c, &revision, NULL, &err);
        if (r == 0)
            return revision;
        DH_CHECK(d, r == CLAIMS_CHANGED, "writing the claim of %s: %s", c->host, err.message);
    }
    fail_msg("writing the claim of %s: it kept changing under the test", c->host);
    return 0;
}

void dh_claim_assigned(const char *host, const char *box, claim *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->host, sizeof(out->host), "%s", host);
    snprintf(out->op.id, sizeof(out->op.id), "e2e");
    out->op.kind = CLAIM_OP_SERVING;
    snprintf(out->op.phase, sizeof(out->op.phase), "assigned");
    snprintf(out->op.exec, sizeof(out->op.exec), "%s", box);
}

void dh_claim_beacon(const dh_daemon *d, const char *box, claim *out)
{
    dh_claim_assigned(DH_BEACON_HOST, box, out);
    /* d's box ran it last and released it: the claim names d's box, so the
     * box's index (and watch) has it, and nothing of it is d's to run. */
    snprintf(out->holder.box, sizeof(out->holder.box), "%s", d->box);
    snprintf(out->holder.incarnation, sizeof(out->holder.incarnation), "beacon");
    out->holder.session = 1;
    out->holder.released_usec = 1;
}

/* from as box writes it when it admits itself: its holder (another
 * incarnation, the next session and generation), its op.exec, phase
 * starting, no handle. */
static void taken_by(const claim *from, const char *box, claim *out)
{
    *out = *from;
    snprintf(out->holder.box, sizeof(out->holder.box), "%s", box);
    snprintf(out->holder.incarnation, sizeof(out->holder.incarnation), "fedcba9876543210");
    out->holder.session = from->holder.session + 1;
    out->holder.generation = from->holder.generation + 1;
    out->holder.starting_generation = 0;
    out->holder.handle[0] = '\0';
    snprintf(out->op.exec, sizeof(out->op.exec), "%s", box);
    snprintf(out->op.phase, sizeof(out->op.phase), "starting");
}

void dh_claim_taken_by_other_box(const claim *from, claim *out)
{
    taken_by(from, DH_OTHER_BOX, out);
}

uint64_t dh_claim_take_for(dh_daemon *d, const char *host, const char *box)
{
    claim current;
    DH_CHECK(d, dh_claim_get(d, host, &current), "%s has no claim to hand to %s", host, box);
    claim taken;
    taken_by(&current, box, &taken);
    return dh_claim_put(d, &taken);
}

void dh_marker_path(dh_daemon *d, const char *host, char *out, size_t size)
{
    snprintf(out, size, "%s/markers/marker-%s", d->drv.dir, host);
}

int dh_http_get(int port, char *buf, size_t size)
{
    return dd_http_get(port, buf, size);
}

int dh_http_get_unix(const char *path, char *buf, size_t size)
{
    return dd_http_get_unix(path, buf, size);
}

int64_t dh_answer_pid(int port)
{
    char body[1024];
    int n = dh_http_get(port, body, sizeof(body));
    const char *pid = n > 0 ? strstr(body, "pid=") : NULL;
    return pid ? atoll(pid + 4) : -1;
}

void dh_expect_version(dh_daemon *d, int port, const char *version)
{
    char body[1024];
    int n = dh_http_get(port, body, sizeof(body));
    DH_CHECK(d, n > 0, "GET / on port %d: %s", port, n < 0 ? strerror(-n) : "no answer");
    const char *v = strstr(body, "version=");
    DH_CHECK(d, v, "the answer names no version: %s", body);
    v += strlen("version=");
    size_t len = strcspn(v, " \n");
    DH_CHECK(d, strlen(version) == len && strncmp(v, version, len) == 0,
             "the host answered as %.*s, not %s", (int)len, v, version);
}

void dh_cold_wake_runs_fallback(dh_daemon *d, const char *host, int port, const char *version)
{
    dh_events_mark(d);
    dh_expect_version(d, port, version);
    DH_CHECK(d, dh_event_wait(d, host, "pin.fallback", 10000, NULL),
             "no pin.fallback event for the cold wake of %s", host);
}

static void *busy_client_run(void *arg)
{
    dh_busy_client *client = arg;
    char body[512];
    for (unsigned i = 0; !atomic_load(&client->stop); i++) {
        bool on_unix = client->unix_path && i % 2;
        int n = on_unix ? dh_http_get_unix(client->unix_path, body, sizeof(body))
                        : dh_http_get(client->port, body, sizeof(body));
        if (n > 0 && strstr(body, "pid=")) {
            client->answered++;
            continue;
        }
        if (!client->failed++)
            snprintf(client->first_failure, sizeof(client->first_failure), "%s: %.200s",
                     on_unix ? client->unix_path : "tcp", n < 0 ? strerror(-n) : body);
    }
    return NULL;
}

void dh_busy_client_start(dh_daemon *d, dh_busy_client *client, int port, const char *unix_path)
{
    *client = (dh_busy_client){.port = port, .unix_path = unix_path};
    DH_CHECK(d, pthread_create(&client->thread, NULL, busy_client_run, client) == 0,
             "cannot start the client");
}

void dh_busy_client_stop(dh_busy_client *client)
{
    atomic_store(&client->stop, true);
    pthread_join(client->thread, NULL);
}

size_t dh_marker_pids(dh_daemon *d, const char *host, pid_t *pids, size_t max)
{
    char path[PATH_MAX];
    dh_marker_path(d, host, path, sizeof(path));
    char *text = dh_read_text(path);
    if (!text)
        return 0;
    size_t n = 0;
    for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n"))
        pids[n++] = (pid_t)atoi(line);
    free(text);
    return n;
}

bool dh_marker_wait(dh_daemon *d, const char *host, size_t count, int timeout_ms)
{
    uint64_t deadline = dh_now_ms() + (uint64_t)timeout_ms;
    pid_t pids[64];
    while (dh_marker_pids(d, host, pids, 64) < count) {
        if (dh_now_ms() >= deadline)
            return false;
        dh_sleep_ms(10);
    }
    return true;
}

bool dh_leaf_exists(dh_daemon *d, const char *host, const char *leaf)
{
    return dd_leaf_exists(&d->drv, host, leaf);
}

size_t dh_leaf_count(dh_daemon *d, const char *host)
{
    return dd_leaf_count(&d->drv, host);
}

size_t dh_generation_records(dh_daemon *d, const char *host)
{
    return dd_generation_records(&d->drv, host);
}

size_t dh_host_dir_fds(dh_daemon *d, const char *host)
{
    return dd_host_dir_fds(&d->drv, host);
}

/* "activatorctl --connect ... move web box-2", for the watchdog. */
static void waiting_for_run(char *const argv[])
{
    char command[512] = "";
    size_t used = 0;
    for (size_t i = 0; argv[i] && used < sizeof(command) - 1; i++)
        used +=
            (size_t)snprintf(command + used, sizeof(command) - used, "%s%s", i ? " " : "", argv[i]);
    dh_waiting_for("%s to exit (up to %d s)", command, DD_RUN_TIMEOUT_MS / 1000);
}

int dh_run(char *const argv[], char *out, size_t out_size)
{
    waiting_for_run(argv);
    return dd_run(argv, out, out_size);
}

int dh_run_as(char *const argv[], uid_t uid, gid_t gid, char *out, size_t out_size)
{
    waiting_for_run(argv);
    return dd_run_as(argv, uid, gid, out, out_size);
}
