/* The daemon's Prometheus metrics, scraped over HTTP from the real daemon:
 * the text parses, and the counters of a wake move; promtool finds nothing
 * wrong with it; idle connections from one address do not keep a scrape
 * from another out, and are closed after the timeout; a taken port stops
 * the start with a message that says so. And the Grafana dashboard
 * (contrib/grafana-dashboard.json) queries only metrics the daemon
 * exports. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "activator/metrics/server.h"
#include "harness.h"

static void test_wake_moves_the_counters(void **state)
{
    dh_daemon *d = *state;
    int metrics_port = dh_setup_with_metrics(d);
    /* A memory limit: a hybrid host keeps memory stats for a leaf in its v1
     * mirror, which only a limit makes. */
    dh_add_app_host(d, "demo", NULL, "[Limits]\nMemoryMax=512M\n");
    dh_start(d, NULL);

    dh_metrics *before = calloc(1, sizeof(*before)), *after = calloc(1, sizeof(*after));
    dh_metrics_scrape(d, metrics_port, before);
    DH_CHECK(d, dh_metrics_sample(d, before, "activator_hosts{state=\"parked\"}") >= 1,
             "no parked host counted before the wake:\n%s", before->text);

    dh_wake(d, "demo");
    dh_metrics_scrape(d, metrics_port, after);

    const char *wakes = "activator_wakes_total{outcome=\"serving\",reason=\"none\"}";
    DH_CHECK(d, dh_metrics_sample(d, after, wakes) == dh_metrics_sample(d, before, wakes) + 1,
             "%s did not move by one:\n%s", wakes, after->text);
    DH_CHECK(d, dh_metrics_sample(d, after, "activator_generations_started_total") == 1,
             "generations started:\n%s", after->text);
    DH_CHECK(d, dh_metrics_sample(d, after, "activator_wake_duration_seconds_count") == 1,
             "the wake duration histogram has no observation:\n%s", after->text);
    DH_CHECK(d, dh_metrics_sample(d, after, "activator_hosts{state=\"serving\"}") == 1,
             "hosts by state:\n%s", after->text);
    DH_CHECK(d,
             dh_metrics_sample(d, after, "activator_host_memory_current_bytes{host=\"demo\"}") > 0,
             "no memory.current for the serving host:\n%s", after->text);
    DH_CHECK(d,
             dh_metrics_sample(d, after,
                               "activator_control_requests_total{op=\"wake\",outcome=\"ok\"}") >= 1,
             "control requests are not counted:\n%s", after->text);
    DH_CHECK(d,
             dh_metrics_sample(d, after, "activator_events_published_total") >
                 dh_metrics_sample(d, before, "activator_events_published_total"),
             "events published did not move:\n%s", after->text);
    /* The wake read and wrote the claim: the store's calls are timed. */
    DH_CHECK(
        d,
        dh_metrics_sample(d, after,
                          "activator_store_operation_duration_seconds_count{operation=\"read\","
                          "outcome=\"ok\"}") >= 1 &&
            dh_metrics_sample(d, after,
                              "activator_store_operation_duration_seconds_count{operation=\"cas\","
                              "outcome=\"ok\"}") >= 1,
        "claim store calls are not timed:\n%s", after->text);
    char box_info[128];
    snprintf(box_info, sizeof(box_info), "activator_box_info{box=\"%s\",version=\"%s\"}", DH_BOX,
             ACTIVATOR_VERSION);
    DH_CHECK(d, dh_metrics_sample(d, after, box_info) == 1, "no %s:\n%s", box_info, after->text);
    free(before);
    free(after);
    dh_stop_and_check_clean(d);
}

/* promtool (Debian's prometheus package) in PATH, into path. */
static bool find_promtool(char *path, size_t size)
{
    const char *dirs = getenv("PATH");
    if (!dirs || !*dirs)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    for (const char *at = dirs; *at;) {
        size_t len = strcspn(at, ":");
        snprintf(path, size, "%.*s/promtool", (int)len, at);
        if (len && access(path, X_OK) == 0)
            return true;
        at += len + (at[len] == ':');
    }
    return false;
}

