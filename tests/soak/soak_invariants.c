/* The invariants: a sampler thread reads every box's cgroups all along (one
 * box per host, one generation per host and box outside swaps, processes
 * only in leaves, daemons alive); lulls and the end check what holds only
 * once things settle (leaves known to their daemon, claims true, every app
 * process in a leaf); the end checks fds, RSS and a clean stop. */
#include "soak.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"

/* The sampler's period: often enough to see a double start that lasts a
 * few milliseconds, rarely enough to leave the two cores to the fleet. */
#define SAMPLE_MS 20
/* How long a lull waits for every host to be parked or serving. */
#define SETTLE_MS 20000

const char *soak_invariant_name(soak_invariant inv)
{
    static const char *const names[I__COUNT] = {
        [I_ONE_BOX] = "never two boxes run one host",
        [I_ONE_GENERATION] = "one generation per box unless swapping",
        [I_IN_LEAVES] = "no process outside the generation leaves",
        [I_LEAVES_KNOWN] = "every leaf is a generation its daemon knows",
        [I_CLAIM_TRUE] = "the claim names the box that serves",
        [I_COUNTER] = "a stateful host's counter never goes back",
        [I_FAILURES] = "every failed request is in a fault's window",
        [I_REASONS] = "every refusal has a reason",
        [I_DAEMONS_ALIVE] = "no daemon dies unless the soak kills it",
        [I_BASELINE] = "fds and RSS back to baseline",
        [I_CLEAN_STOP] = "clean handovers and stops leave nothing",
        [I_TAKEN_OVER] = "a dead box's failover hosts go to live boxes",
    };
    return names[inv];
}

static void check_v(soak *s, soak_invariant inv, const soak_host *h, bool held, const char *fmt,
                    va_list ap) __attribute__((format(printf, 5, 0)));
static void check_v(soak *s, soak_invariant inv, const soak_host *h, bool held, const char *fmt,
                    va_list ap)
{
    atomic_fetch_add(&s->tally[inv].checked, 1);
    if (held)
        return;
    atomic_fetch_add(&s->tally[inv].broken, 1);
    char what[1536];
    vsnprintf(what, sizeof(what), fmt, ap);
    fprintf(stderr, "soak: BROKEN at +%.3f s: %s: %s\n",
            (double)(soak_now_ms() - s->start_ms) / 1000.0, soak_invariant_name(inv), what);
    pthread_mutex_lock(&s->broken_lock);
    if (!atomic_load(&s->broken)) {
        snprintf(s->broken_what, sizeof(s->broken_what), "%s: %s", soak_invariant_name(inv), what);
        s->first_broken = inv;
        s->broken_host = h;
    }
    atomic_store(&s->broken, true);
    pthread_mutex_unlock(&s->broken_lock);
}

void soak_check(soak *s, soak_invariant inv, bool held, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_v(s, inv, NULL, held, fmt, ap);
    va_end(ap);
}

void soak_check_host(soak *s, soak_invariant inv, const soak_host *h, bool held, const char *fmt,
                     ...)
{
    va_list ap;
    va_start(ap, fmt);
    check_v(s, inv, h, held, fmt, ap);
    va_end(ap);
}

/* ---- what the cgroups say ---- */

/* Whether the leaf at path (a g-N directory) is frozen: a fenced or
 * operator-frozen generation answers nothing, so it serves nowhere. */
static bool leaf_frozen(const char *path)
{
    char events_path[2 * PATH_MAX];
    snprintf(events_path, sizeof(events_path), "%s/cgroup.events", path);
    _cleanup_free_ char *events = dd_read_text(events_path);
    return events && strstr(events, "frozen 1");
}

/* The numbers of host's populated g-N leaves on box (at most max); with
 * serving_only, not those frozen. */
static size_t populated_generations(soak *s, size_t box, const char *host, uint64_t *numbers,
                                    size_t max, bool serving_only)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", s->fleet.boxes[box].drv.cgroup_path, host);
    _cleanup_(closedirp) DIR *dir = opendir(path);
    size_t n = 0;
    struct dirent *entry;
    while (dir && (entry = readdir(dir)) && n < max) {
        if (strncmp(entry->d_name, "g-", 2) != 0)
            continue;
        char leaf[2 * PATH_MAX], procs_path[2 * PATH_MAX + 16];
        snprintf(leaf, sizeof(leaf), "%s/%s", path, entry->d_name);
        snprintf(procs_path, sizeof(procs_path), "%s/cgroup.procs", leaf);
        _cleanup_free_ char *procs = dd_read_text(procs_path);
        if (procs && procs[0] && !(serving_only && leaf_frozen(leaf)))
            numbers[n++] = strtoull(entry->d_name + 2, NULL, 10);
    }
    return n;
}

