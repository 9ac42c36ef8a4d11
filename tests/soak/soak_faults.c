/* The faults: one at a time, each chosen at random (with the run's seed)
 * by weight, aimed at a random host or box, logged, and wrapped in the
 * window its clients' failures may fall in. A fault that promises no client
 * failure (a wake, a swap, a promote, a reload, bad control requests) opens
 * no window: a failure then breaks I_FAILURES. */
#include "soak.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"

/* How long two generations of a host may share a box after its swap's
 * reply: N's retirement, StopTimeoutSec=1 and its kill, with room. */
#define SWAP_TAIL_MS 5000

typedef struct fault_spec {
    const char *name;  /* for people */
    const char *token; /* for --only */
    unsigned weight;
} fault_spec;

static const fault_spec faults[F__COUNT] = {
    [F_WAKE] = {"wake", "wake", 10},
    [F_PARK] = {"park", "park", 8},
    [F_SWAP_GOOD] = {"swap (good build)", "swap-good", 8},
    [F_SWAP_BAD] = {"swap (crashing build)", "swap-bad", 5},
    [F_STAGE_PROMOTE] = {"stage and promote", "promote", 6},
    [F_ASSIGN] = {"claim assign", "assign", 6},
    [F_MOVE] = {"move", "move", 7},
    [F_KILL_DAEMON] = {"SIGKILL of a daemon", "kill-daemon", 6},
    [F_HANDOVER] = {"handover restart", "handover", 6},
    [F_KILL_APP] = {"SIGKILL of an app", "kill-app", 10},
    [F_STUBBORN_RETIRE] = {"retire of an app ignoring SIGTERM", "stubborn", 4},
    [F_ETCD_STOP] = {"etcd stopped", "etcd-stop", 4},
    [F_ETCD_COMPACT] = {"etcd restarted and compacted", "etcd-compact", 3},
    [F_BAD_REQUESTS] = {"bad control requests", "bad-requests", 7},
    [F_RELOAD] = {"config reload", "reload", 6},
    /* An operator's freeze: no window, because the next connection must
     * thaw the generation and be served. */
    [F_FREEZE_PARK] = {"freeze", "freeze", 6},
    /* The registry of the checkpoints gone: a move meanwhile cannot push its
     * checkpoint and rolls back to the box it left, which serves on. */
    [F_REGISTRY_STOP] = {"registry stopped", "registry-stop", 3},
    /* A box gone for good, as far as one machine shows it: its failover
     * hosts are taken over by the others, then the box comes back. */
    [F_POWER_CUT] = {"power cut of a box", "power-cut", 3},
    /* box-1 cut off from etcd (its proxy drops every byte), for long enough
     * at times that it fences its failover hosts and the others take them. */
    [F_PARTITION] = {"box-1 cut off from etcd", "partition", 3},
    [F_DRAIN] = {"drain of a box", "drain", 3},
};

int soak_fault_by_token(const char *token)
{
    for (int k = 0; k < F__COUNT; k++)
        if (faults[k].weight && strcmp(faults[k].token, token) == 0)
            return k;
    return -1;
}

int soak_faults_only(soak *s, const char *list)
{
    for (int k = 0; k < F__COUNT; k++)
        s->fault_off[k] = true;
    char copy[512];
    snprintf(copy, sizeof(copy), "%s", list);
    char *save = NULL;
    for (char *token = strtok_r(copy, ",", &save); token; token = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < F__COUNT && strcmp(faults[k].token, token) != 0)
            k++;
        if (k == F__COUNT || !faults[k].weight) {
            fprintf(stderr, "soak: no fault \"%s\"; faults are:", token);
            for (int j = 0; j < F__COUNT; j++)
                if (faults[j].weight)
                    fprintf(stderr, " %s", faults[j].token);
            fprintf(stderr, "\n");
            return -1;
        }
        s->fault_off[k] = false;
    }
    return 0;
}

const char *soak_fault_name(soak_fault_kind kind)
{
    return faults[kind].name;
}

static bool verbose(void)
{
    const char *v = getenv("SOAK_VERBOSE");
    return v && v[0] == '1';
}