/* A daemon serving its metrics on a free port (returned) whose host demo
 * was woken and swapped to v2 (demo_lines: its host file's extra lines),
 * and whose host broken was woken once and failed at once (a failure
 * park). */
static int start_swapped_and_failed(dh_daemon *d, const char *demo_lines)
{
    int metrics_port = dh_setup_with_metrics(d);
    dh_add_app_host(d, "demo", NULL, demo_lines);
    dh_add_app_host(d, "broken", "--exit-immediately 3", "MaxStarts=1\n");
    dh_start(d, NULL);

    dh_wake(d, "demo");
    dh_stage(d, "demo", "v2", false, NULL);
    json_object *reply =
        dh_request(d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"demo\",\"version\":\"v2\"}");
    DH_CHECK(d, dh_reply_ok(reply), "the swap did not serve: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    reply = dh_wake_reply(d, "broken", 30000);
    DH_CHECK(d, !dh_reply_ok(reply), "a build that exits at once served: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);
    return metrics_port;
}

/* The box's claim watch reads the box's own index: other boxes' claims,
 * however often they are written, never reach it, while a write of its own
 * host's claim does. The heal counters say how the start listed. */
static void test_the_claim_watch_tells_only_this_boxs_claims(void **state)
{
    dh_daemon *d = *state;
    int metrics_port = dh_setup_with_metrics(d);
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    for (int i = 0; i < 20; i++) {
        char host[32];
        snprintf(host, sizeof(host), "elsewhere-%d", i);
        claim c;
        dh_claim_assigned(host, DH_OTHER_BOX, &c);
        dh_claim_put(d, &c);
    }
    /* The wake writes demo's claim (admitted, published): changes the watch
     * tells in order after every write above. */
    dh_wake(d, "demo");
    DH_CHECK(d, dh_event_wait(d, "demo", "claim.changed", 10000, NULL),
             "the watch never told demo's claim");
    dh_metrics *scraped = calloc(1, sizeof(*scraped));
    dh_metrics_scrape(d, metrics_port, scraped);
    double concerning =
        dh_metrics_sample(d, scraped, "activator_claim_changes_total{concerning=\"yes\"}");
    double other =
        dh_metrics_sample(d, scraped, "activator_claim_changes_total{concerning=\"no\"}");
    DH_CHECK(d, concerning >= 1 && other == 0,
             "the claim watch told %.0f changes of other boxes' hosts (and %.0f of demo's): it "
             "reads more than this box's index",
             other, concerning);
    free(scraped);
    dh_stop_and_check_clean(d);
}

/* After a wake that serves, one that fails, a swap and control requests, a
 * scrape of the real daemon passes `promtool check metrics`: its parser
 * and its lint (names, HELP, TYPE, counters ending in _total, units). */
static void test_promtool_accepts_a_real_scrape(void **state)
{
    dh_daemon *d = *state;
    char promtool[512];
    if (!find_promtool(promtool, sizeof(promtool)))
        fail_msg("promtool is not in PATH; run scripts/install-deps.sh (it installs Debian's "
                 "prometheus package, which ships /usr/bin/promtool)");
    int metrics_port = start_swapped_and_failed(d, "[Limits]\nMemoryMax=512M\n");
    json_object_put(dh_request(d, 5000, "{\"v\":1,\"op\":\"status\"}"));

    dh_metrics *scraped = calloc(1, sizeof(*scraped));
    dh_metrics_scrape(d, metrics_port, scraped);
    DH_CHECK(d,
             dh_metrics_sample(d, scraped,
                               "activator_wakes_total{outcome=\"serving\",reason=\"none\"}") >= 1,
             "the wake is not in the scrape:\n%s", scraped->text);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/scrape.txt", d->drv.dir);
    FILE *f = fopen(path, "w");
    DH_CHECK(d, f && fwrite(scraped->text, 1, scraped->len, f) == scraped->len && fclose(f) == 0,
             "cannot write %s", path);
    /* promtool reads the exposition on stdin. */
    char command[PATH_MAX + 600];
    snprintf(command, sizeof(command), "exec '%s' check metrics < '%s'", promtool, path);
    char *const argv[] = {"/bin/sh", "-c", command, NULL};
    char out[16384];
    int status = dh_run(argv, out, sizeof(out));
    DH_CHECK(d, status == 0 && out[0] == '\0',
             "promtool check metrics (exit %d) on the daemon's metrics:\n%s\n--- the scrape:\n%s",
             status, out, scraped->text);
    free(scraped);
    dh_stop_and_check_clean(d);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether the daemon closed fd (EOF or a reset), waiting up to wait_ms. */
static bool closed_by_daemon(int fd, int wait_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) <= 0)
        return false;
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

#define IDLE_CONNECTIONS 200

/* 200 connections from 127.0.0.2 that send nothing: one address holds at
 * most its limit of them (the rest are refused and counted), a scrape from
 * 127.0.0.1 is answered meanwhile, and the ones held are closed by the
 * daemon once idle for the timeout. */
static void test_idle_connections_from_one_address_leave_room(void **state)
{
    dh_daemon *d = *state;
    int metrics_port = dh_setup_with_metrics(d);
    dh_start(d, NULL);

    dh_step("open %d idle connections from 127.0.0.2", IDLE_CONNECTIONS);
    int idle[IDLE_CONNECTIONS];
    struct sockaddr_in local = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &local.sin_addr);
    struct sockaddr_in server = {.sin_family = AF_INET, .sin_port = htons((uint16_t)metrics_port)};
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < IDLE_CONNECTIONS; i++) {
        idle[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        DH_CHECK(d, idle[i] >= 0, "socket: %s", strerror(errno));
        DH_CHECK(d, bind(idle[i], (struct sockaddr *)&local, sizeof(local)) == 0,
                 "bind to 127.0.0.2: %s", strerror(errno));
        DH_CHECK(d, connect(idle[i], (struct sockaddr *)&server, sizeof(server)) == 0,
                 "connection %d from 127.0.0.2 to the metrics port: %s", i, strerror(errno));
    }

    /* The daemon takes connections in the order they came, so all 200 were
     * taken or refused before the scrape's. */
    dh_step("scrape from 127.0.0.1");
    dh_metrics *scraped = calloc(1, sizeof(*scraped));
    dh_metrics_scrape(d, metrics_port, scraped);
    char box_info[128];
    snprintf(box_info, sizeof(box_info), "activator_box_info{box=\"%s\",version=\"%s\"}", DH_BOX,
             ACTIVATOR_VERSION);
    DH_CHECK(d, dh_metrics_sample(d, scraped, box_info) == 1, "the scrape has no %s:\n%s", box_info,
             scraped->text);
    double refused = dh_metrics_sample(d, scraped, "activator_metrics_connections_refused_total");
    DH_CHECK(d, refused == IDLE_CONNECTIONS - MET_MAX_CONNECTIONS_PER_ADDRESS,
             "%d connections from one address with a limit of %d: %.0f refused counted",
             IDLE_CONNECTIONS, MET_MAX_CONNECTIONS_PER_ADDRESS, refused);
    free(scraped);

    /* Every one ends closed by the daemon: the refused at once, the held
     * ones after the timeout. A generous deadline: the machine's speed
     * decides when. */
    dh_waiting_for("the daemon to close %d idle connections", IDLE_CONNECTIONS);
    int64_t deadline = now_ms() + (MET_CONNECTION_TIMEOUT_SEC + 30) * 1000;
    for (int i = 0; i < IDLE_CONNECTIONS; i++) {
        int64_t left = deadline - now_ms();
        DH_CHECK(d, closed_by_daemon(idle[i], left > 0 ? (int)left : 0),
                 "idle metrics connection %d from 127.0.0.2 is still open %d s after the "
                 "scrape (the timeout is %d s)",
                 i, MET_CONNECTION_TIMEOUT_SEC + 30, MET_CONNECTION_TIMEOUT_SEC);
        close(idle[i]);
    }
    /* And the daemon serves on. */
    scraped = calloc(1, sizeof(*scraped));
    dh_metrics_scrape(d, metrics_port, scraped);
    free(scraped);
    dh_stop_and_check_clean(d);
}

/* MetricsListen= on a port something else listens on: the daemon does not
 * start, and says which key, which address, what failed and what to do,
 * once. */
static void test_a_taken_metrics_port_stops_the_start(void **state)
{
    dh_daemon *d = *state;
    int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(address);
    DH_CHECK(d,
             taken >= 0 && bind(taken, (struct sockaddr *)&address, sizeof(address)) == 0 &&
                 listen(taken, 1) == 0 &&
                 getsockname(taken, (struct sockaddr *)&address, &len) == 0,
             "cannot take a port: %s", strerror(errno));
    char conf[64], said[160];
    snprintf(conf, sizeof(conf), "MetricsListen=127.0.0.1:%d\n", ntohs(address.sin_port));
    dh_setup(d, DH_STORE_DIR, conf);
    DH_CHECK(d, dh_start_failing(d) == 1, "the start on a taken metrics port did not exit 1");
    snprintf(said, sizeof(said),
             "MetricsListen=127.0.0.1:%d: cannot bind 127.0.0.1:%d: Address already in use",
             ntohs(address.sin_port), ntohs(address.sin_port));
    DH_CHECK(d, dh_log_wait(d, said, 0), "the failed start does not say \"%s\"", said);
    DH_CHECK(d, dh_log_wait(d, "choose a free ADDR:PORT", 0),
             "the failed start does not say what to do");
    char twice[96];
    snprintf(twice, sizeof(twice),
             "MetricsListen=127.0.0.1:%d: MetricsListen=", ntohs(address.sin_port));
    DH_CHECK(d, !dh_log_wait(d, twice, 0), "the failed start names MetricsListen= twice");
    close(taken);
}

/* The sum of a family's series (its "name{" lines). */
static double family_sum(const dh_metrics *scraped, const char *name)
{
    char prefix[160];
    snprintf(prefix, sizeof(prefix), "\n%s{", name);
    double sum = 0;
    for (const char *at = scraped->text; (at = strstr(at, prefix)); at++) {
        const char *value = strstr(at + 1, "} ");
        if (value)
            sum += strtod(value + 2, NULL);
    }
    return sum;
}

/* A swap that is done, and a wake whose only start fails (a failure park),
 * each move their counters. */
static void test_swaps_and_failure_parks_are_counted(void **state)
{
    dh_daemon *d = *state;
    int metrics_port = start_swapped_and_failed(d, NULL);

    dh_metrics *scraped = calloc(1, sizeof(*scraped));
    dh_metrics_scrape(d, metrics_port, scraped);
    DH_CHECK(d,
             dh_metrics_sample(d, scraped,
                               "activator_swaps_total{outcome=\"done\",reason=\"none\"}") == 1,
             "the swap is not counted:\n%s", scraped->text);
    DH_CHECK(d, family_sum(scraped, "activator_failure_parks_total") >= 1,
             "the failed wake is not counted as a failure park:\n%s", scraped->text);
    free(scraped);
    dh_stop_and_check_clean(d);
}

/* The type of family name in the scraped text ("counter", ...), or NULL
 * when the daemon does not export it. */
static const char *family_type(const dh_metrics *scraped, const char *name, char *type, size_t size)
{
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "# TYPE %s ", name);
    const char *at = scraped->text;
    while ((at = strstr(at, prefix))) {
        if (at == scraped->text || at[-1] == '\n') {
            at += strlen(prefix);
            snprintf(type, size, "%.*s", (int)strcspn(at, "\n"), at);
            return type;
        }
        at++;
    }
    return NULL;
}

