/* The bare etcd probe (bare_probe.h). */
#include "bench/fleet/bare_probe.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "claims/etcd_wire.h"
#include "common/clock.h"

#define PROBE_KEY "/bare-probe/admission"
/* About a claim's size, as an admission writes. */
#define PROBE_VALUE_BYTES 320

typedef struct answer {
    char text[4096];
    size_t len;
} answer;

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    answer *a = userdata;
    size_t len = size * n;
    size_t room = sizeof(a->text) - 1 - a->len;
    size_t take = len < room ? len : room;
    memcpy(a->text + a->len, data, take);
    a->len += take;
    a->text[a->len] = '\0';
    return len;
}

/* One POST on the probe's handle (kept alive, as the store client keeps
 * its connections); the answer's text in a, false unless HTTP 200. */
static bool post(CURL *easy, const char *endpoint, const char *path, const char *body, answer *a)
{
    char url[160];
    snprintf(url, sizeof(url), "http://%s%s", endpoint, path);
    a->len = 0;
    a->text[0] = '\0';
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    long status = 0;
    return curl_easy_perform(easy) == CURLE_OK &&
           curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200;
}

/* The key's mod_revision in a range's answer; 0 when it has none. */
static uint64_t mod_revision(const char *text)
{
    const char *at = strstr(text, "\"mod_revision\":\"");
    return at ? strtoull(at + strlen("\"mod_revision\":\""), NULL, 10) : 0;
}

static void *probe_main(void *userdata)
{
    bare_probe *p = userdata;
    CURL *easy = curl_easy_init();
    char *key = etcd_b64_encode(PROBE_KEY, strlen(PROBE_KEY));
    char raw[PROBE_VALUE_BYTES + 1];
    memset(raw, 'x', PROBE_VALUE_BYTES);
    raw[PROBE_VALUE_BYTES] = '\0';
    char *value = etcd_b64_encode(raw, PROBE_VALUE_BYTES);
    if (!easy || !key || !value)
        goto out;
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    char range_body[256], txn_body[1024];
    snprintf(range_body, sizeof(range_body), "{\"key\":\"%s\"}", key);
    answer a;
    while (!atomic_load(&p->stop)) {
        /* Gaps drawn uniformly up to twice the mean: the probe does not
         * march in step with the boxes' timers. */
        usleep((useconds_t)act_draw_below(2 * p->mean_gap_usec));
        uint64_t started = act_now_usec();
        if (!post(easy, p->endpoint, "/v3/kv/range", range_body, &a)) {
            p->failures++;
            continue;
        }
        uint64_t read_done = act_now_usec();
        uint64_t revision = mod_revision(a.text);
        snprintf(txn_body, sizeof(txn_body),
                 "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"mod_revision\":\"%" PRIu64
                 "\"}],\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}],"
                 "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
                 key, revision, key, value, key);
        if (!post(easy, p->endpoint, "/v3/kv/txn", txn_body, &a) ||
            !strstr(a.text, "\"succeeded\":true")) {
            p->failures++;
            continue;
        }
        uint64_t done = act_now_usec();
        sim_samples_add(&p->read_usec, (double)(read_done - started));
        sim_samples_add(&p->cas_usec, (double)(done - read_done));
        sim_samples_add(&p->both_usec, (double)(done - started));
    }
    curl_slist_free_all(headers);
out:
    curl_easy_cleanup(easy);
    free(key);
    free(value);
    return NULL;
}

int bare_probe_start(bare_probe *probe, const char *endpoint, uint64_t mean_gap_usec)
{
    snprintf(probe->endpoint, sizeof(probe->endpoint), "%s", endpoint);
    probe->mean_gap_usec = mean_gap_usec;
    atomic_store(&probe->stop, false);
    sim_samples *each[] = {&probe->read_usec, &probe->cas_usec, &probe->both_usec};
    for (size_t i = 0; i < 3; i++)
        pthread_mutex_init(&each[i]->lock, NULL);
    probe->started = pthread_create(&probe->thread, NULL, probe_main, probe) == 0;
    return probe->started ? 0 : -1;
}

void bare_probe_stop(bare_probe *probe)
{
    if (!probe->started)
        return;
    atomic_store(&probe->stop, true);
    pthread_join(probe->thread, NULL);
    probe->started = false;
}

void bare_probe_free(bare_probe *probe)
{
    bare_probe_stop(probe);
    sim_samples *each[] = {&probe->read_usec, &probe->cas_usec, &probe->both_usec};
    for (size_t i = 0; i < 3; i++) {
        free(each[i]->values);
        pthread_mutex_destroy(&each[i]->lock);
    }
}
