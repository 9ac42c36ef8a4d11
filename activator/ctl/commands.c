#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "activator/ctl/client.h"
#include "activator/ctl/commands.h"
#include "activator/ctl/render.h"
#include "activator/events/events.h"
#include "common/cleanup_json.h"
#include "common/clock.h"
#include "common/names.h"

#ifndef ACT_VERSION
#define ACT_VERSION "unknown"
#endif

/* Quick requests answer in milliseconds; this only bounds a wedged daemon. */
#define QUICK_TIMEOUT_SEC 15
/* A waiting wake or swap may take MaxStarts (5) ready windows (30 s each)
 * with backoff, plus a restore; the bound is generous, and a daemon that goes
 * away ends the wait at once anyway. */
#define WAIT_TIMEOUT_SEC 600

int ctl_usage_error(const ctl_command *command, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "activatorctl: %s: ", command->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'activatorctl %s --help'.\n", command->name);
    return CTL_EXIT_USAGE;
}

void ctl_command_usage(const ctl_command *command, FILE *out)
{
    fprintf(out, "Usage: activatorctl [OPTIONS] %s%s%s\n\n%s\n", command->name,
            *command->usage ? " " : "", command->usage, command->summary);
    if (command->help)
        fprintf(out, "\n%s", command->help);
}

/* Parses the options of one command. Returns -1 when done, the option char,
 * or a usage exit code (as -100 - code) after printing. */
static bool want_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

static int check_name(const ctl_command *command, const char *what, const char *name)
{
    act_error err = {0};
    if (act_name_check(what, name, &err) < 0)
        return ctl_usage_error(command, "%s", err.message);
    return 0;
}

static json_object *new_request(const char *op)
{
    json_object *request = json_object_new_object();
    json_object_object_add(request, "v", json_object_new_int(1));
    json_object_object_add(request, "op", json_object_new_string(op));
    return request;
}

static void add_string(json_object *request, const char *key, const char *value)
{
    json_object_object_add(request, key, json_object_new_string(value));
}

typedef void (*render_fn)(json_object *result, const ctl_options *options);

typedef struct progress {
    const ctl_options *options;
    uint64_t started_usec;
} progress;

static uint64_t get_u64(json_object *object, const char *key)
{
    json_object *value;
    if (!json_object_object_get_ex(object, key, &value) || !value)
        return 0;
    return (uint64_t)json_object_get_int64(value);
}

static const char *get_str(json_object *object, const char *key)
{
    json_object *value;
    if (!json_object_object_get_ex(object, key, &value) || !value ||
        !json_object_is_type(value, json_type_string))
        return NULL;
    return json_object_get_string(value);
}

/* "generation 3, version v2, pid 1234, reason ready_timeout" from an event. */
static void describe_event(json_object *event, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    uint64_t generation = get_u64(event, "generation"), pid = get_u64(event, "pid");
    const char *version = get_str(event, "version"), *reason = get_str(event, "reason");
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
    const char *name = get_str(event, "event");
    char elapsed[32], details[512];
    ctl_format_duration(act_now_usec() - p->started_usec, elapsed, sizeof(elapsed));
    describe_event(event, details, sizeof(details));
    const char *color = p->options->color ? ctl_state_color(name) : NULL;
    printf("  %7s  %s%-13s%s %s\n", elapsed, color ? color : "", name ? name : "?",
           color ? CTL_COLOR_RESET : "", details);
    fflush(stdout);
}

/* Sends one request and prints the outcome. progress_host: subscribe to that
 * host's events first and show them while waiting. */