static unsigned log_fault(soak *s, soak_fault_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static unsigned log_fault(soak *s, soak_fault_kind kind, const char *fmt, ...)
{
    unsigned id = ++s->next_fault_id;
    soak_fault_record *rec = &s->fault_log[id % SOAK_FAULT_LOG];
    rec->id = id;
    rec->kind = kind;
    rec->at_ms = soak_now_ms() - s->start_ms;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rec->what, sizeof(rec->what), fmt, ap);
    va_end(ap);
    s->faults_made++;
    s->fault_counts[kind]++;
    if (verbose())
        fprintf(stderr, "soak: +%.3f s fault %u: %s\n", (double)rec->at_ms / 1000.0, id, rec->what);
    return id;
}

/* Appends what came of a fault to its log line. */
static void log_outcome(soak *s, unsigned id, const char *outcome)
{
    soak_fault_record *rec = &s->fault_log[id % SOAK_FAULT_LOG];
    size_t len = strlen(rec->what);
    snprintf(rec->what + len, sizeof(rec->what) - len, ": %s", outcome);
    if (verbose())
        fprintf(stderr, "soak: fault %u: %s\n", id, outcome);
}

void soak_fault_log_print(const soak *s)
{
    unsigned first = s->next_fault_id > SOAK_FAULT_LOG ? s->next_fault_id - SOAK_FAULT_LOG + 1 : 1;
    for (unsigned id = first; id <= s->next_fault_id; id++) {
        const soak_fault_record *rec = &s->fault_log[id % SOAK_FAULT_LOG];
        printf("  fault %u at +%.3f s: %s\n", rec->id, (double)rec->at_ms / 1000.0, rec->what);
    }
}

static soak_host *random_host(soak *s)
{
    return &s->hosts[soak_random_below(s, s->n_hosts)];
}

static size_t route_of(soak_host *h)
{
    int route = atomic_load(&h->route);
    return route < 0 ? 0 : (size_t)route;
}

static size_t other_box(soak *s, size_t box)
{
    return (box + 1 + soak_random_below(s, s->n_boxes - 1)) % s->n_boxes;
}

/* The outcome of a control reply, for the log. */
static void reply_outcome(json_object *reply, char *out, size_t size)
{
    if (!reply)
        snprintf(out, size, "no answer");
    else if (dd_reply_ok(reply))
        snprintf(out, size, "ok");
    else {
        json_object *error = NULL;
        json_object_object_get_ex(reply, "error", &error);
        snprintf(out, size, "refused: %s: %.100s", dd_json_str(error, "code"),
                 dd_json_str(error, "message"));
    }
}

static void host_op(soak *s, soak_fault_kind kind, soak_host *h, const char *op, bool window)
{
    size_t box = route_of(h);
    unsigned id = log_fault(s, kind, "%s %s on %s", op, h->name, fl_box_name(box));
    if (window)
        soak_window_open(s, h, -1, -1, id, kind);
    json_object *reply =
        soak_request(s, box, 60000, "{\"v\":1,\"op\":\"%s\",\"host\":\"%s\"}", op, h->name);
    char outcome[160];
    reply_outcome(reply, outcome, sizeof(outcome));
    json_object_put(reply);
    if (window)
        soak_window_close(s, id);
    log_outcome(s, id, outcome);
}

static void swap(soak *s, soak_host *h, bool good)
{
    char version[32];
    if (good)
        soak_stage_good(s, h, version, sizeof(version));
    else
        soak_stage_bad(s, h, version, sizeof(version));
    size_t box = route_of(h);
    unsigned id = log_fault(s, good ? F_SWAP_GOOD : F_SWAP_BAD, "swap %s to %s on %s", h->name,
                            version, fl_box_name(box));
    atomic_fetch_add(&h->swaps_in_flight, 1);
    json_object *reply =
        soak_request(s, box, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"%s\",\"version\":\"%s\"}",
                     h->name, version);
    atomic_store(&h->swap_tail_until_ms, soak_now_ms() + SWAP_TAIL_MS);
    soak_swap_answered(h);
    char outcome[160];
    reply_outcome(reply, outcome, sizeof(outcome));
    json_object_put(reply);
    log_outcome(s, id, outcome);
}

static void stage_promote(soak *s, soak_host *h)
{
    char version[32];
    soak_stage_good(s, h, version, sizeof(version));
    unsigned id =
        log_fault(s, F_STAGE_PROMOTE, "stage and promote %s %s on every box", h->name, version);
    char outcome[160] = "ok";
    for (size_t b = 0; b < s->n_boxes; b++) {
        json_object *reply = soak_request(
            s, b, 60000, "{\"v\":1,\"op\":\"promote\",\"host\":\"%s\",\"version\":\"%s\"}", h->name,
            version);
        if (!dd_reply_ok(reply))
            reply_outcome(reply, outcome, sizeof(outcome));
        json_object_put(reply);
    }
    log_outcome(s, id, outcome);
}