/* Whether g-number of host on box has a process and is not frozen. */
static bool generation_serving(soak *s, size_t box, const char *host, uint64_t number)
{
    char leaf[PATH_MAX + 160], path[PATH_MAX + 180];
    snprintf(leaf, sizeof(leaf), "%s/hosts/%s/g-%llu", s->fleet.boxes[box].drv.cgroup_path, host,
             (unsigned long long)number);
    snprintf(path, sizeof(path), "%s/cgroup.procs", leaf);
    _cleanup_free_ char *procs = dd_read_text(path);
    return procs && procs[0] && !leaf_frozen(leaf);
}

/* One box per host, one generation per box outside swaps. Leaves are read
 * one after another, so a sighting of two is confirmed by reading the
 * first again: it ran before and after the second was seen running. */
static void sample_host(soak *s, soak_host *h)
{
    uint64_t gens[FL_BOXES_MAX][8];
    size_t n[FL_BOXES_MAX], boxes = 0;
    for (size_t b = 0; b < s->n_boxes; b++) {
        n[b] = populated_generations(s, b, h->name, gens[b], 8, true);
        boxes += n[b] > 0;
        char seen[96] = "";
        for (size_t i = 0, used = 0; i < n[b] && used < sizeof(seen); i++)
            used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%sg-%llu", i ? " " : "",
                                     (unsigned long long)gens[b][i]);
        soak_history_leaves(s, h, b, seen);
    }
    if (boxes > 1) {
        size_t confirmed = 0;
        char seen[256] = "";
        for (size_t b = 0; b < s->n_boxes; b++) {
            bool still = false;
            for (size_t i = 0; i < n[b] && !still; i++)
                still = generation_serving(s, b, h->name, gens[b][i]);
            if (still) {
                confirmed++;
                size_t len = strlen(seen);
                snprintf(seen + len, sizeof(seen) - len, " %s/g-%llu", fl_box_name(b),
                         (unsigned long long)gens[b][0]);
            }
        }
        boxes = confirmed > 1 ? confirmed : 1;
        soak_check_host(s, I_ONE_BOX, h, confirmed <= 1, "host %s runs on %zu boxes at once:%s",
                        h->name, confirmed, seen);
    } else {
        soak_check(s, I_ONE_BOX, true, "-");
    }
    bool swapping =
        atomic_load(&h->swaps_in_flight) > 0 || soak_now_ms() < atomic_load(&h->swap_tail_until_ms);
    for (size_t b = 0; b < s->n_boxes; b++) {
        if (n[b] <= 1 || swapping) {
            soak_check(s, I_ONE_GENERATION, true, "-");
            continue;
        }
        size_t still = 0;
        for (size_t i = 0; i < n[b]; i++)
            still += generation_serving(s, b, h->name, gens[b][i]);
        soak_check_host(s, I_ONE_GENERATION, h, still <= 1,
                        "host %s has %zu generations on %s (g-%llu and g-%llu) with no swap in "
                        "flight",
                        h->name, still, fl_box_name(b), (unsigned long long)gens[b][0],
                        (unsigned long long)gens[b][1]);
    }
}

/* ---- processes only in leaves ---- */

typedef struct leaves_walk {
    soak *s;
    size_t box;
    size_t root_len;
    pid_t daemon_pid;
} leaves_walk;

static leaves_walk *current_walk; /* nftw has no userdata; one walker thread at a time */
static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether a cgroup below a box's root may hold processes: a leaf of a host
 * (hosts/<host>/<kind>-<N>), the daemon's own supervisor leaf, or its log
 * keeper's. */
static bool may_hold(const char *relative)
{
    if (strcmp(relative, "supervisor") == 0 || strcmp(relative, "log-keeper") == 0)
        return true;
    if (strncmp(relative, "hosts/", 6) != 0)
        return false;
    const char *leaf = strchr(relative + 6, '/');
    return leaf && leaf[1] && !strchr(leaf + 1, '/') && strchr(leaf + 1, '-');
}