static int perform(const ctl_options *options, const char *what, json_object *request_arg,
                   const char *progress_host, int default_timeout, render_fn render)
{
    _cleanup_(json_object_putp) json_object *request = request_arg;
    ctl_client client;
    int r = ctl_client_open(&client, options);
    if (r != CTL_EXIT_OK) {
        ctl_client_close(&client);
        return r;
    }
    progress p = {options, act_now_usec()};
    bool live = false;
    if (progress_host && !options->json) {
        char prefix[ACT_NAME_MAX + 8];
        if (act_events_host_prefix(progress_host, prefix, sizeof(prefix)) == 0)
            live = ctl_client_subscribe(&client, prefix, false);
        if (live)
            printf("%s: waiting (events follow)\n", what);
    }
    _cleanup_(json_object_putp) json_object *reply = NULL;
    r = ctl_client_call(&client, request, options->timeout_sec ? options->timeout_sec
                                                               : default_timeout,
                        live ? on_progress : NULL, &p, &reply);
    ctl_client_close(&client);
    if (r != CTL_EXIT_OK)
        return r;

    json_object *ok = NULL, *result = NULL, *error = NULL;
    json_object_object_get_ex(reply, "ok", &ok);
    json_object_object_get_ex(reply, "result", &result);
    json_object_object_get_ex(reply, "error", &error);
    bool succeeded = ok && json_object_get_boolean(ok);

    if (options->json) {
        printf("%s\n", json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
    } else if (succeeded) {
        render(result, options);
    } else {
        const char *code = error ? get_str(error, "code") : NULL;
        const char *message = error ? get_str(error, "message") : NULL;
        fprintf(stderr, "activatorctl: %s: %s%s%s%s\n", what,
                message ? message : "the daemon refused without a message",
                code ? " [" : "", code ? code : "", code ? "]" : "");
    }
    return succeeded ? CTL_EXIT_OK : CTL_EXIT_FAILED;
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
    const char *host = get_str(result, "host"), *state = get_str(result, "state");
    char details[512];
    describe_event(result, details, sizeof(details));
    const char *color = options->color ? ctl_state_color(state) : NULL;
    printf("%s: %s%s%s%s%s\n", host ? host : "?", color ? color : "", state ? state : "done",
           color ? CTL_COLOR_RESET : "", *details ? ", " : "", details);
}

static bool names_only;

static void render_status(json_object *result, const ctl_options *options)
{
    json_object *hosts = NULL;
    if (!result || !json_object_object_get_ex(result, "hosts", &hosts) ||
        !json_object_is_type(hosts, json_type_array)) {
        if (result && get_str(result, "host")) { /* one host as a bare object */
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
            const char *host = get_str(json_object_array_get_idx(hosts, i), "host");
            if (host)
                printf("%s\n", host);
        }
        return;
    }
    ctl_table table;
    ctl_table_init(&table, (const char *const[]){"HOST", "STATE", "GEN", "VERSION", "PID",
                                                 "UPTIME", "MEMORY", "PIDS", "REASON", NULL});
    uint64_t now = act_wallclock_usec();
    for (size_t i = 0; i < n; i++) {
        json_object *h = json_object_array_get_idx(hosts, i);
        char gen[24] = "-", pid[24] = "-", uptime[32] = "-", memory[32] = "-", pids[24] = "-";
        uint64_t v;
        if ((v = get_u64(h, "generation")))
            snprintf(gen, sizeof(gen), "%llu", (unsigned long long)v);
        if ((v = get_u64(h, "pid")))
            snprintf(pid, sizeof(pid), "%llu", (unsigned long long)v);
        if ((v = get_u64(h, "since_usec")) && v <= now)
            ctl_format_duration(now - v, uptime, sizeof(uptime));
        if ((v = get_u64(h, "memory_current")))
            ctl_format_size(v, memory, sizeof(memory));
        if ((v = get_u64(h, "pids_current")))
            snprintf(pids, sizeof(pids), "%llu", (unsigned long long)v);
        const char *state = get_str(h, "state");
        const char *cells[] = {get_str(h, "host"), state, gen, get_str(h, "version"), pid,
                               uptime, memory, pids, get_str(h, "reason")};
        const char *colors[9] = {NULL, ctl_state_color(state)};
        ctl_table_add(&table, cells, colors);
    }
    ctl_table_print(&table, options->color);
    ctl_table_free(&table);
}

static void render_releases(json_object *result, const ctl_options *options)
{
    json_object *releases = NULL;
    if (!result || !json_object_object_get_ex(result, "releases", &releases) ||
        !json_object_is_type(releases, json_type_array)) {
        render_object(result, options);
        return;
    }
    const char *live = get_str(result, "live");
    ctl_table table;
    ctl_table_init(&table,
                   (const char *const[]){"VERSION", "LIVE", "DIGEST", "SIZE", "STAGED", NULL});
    uint64_t now = act_wallclock_usec();
    for (size_t i = 0; i < json_object_array_length(releases); i++) {
        json_object *rel = json_object_array_get_idx(releases, i);
        const char *version = get_str(rel, "version"), *digest = get_str(rel, "digest");
        char size[32] = "-", staged[40] = "-", short_digest[16] = "-";
        uint64_t v;
        if ((v = get_u64(rel, "size")))
            ctl_format_size(v, size, sizeof(size));
        if ((v = get_u64(rel, "staged_usec")) && v <= now) {
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

static void render_version(json_object *result, const ctl_options *options)
{
    printf("activatorctl %s\n", ACT_VERSION);
    const char *version = result ? get_str(result, "version") : NULL;
    const char *box = result ? get_str(result, "box") : NULL;
    printf("activatord   %s%s%s%s\n", version ? version : "?", box ? " (box " : "",
           box ? box : "", box ? ")" : "");
}

/* ---- commands ---- */

#define OPTIONS_END {0, 0, 0, 0}

/* Runs getopt over a command's arguments and collects positionals. */
static int parse(const ctl_command *command, int argc, char **argv, const struct option *longopts,
                 int (*on_option)(int opt, void *state), void *state, char **positional,
                 int min, int max, int *n_positional)
{
    optind = 0; /* re-initialises GNU getopt for this argument vector */
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'h')
            return -1;
        if (opt == '?')
            return ctl_usage_error(command, "unknown option '%s'", argv[optind - 1]);
        if (opt == ':')
            return ctl_usage_error(command, "option '%s' needs a value", argv[optind - 1]);
        int r = on_option ? on_option(opt, state) : CTL_EXIT_USAGE;
        if (r != 0)
            return ctl_usage_error(command, "bad value '%s' for option '%s'",
                                   optarg ? optarg : "", argv[optind - (optarg ? 2 : 1)]);
    }
    int n = argc - optind;
    if (n < min)
        return ctl_usage_error(command, "missing argument(s); usage: activatorctl %s %s",
                               command->name, command->usage);
    if (n > max)
        return ctl_usage_error(command, "unexpected argument '%s'", argv[optind + max]);
    for (int i = 0; i < n; i++)
        positional[i] = argv[optind + i];
    *n_positional = n;
    return 0;
}

#define PARSE_OR_RETURN(longopts, on_option, state, min, max)                                      \
    char *pos[4] = {0};                                                                            \
    int n_pos = 0;                                                                                 \
    do {                                                                                           \
        int parsed_ = parse(self, argc, argv, longopts, on_option, state, pos, min, max, &n_pos);  \
        if (parsed_ < 0) {                                                                         \
            ctl_command_usage(self, stdout);                                                       \
            return CTL_EXIT_OK;                                                                    \
        }                                                                                          \
        if (parsed_ > 0)                                                                           \
            return parsed_;                                                                        \
    } while (0)

static const struct option no_options[] = {{"help", no_argument, 0, 'h'}, OPTIONS_END};

static int on_status_option(int opt, void *state)
{
    if (opt != 'n')
        return 1;
    names_only = true;
    return 0;
}

static int cmd_status(const ctl_options *options, int argc, char **argv)
{
    const ctl_command *self = ctl_command_find("status");
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'}, {"names", no_argument, 0, 'n'}, OPTIONS_END};
    PARSE_OR_RETURN(longopts, on_status_option, NULL, 0, 1);
    if (n_pos == 1 && check_name(self, "host", pos[0]))
        return CTL_EXIT_USAGE;
    json_object *request = new_request("status");
    if (n_pos == 1)
        add_string(request, "host", pos[0]);
    return perform(options, n_pos ? pos[0] : "status", request, NULL, QUICK_TIMEOUT_SEC,
                   render_status);
}

typedef struct wait_flags {
    bool no_wait, promote;
    const char *mode;
} wait_flags;

static int on_wait_option(int opt, void *state)
{
    wait_flags *flags = state;
    switch (opt) {
    case 'W':
        flags->no_wait = true;
        return 0;
    case 'P':
        flags->promote = true;
        return 0;
    case 'm':
        if (strcmp(optarg, "overlap") != 0 && strcmp(optarg, "stop-first") != 0)
            return 1;
        flags->mode = optarg;
        return 0;
    }
    return 1;
}

static int cmd_wake(const ctl_options *options, int argc, char **argv)
{
    const ctl_command *self = ctl_command_find("wake");
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'}, {"no-wait", no_argument, 0, 'W'}, OPTIONS_END};
    wait_flags flags = {0};
    PARSE_OR_RETURN(longopts, on_wait_option, &flags, 1, 1);
    if (check_name(self, "host", pos[0]))
        return CTL_EXIT_USAGE;
    json_object *request = new_request("wake");
    add_string(request, "host", pos[0]);
    if (flags.no_wait)
        json_object_object_add(request, "no_wait", json_object_new_boolean(1));
    char what[128];
    snprintf(what, sizeof(what), "wake %s", pos[0]);
    return perform(options, what, request, flags.no_wait ? NULL : pos[0],
                   flags.no_wait ? QUICK_TIMEOUT_SEC : WAIT_TIMEOUT_SEC, render_host_outcome);
}

static int cmd_swap(const ctl_options *options, int argc, char **argv)
{
    const ctl_command *self = ctl_command_find("swap");
    static const struct option longopts[] = {{"help", no_argument, 0, 'h'},
                                             {"no-wait", no_argument, 0, 'W'},
                                             {"mode", required_argument, 0, 'm'},
                                             OPTIONS_END};
    wait_flags flags = {0};
    PARSE_OR_RETURN(longopts, on_wait_option, &flags, 2, 2);
    if (check_name(self, "host", pos[0]) || check_name(self, "version", pos[1]))
        return CTL_EXIT_USAGE;
    json_object *request = new_request("swap");
    add_string(request, "host", pos[0]);
    add_string(request, "version", pos[1]);
    if (flags.mode)
        add_string(request, "mode", flags.mode);
    if (flags.no_wait)
        json_object_object_add(request, "no_wait", json_object_new_boolean(1));
    char what[160];
    snprintf(what, sizeof(what), "swap %s to %s", pos[0], pos[1]);
    return perform(options, what, request, flags.no_wait ? NULL : pos[0],
                   flags.no_wait ? QUICK_TIMEOUT_SEC : WAIT_TIMEOUT_SEC, render_host_outcome);
}

static int cmd_stage(const ctl_options *options, int argc, char **argv)
{
    const ctl_command *self = ctl_command_find("stage");
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'}, {"promote", no_argument, 0, 'P'}, OPTIONS_END};
    wait_flags flags = {0};
    PARSE_OR_RETURN(longopts, on_wait_option, &flags, 3, 3);
    if (check_name(self, "host", pos[0]) || check_name(self, "version", pos[1]))
        return CTL_EXIT_USAGE;
    /* The daemon reads the path on this box, from its own working directory:
     * a relative path is made absolute here, where the user meant it. */
    char path[PATH_MAX];
    if (pos[2][0] == '/') {
        snprintf(path, sizeof(path), "%s", pos[2]);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) ||
            snprintf(path, sizeof(path), "%s/%s", cwd, pos[2]) >= (int)sizeof(path))
            return ctl_usage_error(self, "cannot make '%s' an absolute path", pos[2]);
    }
    if (access(path, R_OK) != 0)
        return ctl_usage_error(self, "%s: %s; name the build to stage", path, strerror(errno));
    json_object *request = new_request("stage");
    add_string(request, "host", pos[0]);
    add_string(request, "version", pos[1]);
    add_string(request, "path", path);
    if (flags.promote)
        json_object_object_add(request, "promote", json_object_new_boolean(1));
    char what[160];
    snprintf(what, sizeof(what), "stage %s %s", pos[0], pos[1]);
    return perform(options, what, request, NULL, WAIT_TIMEOUT_SEC, render_object);
}