static void assign(soak *s, soak_host *h)
{
    /* A plain assign carries no state (a move does), so a stateful host's
     * counter would rightly start over: those are only ever moved. */
    if (h->kind == SOAK_COUNTER)
        h = &s->hosts[0];
    size_t from = route_of(h), to = other_box(s, from);
    unsigned id = log_fault(s, F_ASSIGN, "claim assign %s from %s to %s", h->name,
                            fl_box_name(from), fl_box_name(to));
    soak_window_open(s, h, -1, (int)to, id, F_ASSIGN);
    json_object *reply = soak_request(
        s, from, 30000, "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"%s\",\"box\":\"%s\"}", h->name,
        fl_box_name(to));
    char outcome[160];
    reply_outcome(reply, outcome, sizeof(outcome));
    json_object_put(reply);
    soak_window_close(s, id);
    log_outcome(s, id, outcome);
}

/* The last non-empty line of out, for a fault's log. */
static void last_line(const char *out, char *line, size_t size)
{
    size_t end = strlen(out);
    while (end > 0 && out[end - 1] == '\n')
        end--;
    size_t start = end;
    while (start > 0 && out[start - 1] != '\n')
        start--;
    snprintf(line, size, "%.*s", (int)(end - start), out + start);
}

static void move(soak *s, soak_host *h)
{
    size_t from = route_of(h), to = other_box(s, from);
    unsigned id =
        log_fault(s, F_MOVE, "move %s from %s to %s", h->name, fl_box_name(from), fl_box_name(to));
    soak_window_open(s, h, -1, (int)to, id, F_MOVE);
    char *argv[] = {(char *)DH_ACTIVATORCTL,
                    (char *)"--no-color",
                    (char *)"--connect",
                    s->fleet.boxes[from].drv.control_url,
                    (char *)"move",
                    h->name,
                    (char *)fl_box_name(to),
                    (char *)"--timeout",
                    (char *)"30",
                    NULL};
    char out[8192];
    int status = dd_run(argv, out, sizeof(out));
    soak_window_close(s, id);
    char line[120], outcome[160];
    last_line(out, line, sizeof(line));
    snprintf(outcome, sizeof(outcome), "exit %d: %s", status, line);
    log_outcome(s, id, outcome);
}

/* The registry stopped; a move of h tried while it is down, which must
 * roll back (its checkpoint cannot be pushed); the registry started again
 * with its storage. */
static void registry_outage(soak *s, soak_host *h)
{
    reg_harness_pause(&s->registry);
    unsigned id = log_fault(s, F_REGISTRY_STOP, "registry stopped; a move of %s meanwhile",
                            h->name);
    move(s, h);
    act_error err = {0};
    int r = reg_harness_resume(&s->registry, &err);
    soak_check(s, I_DAEMONS_ALIVE, r == 0, "the registry did not start again: %s", err.message);
    log_outcome(s, id, r == 0 ? "registry back" : "registry did not start again");
}

static void restart_box(soak *s, soak_fault_kind kind)
{
    size_t box = soak_random_below(s, s->n_boxes);
    long down_ms = (long)soak_random_below(s, 1000);
    dh_daemon *d = &s->fleet.boxes[box];
    unsigned id =
        log_fault(s, kind, "%s %s, restarted %ld ms later",
                  kind == F_KILL_DAEMON ? "SIGKILL" : "handover of", fl_box_name(box), down_ms);
    soak_window_open(s, NULL, (int)box, (int)box, id, kind);
    atomic_store(&s->daemon_down[box], true);
    act_error err = {0};
    int status =
        kind == F_KILL_DAEMON ? dd_kill(&d->drv, 30000, &err) : dd_hand_over(&d->drv, 30000, &err);
    if (kind == F_HANDOVER)
        soak_check(s, I_CLEAN_STOP, status == 0,
                   "%s's handover ended with status %d, not 0 %s (log: %s)", fl_box_name(box),
                   status, err.message, d->drv.log_path);
    dd_sleep_ms(down_ms);
    int r = soak_restart_daemon(s, box);
    soak_check(s, I_DAEMONS_ALIVE, r == 0, "%s did not start again after its %s (log: %s)",
               fl_box_name(box), soak_fault_name(kind), d->drv.log_path);
    atomic_store(&s->daemon_down[box], false);
    soak_window_close(s, id);
    log_outcome(s, id, r == 0 ? "back" : "did not start");
}

