#include "fleet.h"

#include <assert.h>
#include <errno.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

int fl_check_can_run(const char *suite)
{
    return dh_check_can_run(suite, DH_STORE_ETCD);
}

const char *fl_box_name(size_t index)
{
    static const char *const names[FL_BOXES_MAX] = {"box-1", "box-2", "box-3", "box-4"};
    assert_true(index < FL_BOXES_MAX);
    return names[index];
}

const char *fl_box_address(size_t index)
{
    static const char *const addresses[FL_BOXES_MAX] = {"127.0.0.2", "127.0.0.3", "127.0.0.4",
                                                        "127.0.0.5"};
    assert_true(index < FL_BOXES_MAX);
    return addresses[index];
}

static void setup(fl_fleet *fl, size_t n_boxes, const char *extra_conf, int proxied)
{
    assert_true(n_boxes >= 1 && n_boxes <= FL_BOXES_MAX);
    memset(fl, 0, sizeof(*fl));
    fl->proxied = proxied;
    act_error err = {0};
    if (etcd_harness_start(&fl->etcd, &err) < 0)
        fail_msg("cannot start etcd: %s", err.message);
    fl->etcd_started = true;
    snprintf(fl->store_url, sizeof(fl->store_url), "%s/fleet-%d", fl->etcd.url_prefix,
             (int)getpid());
    if (claims_store_open(fl->store_url, NULL, &fl->store, &err) < 0)
        fail_msg("cannot open the claim store %s: %s", fl->store_url, err.message);
    char proxied_url[PATH_MAX];
    if (proxied >= 0) {
        fl_proxy_start(&fl->proxy, fl->etcd.client_port);
        snprintf(proxied_url, sizeof(proxied_url), "etcd://127.0.0.1:%d/fleet-%d", fl->proxy.port,
                 (int)getpid());
    }
    for (size_t i = 0; i < n_boxes; i++) {
        dh_setup_box(&fl->boxes[i], fl_box_name(i), (int)i == proxied ? proxied_url : fl->store_url,
                     extra_conf);
        fl->n_boxes++;
    }
}

void fl_setup(fl_fleet *fl, size_t n_boxes, const char *extra_conf)
{
    setup(fl, n_boxes, extra_conf, -1);
}

void fl_setup_cut_off(fl_fleet *fl, size_t n_boxes, const char *extra_conf, size_t index)
{
    setup(fl, n_boxes, extra_conf, (int)index);
}

int fl_teardown(fl_fleet *fl)
{
    int result = 0;
    fl_overlap_stop(fl, NULL);
    for (size_t i = 0; i < fl->n_boxes; i++)
        if (dh_teardown(&fl->boxes[i]) < 0)
            result = -1;
    fl->n_boxes = 0;
    fl_proxy_stop(&fl->proxy);
    claims_store_free(fl->store);
    fl->store = NULL;
    if (fl->etcd_started)
        etcd_harness_destroy(&fl->etcd);
    fl->etcd_started = false;
    return result;
}

int fl_fixture_setup(void **state)
{
    *state = calloc(1, sizeof(fl_fleet));
    dh_watchdog_arm(FL_TEST_BUDGET_MS);
    return *state ? 0 : -1;
}

int fl_fixture_teardown(void **state)
{
    dh_step("the fleet's teardown");
    int r = fl_teardown(*state);
    free(*state);
    dh_watchdog_disarm();
    return r;
}

int fl_add_host(fl_fleet *fl, const char *host, const char *app_args,
                const char *extra_host_lines)
{
    int port = dh_free_port();
    for (size_t i = 0; i < fl->n_boxes; i++) {
        dh_write_app_host_at(&fl->boxes[i], host, fl_box_address(i), port, app_args,
                             extra_host_lines);
        dh_stage(&fl->boxes[i], host, "v1", true, NULL);
    }
    return port;
}

void fl_start(fl_fleet *fl)
{
    for (size_t i = 0; i < fl->n_boxes; i++)
        dh_start(&fl->boxes[i], NULL);
}

void fl_assign(fl_fleet *fl, const char *host, const char *box)
{
    claim current = {0};
    act_error err = {0};
    int found = claims_read(fl->store, host, &current, &err);
    if (found < 0)
        fail_msg("reading %s's claim: %s", host, err.message);
    claim next = current;
    if (!found)
        dh_claim_assigned(host, box, &next);
    snprintf(next.host, sizeof(next.host), "%s", host);
    snprintf(next.op.id, sizeof(next.op.id), "assign");
    next.op.kind = CLAIM_OP_SERVING;
    snprintf(next.op.phase, sizeof(next.op.phase), "assigned");
    snprintf(next.op.exec, sizeof(next.op.exec), "%s", box);
    uint64_t revision = 0;
    if (claims_cas(fl->store, host, found ? current.revision : 0, &next, &revision, NULL, &err) <
        0)
        fail_msg("assigning %s to %s: %s", host, box, err.message);
}

