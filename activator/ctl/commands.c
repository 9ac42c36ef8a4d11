#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "activator/config/parse/duration.h"
#include "activator/control/fleet.h"
#include "activator/ctl/claim_transfer.h"
#include "activator/ctl/client.h"
#include "activator/ctl/commands.h"
#include "activator/ctl/drain.h"
#include "activator/ctl/move.h"
#include "activator/ctl/op_line.h"
#include "activator/ctl/render.h"
#include "activator/ctl/store_mode.h"
#include "activator/events/events.h"
#include "common/cleanup_json.h"
#include "common/clock.h"
#include "common/json_fields.h"
#include "common/names.h"

#ifndef CTL_VERSION
#define CTL_VERSION "unknown"
#endif

/* Quick requests answer in milliseconds; this only bounds a wedged daemon. */
#define QUICK_TIMEOUT_SEC 15
/* A waiting wake or swap may take MaxStarts (5) ready windows (30 s each)
 * with backoff, plus a restore; the bound is generous, and a daemon that goes
 * away ends the wait at once anyway. */
#define WAIT_TIMEOUT_SEC 600
/* A reload reads every host file and may bind and stop many hosts. */
#define RELOAD_TIMEOUT_SEC 120

static json_object *new_request(const char *op)
{
    json_object *request = json_object_new_object();
    json_object_object_add(request, "v", json_object_new_int(CTRL_PROTOCOL_VERSION));
    json_object_object_add(request, "op", json_object_new_string(op));
    return request;
}

typedef struct progress {
    const ctl_options *options;
    uint64_t started_usec;
    bool line_open; /* a stage.progress line, rewritten in place on a terminal */
} progress;

/* "generation 3, version v2, pid 1234, reason ready_timeout" from an event. */
static void describe_event(json_object *event, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    uint64_t generation = act_json_u64_or(event, "generation", 0),
             pid = act_json_u64_or(event, "pid", 0);
    const char *version = act_json_string_or(event, "version", NULL),
               *reason = act_json_string_or(event, "reason", NULL);
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (o < size)                                                                              \
            o += (size_t)snprintf(buf + o, size - o, __VA_ARGS__);                                 \
    } while (0)
    if (generation)
        APPEND("%sgeneration %llu", o ? ", " : "", (unsigned long long)generation);
    if (version)
        APPEND("%sversion %s", o ? ", " : "", version);
    if (pid)
        APPEND("%spid %llu", o ? ", " : "", (unsigned long long)pid);
    if (reason)
        APPEND("%sreason %s", o ? ", " : "", reason);
#undef APPEND
}

static void on_progress(json_object *event, void *userdata)
{
    progress *p = userdata;
    const char *name = act_json_string_or(event, "event", NULL);
    char elapsed[32], details[512];
    ctl_format_duration(act_now_usec() - p->started_usec, elapsed, sizeof(elapsed));
    describe_event(event, details, sizeof(details));
    const char *color = p->options->color ? ctl_state_color(name) : NULL;
    /* A pull's progress, once a second: one line, rewritten, on a terminal. */
    bool in_place = name && strcmp(name, "stage.progress") == 0 && isatty(STDOUT_FILENO);
    printf("%s  %7s  %s%-13s%s %s%s", p->line_open ? "\r\033[K" : "", elapsed,
           color ? color : "", name ? name : "?", color ? CTL_COLOR_RESET : "", details,
           in_place ? "" : "\n");
    p->line_open = in_place;
    fflush(stdout);
}

/* Prints a reply: as JSON with --json, else the result rendered or the
 * refusal on stderr. Returns the exit code it stands for. */
