/* bench-claims: compare-and-swap round trips on the dir and etcd stores.
 *
 * Prints, per store, CAS operations per second and p50/p99 latency (medians
 * over several runs). For etcd it also runs the same txn as a bare HTTP POST
 * with plain libcurl on one reused connection, interleaved with ours in the
 * same run, and prints RATIO = our p50 / bare p50 (target <= 1.2: the claims
 * client adds little over the wire). The same for one claim's read (what a
 * wake's gate makes before the exec) against a bare range request. Starts
 * its own etcd on free loopback ports; skips the etcd part when etcd is not
 * installed. */
#include <curl/curl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "claims/claims.h"
#include "claims/etcd_wire.h"
#include "common/clock.h"
#include "tests/claims/etcd_harness.h"

#define RUNS 7
#define OPS_PER_RUN 300

typedef struct run_result {
    double ops_per_sec, p50_us, p99_us;
} run_result;

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static run_result summarize(uint64_t *latencies, size_t n, uint64_t total_us)
{
    qsort(latencies, n, sizeof(*latencies), compare_u64);
    return (run_result){.ops_per_sec = (double)n * 1e6 / (double)total_us,
                        .p50_us = (double)latencies[n / 2],
                        .p99_us = (double)latencies[(n * 99) / 100]};
}

static claim bench_claim(uint64_t session)
{
    claim c = {0};
    snprintf(c.host, sizeof(c.host), "bench");
    snprintf(c.holder.box, sizeof(c.holder.box), "box-1");
    snprintf(c.holder.incarnation, sizeof(c.holder.incarnation), "5f0c2a9e7d3b4c1a");
    c.holder.session = session;
    c.holder.generation = session;
    c.holder.stamp_usec = act_wallclock_usec();
    snprintf(c.holder.handle, sizeof(c.holder.handle), "/run/activator/hosts/bench/g-1.sock");
    snprintf(c.op.id, sizeof(c.op.id), "op-1");
    c.op.kind = CLAIM_OP_SERVING;
    snprintf(c.op.phase, sizeof(c.op.phase), "serving");
    snprintf(c.op.exec, sizeof(c.op.exec), "box-1");
    return c;
}

/* OPS_PER_RUN chained CAS calls through the claims API. */
static int run_store(claim_store *store, uint64_t *revision, run_result *out)
{
    uint64_t latencies[OPS_PER_RUN];
    act_error err = {0};
    uint64_t start = act_now_usec();
    for (size_t i = 0; i < OPS_PER_RUN; i++) {
        claim c = bench_claim(*revision + 1);
        uint64_t t = act_now_usec();
        int r = claims_cas(store, "bench", *revision, &c, revision, NULL, &err);
        latencies[i] = act_now_usec() - t;
        if (r != 0) {
            fprintf(stderr, "bench-claims: CAS failed (%d): %s\n", r, err.message);
            return -1;
        }
    }
    *out = summarize(latencies, OPS_PER_RUN, act_now_usec() - start);
    return 0;
}

/* OPS_PER_RUN reads of the claim through the claims API. */
static int run_store_reads(claim_store *store, run_result *out)
{
    uint64_t latencies[OPS_PER_RUN];
    act_error err = {0};
    uint64_t start = act_now_usec();
    for (size_t i = 0; i < OPS_PER_RUN; i++) {
        claim c;
        uint64_t t = act_now_usec();
        int r = claims_read(store, "bench", &c, &err);
        latencies[i] = act_now_usec() - t;
        if (r != 1) {
            fprintf(stderr, "bench-claims: read failed (%d): %s\n", r, err.message);
            return -1;
        }
    }
    *out = summarize(latencies, OPS_PER_RUN, act_now_usec() - start);
    return 0;
}

typedef struct bare_client {
    CURL *easy;
    struct curl_slist *headers;
    char url[128], range_url[128];
    char *key64, *value64;
    char response[4096];
    size_t response_len;
} bare_client;

static size_t bare_write(char *data, size_t size, size_t nmemb, void *userdata)
{
    bare_client *bare = userdata;
    size_t n = size * nmemb, room = sizeof(bare->response) - 1 - bare->response_len;
    memcpy(bare->response + bare->response_len, data, n < room ? n : room);
    bare->response_len += n < room ? n : room;
    bare->response[bare->response_len] = '\0';
    return n;
}

/* The same txn our store sends, as a hand-formatted POST on one easy handle:
 * the cost of the wire and etcd alone. */