static int walk_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    leaves_walk *walk = current_walk;
    if (flag != FTW_D)
        return 0;
    char procs_path[PATH_MAX + 16];
    snprintf(procs_path, sizeof(procs_path), "%s/cgroup.procs", path);
    _cleanup_free_ char *procs = dd_read_text(procs_path);
    if (!procs || !procs[0])
        return 0;
    const char *relative = path + walk->root_len;
    if (*relative == '/')
        relative++;
    bool held = may_hold(relative);
    if (held && strcmp(relative, "supervisor") == 0 && walk->daemon_pid > 0) {
        /* Only the daemon itself: whatever it runs goes into a leaf. */
        for (char *line = procs; line && *line && held;) {
            held = atol(line) == walk->daemon_pid;
            char *next = strchr(line, '\n');
            line = next ? next + 1 : NULL;
        }
    }
    if (held && strcmp(relative, "log-keeper") == 0) {
        /* One process, the keeper: "activatord --log-keeper". */
        char cmdline_path[64], cmdline[64] = "";
        snprintf(cmdline_path, sizeof(cmdline_path), "/proc/%ld/cmdline", atol(procs));
        FILE *f = fopen(cmdline_path, "re");
        size_t n = f ? fread(cmdline, 1, sizeof(cmdline) - 1, f) : 0;
        if (f)
            fclose(f);
        size_t first = strnlen(cmdline, n);
        held = !strchr(procs, '\n') || strchr(procs, '\n')[1] == '\0';
        held = held && first + 1 < n && strcmp(cmdline + first + 1, "--log-keeper") == 0;
    }
    char shown[128];
    snprintf(shown, sizeof(shown), "%.120s", procs);
    for (char *c = shown; *c; c++)
        if (*c == '\n')
            *c = ' ';
    soak_check(walk->s, I_IN_LEAVES, held, "%s: processes [%s] in %s, outside every leaf",
               fl_box_name(walk->box), shown, relative[0] ? relative : "the box's root");
    return 0;
}

static void check_in_leaves(soak *s, size_t box, pid_t daemon_pid)
{
    leaves_walk walk = {.s = s,
                        .box = box,
                        .root_len = strlen(s->fleet.boxes[box].drv.cgroup_path),
                        .daemon_pid = daemon_pid};
    pthread_mutex_lock(&walk_lock);
    current_walk = &walk;
    nftw(s->fleet.boxes[box].drv.cgroup_path, walk_entry, 16, FTW_PHYS);
    current_walk = NULL;
    pthread_mutex_unlock(&walk_lock);
}

/* ---- daemons alive ---- */

static void check_daemon(soak *s, size_t box)
{
    if (atomic_load(&s->daemon_down[box]))
        return;
    const dd_daemon *d = &s->fleet.boxes[box].drv;
    pid_t pid = d->pid;
    bool alive = pid > 0 && kill(pid, 0) == 0;
    if (alive) {
        /* A daemon that died and is not reaped yet is a zombie. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        _cleanup_free_ char *stat = dd_read_text(path);
        const char *state = stat ? strrchr(stat, ')') : NULL;
        alive = state && state[1] == ' ' && state[2] != 'Z' && state[2] != 'X';
    }
    if (atomic_load(&s->daemon_down[box]))
        return; /* the soak began to stop it meanwhile */
    soak_check(s, I_DAEMONS_ALIVE, alive,
               "%s's daemon (pid %d) died and the soak did not kill "
               "it (log: %s)",
               fl_box_name(box), (int)pid, d->log_path);
    if (alive)
        check_in_leaves(s, box, pid);
}

static void *sampler_run(void *arg)
{
    soak *s = arg;
    unsigned round = 0;
    while (!atomic_load(&s->stop_sampler) && !atomic_load(&s->broken)) {
        for (size_t i = 0; i < s->n_hosts; i++)
            sample_host(s, &s->hosts[i]);
        /* The tree walks cost more; every 25th round (half a second). */
        if (round++ % 25 == 0)
            for (size_t b = 0; b < s->n_boxes; b++)
                check_daemon(s, b);
        dd_sleep_ms(SAMPLE_MS);
    }
    return NULL;
}

void soak_sampler_start(soak *s)
{
    atomic_store(&s->stop_sampler, false);
    s->sampler_running = true;
    if (pthread_create(&s->sampler_thread, NULL, sampler_run, s) != 0)
        abort();
}

void soak_sampler_stop(soak *s)
{
    atomic_store(&s->stop_sampler, true);
    if (!s->sampler_running)
        return;
    s->sampler_running = false;
    pthread_join(s->sampler_thread, NULL);
}

/* ---- settled ---- */

typedef struct host_view {
    char state[32];
    uint64_t generation;
    /* "unproven_stop" while a leaf a previous daemon left (or a retirement
     * could not prove empty) is being swept: the daemon knows it. */
    bool unproven;
} host_view;

static bool status_of(soak *s, size_t box, const char *host, host_view *out)
{
    json_object *reply =
        soak_request(s, box, 10000, "{\"v\":1,\"op\":\"status\",\"host\":\"%s\"}", host);
    bool ok = reply && dd_reply_ok(reply);
    if (ok) {
        json_object *result = dd_reply_result(reply);
        snprintf(out->state, sizeof(out->state), "%s", dd_json_str(result, "state"));
        out->generation = dd_json_u64(result, "generation");
        out->unproven = strcmp(dd_json_str(result, "reason"), "unproven_stop") == 0;
    }
    json_object_put(reply);
    return ok;
}

static bool at_rest_state(const char *state)
{
    return strcmp(state, "serving") == 0 || strcmp(state, "parked") == 0;
}

/* Every leaf directory of host on box (empty or not) but g-<keep>. */
static size_t stray_leaves(soak *s, size_t box, const char *host, uint64_t keep, char *names,
                           size_t size)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", s->fleet.boxes[box].drv.cgroup_path, host);
    _cleanup_(closedirp) DIR *dir = opendir(path);
    char kept[40];
    snprintf(kept, sizeof(kept), "g-%llu", (unsigned long long)keep);
    size_t n = 0, used = 0;
    names[0] = '\0';
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        if (entry->d_type != DT_DIR || entry->d_name[0] == '.' ||
            (keep && strcmp(entry->d_name, kept) == 0))
            continue;
        n++;
        if (used < size)
            used += (size_t)snprintf(names + used, size - used, " %s", entry->d_name);
    }
    return n;
}