/* How long a dead box's failover hosts may take to be claimed elsewhere:
 * the lease (6 s), the grace (1.2 s), a poll of the others (1.5 s) and
 * their stagger, with room for a loaded machine. */
#define TAKEOVER_WAIT_MS 30000

/* Waits until no failover host in hosts (those box served) is routed to
 * box any more (the router follows the claims' executors), at most
 * timeout_ms; the number that still are. */
static size_t wait_taken_over(soak *s, size_t box, soak_host **hosts, size_t n, int timeout_ms)
{
    uint64_t deadline = soak_now_ms() + (uint64_t)timeout_ms;
    size_t left;
    do {
        left = 0;
        for (size_t i = 0; i < n; i++)
            left += atomic_load(&hosts[i]->route) == (int)box;
        if (left)
            dd_sleep_ms(100);
    } while (left && soak_now_ms() < deadline);
    return left;
}

/* The failover hosts box serves (its clients are routed there). */
static size_t failover_hosts_on(soak *s, size_t box, soak_host **out)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_hosts; i++)
        if (s->hosts[i].failover && route_of(&s->hosts[i]) == box)
            out[n++] = &s->hosts[i];
    return n;
}

/* The machine's power cut: the daemon SIGKILLed, then every process of its
 * cgroup root. The box stays down until its failover hosts are claimed by
 * the others (I_TAKEN_OVER), then comes back as a repaired machine would;
 * its other hosts wait for it. */
static void power_cut(soak *s)
{
    size_t box = soak_random_below(s, s->n_boxes);
    dh_daemon *d = &s->fleet.boxes[box];
    soak_host *failover[SOAK_HOSTS_MAX];
    size_t n_failover = failover_hosts_on(s, box, failover);
    unsigned id = log_fault(s, F_POWER_CUT, "power cut of %s (%zu failover hosts)",
                            fl_box_name(box), n_failover);
    soak_window_open(s, NULL, (int)box, -1, id, F_POWER_CUT);
    atomic_store(&s->daemon_down[box], true);
    act_error err = {0};
    (void)dd_kill(&d->drv, 30000, &err);
    bool emptied = fl_kill_root(&s->fleet, box);
    soak_check(s, I_DAEMONS_ALIVE, emptied, "%s's cgroup root kept processes after cgroup.kill",
               fl_box_name(box));
    size_t left = wait_taken_over(s, box, failover, n_failover, TAKEOVER_WAIT_MS);
    soak_check(s, I_TAKEN_OVER, left == 0,
               "%zu of %s's %zu failover hosts still name it %d ms after its power cut", left,
               fl_box_name(box), n_failover, TAKEOVER_WAIT_MS);
    int r = soak_restart_daemon(s, box);
    soak_check(s, I_DAEMONS_ALIVE, r == 0, "%s did not start again after its power cut (log: %s)",
               fl_box_name(box), d->drv.log_path);
    atomic_store(&s->daemon_down[box], false);
    soak_window_close(s, id);
    char outcome[96];
    snprintf(outcome, sizeof(outcome), "%zu of %zu taken over; %s", n_failover - left, n_failover,
             r == 0 ? "back" : "did not start");
    log_outcome(s, id, outcome);
}

static void wait_store_answers(soak *s);

/* box-1 alone loses etcd: its proxy drops every byte for 1 to 13 s. Past
 * its fence (4.8 s after its last renewal) its failover hosts freeze; past
 * the lease and the grace the others take them; its other hosts serve on.
 * A frozen generation serves nowhere (I_ONE_BOX). */
static void partition(soak *s)
{
    long cut_ms = 1000 + (long)soak_random_below(s, 12000);
    unsigned id =
        log_fault(s, F_PARTITION, "%s cut off from etcd for %ld ms", fl_box_name(0), cut_ms);
    soak_window_open(s, NULL, 0, -1, id, F_PARTITION);
    fl_proxy_cut(&s->fleet.proxy);
    dd_sleep_ms(cut_ms);
    fl_proxy_heal(&s->fleet.proxy);
    wait_store_answers(s);
    soak_window_close(s, id);
    log_outcome(s, id, "healed");
}