/* Commands that take HOST [SECOND] and nothing else. */
static int simple_host_command(const char *name, const char *op, const char *second_what,
                               render_fn render, const ctl_options *options, int argc,
                               char **argv)
{
    const ctl_command *self = ctl_command_find(name);
    int wanted = second_what ? 2 : 1;
    PARSE_OR_RETURN(no_options, NULL, NULL, wanted, wanted);
    if (check_name(self, "host", pos[0]) || (second_what && check_name(self, second_what, pos[1])))
        return CTL_EXIT_USAGE;
    json_object *request = new_request(op);
    add_string(request, "host", pos[0]);
    if (second_what)
        add_string(request, second_what, pos[1]);
    char what[160];
    snprintf(what, sizeof(what), "%s %s", name, pos[0]);
    return perform(options, what, request, NULL, QUICK_TIMEOUT_SEC, render);
}

static int cmd_park(const ctl_options *options, int argc, char **argv)
{
    /* Parking retires with proof of empty, which may take StopTimeoutSec. */
    return simple_host_command("park", "park", NULL, render_host_outcome, options, argc, argv);
}

static int cmd_promote(const ctl_options *options, int argc, char **argv)
{
    return simple_host_command("promote", "promote", "version", render_object, options, argc,
                               argv);
}

static int cmd_releases(const ctl_options *options, int argc, char **argv)
{
    return simple_host_command("releases", "releases", NULL, render_releases, options, argc,
                               argv);
}