static int run_bare(bare_client *bare, uint64_t *revision, run_result *out)
{
    uint64_t latencies[OPS_PER_RUN];
    char body[8192];
    uint64_t start = act_now_usec();
    for (size_t i = 0; i < OPS_PER_RUN; i++) {
        uint64_t t = act_now_usec();
        snprintf(body, sizeof(body),
                 "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"mod_revision\":\"%" PRIu64
                 "\",\"result\":\"EQUAL\"}],\"success\":[{\"request_put\":{\"key\":\"%s\","
                 "\"value\":\"%s\"}}],\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
                 bare->key64, *revision, bare->key64, bare->value64, bare->key64);
        bare->response_len = 0;
        curl_easy_setopt(bare->easy, CURLOPT_POSTFIELDS, body);
        CURLcode code = curl_easy_perform(bare->easy);
        const char *rev = strstr(bare->response, "\"revision\":\"");
        latencies[i] = act_now_usec() - t;
        if (code != CURLE_OK || !rev || !strstr(bare->response, "\"succeeded\":true")) {
            fprintf(stderr, "bench-claims: bare POST failed: %s %s\n", curl_easy_strerror(code),
                    bare->response);
            return -1;
        }
        *revision = strtoull(rev + strlen("\"revision\":\""), NULL, 10);
    }
    *out = summarize(latencies, OPS_PER_RUN, act_now_usec() - start);
    return 0;
}

/* One claim's range request, as a hand-formatted POST on the same handle. */
static int run_bare_reads(bare_client *bare, run_result *out)
{
    uint64_t latencies[OPS_PER_RUN];
    char body[512];
    snprintf(body, sizeof(body), "{\"key\":\"%s\"}", bare->key64);
    curl_easy_setopt(bare->easy, CURLOPT_URL, bare->range_url);
    curl_easy_setopt(bare->easy, CURLOPT_POSTFIELDS, body);
    uint64_t start = act_now_usec();
    int r = 0;
    for (size_t i = 0; i < OPS_PER_RUN && r == 0; i++) {
        uint64_t t = act_now_usec();
        bare->response_len = 0;
        CURLcode code = curl_easy_perform(bare->easy);
        latencies[i] = act_now_usec() - t;
        if (code != CURLE_OK || !strstr(bare->response, "\"kvs\"")) {
            fprintf(stderr, "bench-claims: bare range failed: %s %s\n", curl_easy_strerror(code),
                    bare->response);
            r = -1;
        }
    }
    curl_easy_setopt(bare->easy, CURLOPT_URL, bare->url);
    if (r == 0)
        *out = summarize(latencies, OPS_PER_RUN, act_now_usec() - start);
    return r;
}

static run_result median_of(run_result *runs, size_t n)
{
    double ops[RUNS], p50[RUNS], p99[RUNS];
    for (size_t i = 0; i < n; i++) {
        ops[i] = runs[i].ops_per_sec;
        p50[i] = runs[i].p50_us;
        p99[i] = runs[i].p99_us;
    }
    qsort(ops, n, sizeof(double), compare_double);
    qsort(p50, n, sizeof(double), compare_double);
    qsort(p99, n, sizeof(double), compare_double);
    return (run_result){ops[n / 2], p50[n / 2], p99[n / 2]};
}

static void print_ops(const char *name, const char *ops, run_result r)
{
    printf("%-22s %9.0f %s/s  p50 %8.1f us   p99 %8.1f us   (median of %d runs x %d)\n", name,
           r.ops_per_sec, ops, r.p50_us, r.p99_us, RUNS, OPS_PER_RUN);
}

static void print_result(const char *name, run_result r)
{
    print_ops(name, "CAS", r);
}

