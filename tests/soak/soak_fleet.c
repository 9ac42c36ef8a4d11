/* The soak's fleet: one etcd, n boxes (tests/fleet/fleet.h), a dozen hosts
 * configured alike on every box, each assigned to one box at the start, and
 * the builds the faults swap to. */
#include "soak.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

typedef struct host_spec {
    const char *name;
    soak_host_kind kind;
    const char *app_args;
    const char *lines; /* [Host] lines, and sections after it */
    unsigned interval_ms;
    bool failover;
} host_spec;

/* The kinds of host the soak runs; none is freeze-parked (ParkMode=freeze
 * has tests of its own, tests/activator/daemon/test_freeze.c). */
static const host_spec specs[] = {
    /* Failover=yes on stateless hosts only: a takeover restores the last
     * checkpoint, so a stateful host's counter would rightly go back. */
    {"plain-1", SOAK_PLAIN, "", NULL, 500, true},
    {"plain-2", SOAK_PLAIN, "", NULL, 500, true},
    {"plain-3", SOAK_PLAIN, "", NULL, 500, false},
    {"idle-1", SOAK_IDLE, "", "IdleTimeoutSec=1\n", 1500, true},
    {"idle-2", SOAK_IDLE, "", "IdleTimeoutSec=1\n", 1500, false},
    {"limits", SOAK_LIMITS, "", "[Limits]\nMemoryMax=512M\nPidsMax=64\n", 700, false},
    /* Crashes 600 ms after each start, served or not: a failure park each
     * time, backing off, and a wake at the next connection. */
    {"crashloop", SOAK_CRASHLOOP, "--crash-after-ms 600", NULL, 700, false},
    {"counter-1", SOAK_COUNTER, "--counter", NULL, 500, false},
    {"counter-2", SOAK_COUNTER, "--counter", "IdleTimeoutSec=2\n", 900, false},
    {"stubborn", SOAK_STUBBORN, "--ignore-sigterm", NULL, 700, false},
    {"slow", SOAK_SLOW, "--ready-delay-ms 400", NULL, 700, false},
    {"watchdog", SOAK_WATCHDOG, "", "WatchdogSec=2s\n", 700, false},
};

const char *soak_host_kind_name(soak_host_kind kind)
{
    static const char *const names[] = {
        [SOAK_PLAIN] = "socket-activated", [SOAK_IDLE] = "idle-parked",
        [SOAK_LIMITS] = "limits",          [SOAK_CRASHLOOP] = "crash-looping",
        [SOAK_COUNTER] = "stateful",       [SOAK_STUBBORN] = "ignores SIGTERM",
        [SOAK_SLOW] = "slow ready",        [SOAK_WATCHDOG] = "watchdog",
    };
    return names[kind];
}

int soak_fleet_setup(soak *s)
{
    fl_fleet *fl = &s->fleet;
    snprintf(s->checkpoints, sizeof(s->checkpoints), "/tmp/act-soak-ckpt-XXXXXX");
    if (!mkdtemp(s->checkpoints)) {
        fprintf(stderr, "soak: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    char conf[512];
    /* Moves carry the state in checkpoints every box reads: through a
     * registry when there is one (whose outage is then a fault), else a
     * shared directory. The lease is short enough for a power cut or a
     * partition to end in takeovers within a fault (6 s, and the grace of
     * 1.2 s its margin gives), and long enough that a daemon killed and
     * restarted (a second down, a start) is not counted dead. */
    act_error registry_err = {0};
    s->through_registry = reg_harness_available() &&
                          reg_harness_start(&s->registry, false, false, &registry_err) == 0;
    if (registry_err.message[0])
        fprintf(stderr, "soak: no registry (%s); checkpoints in %s\n", registry_err.message,
                s->checkpoints);
    if (s->through_registry)
        snprintf(conf, sizeof(conf),
                 "Checkpoints=docker://%s/checkpoints\nRegistryInsecure=%s\nBoxLeaseSec=6s\n",
                 s->registry.address, s->registry.address);
    else
        snprintf(conf, sizeof(conf), "Checkpoints=dir://%s\nBoxLeaseSec=6s\n", s->checkpoints);
    s->fault_off[F_REGISTRY_STOP] = s->fault_off[F_REGISTRY_STOP] || !s->through_registry;
    /* box-1's etcd traffic goes through a proxy of its own: the partition
     * fault cuts it off. */
    fl_setup_cut_off(fl, s->n_boxes, conf, 0);
    /* The soak reads every box's events on a subscriber of its own for the
     * whole run (soak_links.c). */
    for (size_t b = 0; b < s->n_boxes; b++)
        fl->boxes[b].drv.events_by_caller = true;
    s->n_hosts = sizeof(specs) / sizeof(specs[0]);
    for (size_t i = 0; i < s->n_hosts; i++) {
        soak_host *h = &s->hosts[i];
        snprintf(h->name, sizeof(h->name), "%s", specs[i].name);
        h->kind = specs[i].kind;
        h->interval_ms = specs[i].interval_ms;
        h->failover = specs[i].failover;
        h->next_variant = 2;
        h->last_counter = 0;
        atomic_init(&h->route, -1);
        pthread_mutex_init(&h->lock, NULL);
        /* Two starts per admission, not five: a swap to the crashing build
         * gives up after one backoff (1 s) instead of four (15 s). */
        char lines[256];
        snprintf(lines, sizeof(lines), "MaxStarts=2\n%s%s", h->failover ? "Failover=yes\n" : "",
                 specs[i].lines ? specs[i].lines : "");
        h->port = fl_add_host(fl, h->name, specs[i].app_args, lines);
        fl_assign(fl, h->name, fl_box_name(i % s->n_boxes));
    }
    fl_start(fl);
    act_error err = {0};
    if (claims_store_open(fl->store_url, NULL, &s->router_store, &err) < 0) {
        fprintf(stderr, "soak: the router's store: %s\n", err.message);
        return -1;
    }
    return soak_links_open(s);
}

/* A copy of act-e2e-app (or of source) under the Exec= name, made distinct
 * by trailing bytes the kernel never loads, staged on every box. */
static void stage_copy(soak *s, soak_host *host, const char *version, const char *source)
{
    fl_fleet *fl = &s->fleet;
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/variant-%s-%s", fl->boxes[0].drv.dir, host->name, version);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/act-e2e-app", dir);
    act_error err = {0};
    if (dd_copy_file(source, path, 0755, &err) < 0)
        fail_msg("%s", err.message);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || dprintf(fd, "\nsoak build %s of %s\n", version, host->name) < 0)
        fail_msg("append to %s: %s", path, strerror(errno));
    for (size_t i = 0; i < fl->n_boxes; i++)
        dh_stage_file(&fl->boxes[i], host->name, version, path, false, NULL);
}