static int cmd_claim(const ctl_options *options, int argc, char **argv)
{
    const ctl_command *self = ctl_command_find("claim");
    if (argc < 2 || want_help(2, argv)) {
        if (argc >= 2)
            ctl_command_usage(self, stdout);
        return argc >= 2 ? CTL_EXIT_OK : ctl_usage_error(self, "missing show, assign or release");
    }
    const char *sub = argv[1];
    /* The sub-command's arguments are parsed as "claim SUB ..." minus SUB. */
    argv[1] = argv[0];
    if (strcmp(sub, "show") == 0)
        return simple_host_command("claim", "claim.show", NULL, render_object, options,
                                   argc - 1, argv + 1);
    if (strcmp(sub, "assign") == 0)
        return simple_host_command("claim", "claim.assign", "box", render_object, options,
                                   argc - 1, argv + 1);
    if (strcmp(sub, "release") == 0)
        return simple_host_command("claim", "claim.release", NULL, render_object, options,
                                   argc - 1, argv + 1);
    return ctl_usage_error(self, "unknown sub-command '%s'; use show, assign or release", sub);
}

static int cmd_no_args(const char *name, render_fn render, const ctl_options *options, int argc,
                       char **argv)
{
    const ctl_command *self = ctl_command_find(name);
    PARSE_OR_RETURN(no_options, NULL, NULL, 0, 0);
    (void)pos;
    return perform(options, name, new_request(name), NULL, QUICK_TIMEOUT_SEC, render);
}