static int print_reply(const ctl_options *options, const char *what, json_object *reply,
                       ctl_render_fn render)
{
    json_object *result = NULL, *error = NULL;
    json_object_object_get_ex(reply, "result", &result);
    json_object_object_get_ex(reply, "error", &error);
    bool succeeded = act_json_bool_or(reply, "ok", false);

    if (options->json) {
        printf("%s\n", json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
    } else if (succeeded) {
        render(result, options);
    } else {
        const char *code = error ? act_json_string_or(error, "code", NULL) : NULL;
        const char *message = error ? act_json_string_or(error, "message", NULL) : NULL;
        fprintf(stderr, "activatorctl: %s: %s%s%s%s\n", what,
                message ? message : "the daemon refused without a message",
                code ? " [" : "", code ? code : "", code ? "]" : "");
        /* What did not fit one sentence (a refused reload's FILE:LINE:
         * KEY: lines), one per line as the daemon wrote them. */
        json_object *problems = act_json_find(error, "problems", json_type_array);
        if (problems)
            for (size_t i = 0; i < json_object_array_length(problems); i++) {
                json_object *line = json_object_array_get_idx(problems, i);
                if (json_object_is_type(line, json_type_string))
                    fprintf(stderr, "%s\n", json_object_get_string(line));
            }
    }
    return succeeded ? CTL_EXIT_OK : CTL_EXIT_FAILED;
}

/* Gets the reply to request: from the daemon, or with --store from the
 * claim store itself. progress_host: subscribe to that host's events first
 * and show them while waiting. */
static int obtain_reply(const ctl_options *options, const char *what, json_object *request,
                        const char *progress_host, int default_timeout, json_object **reply)
{
    *reply = NULL;
    if (options->store_url)
        return ctl_store_call(options, request, reply);
    ctl_client client;
    int r = ctl_client_open(&client, options);
    if (r != CTL_EXIT_OK) {
        ctl_client_close(&client);
        return r;
    }
    progress p = {.options = options, .started_usec = act_now_usec()};
    bool live = false;
    if (progress_host && !options->json) {
        char prefix[ACT_NAME_MAX + 8];
        if (ev_host_prefix(progress_host, prefix, sizeof(prefix)) == 0)
            live = ctl_client_subscribe(&client, prefix, false);
        if (live)
            printf("%s: waiting (events follow)\n", what);
    }
    r = ctl_client_call(&client, request, options->timeout_sec ? options->timeout_sec
                                                               : default_timeout,
                        live ? on_progress : NULL, &p, reply);
    if (p.line_open)
        printf("\n");
    ctl_client_close(&client);
    return r;
}

/* Sends one request and prints the outcome. */
static int perform(const ctl_options *options, const char *what, json_object *request_arg,
                   const char *progress_host, int default_timeout, ctl_render_fn render)
{
    _cleanup_(json_object_putp) json_object *request = request_arg;
    _cleanup_(json_object_putp) json_object *reply = NULL;
    int r = obtain_reply(options, what, request, progress_host, default_timeout, &reply);
    if (!reply)
        return r;
    int printed = print_reply(options, what, reply, render);
    return r != CTL_EXIT_OK ? r : printed;
}

/* ---- renderers ---- */

static void render_object(json_object *result, const ctl_options *options)
{
    if (result && json_object_is_type(result, json_type_object))
        ctl_print_object(result, options->color);
    else if (result)
        printf("%s\n", json_object_to_json_string_ext(result, JSON_C_TO_STRING_PLAIN));
}

/* "web1: serving, generation 4, version v2" for wake, park, swap, ... */
static void render_host_outcome(json_object *result, const ctl_options *options)
{
    if (!result || !json_object_is_type(result, json_type_object)) {
        render_object(result, options);
        return;
    }
    const char *host = act_json_string_or(result, "host", NULL),
               *state = act_json_string_or(result, "state", NULL);
    char details[512];
    describe_event(result, details, sizeof(details));
    const char *color = options->color ? ctl_state_color(state) : NULL;
    printf("%s: %s%s%s%s%s\n", host ? host : "?", color ? color : "", state ? state : "done",
           color ? CTL_COLOR_RESET : "", *details ? ", " : "", details);
}

static bool names_only;

/* "store etcd://...: ok", or unavailable with since when and why: a box
 * whose store is gone refuses wakes, and this line says so. */
static void render_store(json_object *store, const ctl_options *options)
{
    const char *url = act_json_string_or(store, "url", NULL),
               *state = act_json_string_or(store, "state", NULL);
    if (!state)
        return;
    bool ok = strcmp(state, "ok") == 0;
    const char *color = options->color ? (ok ? CTL_COLOR_GREEN : CTL_COLOR_RED) : NULL;
    char since[64] = "";
    uint64_t since_usec = act_json_u64_or(store, "since_usec", 0);
    time_t since_sec = (time_t)(since_usec / 1000000);
    struct tm local;
    if (since_usec && localtime_r(&since_sec, &local))
        strftime(since, sizeof(since), " since %H:%M:%S", &local);
    const char *error = act_json_string_or(store, "error", NULL);
    printf("store %s: %s%s%s%s%s%s\n", url ? url : "?", color ? color : "", state,
           color ? CTL_COLOR_RESET : "", since, error ? ": " : "", error ? error : "");
}

static void render_status(json_object *result, const ctl_options *options)
{
    json_object *hosts = act_json_find(result, "hosts", json_type_array);
    if (!hosts) {
        if (result && act_json_string_or(result, "host", NULL)) { /* one host as a bare object */
            hosts = json_object_new_array();
            json_object_array_add(hosts, json_object_get(result));
            json_object *wrapper = json_object_new_object();
            json_object_object_add(wrapper, "hosts", hosts);
            render_status(wrapper, options);
            json_object_put(wrapper);
            return;
        }
        render_object(result, options);
        return;
    }
    size_t n = json_object_array_length(hosts);
    if (names_only) {
        for (size_t i = 0; i < n; i++) {
            const char *host =
                act_json_string_or(json_object_array_get_idx(hosts, i), "host", NULL);
            if (host)
                printf("%s\n", host);
        }
        return;
    }
    /* A reload's changes that wait for a host's next start get a column of
     * their own, shown only while some host has them. */
    bool pending = false, moving = false;
    for (size_t i = 0; i < n; i++) {
        pending |= act_json_string_or(json_object_array_get_idx(hosts, i), "config", NULL) != NULL;
        moving |= act_json_string_or(json_object_array_get_idx(hosts, i), "move", NULL) != NULL;
    }
    /* A move's part on this box, likewise only while some host has one. */
    const char *columns[13] = {"HOST", "STATE", "GEN", "VERSION", "PID", "UPTIME", "MEMORY",
                               "PIDS", "REASON"};
    size_t n_columns = 9;
    if (moving)
        columns[n_columns++] = "MOVE";
    if (pending)
        columns[n_columns++] = "CONFIG";
    ctl_table table;
    ctl_table_init(&table, columns);
    uint64_t now = act_wallclock_usec();
    for (size_t i = 0; i < n; i++) {
        json_object *h = json_object_array_get_idx(hosts, i);
        char gen[24] = "-", pid[24] = "-", uptime[32] = "-", memory[32] = "-", pids[24] = "-";
        uint64_t v;
        if ((v = act_json_u64_or(h, "generation", 0)))
            snprintf(gen, sizeof(gen), "%llu", (unsigned long long)v);
        if ((v = act_json_u64_or(h, "pid", 0)))
            snprintf(pid, sizeof(pid), "%llu", (unsigned long long)v);
        if ((v = act_json_u64_or(h, "since_usec", 0)) && v <= now)
            ctl_format_duration(now - v, uptime, sizeof(uptime));
        /* A frozen host's state says for how long: "frozen 12m". */
        char frozen_for[48];
        const char *state = act_json_string_or(h, "state", NULL);
        if ((v = act_json_u64_or(h, "frozen_since_usec", 0)) && v <= now && state) {
            char span[32];
            ctl_format_duration(now - v, span, sizeof(span));
            snprintf(frozen_for, sizeof(frozen_for), "%s %s", state, span);
            state = frozen_for;
        }
        if ((v = act_json_u64_or(h, "memory_current", 0)))
            ctl_format_size(v, memory, sizeof(memory));
        if ((v = act_json_u64_or(h, "pids_current", 0)))
            snprintf(pids, sizeof(pids), "%llu", (unsigned long long)v);
        const char *config = act_json_string_or(h, "config", NULL),
                   *move = act_json_string_or(h, "move", NULL);
        const char *cells[12] = {act_json_string_or(h, "host", NULL),
                                 state,
                                 gen,
                                 act_json_string_or(h, "version", NULL),
                                 pid,
                                 uptime,
                                 memory,
                                 pids,
                                 act_json_string_or(h, "reason", NULL)};
        size_t n_cells = 9;
        if (moving)
            cells[n_cells++] = move ? move : "-";
        if (pending)
            cells[n_cells++] = config ? config : "-";
        const char *colors[12] = {NULL, ctl_state_color(state)};
        ctl_table_add(&table, cells, colors);
    }
    ctl_table_print(&table, options->color);
    ctl_table_free(&table);
    json_object *store = NULL;
    if (json_object_object_get_ex(result, "store", &store))
        render_store(store, options);
}

static void render_releases(json_object *result, const ctl_options *options)
{
    json_object *releases = act_json_find(result, "releases", json_type_array);
    if (!releases) {
        render_object(result, options);
        return;
    }
    const char *live = act_json_string_or(result, "live", NULL);
    ctl_table table;
    ctl_table_init(&table,
                   (const char *const[]){"VERSION", "LIVE", "DIGEST", "SIZE", "STAGED", NULL});
    uint64_t now = act_wallclock_usec();
    for (size_t i = 0; i < json_object_array_length(releases); i++) {
        json_object *rel = json_object_array_get_idx(releases, i);
        const char *version = act_json_string_or(rel, "version", NULL),
                   *digest = act_json_string_or(rel, "digest", NULL);
        char size[32] = "-", staged[40] = "-", short_digest[16] = "-";
        uint64_t v;
        if ((v = act_json_u64_or(rel, "size", 0)))
            ctl_format_size(v, size, sizeof(size));
        if ((v = act_json_u64_or(rel, "staged_usec", 0)) && v <= now) {
            ctl_format_duration(now - v, staged, sizeof(staged) - 4);
            strcat(staged, " ago");
        }
        if (digest)
            snprintf(short_digest, sizeof(short_digest), "%.12s", digest);
        bool is_live = live && version && strcmp(live, version) == 0;
        const char *cells[] = {version, is_live ? "*" : "", short_digest, size, staged};
        const char *colors[5] = {is_live ? CTL_COLOR_GREEN : NULL, CTL_COLOR_GREEN};
        ctl_table_add(&table, cells, colors);
    }
    ctl_table_print(&table, options->color);
    ctl_table_free(&table);
}

/* "web1: checkpoint ID (12.0 MiB, sha256 0123456789ab..., generation 4) named on
 * the claim at revision 17; it was parked first" */
static void render_checkpoint(json_object *result, const ctl_options *options)
{
    const char *host = result ? act_json_string_or(result, "host", NULL) : NULL;
    const char *id = result ? act_json_string_or(result, "checkpoint", NULL) : NULL;
    if (!host || !id) {
        render_object(result, options);
        return;
    }
    const char *sha256 = act_json_string_or(result, "sha256", NULL);
    char size[32] = "size not known";
    if (act_json_u64_or(result, "size", 0))
        ctl_format_size(act_json_u64_or(result, "size", 0), size, sizeof(size));
    bool was_parked = act_json_bool_or(result, "parked", false);
    printf("%s: checkpoint %s (%s, sha256 %.12s..., generation %" PRIu64
           ") named on the claim at revision %" PRIu64 "%s\n",
           host, id, size, sha256 ? sha256 : "?", act_json_u64_or(result, "generation", 0),
           act_json_u64_or(result, "revision", 0),
           was_parked ? "; the host was parked first and wakes on its next connection" : "");
}

static void render_checkpoints(json_object *result, const ctl_options *options)
{
    json_object *list = act_json_find(result, "checkpoints", json_type_array);
    if (!list) {
        render_object(result, options);
        return;
    }
    const char *named = act_json_string_or(result, "named", NULL);
    ctl_table table;
    ctl_table_init(&table, (const char *const[]){"CHECKPOINT", "NAMED", "SHA256", "SIZE",
                                                 "GENERATION", "BOX", "WRITTEN", NULL});
    uint64_t now = act_wallclock_usec();
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *entry = json_object_array_get_idx(list, i);
        const char *id = act_json_string_or(entry, "checkpoint", NULL),
                   *sha256 = act_json_string_or(entry, "sha256", NULL);
        const char *box = act_json_string_or(entry, "box", NULL);
        char size[32] = "-", written[40] = "-", short_sha[16] = "-", generation[24] = "-";
        uint64_t v;
        if ((v = act_json_u64_or(entry, "size", 0)))
            ctl_format_size(v, size, sizeof(size));
        if ((v = act_json_u64_or(entry, "stamp_usec", 0)) && v <= now) {
            ctl_format_duration(now - v, written, sizeof(written) - 4);
            strcat(written, " ago");
        }
        if ((v = act_json_u64_or(entry, "generation", 0)))
            snprintf(generation, sizeof(generation), "%" PRIu64, v);
        if (sha256 && sha256[0])
            snprintf(short_sha, sizeof(short_sha), "%.12s", sha256);
        bool is_named = named && id && strcmp(named, id) == 0;
        const char *cells[] = {id,         is_named ? "*" : "", short_sha, size,
                               generation, box && box[0] ? box : "-", written};
        const char *colors[7] = {is_named ? CTL_COLOR_GREEN : NULL, CTL_COLOR_GREEN};
        ctl_table_add(&table, cells, colors);
    }
    ctl_table_print(&table, options->color);
    ctl_table_free(&table);
}