/* activatorctl drain of a random box (its hosts moved to the others, a few
 * at a time), then undrain, through the box's own daemon. */
static void drain(soak *s)
{
    size_t box = soak_random_below(s, s->n_boxes);
    unsigned id = log_fault(s, F_DRAIN, "drain of %s, then undrain", fl_box_name(box));
    soak_window_open(s, NULL, (int)box, -1, id, F_DRAIN);
    char *url = s->fleet.boxes[box].drv.control_url;
    char *drain_argv[] = {
        (char *)DH_ACTIVATORCTL,  (char *)"--no-color", (char *)"--connect", url, (char *)"drain",
        (char *)fl_box_name(box), (char *)"--deadline", (char *)"60s",       NULL};
    char out[8192];
    int status = dd_run(drain_argv, out, sizeof(out));
    char line[120];
    last_line(out, line, sizeof(line));
    char *undrain_argv[] = {(char *)DH_ACTIVATORCTL,
                            (char *)"--no-color",
                            (char *)"--connect",
                            url,
                            (char *)"undrain",
                            (char *)fl_box_name(box),
                            NULL};
    char undrain_out[1024];
    int undrained = dd_run(undrain_argv, undrain_out, sizeof(undrain_out));
    soak_check(s, I_REASONS, undrained == 0, "activatorctl undrain %s exited %d: %.300s",
               fl_box_name(box), undrained, undrain_out);
    soak_window_close(s, id);
    char outcome[160];
    snprintf(outcome, sizeof(outcome), "exit %d: %s", status, line);
    log_outcome(s, id, outcome);
}

static void kill_app(soak *s, soak_host *h)
{
    size_t box = route_of(h);
    unsigned id = log_fault(s, F_KILL_APP, "SIGKILL %s's app on %s", h->name, fl_box_name(box));
    soak_window_open(s, h, -1, -1, id, F_KILL_APP);
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", s->fleet.boxes[box].drv.cgroup_path, h->name);
    unsigned killed = 0;
    _cleanup_(closedirp) DIR *dir = opendir(path);
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        if (strncmp(entry->d_name, "g-", 2) != 0)
            continue;
        char procs_path[2 * PATH_MAX];
        snprintf(procs_path, sizeof(procs_path), "%s/%s/cgroup.procs", path, entry->d_name);
        _cleanup_free_ char *procs = dd_read_text(procs_path);
        for (char *line = procs; line && *line;) {
            pid_t pid = (pid_t)atol(line);
            if (pid > 0 && kill(pid, SIGKILL) == 0)
                killed++;
            char *next = strchr(line, '\n');
            line = next ? next + 1 : NULL;
        }
    }
    soak_window_close(s, id);
    char outcome[64];
    snprintf(outcome, sizeof(outcome), "%u killed", killed);
    log_outcome(s, id, outcome);
}

/* Until every running daemon's status says the store answers, at most
 * STORE_HEAL_WAIT_MS. From the fleet's side an outage lasts until then: a
 * daemon refuses wakes until its claim watch has listed the claims again
 * (activator/daemon/wake/admit.c), which its backoff may put up to 5 s
 * after etcd is back. A serving host answers all along, so its answers say
 * nothing of that. */
#define STORE_HEAL_WAIT_MS 20000
static void wait_store_answers(soak *s)
{
    uint64_t deadline = soak_now_ms() + STORE_HEAL_WAIT_MS;
    for (size_t b = 0; b < s->n_boxes; b++) {
        bool ok = false;
        while (!ok && !atomic_load(&s->daemon_down[b]) && soak_now_ms() < deadline) {
            json_object *reply = soak_request(s, b, 5000, "{\"v\":1,\"op\":\"status\"}");
            json_object *store = NULL;
            ok = reply && dd_reply_ok(reply) &&
                 json_object_object_get_ex(dd_reply_result(reply), "store", &store) &&
                 strcmp(dd_json_str(store, "state"), "ok") == 0;
            json_object_put(reply);
            if (!ok)
                dd_sleep_ms(100);
        }
    }
}