void soak_stage_good(soak *s, soak_host *host, char *version, size_t size)
{
    snprintf(version, size, "v%u", host->next_variant++);
    stage_copy(s, host, version, DH_E2E_APP);
}

void soak_stage_bad(soak *s, soak_host *host, char *version, size_t size)
{
    snprintf(version, size, "bad%u", host->next_variant++);
    /* Exits 1 at once, whatever its arguments: never ready. */
    stage_copy(s, host, version, "/bin/false");
}

int soak_restart_daemon(soak *s, size_t index)
{
    dh_daemon *box = &s->fleet.boxes[index];
    act_error err = {0};
    int r = dd_start(&box->drv, 30000, NULL, &err);
    if (r < 0)
        fprintf(stderr, "soak: restarting %s: %s\n", fl_box_name(index), err.message);
    return r;
}

json_object *soak_request(soak *s, size_t index, int timeout_ms, const char *fmt, ...)
{
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    _cleanup_free_ char *text = NULL;
    if (soak_link_request(s, index, timeout_ms, body, strlen(body), &text) != 0)
        return NULL;
    json_object *reply = json_tokener_parse(text);
    if (!reply || !json_object_is_type(reply, json_type_object)) {
        soak_check(s, I_REASONS, false, "%s answered %.200s with what is not a JSON object: %.300s",
                   fl_box_name(index), body, text);
        json_object_put(reply);
        return NULL;
    }
    if (!dd_reply_ok(reply)) {
        json_object *error = NULL;
        json_object_object_get_ex(reply, "error", &error);
        const char *code = dd_json_str(error, "code"), *message = dd_json_str(error, "message");
        soak_check(s, I_REASONS, code[0] && message[0],
                   "%s refused %.200s without a reason: %.300s", fl_box_name(index), body,
                   json_object_to_json_string(reply));
    }
    return reply;
}

void soak_fleet_teardown(soak *s, bool keep_logs)
{
    fl_fleet *fl = &s->fleet;
    soak_links_close(s);
    if (s->router_store)
        claims_store_free(s->router_store);
    s->router_store = NULL;
    if (keep_logs) {
        for (size_t i = 0; i < fl->n_boxes; i++) {
            fl->boxes[i].drv.keep_dir = true;
            fprintf(stderr, "soak: %s's log: %s\n", fl_box_name(i), fl->boxes[i].drv.log_path);
        }
        /* etcd's data and log stay: stopped, not destroyed. */
        if (fl->etcd_started) {
            etcd_harness_stop(&fl->etcd);
            fprintf(stderr, "soak: etcd's log: %s/etcd.log\n", fl->etcd.dir);
            fl->etcd_started = false;
        }
        fprintf(stderr, "soak: checkpoints: %s\n", s->checkpoints);
    }
    fl_teardown(fl);
    if (keep_logs && s->registry.dir[0])
        fprintf(stderr, "soak: the registry's log: %s/registry.log\n", s->registry.dir);
    if (keep_logs)
        reg_harness_pause(&s->registry);
    else
        reg_harness_stop(&s->registry);
    if (!keep_logs && s->checkpoints[0]) {
        char command[128];
        snprintf(command, sizeof(command), "rm -rf '%s'", s->checkpoints);
        if (system(command) != 0)
            fprintf(stderr, "soak: cannot remove %s\n", s->checkpoints);
    }
}