/* "1m05s ago" from a wall-clock stamp; "-" when unknown or ahead. */
static void format_ago(uint64_t stamp_usec, uint64_t now, char *buf, size_t size)
{
    if (!stamp_usec || stamp_usec > now) {
        snprintf(buf, size, "-");
        return;
    }
    char duration[32];
    ctl_format_duration(now - stamp_usec, duration, sizeof(duration));
    snprintf(buf, size, "%s ago", duration);
}

static void format_u64(json_object *object, const char *key, char *buf, size_t size)
{
    uint64_t value = act_json_u64_or(object, key, 0);
    if (value)
        snprintf(buf, size, "%llu", (unsigned long long)value);
    else
        snprintf(buf, size, "-");
}

static void render_claims(json_object *result, const ctl_options *options)
{
    json_object *claims = act_json_find(result, "claims", json_type_array);
    if (!claims) {
        render_object(result, options);
        return;
    }
    ctl_table table;
    ctl_table_init(&table, (const char *const[]){"HOST", "BOX", "PHASE", "GEN", "SESSION",
                                                 "VERSION", "PIN", "HELD", "AGE", "REVISION",
                                                 NULL});
    uint64_t now = act_wallclock_usec();
    for (size_t i = 0; i < json_object_array_length(claims); i++) {
        json_object *c = json_object_array_get_idx(claims, i);
        char gen[24], session[24], revision[24], age[40], phase[64];
        format_u64(c, "generation", gen, sizeof(gen));
        format_u64(c, "session", session, sizeof(session));
        format_u64(c, "revision", revision, sizeof(revision));
        format_ago(act_json_u64_or(c, "stamp_usec", 0), now, age, sizeof(age));
        const char *op = act_json_string_or(c, "op", NULL),
                   *state = act_json_string_or(c, "phase", NULL);
        /* The phase alone for the usual serving op, else "move/draining". */
        if (op && strcmp(op, "serving") != 0)
            snprintf(phase, sizeof(phase), "%s/%s", op, state ? state : "?");
        else
            snprintf(phase, sizeof(phase), "%s", state ? state : "-");
        const char *box = act_json_string_or(c, "box", NULL);
        /* "v2 failed (crashed)": every start runs the fallback (VERSION). */
        const char *pin_version = act_json_string_or(c, "pin", NULL);
        const char *pin_failure = act_json_string_or(c, "pin_failure", NULL);
        char pin[160];
        if (pin_version && pin_failure)
            snprintf(pin, sizeof(pin), "%s failed (%s)", pin_version, pin_failure);
        else
            snprintf(pin, sizeof(pin), "%s", pin_version ? pin_version : "");
        const char *cells[] = {act_json_string_or(c, "host", NULL),
                               box ? box : "(released)",
                               phase,
                               gen,
                               session,
                               act_json_string_or(c, "version", NULL),
                               pin[0] ? pin : NULL,
                               act_json_string_or(c, "held", NULL),
                               age,
                               revision};
        const char *colors[10] = {NULL, NULL, ctl_state_color(state)};
        ctl_table_add(&table, cells, colors);
    }
    ctl_table_print(&table, options->color);
    ctl_table_free(&table);
}

/* At most this many hosts are named on a line of print_hosts_fate. */
#define FATE_NAMES_MAX 10

/* Under the table: for a box hosts were taken over from, which went where;
 * for a box that is not live, which hosts still wait for it. */