/* Whether pid can still run its own code: not exiting (PF_EXITING, 0x4 in
 * /proc/PID/stat's flags: a retirement kills a frozen leaf, then thaws it,
 * and its processes are listed until they are torn down, though they never
 * return to user space), not a zombie, no SIGKILL pending. */
static bool can_run(long pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    _cleanup_free_ char *stat = dh_read_text(path);
    const char *after = stat ? strrchr(stat, ')') : NULL;
    char state = 0;
    unsigned long flags = 0;
    if (!after || sscanf(after, ") %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
        return false;
    if (state == 'Z' || state == 'X' || (flags & 0x4))
        return false;
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    _cleanup_free_ char *status = dh_read_text(path);
    for (const char *key = "\nSigPnd:"; status && key;
         key = strcmp(key, "\nSigPnd:") == 0 ? "\nShdPnd:" : NULL) {
        const char *at = strstr(status, key);
        if (at && (strtoull(at + strlen(key), NULL, 16) & (1ull << (SIGKILL - 1))))
            return false;
    }
    return status != NULL;
}

/* The pids that can run in host's g-* leaves that are not frozen, under one
 * box's cgroup root (at most max; more are not counted). */
#define PIDS_MAX 64
static size_t box_pids(const dh_daemon *d, const char *host, long *pids, size_t max)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", d->drv.cgroup_path, host);
    _cleanup_(closedirp) DIR *dir = opendir(path);
    if (!dir)
        return 0;
    size_t n = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) && n < max) {
        if (strncmp(entry->d_name, "g-", 2) != 0)
            continue;
        char procs_path[2 * PATH_MAX];
        /* A frozen generation serves nobody: it is not running. */
        snprintf(procs_path, sizeof(procs_path), "%s/%s/cgroup.events", path, entry->d_name);
        _cleanup_free_ char *events = dh_read_text(procs_path);
        if (events && strstr(events, "frozen 1"))
            continue;
        snprintf(procs_path, sizeof(procs_path), "%s/%s/cgroup.procs", path, entry->d_name);
        _cleanup_free_ char *procs = dh_read_text(procs_path);
        for (char *at = procs, *end; at && *at && n < max; at = end) {
            long pid = strtol(at, &end, 10);
            if (end == at)
                break;
            if (can_run(pid))
                pids[n++] = pid;
        }
    }
    return n;
}

/* The boxes are read one after another, so a box read first running and
 * one read last running need not have run at the same time: the first may
 * have stopped, and the second started, in between. Each box is read twice,
 * all of them once and then all of them again; one whose same process is
 * there both times ran for the whole time between its two reads, and every
 * such stretch holds the instant between the two rounds. Those boxes ran at
 * that same instant. */
size_t fl_running(fl_fleet *fl, const char *host, int *running_on)
{
    static_assert(FL_BOXES_MAX <= 8, "the rounds' arrays are on the stack");
    long first[FL_BOXES_MAX][PIDS_MAX];
    size_t n_first[FL_BOXES_MAX];
    for (size_t i = 0; i < fl->n_boxes; i++)
        n_first[i] = box_pids(&fl->boxes[i], host, first[i], PIDS_MAX);
    size_t running = 0;
    if (running_on)
        *running_on = -1;
    for (size_t i = 0; i < fl->n_boxes; i++) {
        long second[PIDS_MAX];
        size_t n_second = box_pids(&fl->boxes[i], host, second, PIDS_MAX);
        bool throughout = false;
        for (size_t a = 0; a < n_first[i] && !throughout; a++)
            for (size_t b = 0; b < n_second && !throughout; b++)
                throughout = first[i][a] == second[b];
        if (!throughout)
            continue;
        running++;
        if (running_on)
            *running_on = (int)i;
    }
    return running;
}

bool fl_wait_running_on(fl_fleet *fl, const char *host, size_t index, int timeout_ms)
{
    dh_waiting_for("%s to run on %s alone (up to %d ms)", host, fl_box_name(index), timeout_ms);
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    do {
        int on = -1;
        if (fl_running(fl, host, &on) == 1 && on == (int)index)
            return true;
        nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
    } while (dd_now_ms() < deadline);
    return false;
}

static void *sample_overlap(void *arg)
{
    fl_overlap *overlap = arg;
    while (!atomic_load(&overlap->stop)) {
        size_t running = fl_running(overlap->fleet, overlap->host, NULL);
        if (running > atomic_load(&overlap->most_running))
            atomic_store(&overlap->most_running, running);
        atomic_fetch_add(&overlap->samples, 1);
        nanosleep(&(struct timespec){.tv_nsec = 500 * 1000}, NULL);
    }
    return NULL;
}