static int create_claim(claim_store *store, uint64_t *revision)
{
    act_error err = {0};
    claim c = bench_claim(1);
    if (claims_cas(store, "bench", 0, &c, revision, NULL, &err) != 0) {
        fprintf(stderr, "bench-claims: cannot create the claim: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int bench_dir(void)
{
    char dir[] = "/var/tmp/bench-claims-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    char url[64];
    snprintf(url, sizeof(url), "dir://%s", dir);
    claim_store *store;
    act_error err = {0};
    int r = claims_store_open(url, NULL, &store, &err);
    uint64_t revision = 0;
    run_result runs[RUNS], reads[RUNS];
    if (r == 0)
        r = create_claim(store, &revision);
    for (int i = 0; r == 0 && i < RUNS; i++) {
        r = run_store(store, &revision, &runs[i]);
        if (r == 0)
            r = run_store_reads(store, &reads[i]);
    }
    if (r == 0) {
        print_result("dir (/var/tmp)", median_of(runs, RUNS));
        print_ops("dir read", "read", median_of(reads, RUNS));
    } else if (err.message[0])
        fprintf(stderr, "bench-claims: %s\n", err.message);
    claims_store_free(store);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return r;
}

static int bench_etcd(void)
{
    if (!etcd_harness_available()) {
        printf("etcd: SKIPPED (%s not installed)\n", ETCD_HARNESS_BINARY);
        return 0;
    }
    etcd_harness harness;
    act_error err = {0};
    if (etcd_harness_start(&harness, &err) < 0) {
        fprintf(stderr, "bench-claims: %s\n", err.message);
        return -1;
    }
    char url[160];
    snprintf(url, sizeof(url), "%s/bench", harness.url_prefix);
    claim_store *store = NULL;
    bare_client bare = {0};
    uint64_t revision = 0;
    int r = claims_store_open(url, NULL, &store, &err);
    if (r == 0)
        r = create_claim(store, &revision);
    if (r == 0) {
        claim c = bench_claim(1);
        char *value = claim_to_json(&c);
        bare.key64 = etcd_b64_encode("/bench/bench", strlen("/bench/bench"));
        bare.value64 = etcd_b64_encode(value, strlen(value));
        free(value);
        bare.easy = curl_easy_init();
        snprintf(bare.url, sizeof(bare.url), "http://%s/v3/kv/txn", harness.endpoint);
        snprintf(bare.range_url, sizeof(bare.range_url), "http://%s/v3/kv/range", harness.endpoint);
        bare.headers = curl_slist_append(NULL, "Content-Type: application/json");
        bare.headers = curl_slist_append(bare.headers, "Expect:");
        curl_easy_setopt(bare.easy, CURLOPT_URL, bare.url);
        curl_easy_setopt(bare.easy, CURLOPT_HTTPHEADER, bare.headers);
        curl_easy_setopt(bare.easy, CURLOPT_WRITEFUNCTION, bare_write);
        curl_easy_setopt(bare.easy, CURLOPT_WRITEDATA, &bare);
        curl_easy_setopt(bare.easy, CURLOPT_TCP_NODELAY, 1L);
    }
    run_result ours[RUNS], base[RUNS], ours_read[RUNS], base_read[RUNS];
    /* Interleaved so drift in etcd or the machine hits both alike. */
    for (int i = 0; r == 0 && i < RUNS; i++) {
        r = run_store(store, &revision, &ours[i]);
        if (r == 0)
            r = run_bare(&bare, &revision, &base[i]);
        if (r == 0)
            r = run_store_reads(store, &ours_read[i]);
        if (r == 0)
            r = run_bare_reads(&bare, &base_read[i]);
    }
    if (r == 0) {
        run_result o = median_of(ours, RUNS), b = median_of(base, RUNS);
        print_result("etcd (claims store)", o);
        print_result("etcd (bare libcurl)", b);
        double ratio = o.p50_us / b.p50_us;
        printf("RATIO etcd claims-store p50 / bare-POST p50 = %.3f (target <= 1.2) %s\n", ratio,
               ratio <= 1.2 ? "OK" : "OVER TARGET");
        printf("RATIO etcd bare-POST CAS/s / claims-store CAS/s = %.3f\n",
               b.ops_per_sec / o.ops_per_sec);
        run_result ro = median_of(ours_read, RUNS), rb = median_of(base_read, RUNS);
        print_ops("etcd read (claims)", "read", ro);
        print_ops("etcd read (bare)", "read", rb);
        printf("RATIO etcd claims-store read p50 / bare range p50 = %.3f (%+.0f us)\n",
               ro.p50_us / rb.p50_us, ro.p50_us - rb.p50_us);
    } else if (err.message[0]) {
        fprintf(stderr, "bench-claims: %s\n", err.message);
    }
    curl_slist_free_all(bare.headers);
    if (bare.easy)
        curl_easy_cleanup(bare.easy);
    free(bare.key64);
    free(bare.value64);
    claims_store_free(store);
    etcd_harness_destroy(&harness);
    return r;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int r = bench_dir();
    if (bench_etcd() < 0)
        r = -1;
    curl_global_cleanup();
    return r < 0 ? 1 : 0;
}