static void print_hosts_fate(json_object *b)
{
    const char *box = act_json_string_or(b, "box", "?");
    const char *state = act_json_bool_or(b, "live", false) ? "live" : "dead";
    json_object *taken = act_json_find(b, "taken_over", json_type_array);
    size_t n = taken ? json_object_array_length(taken) : 0;
    if (n) {
        printf("%s (%s): %zu host%s taken over:", box, state, n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n && i < FATE_NAMES_MAX; i++) {
            json_object *entry = json_object_array_get_idx(taken, i);
            printf("%s %s -> %s", i ? "," : "", act_json_string_or(entry, "host", "?"),
                   act_json_string_or(entry, "to", "?"));
        }
        if (n > FATE_NAMES_MAX)
            printf(" and %zu more", n - FATE_NAMES_MAX);
        printf("\n");
    }
    json_object *stranded = act_json_find(b, "stranded", json_type_array);
    n = stranded ? json_object_array_length(stranded) : 0;
    if (n) {
        printf("%s (%s): %zu host%s still assigned to it:", box, state, n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n && i < FATE_NAMES_MAX; i++)
            printf("%s %s", i ? "," : "",
                   json_object_get_string(json_object_array_get_idx(stranded, i)));
        if (n > FATE_NAMES_MAX)
            printf(" and %zu more", n - FATE_NAMES_MAX);
        printf(" (no box wakes them until it comes back; 'activatorctl move --force HOST BOX' "
               "moves one from its last checkpoint)\n");
    }
}

static void render_boxes(json_object *result, const ctl_options *options)
{
    json_object *boxes = act_json_find(result, "boxes", json_type_array);
    if (!boxes) {
        render_object(result, options);
        return;
    }
    ctl_table table;
    ctl_table_init(&table, (const char *const[]){"BOX", "STATE", "RENEWED", "LEASE", "HOSTS",
                                                 "VERSION", "STARTED", "CONTROL", "EVENTS",
                                                 NULL});
    uint64_t now = act_wallclock_usec();
    for (size_t i = 0; i < json_object_array_length(boxes); i++) {
        json_object *b = json_object_array_get_idx(boxes, i);
        bool live = act_json_bool_or(b, "live", false);
        bool record = act_json_bool_or(b, "record", false);
        char renewed[40], lease[32] = "-", hosts[24], started[40];
        format_ago(act_json_u64_or(b, "refreshed_usec", 0), now, renewed, sizeof(renewed));
        format_ago(act_json_u64_or(b, "started_usec", 0), now, started, sizeof(started));
        snprintf(hosts, sizeof(hosts), "%llu", (unsigned long long)act_json_u64_or(b, "hosts", 0));
        if (act_json_u64_or(b, "lease_ttl_usec", 0))
            ctl_format_duration(act_json_u64_or(b, "lease_ttl_usec", 0), lease, sizeof(lease));
        /* A box only a claim names has no record at all: never seen alive. */
        const char *state = live ? "live" : record ? "dead" : "unknown";
        char state_drained[32];
        if (act_json_u64_or(b, "drained_usec", 0)) {
            snprintf(state_drained, sizeof(state_drained), "%s, drained", state);
            state = state_drained;
        }
        const char *cells[] = {act_json_string_or(b, "box", NULL),
                               state,
                               renewed,
                               lease,
                               hosts,
                               act_json_string_or(b, "version", NULL),
                               started,
                               act_json_string_or(b, "control_url", NULL),
                               act_json_string_or(b, "events_url", NULL)};
        const char *colors[9] = {NULL, live ? CTL_COLOR_GREEN : CTL_COLOR_RED};
        ctl_table_add(&table, cells, colors);
    }
    ctl_table_print(&table, options->color);
    ctl_table_free(&table);
    for (size_t i = 0; i < json_object_array_length(boxes); i++)
        print_hosts_fate(json_object_array_get_idx(boxes, i));
}

/* An edit's outcome as one line, "web1: claim revision 57, box box-2, held on
 * v3, no pin"; claim show as the claim's fields. */
static void render_claim(json_object *result, const ctl_options *options)
{
    json_object *changed = NULL, *claim_obj = NULL, *pin = NULL;
    /* claim show, and claim wait (which says whether the claim changed and
     * after how long): the claim as it is. */
    if (!result || json_object_object_get_ex(result, "waited_ms", NULL) ||
        !json_object_object_get_ex(result, "changed", &changed) ||
        !json_object_object_get_ex(result, "claim", &claim_obj)) {
        render_object(result, options);
        return;
    }
    const char *executor = act_json_string_or(result, "executor", NULL),
               *held = act_json_string_or(claim_obj, "held", NULL);
    json_object_object_get_ex(claim_obj, "pin", &pin);
    const char *pinned = pin ? act_json_string_or(pin, "version", NULL) : NULL;
    char owner[96] = "released", hold[96] = "not held", pinning[96] = "no pin";
    if (executor && executor[0])
        snprintf(owner, sizeof(owner), "box %s", executor);
    if (held)
        snprintf(hold, sizeof(hold), "held on %s", held);
    if (pinned)
        snprintf(pinning, sizeof(pinning), "pinned to %s", pinned);
    printf("%s: claim revision %llu, %s, %s, %s%s\n", act_json_string_or(result, "host", NULL),
           (unsigned long long)act_json_u64_or(result, "revision", 0), owner, hold, pinning,
           json_object_get_boolean(changed) ? "" : " (unchanged)");
}

static void render_version(json_object *result, const ctl_options *options)
{
    printf("activatorctl %s\n", CTL_VERSION);
    const char *version = result ? act_json_string_or(result, "version", NULL) : NULL;
    const char *box = result ? act_json_string_or(result, "box", NULL) : NULL;
    printf("activatord   %s%s%s%s\n", version ? version : "?", box ? " (box " : "",
           box ? box : "", box ? ")" : "");
    if (!result)
        return;
    uint64_t starts = act_json_u64_or(result, "starts", 0),
             handovers = act_json_u64_or(result, "handovers", 0);
    if (starts)
        printf("started      %" PRIu64 " time%s on this box, %" PRIu64 " by handover\n", starts,
               starts == 1 ? "" : "s", handovers);
    uint64_t last = act_json_u64_or(result, "last_handover_usec", 0);
    if (last) {
        char when[64];
        time_t seconds = (time_t)(last / 1000000);
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&seconds));
        printf("last handover %s\n", when);
    }
}

/* What a reload changed: one row per host added, removed or changed, then
 * the hosts left as they were and the daemon's own keys. */