static int cmd_stats(const ctl_options *options, int argc, char **argv)
{
    return cmd_no_args("stats", render_object, options, argc, argv);
}

static int cmd_version(const ctl_options *options, int argc, char **argv)
{
    return cmd_no_args("version", render_version, options, argc, argv);
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
    uint64_t seq = get_u64(event, "seq");
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
    uint64_t usec = get_u64(event, "time_usec");
    time_t secs = (time_t)(usec / 1000000);
    struct tm tm;
    char when[32] = "?";
    if (localtime_r(&secs, &tm))
        snprintf(when, sizeof(when), "%02d:%02d:%02d.%03u", tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (unsigned)(usec % 1000000 / 1000));
    const char *name = get_str(event, "event"), *host = get_str(event, "host");
    const char *color = w->options->color ? ctl_state_color(name) : NULL;
    char details[512];
    describe_event(event, details, sizeof(details));
    printf("%s  %-16s %s%-13s%s %s\n", when, host ? host : "?", color ? color : "",
           name ? name : "?", color ? CTL_COLOR_RESET : "", details);
}

static int cmd_watch(const ctl_options *options, int argc, char **argv)
{
    const ctl_command *self = ctl_command_find("watch");
    PARSE_OR_RETURN(no_options, NULL, NULL, 0, 1);
    watch_state state = {options, 0, n_pos == 0};
    char prefix[ACT_NAME_MAX + 8] = "";
    if (n_pos == 1) {
        if (check_name(self, "host", pos[0]))
            return CTL_EXIT_USAGE;
        act_events_host_prefix(pos[0], prefix, sizeof(prefix));
    }
    /* watch needs only the events socket, not the control socket. */
    ctl_client client;
    memset(&client, 0, sizeof(client));
    client.options = options;
    ctl_events_url(options, client.events_url, sizeof(client.events_url));
    if (!ctl_client_subscribe(&client, prefix, true)) {
        ctl_client_close(&client);
        return CTL_EXIT_UNREACHABLE;
    }
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int r = ctl_client_watch(&client, &watch_stop, on_watch_event, &state);
    ctl_client_close(&client);
    return r;
}