/* What the statuses of one box said, for the report of a lull that waited
 * too long. */
static void say_status(char *why, size_t size, size_t box, const char *when, const host_view *v,
                       bool answered)
{
    if (!answered)
        snprintf(why, size, "%s did not answer a status (%s)", fl_box_name(box), when);
    else
        snprintf(why, size, "%s said %s g-%llu%s (%s)", fl_box_name(box), v->state,
                 (unsigned long long)v->generation, v->unproven ? " unproven_stop" : "", when);
}

/* One host, checked once it is at rest or serving on every box and stays
 * so across the check. Returns false when it moved meanwhile (try again),
 * with what stood in the way in why. */
static bool check_host_settled(soak *s, soak_host *h, bool last_try, char *why, size_t why_size)
{
    host_view before[FL_BOXES_MAX], after[FL_BOXES_MAX];
    for (size_t b = 0; b < s->n_boxes; b++) {
        bool answered = status_of(s, b, h->name, &before[b]);
        if (!answered || !at_rest_state(before[b].state) || before[b].unproven) {
            say_status(why, why_size, b, "first status", &before[b], answered);
            return false;
        }
    }
    claim c = {0};
    act_error err = {0};
    bool have_claim = claims_read(s->fleet.store, h->name, &c, &err) > 0;
    uint64_t gens[FL_BOXES_MAX][8];
    size_t n[FL_BOXES_MAX];
    /* The leaves are listed between the two statuses, so a wake begun
     * after the second (its leaf made beside the admission) is not taken
     * for a stray of the state the first and second agree on. */
    char strays[FL_BOXES_MAX][256];
    size_t n_strays[FL_BOXES_MAX];
    for (size_t b = 0; b < s->n_boxes; b++) {
        n[b] = populated_generations(s, b, h->name, gens[b], 8, false);
        bool serving = strcmp(before[b].state, "serving") == 0;
        n_strays[b] = stray_leaves(s, b, h->name, serving ? before[b].generation : 0, strays[b],
                                   sizeof(strays[b]));
    }
    for (size_t b = 0; b < s->n_boxes; b++) {
        bool answered = status_of(s, b, h->name, &after[b]);
        if (!answered || strcmp(before[b].state, after[b].state) != 0 ||
            before[b].generation != after[b].generation || after[b].unproven) {
            say_status(why, why_size, b, "second status, changed or unproven", &after[b], answered);
            return false;
        }
    }
    if (!have_claim && !last_try) {
        snprintf(why, why_size, "its claim could not be read: %.160s", err.message);
        return false;
    }

    int serving_box = -1;
    for (size_t b = 0; b < s->n_boxes; b++) {
        bool serving = strcmp(after[b].state, "serving") == 0;
        if (serving)
            serving_box = (int)b;
        bool known = serving ? n[b] == 1 && gens[b][0] == after[b].generation : n[b] == 0;
        soak_check_host(s, I_LEAVES_KNOWN, h, known && n_strays[b] == 0,
                        "host %s on %s: the daemon says %s g-%llu; populated g-leaves: %zu (first "
                        "g-%llu); other leaves:%s",
                        h->name, fl_box_name(b), after[b].state,
                        (unsigned long long)after[b].generation, n[b],
                        (unsigned long long)(n[b] ? gens[b][0] : 0), strays[b]);
    }
    const char *executor = have_claim ? claim_executor(&c) : NULL;
    if (serving_box >= 0) {
        const char *box = fl_box_name((size_t)serving_box);
        soak_check_host(s, I_CLAIM_TRUE, h,
                        have_claim && strcmp(c.holder.box, box) == 0 &&
                            strcmp(c.op.phase, "serving") == 0 && executor &&
                            strcmp(executor, box) == 0,
                        "host %s serves on %s; its claim names holder %s, executor %s, phase %s",
                        h->name, box, c.holder.box, executor ? executor : "(none)", c.op.phase);
    } else {
        /* Parked everywhere: the claim names the box that will serve it.
         * Its phase may still say serving while the write-back of the park
         * waits out a store outage (claim/write_backs.c retries it) or a killed
         * daemon's successor has yet to write it (hosts/recovery.c); that is
         * counted and shown, not broken (see the report). */
        soak_check_host(s, I_CLAIM_TRUE, h, have_claim && executor && executor[0],
                        "host %s serves nowhere; its claim names no executor (phase %s)", h->name,
                        c.op.phase);
        if (have_claim && strcmp(c.op.phase, "serving") == 0) {
            s->stale_serving_claims++;
            const char *v = getenv("SOAK_VERBOSE");
            if (v && v[0] == '1')
                fprintf(stderr,
                        "soak: +%.3f s host %s is parked everywhere; its claim (revision %" PRIu64
                        ") says serving, holder %s generation %" PRIu64 "\n",
                        (double)(soak_now_ms() - s->start_ms) / 1000.0, h->name, c.revision,
                        c.holder.box, c.holder.generation);
        }
    }
    return true;
}