static void render_reload(json_object *result, const ctl_options *options)
{
    json_object *hosts = act_json_find(result, "hosts", json_type_array);
    if (!hosts) {
        render_object(result, options);
        return;
    }
    size_t n = json_object_array_length(hosts);
    if (n) {
        ctl_table table;
        ctl_table_init(&table,
                       (const char *const[]){"HOST", "CHANGE", "LISTEN", "LIMITS", "CONFIG", NULL});
        for (size_t i = 0; i < n; i++) {
            json_object *h = json_object_array_get_idx(hosts, i);
            const char *change = act_json_string_or(h, "change", NULL);
            const char *cells[] = {
                act_json_string_or(h, "host", NULL), change, act_json_string_or(h, "listen", NULL),
                act_json_string_or(h, "limits", NULL), act_json_string_or(h, "config", NULL)};
            for (size_t j = 2; j < ARRAY_SIZE(cells); j++)
                if (!cells[j])
                    cells[j] = "-";
            const char *colors[5] = {NULL,
                                     !change                            ? NULL
                                     : strcmp(change, "added") == 0     ? CTL_COLOR_GREEN
                                     : strcmp(change, "removed") == 0   ? CTL_COLOR_RED
                                                                        : CTL_COLOR_YELLOW};
            ctl_table_add(&table, cells, colors);
        }
        ctl_table_print(&table, options->color);
        ctl_table_free(&table);
    }
    uint64_t unchanged = act_json_u64_or(result, "unchanged", 0);
    printf("%s%" PRIu64 " host%s unchanged\n", n ? "" : "no host changed; ", unchanged,
           unchanged == 1 ? "" : "s");
    json_object *keys = act_json_find(result, "daemon", json_type_array);
    if (keys && json_object_array_length(keys)) {
        printf("daemon: applied");
        for (size_t i = 0; i < json_object_array_length(keys); i++)
            printf("%s %s=", i ? "," : "",
                   json_object_get_string(json_object_array_get_idx(keys, i)));
        printf("\n");
    }
}

const char *ctl_command_summary(const ctl_command *command)
{
    if (command->summary || command->op < 0)
        return command->summary;
    return ctrl_op_spec_of((ctrl_op)command->op)->summary;
}

void ctl_command_usage(const ctl_command *command, FILE *out)
{
    char usage[256];
    ctl_command_arguments(command, usage, sizeof(usage));
    fprintf(out, "Usage: activatorctl [OPTIONS] %s%s%s\n\n%s\n", command->name, *usage ? " " : "",
            usage, ctl_command_summary(command));
    /* The sub-commands, their summaries in one column. */
    int width = 0;
    for (ctrl_op op = 0; op < CTRL_OP__COUNT; op++) {
        char line[160];
        if (ctl_sub_command_usage(command, ctrl_op_spec_of(op), line, sizeof(line)) &&
            (int)strlen(line) > width)
            width = (int)strlen(line);
    }
    bool first = true;
    for (ctrl_op op = 0; op < CTRL_OP__COUNT; op++) {
        const ctrl_op_spec *spec = ctrl_op_spec_of(op);
        char line[160];
        if (!ctl_sub_command_usage(command, spec, line, sizeof(line)))
            continue;
        fprintf(out, "%s  %-*s  %s\n", first ? "\n" : "", width, line, spec->summary);
        first = false;
    }
    if (command->help)
        fprintf(out, "\n%s", command->help);
}

/* "wake web1", "claim web1 box-2": the command and the names it was given,
 * to start the lines that report on the request. */
static void describe_request(const ctl_command *command, json_object *request, char *out,
                             size_t size)
{
    snprintf(out, size, "%s", command->name);
    size_t n_fields;
    const ctrl_field_spec *fields = ctrl_fields(&n_fields);
    for (size_t i = 0; i < n_fields; i++) {
        const char *value = act_json_string_or(request, fields[i].name, NULL);
        size_t used = strlen(out);
        if (value && fields[i].kind == CTRL_FIELD_KIND_NAME)
            snprintf(out + used, size - used, " %s", value);
    }
}

/* Sends op with what the command line gives it and prints the outcome. An
 * op that may reply before it is done (no_wait) is waited for with its
 * host's events shown, unless --no-wait says not to wait. */
static int run_op(const ctl_command *command, ctrl_op op, const ctl_extra_options *extra,
                  const ctl_options *options, int argc, char **argv)
{
    const ctrl_op_spec *spec = ctrl_op_spec_of(op);
    json_object *request = new_request(spec->name);
    int r = ctl_op_parse(command, spec, argc, argv, extra, request);
    if (r != 0) {
        json_object_put(request);
        if (r > 0)
            return r;
        ctl_command_usage(command, stdout);
        return CTL_EXIT_OK;
    }
    char what[256], host[ACT_NAME_MAX + 1];
    describe_request(command, request, what, sizeof(what));
    snprintf(host, sizeof(host), "%s",
             act_json_string_or(request, "host", NULL) ? act_json_string_or(request, "host", NULL)
                                                       : "");
    json_object *no_wait = NULL;
    bool waits = (spec->optional & CTRL_FIELD_NO_WAIT) &&
                 !json_object_object_get_ex(request, "no_wait", &no_wait);
    int timeout = waits                  ? WAIT_TIMEOUT_SEC
                  : command->timeout_sec ? command->timeout_sec
                                         : QUICK_TIMEOUT_SEC;
    if (op == CTRL_OP_CLAIM_WAIT)
        timeout =
            QUICK_TIMEOUT_SEC + (int)act_json_u64_or(request, "wait", CTRL_CLAIM_WAIT_DEFAULT_SEC);
    /* A stage from a registry shows its pull's progress on a terminal. */
    const char *path = act_json_string_or(request, "path", "");
    bool pulls = op == CTRL_OP_STAGE && strncmp(path, "docker://", 9) == 0 &&
                 isatty(STDOUT_FILENO);
    return perform(options, what, request, (waits || pulls) && *host ? host : NULL, timeout,
                   command->render);
}

static int on_status_option(int opt)
{
    if (opt != 'n')
        return 1;
    names_only = true;
    return 0;
}

static int cmd_status(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    static const struct option names[] = {{"names", no_argument, 0, 'n'}, {0, 0, 0, 0}};
    static const ctl_extra_options extra = {names, on_status_option};
    return run_op(self, CTRL_OP_STATUS, &extra, options, argc, argv);
}

static bool want_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

/* "claim show HOST": the ops named <ops_prefix><sub-command>. */
static int cmd_sub_op(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    if (argc >= 2 && want_help(2, argv)) {
        ctl_command_usage(self, stdout);
        return CTL_EXIT_OK;
    }
    const char *sub = argc >= 2 ? argv[1] : NULL;
    for (ctrl_op op = 0; sub && op < CTRL_OP__COUNT; op++) {
        const char *name = ctl_sub_command(self, ctrl_op_spec_of(op));
        if (name && strcmp(name, sub) == 0) {
            /* The sub-command's arguments are parsed as "claim SUB ..." minus SUB. */
            argv[1] = argv[0];
            return run_op(self, op, NULL, options, argc - 1, argv + 1);
        }
    }
    char usage[256];
    ctl_command_arguments(self, usage, sizeof(usage));
    if (!sub)
        return ctl_usage_error(self, "missing a sub-command; usage: activatorctl %s %s", self->name,
                               usage);
    return ctl_usage_error(self, "unknown sub-command '%s'; usage: activatorctl %s %s", sub,
                           self->name, usage);
}

/* claim: its ops, and export and import, which are activatorctl's own. */
static int cmd_claim(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    if (argc >= 2 && ctl_claim_transfer_is(argv[1]))
        return ctl_claim_transfer(self, options, argc - 1, argv + 1);
    return cmd_sub_op(self, options, argc, argv);
}

