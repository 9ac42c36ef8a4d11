/* The daemon's Prometheus metrics, scraped over HTTP from the real daemon:
 * the text parses, and the counters of a wake move. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tests/common/prometheus.h"

typedef struct body {
    char text[256 * 1024];
    size_t len;
} body;

static size_t append(char *data, size_t size, size_t n, void *userdata)
{
    body *b = userdata;
    size_t len = size * n;
    if (b->len + len >= sizeof(b->text))
        return 0;
    memcpy(b->text + b->len, data, len);
    b->len += len;
    b->text[b->len] = '\0';
    return len;
}

static void scrape(dh_daemon *d, int port, body *out)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
    out->len = 0;
    out->text[0] = '\0';
    CURL *curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    DH_CHECK(d, rc == CURLE_OK && status == 200, "GET %s: %s (HTTP %ld)", url,
             curl_easy_strerror(rc), status);
}

/* The value of one sample, or 0 when the family has no such series yet. */
static double sample(dh_daemon *d, const body *scraped, const char *want)
{
    double value = 0;
    char why[256] = "";
    if (parse_prometheus(scraped->text, want, &value, why, sizeof(why)))
        return value;
    DH_CHECK(d, strstr(why, "no sample") != NULL, "metrics do not parse: %s\n%s", why,
             scraped->text);
    return 0;
}

static void test_wake_moves_the_counters(void **state)
{
    dh_daemon *d = *state;
    int metrics_port = dh_free_port();
    char conf[64];
    snprintf(conf, sizeof(conf), "MetricsListen=127.0.0.1:%d\n", metrics_port);
    dh_setup(d, DH_STORE_DIR, conf);
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);

    body *before = calloc(1, sizeof(*before)), *after = calloc(1, sizeof(*after));
    scrape(d, metrics_port, before);
    DH_CHECK(d, sample(d, before, "activator_hosts{state=\"parked\"}") >= 1,
             "no parked host counted before the wake:\n%s", before->text);

    dh_wake(d, "demo");
    scrape(d, metrics_port, after);

    const char *wakes = "activator_wakes_total{outcome=\"serving\",reason=\"none\"}";
    DH_CHECK(d, sample(d, after, wakes) == sample(d, before, wakes) + 1,
             "%s did not move by one:\n%s", wakes, after->text);
    DH_CHECK(d, sample(d, after, "activator_generations_started_total") == 1,
             "generations started:\n%s", after->text);
    DH_CHECK(d, sample(d, after, "activator_wake_duration_seconds_count") == 1,
             "the wake duration histogram has no observation:\n%s", after->text);
    DH_CHECK(d, sample(d, after, "activator_hosts{state=\"serving\"}") == 1,
             "hosts by state:\n%s", after->text);
    DH_CHECK(d, sample(d, after, "activator_host_memory_current_bytes{host=\"demo\"}") > 0,
             "no memory.current for the serving host:\n%s", after->text);
    DH_CHECK(d, sample(d, after, "activator_control_requests_total{op=\"wake\",outcome=\"ok\"}") >= 1,
             "control requests are not counted:\n%s", after->text);
    DH_CHECK(d, sample(d, after, "activator_events_published_total") >
                    sample(d, before, "activator_events_published_total"),
             "events published did not move:\n%s", after->text);
    free(before);
    free(after);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-metrics", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_wake_moves_the_counters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