/* A metric name the daemon exports: a family, or a histogram family's
 * _bucket, _sum or _count series. */
static bool exported(const dh_metrics *scraped, const char *name)
{
    char type[32];
    if (family_type(scraped, name, type, sizeof(type)))
        return true;
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (size_t i = 0; i < 3; i++) {
        size_t len = strlen(name), suffix = strlen(suffixes[i]);
        if (len > suffix && strcmp(name + len - suffix, suffixes[i]) == 0) {
            char base[160];
            snprintf(base, sizeof(base), "%.*s", (int)(len - suffix), name);
            if (family_type(scraped, base, type, sizeof(type)) && strcmp(type, "histogram") == 0)
                return true;
        }
    }
    return false;
}

typedef struct queried {
    char names[64][128];
    size_t n;
    size_t exprs;
} queried;

/* Every activator_* name in a PromQL text. */
static void add_names(queried *q, const char *expr)
{
    for (const char *at = expr; (at = strstr(at, "activator_"));) {
        size_t len = 0;
        while (isalnum((unsigned char)at[len]) || at[len] == '_')
            len++;
        bool known = false;
        for (size_t i = 0; i < q->n; i++)
            known |= strlen(q->names[i]) == len && strncmp(q->names[i], at, len) == 0;
        if (!known && q->n < 64 && len < sizeof(q->names[0]))
            snprintf(q->names[q->n++], sizeof(q->names[0]), "%.*s", (int)len, at);
        at += len;
    }
}

