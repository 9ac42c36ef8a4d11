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

uint64_t dh_claim_take_for(dh_daemon *d, const char *host, const char *box)
{
    claim current;
    DH_CHECK(d, dh_claim_get(d, host, &current), "%s has no claim to hand to %s", host, box);
    claim taken = current;
    snprintf(taken.holder.box, sizeof(taken.holder.box), "%s", box);
    snprintf(taken.holder.incarnation, sizeof(taken.holder.incarnation), "fedcba9876543210");
    taken.holder.session = current.holder.session + 1;
    taken.holder.generation = current.holder.generation + 1;
    snprintf(taken.op.exec, sizeof(taken.op.exec), "%s", box);
    snprintf(taken.op.phase, sizeof(taken.op.phase), "starting");
    taken.holder.handle[0] = '\0';
    return dh_claim_put(d, &taken);
}

void dh_marker_path(dh_daemon *d, const char *host, char *out, size_t size)
{
    snprintf(out, size, "%s/marker-%s", d->drv.dir, host);
}

int dh_http_get(int port, char *buf, size_t size)
{
    return dd_http_get(port, buf, size);
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

int dh_run(char *const argv[], char *out, size_t out_size)
{
    return dd_run(argv, out, out_size);
}

int dh_run_as(char *const argv[], uid_t uid, gid_t gid, char *out, size_t out_size)
{
    return dd_run_as(argv, uid, gid, out, out_size);
}