/* True when pid's environment names marker as its E2E_MARKER: the app that
 * wrote the marker, not another test's app that got its pid since. */
static bool wrote_marker(pid_t pid, const char *marker)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char env[16384];
    ssize_t n = read(fd, env, sizeof(env) - 1);
    close(fd);
    if (n <= 0)
        return false;
    env[n] = '\0';
    for (char *var = env; var < env + n; var += strlen(var) + 1)
        if (strncmp(var, "E2E_MARKER=", 11) == 0)
            return strcmp(var + 11, marker) == 0;
    return false;
}

/* Every act-testapp the markers list that still runs is in a leaf of one
 * of the boxes. */
static void check_app_pids(soak *s)
{
    for (size_t b = 0; b < s->n_boxes; b++) {
        for (size_t i = 0; i < s->n_hosts; i++) {
            char marker[PATH_MAX];
            snprintf(marker, sizeof(marker), "%s/markers/marker-%s", s->fleet.boxes[b].drv.dir,
                     s->hosts[i].name);
            _cleanup_free_ char *text = dd_read_text(marker);
            for (char *line = text; line && *line;) {
                pid_t pid = (pid_t)atol(line);
                char *next = strchr(line, '\n');
                line = next ? next + 1 : NULL;
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
                _cleanup_free_ char *comm = dd_read_text(path);
                if (!comm || strncmp(comm, "act-testapp", 11) != 0 || !wrote_marker(pid, marker))
                    continue; /* gone (or the pid is another program's now) */
                snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
                _cleanup_free_ char *cgroup = dd_read_text(path);
                if (!cgroup)
                    continue;
                bool in_leaf = false;
                for (size_t k = 0; k < s->n_boxes && !in_leaf; k++) {
                    const char *root = strrchr(s->fleet.boxes[k].drv.cgroup_path, '/');
                    const char *at = root ? strstr(cgroup, root) : NULL;
                    in_leaf = at && strstr(at, "/hosts/") && strstr(at, "/g-");
                }
                soak_check_host(s, I_IN_LEAVES, &s->hosts[i], in_leaf,
                                "app pid %d of %s is outside every leaf: %s", (int)pid,
                                s->hosts[i].name, cgroup);
            }
        }
    }
}

