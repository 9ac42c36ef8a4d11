/* The etcd store when things go wrong: the server stops mid-test and comes
 * back, an endpoint is dead or silent, the watch history is compacted, and
 * auth is on. Every failure must be a clear error naming the endpoint, within
 * the timeout, and nothing may crash. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "store_fixture.h"

#define TIMEOUT_MS 1500
/* Slack for a loaded 2-core CI machine; the point is "bounded", not "fast". */
#define SLACK_MS 2500

static store_fixture fixture;

static claim_store *open_url(const char *url, const claims_store_options *options)
{
    claim_store *store;
    act_error err = {0};
    if (claims_store_open(url, options, &store, &err) < 0)
        fail_msg("open %s: %s", url, err.message);
    return store;
}

static void stopped_etcd_fails_clearly_then_recovers(void **state)
{
    char url[512];
    store_fixture_fresh_url(&fixture, url, sizeof(url));
    claims_store_options options = {.timeout_ms = TIMEOUT_MS};
    claim_store *store = open_url(url, &options);
    act_error err = {0};
    claim c = fixture_claim("web1", 1), got;
    uint64_t rev;
    assert_int_equal(claims_cas(store, "web1", 0, &c, &rev, NULL, &err), 0);

    sd_event *event;
    assert_int_equal(sd_event_new(&event), 0);
    assert_int_equal(claims_store_attach_event(store, event, &err), 0);
    fixture_seen seen = {0};
    claims_watch *watch = fixture_seen_start(store, 0, &seen);
    for (int i = 0; i < 20; i++)
        sd_event_run(event, 10 * 1000);

    etcd_harness_stop(&fixture.harness);

    uint64_t start = act_now_usec();
    assert_true(claims_read(store, "web1", &got, &err) < 0);
    uint64_t elapsed_ms = (act_now_usec() - start) / 1000;
    assert_true(elapsed_ms < TIMEOUT_MS + SLACK_MS);
    assert_non_null(strstr(err.message, fixture.harness.endpoint));
    c.holder.session = 2;
    assert_true(claims_cas(store, "web1", rev, &c, NULL, NULL, &err) < 0);
    assert_non_null(strstr(err.message, fixture.harness.endpoint));

    /* The watch ends with an error naming the endpoint. */
    for (int i = 0; i < 300 && seen.error == 0; i++)
        sd_event_run(event, 10 * 1000);
    assert_true(seen.error < 0);
    assert_non_null(strstr(seen.message, fixture.harness.endpoint));
    claims_watch_free(watch);

    assert_int_equal(etcd_harness_restart(&fixture.harness, &err), 0);
    assert_int_equal(claims_read(store, "web1", &got, &err), 1);
    assert_int_equal(got.revision, rev);
    assert_int_equal(claims_cas(store, "web1", rev, &c, &rev, NULL, &err), 0);
    claims_store_free(store);
    sd_event_unref(event);
}