static void etcd_outage(soak *s, bool compact)
{
    fl_fleet *fl = &s->fleet;
    long down_ms = compact ? 0 : 1000 + (long)soak_random_below(s, 3000);
    unsigned id = compact ? log_fault(s, F_ETCD_COMPACT, "etcd restarted, then compacted")
                          : log_fault(s, F_ETCD_STOP, "etcd stopped for %ld ms", down_ms);
    soak_window_open(s, NULL, -1, -1, id, compact ? F_ETCD_COMPACT : F_ETCD_STOP);
    atomic_store(&s->etcd_down, true);
    etcd_harness_stop(&fl->etcd);
    dd_sleep_ms(down_ms);
    act_error err = {0};
    int r = etcd_harness_restart(&fl->etcd, &err);
    char outcome[160] = "back";
    if (r < 0) {
        snprintf(outcome, sizeof(outcome), "etcd did not start again: %.120s", err.message);
        soak_check(s, I_DAEMONS_ALIVE, false, "etcd did not start again: %s", err.message);
    } else if (compact) {
        /* Every daemon's watch is behind this revision now: it must heal. */
        _cleanup_free_ char *range = NULL;
        etcd_harness_post(&fl->etcd, "/v3/kv/range", "{\"key\":\"AA==\"}", NULL, &range);
        const char *at = range ? strstr(range, "\"revision\":\"") : NULL;
        if (at) {
            char body[96];
            snprintf(body, sizeof(body), "{\"revision\":\"%lld\"}", atoll(at + 12));
            long status = etcd_harness_post(&fl->etcd, "/v3/kv/compaction", body, NULL, NULL);
            snprintf(outcome, sizeof(outcome), "compacted at %lld: HTTP %ld", atoll(at + 12),
                     status);
        }
    }
    atomic_store(&s->etcd_down, false);
    if (r == 0)
        wait_store_answers(s);
    soak_window_close(s, id);
    log_outcome(s, id, outcome);
}

/* Requests a client might send by mistake or malice; every one must be
 * refused, with a code and a message. */
static void bad_requests(soak *s)
{
    static const char *const bodies[] = {
        "",
        "{",
        "[]",
        "null",
        "{\"v\":2,\"op\":\"status\"}",
        "{\"v\":1}",
        "{\"v\":\"1\",\"op\":\"status\"}",
        "{\"v\":1,\"op\":\"nope\"}",
        "{\"v\":1,\"op\":\"wake\"}",
        "{\"v\":1,\"op\":\"wake\",\"host\":\"../etc\"}",
        "{\"v\":1,\"op\":\"wake\",\"host\":\"no-such-host\"}",
        "{\"v\":1,\"op\":\"wake\",\"host\":\"plain-1\",\"extra\":1}",
        "{\"v\":1,\"op\":\"swap\",\"host\":\"plain-1\",\"version\":\"never-staged\"}",
        "{\"v\":1,\"op\":\"promote\",\"host\":\"plain-2\",\"version\":\"never-staged\"}",
        "{\"v\":1,\"op\":\"stage\",\"host\":\"plain-1\",\"version\":\"x\",\"path\":\"/no\"}",
        "{\"v\":1,\"op\":\"move\",\"host\":\"plain-1\",\"box\":\"no-such-box\"}",
        "{\"v\":1,\"op\":\"claim.assign\",\"host\":\"plain-2\",\"box\":\"no-such-box\"}",
        "{\"v\":1,\"op\":\"gc\",\"host\":\"plain-1\",\"keep\":-1}",
        "\x01\x02\xff\xfe garbage",
    };
    size_t box = soak_random_below(s, s->n_boxes);
    unsigned id = log_fault(s, F_BAD_REQUESTS, "%zu bad requests to %s",
                            sizeof(bodies) / sizeof(bodies[0]) + 1, fl_box_name(box));
    const char *url = s->fleet.boxes[box].drv.control_url;
    unsigned refused = 0, total = 0;
    for (size_t i = 0; i <= sizeof(bodies) / sizeof(bodies[0]); i++) {
        _cleanup_free_ char *big = NULL;
        const char *body = i < sizeof(bodies) / sizeof(bodies[0]) ? bodies[i] : NULL;
        if (!body) { /* one over the size limit */
            big = malloc(70000);
            if (!big)
                abort();
            memset(big, 'x', 69999);
            big[69999] = '\0';
            body = big;
        }
        _cleanup_free_ char *text = NULL;
        total++;
        /* The one over the limit on a socket of its own: the daemon drops
         * the connection it came on, which would fail whatever else was
         * asked on the box's link at that moment. */
        int rv = big ? dd_request_nng(url, body, strlen(body), 10000, &text)
                     : soak_link_request(s, box, 10000, body, strlen(body), &text);
        json_object *reply = rv == 0 ? json_tokener_parse(text) : NULL;
        json_object *error = NULL;
        if (reply)
            json_object_object_get_ex(reply, "error", &error);
        bool with_reason = reply && !dd_reply_ok(reply) && dd_json_str(error, "code")[0] &&
                           dd_json_str(error, "message")[0];
        soak_check(s, I_REASONS, with_reason, "%s answered the bad request %.80s with %.300s",
                   fl_box_name(box), body, rv ? nng_strerror(rv) : text);
        refused += with_reason;
        json_object_put(reply);
    }
    char outcome[64];
    snprintf(outcome, sizeof(outcome), "%u of %u refused with a reason", refused, total);
    log_outcome(s, id, outcome);
}