static int cmd_help(const ctl_options *options, int argc, char **argv);

const ctl_command ctl_commands[] = {
    {"status", "[HOST] [--names]", "Show every host (or one) with state, generation and usage.",
     "  --names    print only the host names, one per line\n", cmd_status},
    {"wake", "HOST [--no-wait]",
     "Wake HOST and wait until it serves (or is refused), showing progress.",
     "  --no-wait  reply as soon as the wake has started\n", cmd_wake},
    {"park", "HOST", "Retire HOST's generation now; its sockets are watched again.", NULL,
     cmd_park},
    {"swap", "HOST VERSION [--mode overlap|stop-first] [--no-wait]",
     "Replace HOST's generation with one running VERSION, without refusing a connection.",
     "  --mode overlap     start the new generation while the old one serves (default)\n"
     "  --mode stop-first  retire the old generation first (apps that cannot run twice)\n"
     "  --no-wait          reply as soon as the swap has started\n",
     cmd_swap},
    {"stage", "HOST VERSION PATH [--promote]",
     "Stage the build at PATH as HOST's VERSION (digest recorded in its manifest).",
     "  --promote  also make it the live version\n", cmd_stage},
    {"promote", "HOST VERSION", "Make a staged VERSION the live one for the next wake.", NULL,
     cmd_promote},
    {"releases", "HOST", "List HOST's staged versions; * marks the live one.", NULL,
     cmd_releases},
    {"claim", "show HOST | assign HOST BOX | release HOST",
     "Show or change which box may run HOST.",
     "  show HOST        print the claim (holder, op, pin, held, revision)\n"
     "  assign HOST BOX  name BOX as the box that runs HOST\n"
     "  release HOST     retire HOST here and clear this box as its executor, so no box\n"
     "                   wakes it until it is assigned again\n",
     cmd_claim},
    {"watch", "[HOST]", "Stream events (all hosts, or one) until interrupted.",
     "  With --json each event is printed as one JSON line.\n", cmd_watch},
    {"stats", "", "Show the daemon's counters.", NULL, cmd_stats},
    {"version", "", "Show the versions of activatorctl and activatord.", NULL, cmd_version},
    {"help", "[COMMAND]", "Show help for activatorctl or one command.", NULL, cmd_help},
    {NULL, NULL, NULL, NULL, NULL},
};

const ctl_command *ctl_command_find(const char *name)
{
    for (const ctl_command *c = ctl_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

void ctl_print_main_usage(FILE *out);

static int cmd_help(const ctl_options *options, int argc, char **argv)
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