/* With --store there is no daemon: only the fleet ops, and help, run. */
static bool runs_on_the_store(const ctl_command *command)
{
    if (command->op >= 0)
        return ctrl_fleet_is_fleet_op((ctrl_op)command->op);
    return command->ops_prefix || strcmp(command->name, "help") == 0 ||
           strcmp(command->name, "move") == 0 || strcmp(command->name, "drain") == 0 ||
           strcmp(command->name, "undrain") == 0;
}

int ctl_command_run(const ctl_command *command, const ctl_options *options, int argc, char **argv)
{
    if (options->store_url && !runs_on_the_store(command))
        return ctl_usage_error(command, "needs a daemon; with --store only claims, boxes, claim, "
                                        "hold, unhold, unpin, move, drain and undrain run (drop "
                                        "--store)");
    if (command->run)
        return command->run(command, options, argc, argv);
    return run_op(command, (ctrl_op)command->op, NULL, options, argc, argv);
}

/* Keeps the claims of hosts in the reply's result, and says which of them
 * have none; returns how many. */
static size_t keep_hosts(json_object *reply, int n_hosts, char **hosts)
{
    json_object *result = NULL;
    json_object_object_get_ex(reply, "result", &result);
    json_object *claims = act_json_find(result, "claims", json_type_array);
    if (!claims || n_hosts == 0)
        return 0;
    json_object *kept = json_object_new_array();
    size_t missing = 0;
    for (int h = 0; h < n_hosts; h++) {
        bool found = false;
        for (size_t i = 0; i < json_object_array_length(claims) && !found; i++) {
            json_object *c = json_object_array_get_idx(claims, i);
            const char *host = act_json_string_or(c, "host", NULL);
            if (host && strcmp(host, hosts[h]) == 0) {
                json_object_array_add(kept, json_object_get(c));
                found = true;
            }
        }
        if (!found) {
            fprintf(stderr, "activatorctl: claims: host %s has no claim\n", hosts[h]);
            missing++;
        }
    }
    json_object_object_add(result, "claims", kept);
    return missing;
}

/* "claims [HOST...]": every claim, or those of the hosts named. */
static int cmd_claims(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    if (want_help(argc, argv)) {
        ctl_command_usage(self, stdout);
        return CTL_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            return ctl_usage_error(self, "unknown option '%s'", argv[i]);
        if (ctl_check_name(self, "host", argv[i]))
            return CTL_EXIT_USAGE;
    }
    _cleanup_(json_object_putp) json_object *request = new_request(ctrl_op_name(CTRL_OP_CLAIMS));
    _cleanup_(json_object_putp) json_object *reply = NULL;
    int r = obtain_reply(options, self->name, request, NULL, QUICK_TIMEOUT_SEC, &reply);
    if (!reply)
        return r;
    size_t missing = keep_hosts(reply, argc - 1, argv + 1);
    int printed = print_reply(options, self->name, reply, self->render);
    return r != CTL_EXIT_OK ? r : printed != CTL_EXIT_OK || missing ? CTL_EXIT_FAILED : r;
}

/* One request of a move's, quick each: the move itself is followed by
 * reading the claim again and again. */
static int move_call(const ctl_options *options, const char *what, json_object *request_arg,
                     json_object **reply)
{
    _cleanup_(json_object_putp) json_object *request = request_arg;
    int timeout = QUICK_TIMEOUT_SEC;
    /* A claim wait is answered at the end of its wait at the latest. */
    if (strcmp(act_json_string_or(request, "op", ""), ctrl_op_name(CTRL_OP_CLAIM_WAIT)) == 0)
        timeout += (int)act_json_u64_or(request, "wait", CTRL_CLAIM_WAIT_DEFAULT_SEC);
    return obtain_reply(options, what, request, NULL, timeout, reply);
}

/* A move is done in minutes at most: a drain (StopTimeoutSec= and a
 * checkpoint), a restore and a probe (ProbeTimeoutSec=). */
#define MOVE_TIMEOUT_SEC 300

/* A drain's moves at once: enough to empty a box of tens of hosts in
 * minutes, few enough that the boxes' release workers do not queue. */
#define DRAIN_PARALLEL_DEFAULT 4

/* "move HOST BOX [--timeout SEC] [--force]" and "move --abort HOST". */
static int cmd_move(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    if (want_help(argc, argv)) {
        ctl_command_usage(self, stdout);
        return CTL_EXIT_OK;
    }
    ctl_move_args args = {.timeout_sec = MOVE_TIMEOUT_SEC};
    const char *names[2] = {NULL, NULL};
    int n_names = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0) {
            args.force = true;
        } else if (strcmp(argv[i], "--abort") == 0) {
            args.abort = true;
        } else if (strcmp(argv[i], "--timeout") == 0) {
            char *end = NULL;
            long seconds = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !end || *end || seconds < 1 || seconds > 86400)
                return ctl_usage_error(self, "--timeout takes whole seconds from 1 to 86400");
            args.timeout_sec = (int)seconds;
            i++;
        } else if (argv[i][0] == '-') {
            return ctl_usage_error(self, "unknown option '%s'", argv[i]);
        } else if (n_names < 2) {
            names[n_names++] = argv[i];
        } else {
            return ctl_usage_error(self, "unexpected argument '%s'", argv[i]);
        }
    }
    if (n_names < 1)
        return ctl_usage_error(self, "missing HOST");
    if (ctl_check_name(self, "host", names[0]))
        return CTL_EXIT_USAGE;
    if (args.abort && (n_names > 1 || args.force))
        return ctl_usage_error(self, "--abort takes HOST alone: the move in flight is rolled "
                                     "back to the box it leaves");
    if (!args.abort && n_names < 2)
        return ctl_usage_error(self, "missing BOX, the box to move %s to", names[0]);
    if (!args.abort && ctl_check_name(self, "box", names[1]))
        return CTL_EXIT_USAGE;
    args.host = names[0];
    args.box = names[1];
    return ctl_move_run(options, &args, move_call);
}

/* "drain BOX [--parallel N] [--deadline DURATION]" and "undrain BOX". */
static int cmd_drain(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    if (want_help(argc, argv)) {
        ctl_command_usage(self, stdout);
        return CTL_EXIT_OK;
    }
    bool undrain = strcmp(self->name, "undrain") == 0;
    ctl_drain_args args = {.parallel = DRAIN_PARALLEL_DEFAULT};
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!undrain && strcmp(argv[i], "--parallel") == 0) {
            char *end = NULL;
            long n = value ? strtol(value, &end, 10) : 0;
            if (!value || !end || *end || n < 1 || n > CTL_DRAIN_PARALLEL_MAX)
                return ctl_usage_error(self, "--parallel takes a number of moves from 1 to %d",
                                       CTL_DRAIN_PARALLEL_MAX);
            args.parallel = (unsigned)n;
            i++;
        } else if (!undrain && strcmp(argv[i], "--deadline") == 0) {
            act_error err = {0};
            if (!value ||
                cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 7 * 86400 * CFG_USEC_PER_SEC,
                                         &args.deadline_usec, &err) < 0)
                return ctl_usage_error(self, "--deadline: %s",
                                       value ? err.message : "missing a duration (30s, 10min)");
            i++;
        } else if (argv[i][0] == '-') {
            return ctl_usage_error(self, "unknown option '%s'", argv[i]);
        } else if (!args.box) {
            args.box = argv[i];
        } else {
            return ctl_usage_error(self, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!args.box)
        return ctl_usage_error(self, "missing BOX");
    if (ctl_check_name(self, "box", args.box))
        return CTL_EXIT_USAGE;
    return undrain ? ctl_undrain_run(options, args.box, move_call)
                   : ctl_drain_run(options, &args, move_call);
}

