/* The etcd watch against a real etcd, where a watch must not be fooled:
 *   - a key under the prefix that is not a host name (a NUL or another byte
 *     a host name cannot hold) is a malformed change, never another host's,
 *     and the list skips it; so is a value over the claim limit;
 *   - a quiet stream stays up past the watch timeout (the store says nothing
 *     was written), and a stream whose etcd is stopped (SIGSTOP) ends with an
 *     error soon after the timeout, so its owner can heal. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include <cmocka.h>

#include "claims/etcd_wire.h"
#include "common/clock.h"
#include "store_fixture.h"

#define WATCH_TIMEOUT_MS 1000
#define CALL_TIMEOUT_MS 1000
/* Slack for a loaded 2-core CI machine; the point is "bounded", not "fast". */
#define SLACK_MS 2500

static store_fixture fixture;

static claim_store *open_store(char *url, size_t size, sd_event **event)
{
    claims_store_options options = {.timeout_ms = CALL_TIMEOUT_MS,
                                    .watch_timeout_ms = WATCH_TIMEOUT_MS};
    return fixture_open_on_loop(&fixture, url, size, &options, event);
}

/* Puts value under "<prefix>/" + the raw key bytes, bypassing every check. */
static void put_raw(const char *url, const char *key_rest, size_t key_rest_len, const char *value,
                    size_t value_len)
{
    const char *prefix = strchr(url + strlen("etcd://"), '/');
    char key[512];
    size_t prefix_len = strlen(prefix);
    memcpy(key, prefix, prefix_len);
    key[prefix_len] = '/';
    memcpy(key + prefix_len + 1, key_rest, key_rest_len);
    char *key64 = etcd_b64_encode(key, prefix_len + 1 + key_rest_len);
    char *value64 = etcd_b64_encode(value, value_len);
    char *body;
    assert_true(asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\"}", key64, value64) > 0);
    assert_int_equal(etcd_harness_post(&fixture.harness, "/v3/kv/put", body, NULL, NULL), 200);
    free(body);
    free(key64);
    free(value64);
}

typedef struct problems {
    int n;
    char names[8][256];
} problems;

static void note_problem(const char *host, const act_error *problem, void *userdata)
{
    problems *p = userdata;
    if (p->n < 8)
        snprintf(p->names[p->n], sizeof(p->names[0]), "%s", host);
    p->n++;
}