static void dead_endpoint_fails_over_to_a_live_one(void **state)
{
    /* A port nobody listens on: bound and closed again. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    close(fd);
    char dead[64], url[256];
    snprintf(dead, sizeof(dead), "127.0.0.1:%d", ntohs(addr.sin_port));

    snprintf(url, sizeof(url), "etcd://%s,%s/failover", dead, fixture.harness.endpoint);
    claims_store_options options = {.timeout_ms = TIMEOUT_MS};
    claim_store *store = open_url(url, &options);
    act_error err = {0};
    claim c = fixture_claim("web1", 1), got;
    assert_int_equal(claims_cas(store, "web1", 0, &c, NULL, NULL, &err), 0);
    assert_int_equal(claims_read(store, "web1", &got, &err), 1);
    claims_store_free(store);

    snprintf(url, sizeof(url), "etcd://%s/failover", dead);
    store = open_url(url, &options);
    assert_int_equal(claims_read(store, "web1", &got, &err), -ECONNREFUSED);
    assert_non_null(strstr(err.message, dead));
    claims_store_free(store);
}

static void silent_endpoint_times_out(void **state)
{
    /* Listening but never accepting: the connect succeeds through the
     * backlog and no answer ever comes. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(fd, 8), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    char url[256], endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", ntohs(addr.sin_port));
    snprintf(url, sizeof(url), "etcd://%s/silent", endpoint);
    claims_store_options options = {.timeout_ms = 500};
    claim_store *store = open_url(url, &options);
    act_error err = {0};
    claim got;
    uint64_t start = act_now_usec();
    assert_int_equal(claims_read(store, "web1", &got, &err), -ETIMEDOUT);
    assert_true((act_now_usec() - start) / 1000 < 500 + SLACK_MS);
    assert_non_null(strstr(err.message, endpoint));
    claims_store_free(store);
    close(fd);
}

/* An endpoint that answers every connection with 200 and a body without
 * end, until the client goes; it counts the connections. */
typedef struct endless {
    int listener;
    int connections;
} endless;

static void *serve_endlessly(void *arg)
{
    endless *e = arg;
    static char chunk[1 << 20];
    memset(chunk, ' ', sizeof(chunk));
    for (;;) {
        int fd = accept(e->listener, NULL, NULL);
        if (fd < 0)
            return NULL;
        __atomic_add_fetch(&e->connections, 1, __ATOMIC_SEQ_CST);
        char request[4096];
        (void)!read(fd, request, sizeof(request));
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Content-Length: 1000000000000\r\n\r\n{";
        ssize_t w = write(fd, head, sizeof(head) - 1);
        while (w > 0)
            w = write(fd, chunk, sizeof(chunk));
        close(fd);
    }
}

/* An answer beyond any we ask for is refused once it passes the bound,
 * with a sentence that says so, and not asked of another member. */
static void endless_answer_is_cut_off(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    endless e = {.listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    assert_int_equal(bind(e.listener, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(e.listener, 8), 0);
    assert_int_equal(getsockname(e.listener, (struct sockaddr *)&addr, &len), 0);
    pthread_t server;
    assert_int_equal(pthread_create(&server, NULL, serve_endlessly, &e), 0);
    char url[256];
    snprintf(url, sizeof(url), "etcd://127.0.0.1:%d,127.0.0.1:%d/endless", ntohs(addr.sin_port),
             ntohs(addr.sin_port));
    claims_store_options options = {.timeout_ms = 60000};
    claim_store *store = open_url(url, &options);
    act_error err = {0};
    claim got;
    assert_int_equal(claims_read(store, "web1", &got, &err), -EMSGSIZE);
    assert_non_null(strstr(err.message, "passed 256 MiB"));
    assert_int_equal(__atomic_load_n(&e.connections, __ATOMIC_SEQ_CST), 1);
    claims_store_free(store);
    shutdown(e.listener, SHUT_RDWR);
    pthread_join(server, NULL);
    close(e.listener);
}

static void compacted_watch_is_a_clear_error(void **state)
{
    char url[512];
    store_fixture_fresh_url(&fixture, url, sizeof(url));
    claim_store *store = open_url(url, NULL);
    act_error err = {0};
    claim c = fixture_claim("web1", 1);
    uint64_t first, rev;
    assert_int_equal(claims_cas(store, "web1", 0, &c, &first, NULL, &err), 0);
    c.holder.session = 2;
    assert_int_equal(claims_cas(store, "web1", first, &c, &rev, NULL, &err), 0);
    char body[64];
    snprintf(body, sizeof(body), "{\"revision\":\"%llu\"}", (unsigned long long)rev);
    assert_int_equal(etcd_harness_post(&fixture.harness, "/v3/kv/compaction", body, NULL, NULL),
                     200);
    claim_change *changes;
    size_t n;
    assert_int_equal(claims_watch_collect(store, first, 1, 3000, &changes, &n, &err), -ENODATA);
    assert_non_null(strstr(err.message, "compacted"));
    assert_non_null(strstr(err.message, fixture.harness.endpoint));
    claims_store_free(store);
}

static void auth_token_and_auth_failure(void **state)
{
    const etcd_harness *h = &fixture.harness;
    assert_int_equal(etcd_harness_post(h, "/v3/auth/user/add",
                                       "{\"name\":\"root\",\"password\":\"s3cret\"}", NULL, NULL),
                     200);
    assert_int_equal(etcd_harness_post(h, "/v3/auth/role/add", "{\"name\":\"root\"}", NULL, NULL),
                     200);
    assert_int_equal(etcd_harness_post(h, "/v3/auth/user/grant",
                                       "{\"user\":\"root\",\"role\":\"root\"}", NULL, NULL),
                     200);
    assert_int_equal(etcd_harness_post(h, "/v3/auth/enable", "{}", NULL, NULL), 200);

    char url[256];
    snprintf(url, sizeof(url), "%s/authed", h->url_prefix);
    act_error err = {0};
    claim c = fixture_claim("web1", 1), got;
    int r;

    claims_store_options good = {.timeout_ms = TIMEOUT_MS, .username = "root",
                                 .password = "s3cret"};
    claim_store *store = open_url(url, &good);
    assert_int_equal(claims_cas(store, "web1", 0, &c, NULL, NULL, &err), 0);
    assert_int_equal(claims_read(store, "web1", &got, &err), 1);
    claims_store_free(store);

    claims_store_options bad = good;
    bad.password = "wrong";
    store = open_url(url, &bad);
    r = claims_read(store, "web1", &got, &err);
    if (r != -EACCES)
        fail_msg("wrong password: got %d: %s", r, err.message);
    assert_non_null(strstr(err.message, "authentication"));
    assert_non_null(strstr(err.message, h->endpoint));
    claims_store_free(store);

    claims_store_options none = {.timeout_ms = TIMEOUT_MS};
    store = open_url(url, &none);
    r = claims_read(store, "web1", &got, &err);
    if (r != -EACCES)
        fail_msg("no credentials: got %d: %s", r, err.message);
    assert_non_null(strstr(err.message, h->endpoint));
    claims_store_free(store);
}

static void bad_urls_are_refused(void **state)
{
    const char *bad[] = {"etcd://127.0.0.1:2379", "etcd://127.0.0.1/p", "etcd://h:1/../x",
                         "dir://relative/path", "ftp://x", "etcd://a:1,/p"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        claim_store *store = NULL;
        act_error err = {0};
        assert_int_equal(claims_store_open(bad[i], NULL, &store, &err), -EINVAL);
        assert_null(store);
        assert_true(strlen(err.message) > 20);
    }
}

int main(void)
{
    int r = store_fixture_setup(&fixture, "etcd");
    if (r != 0)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_urls_are_refused),
        cmocka_unit_test(stopped_etcd_fails_clearly_then_recovers),
        cmocka_unit_test(dead_endpoint_fails_over_to_a_live_one),
        cmocka_unit_test(silent_endpoint_times_out),
        cmocka_unit_test(endless_answer_is_cut_off),
        cmocka_unit_test(compacted_watch_is_a_clear_error),
        /* Last: it turns auth on for this etcd. */
        cmocka_unit_test(auth_token_and_auth_failure),
    };
    r = cmocka_run_group_tests(tests, NULL, NULL);
    store_fixture_teardown(&fixture);
    return r;
}