/* The queries of every panel ("expr") and variable ("definition", "query"),
 * wherever they are nested. */
static void collect_queries(json_object *node, queried *q)
{
    if (json_object_is_type(node, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(node); i++)
            collect_queries(json_object_array_get_idx(node, i), q);
        return;
    }
    if (!json_object_is_type(node, json_type_object))
        return;
    json_object_object_foreach(node, key, value)
    {
        if (json_object_is_type(value, json_type_string) &&
            (strcmp(key, "expr") == 0 || strcmp(key, "definition") == 0 ||
             strcmp(key, "query") == 0)) {
            add_names(q, json_object_get_string(value));
            q->exprs += strcmp(key, "expr") == 0;
        } else {
            collect_queries(value, q);
        }
    }
}

static void test_dashboard_queries_exported_metrics(void **state)
{
    dh_daemon *d = *state;
    json_object *dashboard = json_object_from_file(DH_DASHBOARD);
    DH_CHECK(d, dashboard != NULL, "%s does not parse as JSON: %s", DH_DASHBOARD,
             json_util_get_last_err());
    json_object *panels = NULL;
    DH_CHECK(d,
             json_object_object_get_ex(dashboard, "panels", &panels) &&
                 json_object_is_type(panels, json_type_array),
             "%s has no panels", DH_DASHBOARD);
    queried *q = calloc(1, sizeof(*q));
    collect_queries(dashboard, q);
    DH_CHECK(d, q->exprs >= 10, "%s has only %zu queries", DH_DASHBOARD, q->exprs);

    int metrics_port = dh_setup_with_metrics(d);
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    dh_metrics *scraped = calloc(1, sizeof(*scraped));
    dh_metrics_scrape(d, metrics_port, scraped);
    for (size_t i = 0; i < q->n; i++)
        DH_CHECK(d, exported(scraped, q->names[i]),
                 "%s queries %s, which the daemon does not export:\n%s", DH_DASHBOARD, q->names[i],
                 scraped->text);
    /* What the dashboard is for: each of these is on it. */
    static const char *const needed[] = {
        "activator_hosts",
        "activator_wakes_total",
        "activator_wake_duration_seconds_bucket",
        "activator_swaps_total",
        "activator_failure_parks_total",
        "activator_budget_deferrals_total",
        "activator_store_operation_duration_seconds_bucket",
        "activator_store_errors_total",
        "activator_box_info",
    };
    for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
        bool found = false;
        for (size_t j = 0; j < q->n; j++)
            found |= strcmp(q->names[j], needed[i]) == 0;
        DH_CHECK(d, found, "%s has no panel over %s", DH_DASHBOARD, needed[i]);
    }
    free(scraped);
    free(q);
    json_object_put(dashboard);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-metrics", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_wake_moves_the_counters),
        DH_TEST(test_the_claim_watch_tells_only_this_boxs_claims),
        DH_TEST(test_promtool_accepts_a_real_scrape),
        DH_TEST(test_idle_connections_from_one_address_leave_room),
        DH_TEST(test_a_taken_metrics_port_stops_the_start),
        DH_TEST(test_dashboard_queries_exported_metrics),
        DH_TEST(test_swaps_and_failure_parks_are_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