static volatile bool watch_stop;

static void on_interrupt(int sig)
{
    watch_stop = true;
}

typedef struct watch_state {
    const ctl_options *options;
    uint64_t last_seq;
    bool all_hosts; /* only then is every sequence number ours to see */
} watch_state;

static void on_watch_event(json_object *event, void *userdata)
{
    watch_state *w = userdata;
    uint64_t seq = act_json_u64_or(event, "seq", 0);
    /* A gap means the publisher dropped messages for us (we were too slow);
     * with a one-host filter gaps are other hosts' events and say nothing. */
    if (w->all_hosts && w->last_seq && seq > w->last_seq + 1)
        fprintf(stderr, "activatorctl: missed %llu event(s) (seq %llu to %llu)\n",
                (unsigned long long)(seq - w->last_seq - 1), (unsigned long long)w->last_seq + 1,
                (unsigned long long)seq - 1);
    w->last_seq = seq;
    if (w->options->json) {
        printf("%s\n", json_object_to_json_string_ext(event, JSON_C_TO_STRING_PLAIN));
        return;
    }
    uint64_t usec = act_json_u64_or(event, "time_usec", 0);
    time_t secs = (time_t)(usec / 1000000);
    struct tm tm;
    char when[32] = "?";
    if (localtime_r(&secs, &tm))
        snprintf(when, sizeof(when), "%02d:%02d:%02d.%03u", tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (unsigned)(usec % 1000000 / 1000));
    const char *name = act_json_string_or(event, "event", NULL),
               *host = act_json_string_or(event, "host", NULL);
    const char *color = w->options->color ? ctl_state_color(name) : NULL;
    char details[512];
    describe_event(event, details, sizeof(details));
    printf("%s  %-16s %s%-13s%s %s\n", when, host ? host : "?", color ? color : "",
           name ? name : "?", color ? CTL_COLOR_RESET : "", details);
}

/* watch's one optional HOST. Returns 0, -1 for --help, or a usage exit code
 * after printing why. */
static int parse_watch_line(const ctl_command *self, int argc, char **argv, const char **host)
{
    *host = NULL;
    if (want_help(argc, argv))
        return -1;
    if (argc > 2)
        return ctl_usage_error(self, "unexpected argument '%s'", argv[2]);
    if (argc == 2 && argv[1][0] == '-')
        return ctl_usage_error(self, "unknown option '%s'", argv[1]);
    if (argc == 2 && ctl_check_name(self, "host", argv[1]))
        return CTL_EXIT_USAGE;
    *host = argc == 2 ? argv[1] : NULL;
    return 0;
}