void fl_overlap_start(fl_fleet *fl, const char *host)
{
    fl_overlap *overlap = &fl->overlap;
    assert_false(overlap->running);
    overlap->fleet = fl;
    snprintf(overlap->host, sizeof(overlap->host), "%s", host);
    atomic_store(&overlap->stop, false);
    atomic_store(&overlap->most_running, 0);
    atomic_store(&overlap->samples, 0);
    if (pthread_create(&overlap->thread, NULL, sample_overlap, overlap) != 0)
        fail_msg("cannot start the overlap sampler");
    overlap->running = true;
}

size_t fl_overlap_stop(fl_fleet *fl, unsigned *samples)
{
    fl_overlap *overlap = &fl->overlap;
    if (overlap->running) {
        atomic_store(&overlap->stop, true);
        pthread_join(overlap->thread, NULL);
        overlap->running = false;
    }
    if (samples)
        *samples = atomic_load(&overlap->samples);
    return atomic_load(&overlap->most_running);
}

int fl_ctl(fl_fleet *fl, int index, char *out, size_t size, ...)
{
    char *argv[24] = {(char *)DH_ACTIVATORCTL, (char *)"--no-color"};
    size_t n = 2;
    argv[n++] = (char *)(index < 0 ? "--store" : "--connect");
    argv[n++] = index < 0 ? fl->store_url : fl->boxes[index].drv.control_url;
    va_list ap;
    va_start(ap, size);
    for (const char *arg; (arg = va_arg(ap, const char *)) && n < 23;)
        argv[n++] = (char *)arg;
    va_end(ap);
    argv[n] = NULL;
    return dh_run(argv, out, size);
}

long fl_counter_at(fl_fleet *fl, size_t index, int port)
{
    char body[512];
    int n = dd_http_get_at(fl_box_address(index), port, body, sizeof(body));
    const char *counter = n > 0 ? strstr(body, "counter=") : NULL;
    return counter ? atol(counter + 8) : -1;
}

claim fl_claim_of(fl_fleet *fl, const char *host)
{
    claim c = {0};
    act_error err = {0};
    if (claims_read(fl->store, host, &c, &err) < 0)
        fail_msg("reading %s's claim: %s", host, err.message);
    return c;
}

/* The deadline is the clock's, not a count of tries: on a loaded box each
 * try (a store read, a walk of every box's cgroups) takes its own time. */
bool fl_serves_on(fl_fleet *fl, const char *host, size_t index, int timeout_ms)
{
    dh_waiting_for("the claim to say %s serves on %s, and %s to run there alone (up to %d ms)",
                   host, fl_box_name(index), host, timeout_ms);
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    do {
        claim c = fl_claim_of(fl, host);
        int on = -1;
        if (c.op.kind == CLAIM_OP_SERVING && strcmp(c.op.phase, "serving") == 0 &&
            strcmp(c.holder.box, fl_box_name(index)) == 0 && fl_running(fl, host, &on) == 1 &&
            on == (int)index)
            return true;
        usleep(20 * 1000);
    } while (dd_now_ms() < deadline);
    return false;
}

bool fl_kill_root(fl_fleet *fl, size_t index)
{
    const char *root = fl->boxes[index].drv.cgroup_path;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/cgroup.kill", root);
    FILE *f = fopen(path, "we");
    bool written = f && fputs("1", f) >= 0;
    if (f && fclose(f) != 0)
        written = false;
    if (!written)
        return false;
    snprintf(path, sizeof(path), "%s/cgroup.events", root);
    uint64_t deadline = dd_now_ms() + 10000;
    for (;;) {
        _cleanup_free_ char *events = dh_read_text(path);
        if (events && strstr(events, "populated 0"))
            return true;
        if (dd_now_ms() >= deadline)
            return false;
        usleep(5 * 1000);
    }
}

void fl_power_cut(fl_fleet *fl, size_t index)
{
    dh_kill(&fl->boxes[index]);
    dh_waiting_for("%s's cgroup root to be empty after cgroup.kill (up to 10 s)",
                   fl_box_name(index));
    if (!fl_kill_root(fl, index))
        fail_msg("%s's cgroup root: cgroup.kill could not be written, or processes remain "
                 "10 s after it",
                 fl_box_name(index));
}

bool fl_wait_dead(fl_fleet *fl, size_t index, int timeout_ms)
{
    dh_waiting_for("%s's lease to lapse (up to %d ms)", fl_box_name(index), timeout_ms);
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    do {
        claims_box *boxes = NULL;
        size_t n = 0;
        act_error err = {0};
        if (claims_box_list_live(fl->store, &boxes, &n, &err) == 0) {
            const claims_box *record = claims_box_find(boxes, n, fl_box_name(index));
            bool live = record && record->live;
            free(boxes);
            if (!live)
                return true;
        }
        usleep(50 * 1000);
    } while (dd_now_ms() < deadline);
    return false;
}