static void keys_that_name_no_host_are_malformed(void **state)
{
    char url[512];
    sd_event *event;
    claim_store *store = open_store(url, sizeof(url), &event);
    act_error err = {0};
    fixture_seen s = {0};
    claims_watch *watch = fixture_seen_start(store, 0, &s);
    for (int i = 0; i < 30; i++)
        sd_event_run(event, 10 * 1000);

    claim web = fixture_claim("web", 1);
    char *body = claim_to_json(&web);
    /* "web\0x" once read as "web" by a reader that stopped at the NUL. */
    put_raw(url, "web\0x", 5, body, strlen(body));
    put_raw(url, "we b", 4, body, strlen(body));
    put_raw(url, "web/deeper", 10, body, strlen(body));
    size_t huge_len = CLAIM_JSON_MAX + 100;
    char *huge = malloc(huge_len);
    memset(huge, ' ', huge_len);
    put_raw(url, "huge", 4, huge, huge_len);
    free(huge);
    uint64_t good_rev;
    claim other = fixture_claim("other", 1);
    assert_int_equal(claims_cas(store, "other", 0, &other, &good_rev, NULL, &err), 0);

    fixture_seen_run(event, &s, 5, 5000);
    assert_int_equal(s.error, 0);
    assert_int_equal(s.n, 5);
    for (size_t i = 0; i < 4; i++) {
        if (s.changes[i].kind != CLAIM_CHANGE_MALFORMED)
            fail_msg("change %zu: kind %d for host \"%s\", expected malformed", i,
                     s.changes[i].kind, s.changes[i].claim.host);
        assert_true(s.changes[i].revision > 0);
    }
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(s.changes[i].claim.host, "");
    assert_non_null(strstr(s.changes[0].problem.message, "web\\x00x"));
    assert_non_null(strstr(s.changes[3].problem.message, "limit"));
    assert_string_equal(s.changes[3].claim.host, "huge");
    assert_int_equal(s.changes[4].kind, CLAIM_CHANGE_PUT);
    assert_string_equal(s.changes[4].claim.host, "other");
    assert_int_equal(s.changes[4].revision, good_rev);

    /* A delete of a malformed key is no host's delete either. */
    char *key64;
    const char *prefix = strchr(url + strlen("etcd://"), '/');
    char key[256];
    int key_len = snprintf(key, sizeof(key), "%s/web", prefix) + 2;
    memcpy(key + key_len - 2, "\0x", 2);
    key64 = etcd_b64_encode(key, (size_t)key_len);
    char del[512];
    snprintf(del, sizeof(del), "{\"key\":\"%s\"}", key64);
    free(key64);
    assert_int_equal(etcd_harness_post(&fixture.harness, "/v3/kv/deleterange", del, NULL, NULL),
                     200);
    fixture_seen_run(event, &s, 6, 5000);
    assert_int_equal(s.n, 6);
    assert_int_equal(s.changes[5].kind, CLAIM_CHANGE_MALFORMED);
    assert_string_equal(s.changes[5].claim.host, "");

    /* The list skips them all, names each, and has no "web". */
    problems p = {0};
    claim *claims;
    size_t n;
    assert_int_equal(claims_list(store, &claims, &n, note_problem, &p, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(claims[0].host, "other");
    free(claims);
    assert_int_equal(p.n, 3);
    claim got;
    assert_int_equal(claims_read(store, "web", &got, &err), 0);
    claims_watch_free(watch);
    free(body);
    fixture_close_on_loop(store, event);
}

static void a_quiet_watch_stays_up_past_its_timeout(void **state)
{
    char url[512];
    sd_event *event;
    claim_store *store = open_store(url, sizeof(url), &event);
    act_error err = {0};
    uint64_t rev;
    claim c = fixture_claim("web1", 1);
    assert_int_equal(claims_cas(store, "web1", 0, &c, &rev, NULL, &err), 0);
    fixture_seen s = {0};
    claims_watch *watch = fixture_seen_start(store, rev + 1, &s);
    fixture_seen_run(event, &s, 1, 3 * WATCH_TIMEOUT_MS + 500);
    if (s.error)
        fail_msg("a quiet watch ended: %s", s.message);
    assert_int_equal(s.n, 0);

    /* And it still tells a change. */
    c.holder.session = 2;
    assert_int_equal(claims_cas(store, "web1", rev, &c, &rev, NULL, &err), 0);
    fixture_seen_run(event, &s, 1, 3000);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.changes[0].revision, rev);
    claims_watch_free(watch);
    fixture_close_on_loop(store, event);
}

static void a_stopped_etcd_ends_the_watch_after_its_timeout(void **state)
{
    char url[512];
    sd_event *event;
    claim_store *store = open_store(url, sizeof(url), &event);
    act_error err = {0};
    fixture_seen s = {0};
    claims_watch *watch = fixture_seen_start(store, 0, &s);
    fixture_seen_run(event, &s, 1, 300);
    assert_int_equal(s.error, 0);

    assert_int_equal(kill(fixture.harness.pid, SIGSTOP), 0);
    uint64_t start = act_now_usec();
    fixture_seen_run(event, &s, 1, WATCH_TIMEOUT_MS + CALL_TIMEOUT_MS + SLACK_MS);
    uint64_t elapsed_ms = (act_now_usec() - start) / 1000;
    kill(fixture.harness.pid, SIGCONT);
    if (s.error == 0)
        fail_msg("the watch did not end within %" PRIu64 " ms of etcd stopping", elapsed_ms);
    /* Not before the stream was silent for the timeout. */
    assert_true(elapsed_ms + 300 >= WATCH_TIMEOUT_MS);
    assert_non_null(strstr(s.message, "silent"));
    claims_watch_free(watch);

    /* Once etcd runs again, a new watch works. */
    fixture_seen again = {0};
    watch = fixture_seen_start(store, 0, &again);
    fixture_seen_run(event, &again, 1, 500);
    claim c = fixture_claim("web1", 1);
    assert_int_equal(claims_cas(store, "web1", 0, &c, NULL, NULL, &err), 0);
    fixture_seen_run(event, &again, 1, 5000);
    assert_int_equal(again.error, 0);
    assert_int_equal(again.n, 1);
    claims_watch_free(watch);
    fixture_close_on_loop(store, event);
}

/* Puts n claims named <prefix>/q<i> in txns of 100 (under etcd's default
 * limit of operations per txn); returns the first revision. */
static uint64_t put_many(const char *url, int n)
{
    const char *prefix = strchr(url + strlen("etcd://"), '/');
    claim c = fixture_claim("q", 1);
    char *value = claim_to_json(&c);
    uint64_t first = 0;
    for (int done = 0; done < n;) {
        json_object *success = json_object_new_array();
        for (int i = 0; i < 100 && done < n; i++, done++) {
            char key[256];
            snprintf(key, sizeof(key), "%s/q%d", prefix, done);
            char *key64 = etcd_b64_encode(key, strlen(key));
            char *value64 = etcd_b64_encode(value, strlen(value));
            json_object *put = json_object_new_object(), *op = json_object_new_object();
            json_object_object_add(put, "key", json_object_new_string(key64));
            json_object_object_add(put, "value", json_object_new_string(value64));
            json_object_object_add(op, "request_put", put);
            json_object_array_add(success, op);
            free(key64);
            free(value64);
        }
        json_object *body = json_object_new_object();
        json_object_object_add(body, "success", success);
        char *response = NULL;
        assert_int_equal(etcd_harness_post(&fixture.harness, "/v3/kv/txn",
                                           json_object_to_json_string(body), NULL, &response),
                         200);
        json_object *parsed = json_tokener_parse(response), *header = NULL;
        json_object_object_get_ex(parsed, "header", &header);
        if (!first)
            first = etcd_json_u64(header, "revision");
        json_object_put(parsed);
        json_object_put(body);
        free(response);
    }
    free(value);
    return first;
}

/* More changes arrive at once than the watch holds for delivery: it ends
 * with an error (so its owner lists again) instead of growing without
 * bound, after handing over what it held. */
static void a_flood_ends_the_watch_instead_of_growing_its_queue(void **state)
{
    char url[512];
    sd_event *event;
    claim_store *store = open_store(url, sizeof(url), &event);
    uint64_t first = put_many(url, 1500);
    fixture_seen s = {0};
    /* Nothing runs the loop until etcd sent it all: one read gets it. */
    claims_watch *watch = fixture_seen_start(store, first, &s);
    fixture_seen_run(event, &s, 0, 5000);
    if (s.error != -ENOBUFS)
        fail_msg("expected the watch to end with -ENOBUFS, got %d (%s) after %zu changes", s.error,
                 s.message, s.n);
    assert_non_null(strstr(s.message, "listed again"));
    claims_watch_free(watch);
    fixture_close_on_loop(store, event);
}

int main(void)
{
    int r = store_fixture_setup(&fixture, "etcd");
    if (r != 0)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keys_that_name_no_host_are_malformed),
        cmocka_unit_test(a_quiet_watch_stays_up_past_its_timeout),
        cmocka_unit_test(a_stopped_etcd_ends_the_watch_after_its_timeout),
        cmocka_unit_test(a_flood_ends_the_watch_instead_of_growing_its_queue),
    };
    r = cmocka_run_group_tests(tests, NULL, NULL);
    store_fixture_teardown(&fixture);
    return r;
}
