/* Metrics: the registry renders valid Prometheus text (checked by a small
 * parser here), and the NNG HTTP server serves it from the event loop, with a
 * counter that moves between two scrapes. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <systemd/sd-event.h>

#include "activator/metrics/daemon_metrics.h"
#include "activator/metrics/server.h"
#include "tests/common/prometheus.h"

static void test_registry_renders_valid_text(void **state)
{
    met_registry *m = met_new();
    met_daemon_metrics d;
    act_error err = {0};
    assert_int_equal(met_daemon_metrics_register(m, &d, &err), 0);
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("serving", "none"), 1), 0);
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("refused", "not_owner"), 2), 0);
    assert_int_equal(met_metric_observe(d.wake_duration, NULL, 0.2), 0);
    assert_int_equal(met_metric_observe(d.wake_duration, NULL, 500), 0);
    assert_int_equal(met_metric_set(d.host_memory_current, MET_LABELS("we\"ird\\host\n"), 1e6), 0);
    assert_int_equal(met_metric_set(d.hosts, MET_LABELS("serving"), 3), 0);
    for (int i = 0; i < 1000; i++) { /* many series: the hash table grows */
        char host[16];
        snprintf(host, sizeof(host), "h%d", i);
        assert_int_equal(met_metric_set(d.host_pids_current, MET_LABELS(host), i), 0);
    }
    assert_int_equal(met_metric_remove(d.host_pids_current, MET_LABELS("h7")), 0);
    assert_true(met_metric_get(d.host_pids_current, MET_LABELS("h999")) == 999);
    assert_true(met_metric_get(d.host_pids_current, MET_LABELS("h7")) == 0);

    /* Misuse is refused. */
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("serving"), 1), -EINVAL);
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("a", "b"), -1), -EINVAL);
    assert_int_equal(met_metric_add(d.wake_duration, NULL, 1), -EINVAL);
    assert_int_equal(met_metric_set(d.generations_started, NULL, 5), 0);
    assert_int_equal(met_metric_set(d.generations_started, NULL, 4), -EINVAL);
    assert_true(met_add_family(m, MET_METRIC_COUNTER, "bad-name", "", NULL, NULL, 0, NULL, &err) <
                0);
    assert_true(met_add_family(m, MET_METRIC_COUNTER, "activator_hosts", "", NULL, NULL, 0, NULL,
                               &err) < 0);

    char *text;
    size_t len;
    assert_int_equal(met_render(m, &text, &len), 0);
    char why[256] = "";
    double value = -1;
    if (!parse_prometheus(text, "activator_wakes_total{outcome=\"refused\",reason=\"not_owner\"}",
                          &value, why, sizeof(why)))
        fail_msg("%s\n%s", why, text);
    assert_true(value == 2);
    assert_true(parse_prometheus(text, "activator_wake_duration_seconds_bucket{le=\"+Inf\"}",
                                 &value, why, sizeof(why)));
    assert_true(value == 2);
    assert_true(parse_prometheus(text, "activator_wake_duration_seconds_bucket{le=\"0.25\"}",
                                 &value, why, sizeof(why)));
    assert_true(value == 1);
    assert_non_null(strstr(text, "{host=\"we\\\"ird\\\\host\\n\"} 1000000\n"));
    assert_non_null(strstr(text, "activator_generations_retired_total 0\n"));
    /* The parser itself rejects broken text. */
    assert_false(parse_prometheus("x{a=\"1} 2\n", NULL, NULL, why, sizeof(why)));
    assert_false(parse_prometheus("# TYPE x counter\nx two\n", NULL, NULL, why, sizeof(why)));
    assert_false(parse_prometheus("y 1\n", NULL, NULL, why, sizeof(why)));
    free(text);
    met_free(m);
}

typedef struct fetch {
    char url[128];
    atomic_bool done;
    long status;
    char *body;
    size_t len;
} fetch;

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    fetch *f = userdata;
    char *grown = realloc(f->body, f->len + size * n + 1);
    if (!grown)
        return 0;
    f->body = grown;
    memcpy(f->body + f->len, data, size * n);
    f->len += size * n;
    f->body[f->len] = '\0';
    return size * n;
}