void soak_check_settled(soak *s, const char *when)
{
    uint64_t deadline = soak_now_ms() + SETTLE_MS;
    for (size_t i = 0; i < s->n_hosts && !atomic_load(&s->broken); i++) {
        soak_host *h = &s->hosts[i];
        /* Never at rest for long: it crashes 600 ms after each start. */
        if (h->kind == SOAK_CRASHLOOP)
            continue;
        bool done = false;
        while (!done && !atomic_load(&s->broken)) {
            bool last_try = soak_now_ms() >= deadline;
            char why[256] = "";
            done = check_host_settled(s, h, last_try, why, sizeof(why));
            if (!done && last_try) {
                soak_check_host(s, I_LEAVES_KNOWN, h, false,
                                "at the %s lull, host %s was not parked or serving on every box "
                                "within %d s: at the last look %s",
                                when, h->name, SETTLE_MS / 1000, why);
                break;
            }
            if (!done)
                dd_sleep_ms(100);
        }
    }
    check_app_pids(s);
}

/* ---- baseline ---- */

/* A socket's kind by its inode: "tcp LISTEN", "tcp ESTABLISHED (store)"
 * (a connection to etcd, on store_port), ..., "unix <path>", or "socket". */
static void socket_kind(pid_t pid, unsigned long inode, int store_port, char *out, size_t size)
{
    static const char *const tcp_states[] = {"?",          "ESTABLISHED", "SYN_SENT",  "SYN_RECV",
                                             "FIN_WAIT1",  "FIN_WAIT2",   "TIME_WAIT", "CLOSE",
                                             "CLOSE_WAIT", "LAST_ACK",    "LISTEN",    "CLOSING"};
    snprintf(out, size, "socket");
    const char *tables[] = {"tcp", "tcp6", "unix", "udp"};
    for (size_t t = 0; t < 4; t++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)pid, tables[t]);
        _cleanup_free_ char *text = dd_read_text(path);
        for (char *line = text; line && *line;) {
            char *next = strchr(line, '\n');
            if (next)
                *next = '\0';
            unsigned long found = 0;
            unsigned state = 0, remote_port = 0;
            if (t == 2) { /* Num RefCount Protocol Flags Type St Inode Path */
                char named[PATH_MAX] = "";
                if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %4095s", &found, named) >= 1 &&
                    found == inode) {
                    /* The path says whose: a listener's, or a connection
                     * accepted on it; unnamed ones are the other ends. */
                    const char *base = strrchr(named, '/');
                    snprintf(out, size, "unix %s", base ? base + 1 : "(unnamed)");
                    return;
                }
            } else if (sscanf(line, "%*s %*s %*[0-9A-Fa-f]:%x %x %*s %*s %*s %*s %*s %lu",
                              &remote_port, &state, &found) == 3 &&
                       found == inode) {
                bool store = store_port && (int)remote_port == store_port;
                snprintf(out, size, "%s %s%s", tables[t],
                         state < sizeof(tcp_states) / sizeof(tcp_states[0]) ? tcp_states[state]
                                                                            : "?",
                         store ? " (store)" : "");
                return;
            }
            line = next ? next + 1 : NULL;
        }
    }
}

/* The port box's store connections go to: etcd's, or for the box cut off
 * through a proxy of its own (the partition fault), the proxy's. */
static int store_port_of(const soak *s, size_t box)
{
    return (int)box == s->fleet.proxied ? s->fleet.proxy.port : s->fleet.etcd.client_port;
}

/* A daemon's fds: how many in all, how many are the store client's
 * connections (libcurl keeps a pool, whose size follows the calls that
 * were in flight at once, and closes a dead one when it next looks), how
 * many are host directories, and what they are by kind ("tcp LISTEN 12,
 * unix control.ipc 1, anon_inode:[pidfd] 3, ...") for a message. */
typedef struct fd_census {
    long total, store, host_dirs;
    char host_dir_names[256]; /* " stubborn counter-1" */
    char kinds[1024];
} fd_census;

/* Whether the soak process itself has target ("socket:[123]") open. */
static bool inherited(const char *target)
{
    _cleanup_(closedirp) DIR *dir = opendir("/proc/self/fd");
    struct dirent *entry;
    while (dir && (entry = readdir(dir))) {
        char link[PATH_MAX], mine[PATH_MAX] = "";
        snprintf(link, sizeof(link), "/proc/self/fd/%s", entry->d_name);
        ssize_t len = readlink(link, mine, sizeof(mine) - 1);
        if (len > 0 && (mine[len] = '\0', strcmp(mine, target) == 0))
            return true;
    }
    return false;
}

