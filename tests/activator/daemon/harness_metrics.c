/* The daemon's Prometheus metrics as a test reads them: GET /metrics on
 * its MetricsListen=, and one sample of what came back. */
#include "harness.h"

#include <curl/curl.h>
#include <string.h>

#include "tests/common/prometheus.h"

int dh_setup_with_metrics(dh_daemon *d)
{
    int port = dh_free_port();
    char conf[64];
    snprintf(conf, sizeof(conf), "MetricsListen=127.0.0.1:%d\n", port);
    dh_setup(d, DH_STORE_DIR, conf);
    return port;
}

static size_t append(char *data, size_t size, size_t n, void *userdata)
{
    dh_metrics *m = userdata;
    size_t len = size * n;
    if (m->len + len >= sizeof(m->text))
        return 0;
    memcpy(m->text + m->len, data, len);
    m->len += len;
    m->text[m->len] = '\0';
    return len;
}

void dh_metrics_scrape(dh_daemon *d, int port, dh_metrics *out)
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

double dh_metrics_sample(dh_daemon *d, const dh_metrics *scraped, const char *want)
{
    double value = 0;
    char why[256] = "";
    if (parse_prometheus(scraped->text, want, &value, why, sizeof(why)))
        return value;
    DH_CHECK(d, strstr(why, "no sample") != NULL, "metrics do not parse: %s\n%s", why,
             scraped->text);
    return 0;
}