static void *fetch_thread(void *arg)
{
    fetch *f = arg;
    CURL *curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, f->url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &f->status);
    curl_easy_cleanup(curl);
    atomic_store(&f->done, true);
    return NULL;
}

/* Fetches url while this thread runs the loop, as the daemon's loop would. */
static void scrape(sd_event *event, int port, const char *path, fetch *f)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d%s", port, path);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, fetch_thread, f), 0);
    while (!atomic_load(&f->done))
        assert_true(sd_event_run(event, 50 * 1000) >= 0);
    pthread_join(thread, NULL);
}

static unsigned refreshes;

static void on_refresh(met_registry *m, void *userdata)
{
    /* Runs on the loop thread before each render, where the daemon copies
     * live values in. */
    refreshes++;
    met_daemon_metrics *d = userdata;
    met_metric_set(d->host_memory_current, MET_LABELS("web1"), 4096.0 * refreshes);
}

static void test_http_scrape_and_counter_moves(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    sd_event *event;
    assert_int_equal(sd_event_new(&event), 0);
    met_registry *m = met_new();
    met_daemon_metrics d;
    act_error err = {0};
    assert_int_equal(met_daemon_metrics_register(m, &d, &err), 0);
    met_server *server;
    if (met_server_new(event, "127.0.0.1:0", m, on_refresh, &d, &server, &err) < 0)
        fail_msg("metrics server: %s", err.message);
    int port = met_server_port(server);
    assert_true(port > 0);

    fetch f;
    scrape(event, port, "/metrics", &f);
    assert_int_equal(f.status, 200);
    char why[256];
    double before = -1, after = -1;
    if (!parse_prometheus(f.body, "activator_control_requests_total{op=\"status\",outcome=\"ok\"}",
                          &before, why, sizeof(why))) {
        /* No request yet: the labelled series does not exist. */
        assert_true(parse_prometheus(f.body, NULL, NULL, why, sizeof(why)));
        before = 0;
    }
    free(f.body);

    met_metric_add(d.control_requests, MET_LABELS("status", "ok"), 1);
    met_metric_add(d.generations_started, NULL, 1);
    scrape(event, port, "/metrics", &f);
    assert_int_equal(f.status, 200);
    if (!parse_prometheus(f.body, "activator_control_requests_total{op=\"status\",outcome=\"ok\"}",
                          &after, why, sizeof(why)))
        fail_msg("%s\n%s", why, f.body);
    assert_true(after == before + 1);
    double started = 0, memory = 0;
    assert_true(parse_prometheus(f.body, "activator_generations_started_total", &started, why,
                                 sizeof(why)));
    assert_true(started == 1);
    assert_true(parse_prometheus(f.body, "activator_host_memory_current_bytes{host=\"web1\"}",
                                 &memory, why, sizeof(why)));
    assert_true(memory == 4096.0 * 2); /* refreshed on the loop before each render */
    free(f.body);

    scrape(event, port, "/other", &f);
    assert_int_equal(f.status, 404);
    free(f.body);

    met_server_free(server);
    met_free(m);
    sd_event_unref(event);
    curl_global_cleanup();
}

static void test_bad_listen(void **state)
{
    sd_event *event;
    assert_int_equal(sd_event_new(&event), 0);
    met_registry *m = met_new();
    met_server *server;
    act_error err = {0};
    assert_true(met_server_new(event, "127.0.0.1:99999", m, NULL, NULL, &server, &err) < 0);
    assert_non_null(strstr(err.message, "MetricsListen=127.0.0.1:99999"));
    assert_true(met_server_new(event, "/tmp/x", m, NULL, NULL, &server, &err) < 0);
    met_free(m);
    sd_event_unref(event);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_renders_valid_text),
        cmocka_unit_test(test_http_scrape_and_counter_moves),
        cmocka_unit_test(test_bad_listen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