static int cmd_watch(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    const char *host;
    int parsed = parse_watch_line(self, argc, argv, &host);
    if (parsed < 0) {
        ctl_command_usage(self, stdout);
        return CTL_EXIT_OK;
    }
    if (parsed > 0)
        return parsed;
    watch_state state = {options, 0, host == NULL};
    char prefix[ACT_NAME_MAX + 8] = "";
    if (host)
        ev_host_prefix(host, prefix, sizeof(prefix));
    /* Before the subscription: an interrupt that comes while it is being
     * set up (a slow machine, a daemon still starting) ends the watch as
     * any interrupt does, with status 0, not by the signal. */
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* watch needs only the events socket, not the control socket. */
    ctl_client client;
    memset(&client, 0, sizeof(client));
    client.options = options;
    ctl_events_url(options, client.events_url, sizeof(client.events_url));
    if (!ctl_client_subscribe(&client, prefix, true)) {
        ctl_client_close(&client);
        return watch_stop ? CTL_EXIT_OK : CTL_EXIT_UNREACHABLE;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int r = ctl_client_watch(&client, &watch_stop, on_watch_event, &state);
    ctl_client_close(&client);
    return r;
}

void ctl_print_main_usage(FILE *out)
{
    fprintf(out, "Usage: activatorctl [OPTIONS] COMMAND [ARGS]\n\n"
                 "Options:\n"
                 "  --connect URL     control socket (default " CTL_DEFAULT_CONTROL_URL ")\n"
                 "  --events URL      events socket (default: events.ipc beside the control "
                 "socket)\n"
                 "  --json            print the daemon's JSON reply (watch: JSON lines)\n"
                 "  --timeout SEC     give up waiting for a reply after SEC seconds\n"
                 "  --tls-cert FILE   client certificate for a tls+tcp:// URL\n"
                 "  --tls-key FILE    its key\n"
                 "  --tls-ca FILE     CA that signed the daemon's certificate\n"
                 "  --store URL       no daemon: run claims, boxes, claim, hold, unhold and "
                 "unpin\n"
                 "                    against the claim store itself (dir:///PATH or\n"
                 "                    etcd://HOST:PORT[,HOST:PORT...]/PREFIX)\n"
                 "  --store-ca FILE   CA of an https etcd (switches to https)\n"
                 "  --store-cert FILE client certificate for etcd\n"
                 "  --store-key FILE  its key\n"
                 "  --no-color        never colour the output\n"
                 "  -h, --help        show this help (COMMAND --help for a command)\n\n"
                 "Commands:\n");
    /* One column for the summaries, as wide as the longest command. */
    int width = 0;
    for (const ctl_command *c = ctl_commands; c->name; c++)
        if ((int)strlen(c->name) > width)
            width = (int)strlen(c->name);
    for (const ctl_command *c = ctl_commands; c->name; c++)
        fprintf(out, "  %-*s %s\n", width, c->name, ctl_command_summary(c));
    fprintf(out, "\nExit status: 0 done, 1 refused or failed, 2 usage error, 3 daemon (or "
                 "--store's store) unreachable.\n");
}

static int cmd_help(const ctl_command *self, const ctl_options *options, int argc, char **argv);

const ctl_command ctl_commands[] = {
    {.name = "status",
     .op = CTRL_OP_STATUS,
     .usage = "[--names]",
     .help = "  --names    print only the host names, one per line\n",
     .render = render_status,
     .run = cmd_status},
    {.name = "wake",
     .op = CTRL_OP_WAKE,
     .help = "  --no-wait  reply as soon as the wake has started\n",
     .render = render_host_outcome},
    {.name = "park", .op = CTRL_OP_PARK, .render = render_host_outcome},
    {.name = "freeze", .op = CTRL_OP_FREEZE, .render = render_host_outcome},
    {.name = "thaw", .op = CTRL_OP_THAW, .render = render_host_outcome},
    {.name = "swap",
     .op = CTRL_OP_SWAP,
     .help = "  --mode overlap     start the new generation while the old one serves (default)\n"
             "  --mode stop-first  retire the old generation first (apps that cannot run twice)\n"
             "  --no-wait          reply as soon as the swap has started\n",
     .render = render_host_outcome},
    {.name = "stage",
     .op = CTRL_OP_STAGE,
     .help = "  --promote  also make it the live version\n",
     .render = render_object,
     .timeout_sec = WAIT_TIMEOUT_SEC},
    {.name = "promote", .op = CTRL_OP_PROMOTE, .render = render_object},
    {.name = "releases", .op = CTRL_OP_RELEASES, .render = render_releases},
    {.name = "claim",
     .op = -1,
     .ops_prefix = "claim.",
     .summary = "Show or change which box may run HOST.",
     .usage = "export | import FILE",
     .help = "  assign --force  name a box that has no live lease in the store (its daemon is\n"
             "                  down, or has not started yet)\n"
             "  export          (with --store) print every claim as a JSON line\n"
             "  import FILE     (with --store) write the claims of FILE (export's lines; - for\n"
             "                  standard input) by compare-and-swap on the claims there now;\n"
             "                  nothing is written when a line is wrong\n",
     .render = render_claim,
     .run = cmd_claim},
    {.name = "claims",
     .op = CTRL_OP_CLAIMS,
     .usage = "[HOST...]",
     .help = "  VERSION is the pin's, or the build the holder runs when its daemon answers;\n"
             "  AGE is the time since the holder's last admission.\n",
     .render = render_claims,
     .run = cmd_claims},
    {.name = "boxes",
     .op = CTRL_OP_BOXES,
     .help = "  dead: its lease ran out; unknown: a claim names it, but it has no record;\n"
             "  drained: an operator drained it, so no new host goes to it.\n",
     .render = render_boxes},
    {.name = "hold", .op = CTRL_OP_HOLD, .render = render_claim},
    {.name = "unhold", .op = CTRL_OP_UNHOLD, .render = render_claim},
    {.name = "unpin", .op = CTRL_OP_UNPIN, .render = render_claim},
    {.name = "gc",
     .op = CTRL_OP_GC,
     .help = "  --keep N   keep the N newest versions besides those in use (default: the host's\n"
             "             ReleasesKeep=, 3 unless set)\n"
             "  --dry-run  show what would be removed, remove nothing\n",
     .render = render_object,
     .timeout_sec = WAIT_TIMEOUT_SEC},
    {.name = "move",
     .op = -1,
     .summary = "Move HOST to BOX with its state, showing each phase; or roll its move back.",
     .usage = "HOST BOX [--timeout SEC] [--force] | --abort HOST",
     .help = "  Prints each phase as it comes (draining, moving, probing, serving) and exits\n"
             "  0 once HOST serves on BOX, 1 when the move failed or was refused (with why\n"
             "  and where HOST runs now), 3 when nothing could be reached. Running it again\n"
             "  for the same BOX follows the move in flight.\n"
             "  --timeout SEC  roll the move back when it is not done by then (default 300)\n"
             "  --force        HOST's box is gone (its lease expired): start at moving from\n"
             "                 the last checkpoint the claim names, and say how old it is\n"
             "  --abort        roll HOST's unfinished move back to the box it leaves\n",
     .run = cmd_move},
    {.name = "drain",
     .op = -1,
     .summary = "Drain BOX: no new host goes to it, and every host it runs moves elsewhere.",
     .usage = "BOX [--parallel N] [--deadline DURATION]",
     .help = "  Marks BOX drained (the mark stays through its restarts: no host is assigned\n"
             "  or moved to it, nor claimed by it), then moves every host it runs, serving\n"
             "  or parked, with its state to the live boxes that are not drained, the least\n"
             "  loaded first, printing each step. A host whose move fails goes to the next\n"
             "  box. Exits 0 once BOX runs no host (it can then be stopped with nothing\n"
             "  lost), 1 naming each host left and why. Running it again resumes.\n"
             "  --parallel N          moves in flight at once (default 4)\n"
             "  --deadline DURATION   roll back the moves in flight and stop then (30s, 10min)\n",
     .run = cmd_drain},
    {.name = "undrain",
     .op = -1,
     .summary = "Lift BOX's drain mark: it may be given hosts again.",
     .usage = "BOX",
     .run = cmd_drain},
    {.name = "watch",
     .op = -1,
     .usage = "[HOST]",
     .summary = "Stream events (all hosts, or one) until interrupted.",
     .help = "  With --json each event is printed as one JSON line.\n",
     .run = cmd_watch},
    {.name = "stats", .op = CTRL_OP_STATS, .render = render_object},
    {.name = "version", .op = CTRL_OP_VERSION, .render = render_version},
    {.name = "reload",
     .op = CTRL_OP_RELOAD,
     .help = "  Reads activatord.conf and every host file again and applies them: hosts\n"
             "  added are bound and watched, hosts removed retired with proof, [Listen]\n"
             "  and [Limits] changes applied at once, anything else from a host's next\n"
             "  start. If anything is wrong nothing changes, every problem is printed\n"
             "  as FILE:LINE: KEY: what is wrong, and the exit status is 1.\n",
     .render = render_reload,
     .timeout_sec = RELOAD_TIMEOUT_SEC},
    {.name = "checkpoint",
     .op = CTRL_OP_CHECKPOINT,
     .help = "  With the built-in transport (Checkpoints= in activatord.conf) the host is\n"
             "  parked first, and wakes are refused until the checkpoint is written; an\n"
             "  ExecCheckpoint= with CheckpointLive=yes keeps it serving. The checkpoint is\n"
             "  named on the claim only while the claim says this box runs the host.\n",
     .render = render_checkpoint,
     .timeout_sec = WAIT_TIMEOUT_SEC},
    {.name = "checkpoints",
     .op = CTRL_OP_CHECKPOINTS,
     .help = "  Lists the archives in Checkpoints=, newest first; * marks the one the\n"
             "  claim names, which a wake on a box without it restores.\n",
     .render = render_checkpoints},
    {.name = "help",
     .op = -1,
     .usage = "[COMMAND]",
     .summary = "Show help for activatorctl or one command.",
     .run = cmd_help},
    {.name = NULL},
};

const ctl_command *ctl_command_find(const char *name)
{
    for (const ctl_command *c = ctl_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

static int cmd_help(const ctl_command *self, const ctl_options *options, int argc, char **argv)
{
    if (argc < 2) {
        ctl_print_main_usage(stdout);
        return CTL_EXIT_OK;
    }
    const ctl_command *command = ctl_command_find(argv[1]);
    if (!command) {
        fprintf(stderr, "activatorctl: no command '%s'; try 'activatorctl --help'\n", argv[1]);
        return CTL_EXIT_USAGE;
    }
    ctl_command_usage(command, stdout);
    return CTL_EXIT_OK;
}