static void count_fds(pid_t pid, int store_port, const char *hosts_dir, fd_census *out)
{
    typedef struct kind {
        char name[96];
        unsigned n;
    } kind;
    kind kinds[48];
    size_t n_kinds = 0, used = 0;
    *out = (fd_census){0};
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    _cleanup_(closedirp) DIR *dir = opendir(path);
    if (!dir) {
        out->total = -1;
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (entry->d_name[0] == '.')
            continue;
        char link[PATH_MAX + 80], target[PATH_MAX] = "";
        snprintf(link, sizeof(link), "%s/%s", path, entry->d_name);
        ssize_t len = readlink(link, target, sizeof(target) - 1);
        target[len > 0 ? len : 0] = '\0';
        /* An fd the soak itself has open came with the fork: the driver's
         * exec of the daemon keeps what is not close-on-exec (NNG's and
         * libcurl's socketpairs here), which is the harness's, not the
         * daemon's. */
        if (strchr(target, '[') && inherited(target))
            continue;
        out->total++;
        unsigned long inode = 0;
        if (sscanf(target, "socket:[%lu]", &inode) == 1)
            socket_kind(pid, inode, store_port, target, sizeof(target));
        else if (strncmp(target, "pipe:", 5) == 0)
            target[4] = '\0';
        /* A socket no table lists is a TCP connection that is closed (an RST
         * after the peer went away) but not yet released: in this daemon
         * that is a pooled connection of libcurl's to an etcd that was
         * restarted, which it drops when it next looks (every other inet
         * socket of the daemon is a listener or an accepted connection,
         * and every unix one is listed). So it counts with the store's. */
        if (strcmp(target, "socket") == 0)
            snprintf(target, sizeof(target), "socket (closed TCP, store)");
        if (strstr(target, "store)"))
            out->store++;
        if (strncmp(target, hosts_dir, strlen(hosts_dir)) == 0 && target[strlen(hosts_dir)] == '/') {
            size_t named = strlen(out->host_dir_names);
            snprintf(out->host_dir_names + named, sizeof(out->host_dir_names) - named, " %s",
                     target + strlen(hosts_dir) + 1);
            out->host_dirs++;
        }
        size_t k = 0;
        while (k < n_kinds && strncmp(kinds[k].name, target, sizeof(kinds[k].name) - 1) != 0)
            k++;
        if (k == n_kinds && n_kinds < sizeof(kinds) / sizeof(kinds[0])) {
            snprintf(kinds[k].name, sizeof(kinds[k].name), "%.95s", target);
            kinds[k].n = 0;
            n_kinds++;
        }
        if (k < n_kinds)
            kinds[k].n++;
    }
    for (size_t k = 0; k < n_kinds && used < sizeof(out->kinds); k++)
        used += (size_t)snprintf(out->kinds + used, sizeof(out->kinds) - used, "%s%s %u",
                                 k ? ", " : "", kinds[k].name, kinds[k].n);
}