static void reload(soak *s)
{
    soak_host *limits = NULL;
    for (size_t i = 0; i < s->n_hosts; i++)
        if (s->hosts[i].kind == SOAK_LIMITS)
            limits = &s->hosts[i];
    if (!limits)
        return; /* a fleet without a host with limits has nothing to reload */
    size_t box = soak_random_below(s, s->n_boxes);
    unsigned memory_mb = 256 + 64 * (unsigned)soak_random_below(s, 5);
    unsigned id = log_fault(s, F_RELOAD, "reload of %s with %s's MemoryMax=%uM", fl_box_name(box),
                            limits->name, memory_mb);
    char lines[128];
    snprintf(lines, sizeof(lines), "MaxStarts=2\n[Limits]\nMemoryMax=%uM\nPidsMax=64\n", memory_mb);
    dh_write_app_host_at(&s->fleet.boxes[box], limits->name, fl_box_address(box), limits->port, "",
                         lines);
    json_object *reply = soak_request(s, box, 30000, "{\"v\":1,\"op\":\"reload\"}");
    char outcome[160];
    reply_outcome(reply, outcome, sizeof(outcome));
    json_object_put(reply);
    log_outcome(s, id, outcome);
}

static soak_fault_kind pick(soak *s)
{
    unsigned total = 0;
    for (int k = 0; k < F__COUNT; k++)
        total += s->fault_off[k] ? 0 : faults[k].weight;
    unsigned at = (unsigned)soak_random_below(s, total);
    for (int k = 0; k < F__COUNT; k++) {
        unsigned weight = s->fault_off[k] ? 0 : faults[k].weight;
        if (at < weight)
            return (soak_fault_kind)k;
        at -= weight;
    }
    return F_WAKE;
}

void soak_fault_one(soak *s)
{
    soak_fault_kind kind = pick(s);
    soak_host *h = random_host(s);
    switch (kind) {
    case F_WAKE:
        host_op(s, F_WAKE, h, "wake", false);
        break;
    case F_PARK:
        host_op(s, F_PARK, h, "park", true);
        break;
    case F_FREEZE_PARK:
        host_op(s, F_FREEZE_PARK, h, "freeze", false);
        break;
    case F_STUBBORN_RETIRE:
        for (size_t i = 0; i < s->n_hosts; i++)
            if (s->hosts[i].kind == SOAK_STUBBORN)
                h = &s->hosts[i];
        host_op(s, F_STUBBORN_RETIRE, h, "park", true);
        break;
    case F_SWAP_GOOD:
    case F_SWAP_BAD:
        swap(s, h, kind == F_SWAP_GOOD);
        break;
    case F_STAGE_PROMOTE:
        stage_promote(s, h);
        break;
    case F_ASSIGN:
        assign(s, h);
        break;
    case F_MOVE:
        move(s, h);
        break;
    case F_KILL_DAEMON:
    case F_HANDOVER:
        restart_box(s, kind);
        break;
    case F_KILL_APP:
        kill_app(s, h);
        break;
    case F_ETCD_STOP:
    case F_ETCD_COMPACT:
        etcd_outage(s, kind == F_ETCD_COMPACT);
        break;
    case F_BAD_REQUESTS:
        bad_requests(s);
        break;
    case F_RELOAD:
        reload(s);
        break;
    case F_REGISTRY_STOP:
        registry_outage(s, h);
        break;
    case F_POWER_CUT:
        power_cut(s);
        break;
    case F_PARTITION:
        partition(s);
        break;
    case F_DRAIN:
        drain(s);
        break;
    case F__COUNT:
        break;
    }
}