void soak_measure_baseline(soak *s, bool at_end)
{
    /* The same state both times: every host parked, nothing in flight. */
    for (size_t i = 0; i < s->n_hosts; i++) {
        int route = atomic_load(&s->hosts[i].route);
        json_object *reply =
            soak_request(s, route < 0 ? 0 : (size_t)route, 60000,
                         "{\"v\":1,\"op\":\"park\",\"host\":\"%s\"}", s->hosts[i].name);
        json_object_put(reply);
    }
    for (size_t b = 0; b < s->n_boxes; b++)
        for (size_t i = 0; i < s->n_hosts; i++)
            dd_wait_state(&s->fleet.boxes[b].drv, s->hosts[i].name, "parked", 10000, 50,
                          &(act_error){0});
    /* Claim write-backs and store connections come to rest. */
    dd_sleep_ms(1000);
    for (size_t b = 0; b < s->n_boxes; b++) {
        const dd_daemon *d = &s->fleet.boxes[b].drv;
        char hosts_dir[PATH_MAX];
        snprintf(hosts_dir, sizeof(hosts_dir), "%s/hosts", d->state_dir);
        fd_census fds;
        count_fds(d->pid, store_port_of(s, b), hosts_dir, &fds);
        /* The daemon probes its own control and events sockets every 3 s
         * (activator/control/ipc_heal.c), and a probe holds two ends of a
         * unix connection for a moment: a count is taken again, for up to
         * 3 s, until it is back. A leaked fd stays; a probe's does not. */
        for (int again = 0; at_end && again < 10 && fds.total >= 0 &&
                            fds.total - fds.store - fds.host_dirs > s->baseline_other_fds[b];
             again++) {
            dd_sleep_ms(300);
            count_fds(d->pid, store_port_of(s, b), hosts_dir, &fds);
        }
        long rss = dd_rss_kib(d);
        if (!at_end) {
            s->baseline_fds[b] = fds.total;
            s->baseline_other_fds[b] = fds.total - fds.store - fds.host_dirs;
            s->baseline_rss_kib[b] = rss;
            snprintf(s->baseline_fd_kinds[b], sizeof(s->baseline_fd_kinds[b]), "%s", fds.kinds);
            continue;
        }
        s->end_fds[b] = fds.total;
        s->end_store_fds[b] = fds.store;
        s->end_host_dir_fds[b] = fds.host_dirs;
        snprintf(s->end_host_dir_names[b], sizeof(s->end_host_dir_names[b]), "%s",
                 fds.host_dir_names);
        s->end_rss_kib[b] = rss;
        /* The store's connection pool is libcurl's and bounded; a parked
         * host's directory left open is counted and shown (see the
         * report). Every other fd must be back. */
        long other = fds.total - fds.store - fds.host_dirs;
        soak_check(s, I_BASELINE, fds.total >= 0 && other <= s->baseline_other_fds[b],
                   "%s's daemon holds %ld fds besides its store connections and host "
                   "directories with every host parked (%s), %ld at the start (%s)",
                   fl_box_name(b), other, fds.kinds, s->baseline_other_fds[b],
                   s->baseline_fd_kinds[b]);
        /* RSS under ASan grows with what its allocator keeps, even with a
         * small quarantine: only a gross growth counts. */
        long rss_slack = s->baseline_rss_kib[b] / 2 > 32768 ? s->baseline_rss_kib[b] / 2 : 32768;
        soak_check(s, I_BASELINE, rss > 0 && rss <= s->baseline_rss_kib[b] + rss_slack,
                   "%s's daemon's RSS is %ld KiB with every host parked, %ld KiB at the start",
                   fl_box_name(b), rss, s->baseline_rss_kib[b]);
    }
}

/* ---- clean stop ---- */

typedef struct stop_walk {
    size_t root_len;
    bool populated;
    char leftovers[512];
    size_t used;
} stop_walk;

static stop_walk *current_stop_walk;

static int stop_walk_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    stop_walk *walk = current_stop_walk;
    if (flag != FTW_D && flag != FTW_DP)
        return 0;
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
    _cleanup_free_ char *text = dd_read_text(procs);
    if (text && text[0])
        walk->populated = true;
    const char *relative = path + walk->root_len;
    if (*relative == '/')
        relative++;
    if (*relative && strcmp(relative, "hosts") != 0 && walk->used < sizeof(walk->leftovers) - 1)
        walk->used += (size_t)snprintf(walk->leftovers + walk->used,
                                       sizeof(walk->leftovers) - walk->used, " %s", relative);
    return 0;
}

void soak_check_clean_stop(soak *s)
{
    for (size_t b = 0; b < s->n_boxes; b++) {
        dd_daemon *d = &s->fleet.boxes[b].drv;
        act_error err = {0};
        atomic_store(&s->daemon_down[b], true);
        int status = dd_stop(d, 60000, &err);
        soak_check(s, I_CLEAN_STOP, status == 0,
                   "%s's daemon exited with status %d after SIGTERM %s (log: %s)", fl_box_name(b),
                   status, err.message, d->log_path);
        stop_walk walk = {.root_len = strlen(d->cgroup_path)};
        pthread_mutex_lock(&walk_lock);
        current_stop_walk = &walk;
        nftw(d->cgroup_path, stop_walk_entry, 16, FTW_PHYS);
        current_stop_walk = NULL;
        pthread_mutex_unlock(&walk_lock);
        soak_check(s, I_CLEAN_STOP, !walk.populated && walk.used == 0,
                   "%s's cgroup root after a clean stop: %s, leaves left:%s", fl_box_name(b),
                   walk.populated ? "processes left" : "empty",
                   walk.used ? walk.leftovers : " none");
    }
}
