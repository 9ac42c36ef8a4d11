/* Box records (claims.h: box records), run once per backend:
 *   test_box_records dir     (a temp directory)
 *   test_box_records etcd    (a real etcd started on free loopback ports)
 * A record is put under a lease, renewed, listed, removed; a record whose
 * lease is not renewed goes dead; records are never claims: a claim list or
 * watch does not see them; the asynchronous calls run on the caller's
 * loop; a listing for liveness is one store request however many
 * boxes there are (on etcd counted by etcd itself); and an operator's
 * drain mark is listed with the record, outlives it, and goes with an
 * undrain. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <time.h>

#include <cmocka.h>

#include "claims/etcd_wire.h"
#include "common/clock.h"
#include "store_fixture.h"

static store_fixture fixture;

static claim_store *open_fresh(char *url, size_t size)
{
    return store_fixture_open_fresh(&fixture, url, size);
}

static claims_box record_of(const char *box, uint64_t ttl_sec)
{
    claims_box record = {.started_usec = act_wallclock_usec(), .lease_ttl_usec = ttl_sec * 1000000};
    snprintf(record.box, sizeof(record.box), "%s", box);
    snprintf(record.incarnation, sizeof(record.incarnation), "inc-%s", box);
    snprintf(record.version, sizeof(record.version), "0.1.0");
    snprintf(record.control_url, sizeof(record.control_url), "tls+tcp://10.0.0.5:7000");
    return record;
}

/* The store's records, NULL-safe: the one named box, or NULL. */
static bool listed(claim_store *store, const char *box, claims_box *out)
{
    claims_box *boxes = NULL;
    size_t n = 0;
    act_error err = {0};
    if (claims_box_list(store, &boxes, &n, &err) < 0)
        fail_msg("box list: %s", err.message);
    const claims_box *found = claims_box_find(boxes, n, box);
    if (found && out)
        *out = *found;
    free(boxes);
    return found != NULL;
}

static bool listed_live(claim_store *store, const char *box)
{
    claims_box record;
    return listed(store, box, &record) && record.live;
}

static void put_list_keepalive_remove(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    act_error err = {0};
    claims_box b2 = record_of("box-2", 30), b1 = record_of("box-1", 30), stored, renewed;

    assert_int_equal(claims_box_put(store, &b2, &stored, &err), 0);
    assert_int_equal(claims_box_put(store, &b1, &stored, &err), 0);
    assert_true(stored.live);
    assert_true(stored.expires_usec > act_wallclock_usec());
    assert_true(!fixture.etcd || stored.lease_id != 0);

    claims_box *boxes = NULL;
    size_t n = 0;
    assert_int_equal(claims_box_list(store, &boxes, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(boxes[0].box, "box-1");
    assert_string_equal(boxes[1].box, "box-2");
    assert_true(boxes[0].live);
    assert_string_equal(boxes[0].incarnation, "inc-box-1");
    assert_string_equal(boxes[0].version, "0.1.0");
    assert_string_equal(boxes[0].control_url, "tls+tcp://10.0.0.5:7000");
    assert_string_equal(boxes[0].events_url, "");
    assert_int_equal(boxes[0].started_usec, b1.started_usec);
    assert_int_equal(boxes[0].lease_ttl_usec, 30 * 1000000);
    assert_true(boxes[0].expires_usec > act_wallclock_usec() + 20 * 1000000ull);
    free(boxes);

    assert_int_equal(claims_box_keepalive(store, &stored, &renewed, &err), 0);
    assert_true(renewed.live);
    assert_true(renewed.expires_usec >= stored.expires_usec);

    /* Removed: gone, and renewing it says the lease is lost. */
    assert_int_equal(claims_box_remove(store, &stored, &err), 0);
    assert_false(listed(store, "box-1", NULL));
    assert_true(listed_live(store, "box-2"));
    assert_int_equal(claims_box_keepalive(store, &stored, NULL, &err), CLAIMS_LEASE_LOST);
    assert_non_null(strstr(err.message, "box-1"));
    /* Removing again is no error: it is gone either way. */
    assert_int_equal(claims_box_remove(store, &stored, &err), 0);

    /* A record that is not a record is refused before the store sees it. */
    claims_box bad = record_of("../x", 30);
    assert_int_equal(claims_box_put(store, &bad, NULL, &err), -EINVAL);
    bad = record_of("box-3", 30);
    snprintf(bad.control_url, sizeof(bad.control_url), "tcp://a b");
    assert_int_equal(claims_box_put(store, &bad, NULL, &err), -EINVAL);
    claims_store_free(store);
}

static void a_lease_not_renewed_makes_the_box_dead(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    act_error err = {0};
    claims_box quick = record_of("box-q", 2), steady = record_of("box-s", 30), stored, kept;
    assert_int_equal(claims_box_put(store, &quick, &stored, &err), 0);
    assert_int_equal(claims_box_put(store, &steady, &kept, &err), 0);
    assert_true(listed_live(store, "box-q"));

    /* Past its TTL (etcd revokes an expired lease within a second or so). */
    uint64_t deadline = act_now_usec() + 8 * 1000000ull;
    while (listed_live(store, "box-q") && act_now_usec() < deadline)
        nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    claims_box dead;
    bool still_listed = listed(store, "box-q", &dead);
    assert_false(still_listed && dead.live);
    /* etcd deletes the key with its lease (an instant after it expired);
     * the dir store keeps the record, dead, so an operator sees when the box
     * was last heard of. */
    assert_true(fixture.etcd || (still_listed && dead.expires_usec <= act_wallclock_usec()));
    assert_int_equal(claims_box_keepalive(store, &stored, NULL, &err), CLAIMS_LEASE_LOST);
    assert_true(listed_live(store, "box-s"));

    /* Put again, it is alive again. */
    assert_int_equal(claims_box_put(store, &quick, &stored, &err), 0);
    assert_true(listed_live(store, "box-q"));
    claims_store_free(store);
}

static void records_are_never_claims(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    act_error err = {0};
    uint64_t first = 0, second = 0;
    claim c = fixture_claim("web1", 1);
    assert_int_equal(claims_cas(store, "web1", 0, &c, &first, NULL, &err), 0);
    claims_box record = record_of("box-1", 30), stored;
    assert_int_equal(claims_box_put(store, &record, &stored, &err), 0);
    assert_int_equal(claims_box_keepalive(store, &stored, &stored, &err), 0);
    c = fixture_claim("web2", 1);
    assert_int_equal(claims_cas(store, "web2", 0, &c, &second, NULL, &err), 0);
    assert_int_equal(claims_box_remove(store, &stored, &err), 0);

    claim *claims = NULL;
    size_t n = 0;
    assert_int_equal(claims_list(store, &claims, &n, NULL, NULL, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(claims[0].host, "web1");
    assert_string_equal(claims[1].host, "web2");
    free(claims);

    /* The watch sees the two claims and nothing of the record's put, renewal
     * and removal, which happened between and after them. */
    claim_change *changes = NULL;
    assert_int_equal(claims_watch_collect(store, first, 5, 1500, &changes, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(changes[0].revision, first);
    assert_int_equal(changes[1].revision, second);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(changes[i].kind, CLAIM_CHANGE_PUT);
    free(changes);
    claims_store_free(store);
}

/* A takeover's write lands only while the box it takes from has no live
 * record: refused with CLAIMS_BOX_LIVE (nothing written) while box-1 is
 * live, written once its record is gone; a plain conflict is still
 * CLAIMS_CHANGED; a bad box name is refused. */
static void a_takeover_lands_only_while_the_box_is_dead(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    act_error err = {0};
    uint64_t first = 0, taken = 0;
    claim c = fixture_claim("web1", 1), next = fixture_claim("web1", 2), now;
    assert_int_equal(claims_cas(store, "web1", 0, &c, &first, NULL, &err), 0);
    claims_box record = record_of("box-1", 30), stored;
    assert_int_equal(claims_box_put(store, &record, &stored, &err), 0);
    assert_int_equal(
        claims_cas_unless_live(store, "web1", first, &next, "box-1", &taken, &now, &err),
        CLAIMS_BOX_LIVE);
    assert_non_null(strstr(err.message, "web1"));
    claim read;
    assert_int_equal(claims_read(store, "web1", &read, &err), 1);
    assert_int_equal(read.revision, first);
    /* Another box's record says nothing about box-1. */
    assert_int_equal(claims_box_remove(store, &stored, &err), 0);
    record = record_of("box-2", 30);
    assert_int_equal(claims_box_put(store, &record, NULL, &err), 0);
    assert_int_equal(
        claims_cas_unless_live(store, "web1", first + 1000, &next, "box-1", &taken, &now, &err),
        CLAIMS_CHANGED);
    assert_int_equal(now.revision, first);
    assert_int_equal(
        claims_cas_unless_live(store, "web1", first, &next, "box-1", &taken, &now, &err), 0);
    assert_true(taken > first);
    assert_int_equal(
        claims_cas_unless_live(store, "web1", taken, &next, "../box-1", &taken, &now, &err),
        -EINVAL);
    claims_store_free(store);
}

/* The calls etcd has started (all methods), or 0 on the dir store. */
static long long etcd_calls(void)
{
    if (!fixture.etcd)
        return 0;
    long long calls = etcd_harness_grpc_calls(&fixture.harness, NULL);
    if (calls < 0)
        fail_msg("etcd's /metrics at %s does not answer", fixture.harness.endpoint);
    return calls;
}

/* Lists store's boxes for liveness, expecting want of them, all live, and
 * (on etcd, where etcd counts them) exactly one request for it. */
static void list_live_in_one_request(claim_store *store, size_t want)
{
    claims_box *boxes = NULL;
    size_t n = 0;
    act_error err = {0};
    long long before = etcd_calls();
    if (claims_box_list_live(store, &boxes, &n, &err) < 0)
        fail_msg("box list for liveness: %s", err.message);
    long long requests = etcd_calls() - before;
    if (fixture.etcd && requests != 1)
        fail_msg("listing %zu boxes for liveness took %lld etcd requests, not 1", n, requests);
    assert_int_equal(n, want);
    for (size_t i = 0; i < n; i++) {
        assert_true(boxes[i].live);
        assert_int_equal(boxes[i].lease_ttl_usec, 30 * 1000000);
        /* The dir store's file says when the lease lapses; on etcd only the
         * lease knows, and asking it is a request per box. */
        assert_true(fixture.etcd ? boxes[i].expires_usec == 0
                                 : boxes[i].expires_usec > act_wallclock_usec());
    }
    free(boxes);
}

static void a_liveness_listing_is_one_request(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    act_error err = {0};
    claims_box record = record_of("box-000", 30);
    assert_int_equal(claims_box_put(store, &record, NULL, &err), 0);
    list_live_in_one_request(store, 1);

    /* 40 boxes cost what one did. */
    for (unsigned i = 1; i < 40; i++) {
        char box[16];
        snprintf(box, sizeof(box), "box-%03u", i);
        record = record_of(box, 30);
        assert_int_equal(claims_box_put(store, &record, NULL, &err), 0);
    }
    list_live_in_one_request(store, 40);

    /* The full listing (activatorctl boxes) still says when each lease
     * runs out, asking each lease on etcd. */
    claims_box *boxes = NULL;
    size_t n = 0;
    long long before = etcd_calls();
    assert_int_equal(claims_box_list(store, &boxes, &n, &err), 0);
    assert_int_equal(etcd_calls() - before, fixture.etcd ? 1 + 40 : 0);
    assert_int_equal(n, 40);
    for (size_t i = 0; i < n; i++)
        assert_true(boxes[i].live && boxes[i].refreshed_usec > 0 &&
                    boxes[i].expires_usec > act_wallclock_usec());
    free(boxes);
    claims_store_free(store);
}

/* A drain mark: put once (a second drain keeps the first stamp), listed on
 * the box's record by both listings in the one request, outliving the
 * record (a drained box that is down is listed, not live), gone with an
 * undrain; an undrain of a box never drained is no error, and a bad box
 * name is refused with nothing written. */
static void a_drain_mark_outlives_the_record_until_undrained(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    act_error err = {0};
    claims_box b1 = record_of("box-1", 30), b2 = record_of("box-2", 30), stored;
    assert_int_equal(claims_box_put(store, &b1, &stored, &err), 0);
    assert_int_equal(claims_box_put(store, &b2, NULL, &err), 0);
    uint64_t since = 0;
    assert_int_equal(claims_box_drain(store, "box-1", 1111, &since, &err), 0);
    assert_int_equal(since, 1111);
    assert_int_equal(claims_box_drain(store, "box-1", 2222, &since, &err), 0);
    assert_int_equal(since, 1111);
    /* A box with no record yet may be drained too (before it first starts). */
    assert_int_equal(claims_box_drain(store, "box-3", 3333, NULL, &err), 0);

    claims_box record;
    assert_true(listed(store, "box-1", &record));
    assert_true(record.live);
    assert_int_equal(record.drained_usec, 1111);
    assert_true(listed(store, "box-2", &record));
    assert_int_equal(record.drained_usec, 0);
    assert_true(listed(store, "box-3", &record));
    assert_false(record.live);
    assert_int_equal(record.drained_usec, 3333);

    /* The decision's listing sees it in its one request. */
    claims_box *boxes = NULL;
    size_t n = 0;
    long long before = etcd_calls();
    assert_int_equal(claims_box_list_live(store, &boxes, &n, &err), 0);
    if (fixture.etcd)
        assert_int_equal(etcd_calls() - before, 1);
    assert_int_equal(n, 3);
    assert_int_equal(claims_box_find(boxes, n, "box-1")->drained_usec, 1111);
    assert_int_equal(claims_box_find(boxes, n, "box-3")->drained_usec, 3333);
    free(boxes);

    /* The mark is not the record's: the box's record goes, the mark stays. */
    assert_int_equal(claims_box_remove(store, &stored, &err), 0);
    assert_true(listed(store, "box-1", &record));
    assert_false(record.live);
    assert_int_equal(record.drained_usec, 1111);

    assert_int_equal(claims_box_undrain(store, "box-1", &err), 0);
    assert_int_equal(claims_box_undrain(store, "box-1", &err), 0);
    assert_int_equal(claims_box_undrain(store, "box-2", &err), 0);
    assert_false(listed(store, "box-1", NULL));
    assert_true(listed(store, "box-3", NULL));

    assert_int_equal(claims_box_drain(store, "../box-1", 1, NULL, &err), -EINVAL);
    assert_non_null(strstr(err.message, "../box-1"));
    assert_false(listed(store, "../box-1", NULL));
    claims_store_free(store);
}

/* A record put on etcd by hand, without a lease, is no daemon's: it is
 * listed as not live (and logged), whichever listing. */
static void a_record_without_a_lease_is_not_live(void **state)
{
    if (!fixture.etcd)
        skip(); /* every dir record carries its expiry */
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    /* Saying an expiry in the value makes it no more live: on etcd only
     * the lease does. */
    const char *value = "{\"box\":\"box-hand\",\"incarnation\":\"inc-hand\","
                        "\"version\":\"0.1.0\",\"lease_ttl_usec\":30000000,"
                        "\"expires_usec\":99999999999999999}";
    char key[300];
    snprintf(key, sizeof(key), "%s.boxes/box-hand", strchr(url + strlen("etcd://"), '/'));
    char *body = NULL, *key64 = etcd_b64_encode(key, strlen(key)),
         *value64 = etcd_b64_encode(value, strlen(value));
    assert_true(asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\"}", key64, value64) > 0);
    assert_int_equal(etcd_harness_post(&fixture.harness, "/v3/kv/put", body, NULL, NULL), 200);
    free(body);
    free(key64);
    free(value64);

    claims_box *boxes = NULL;
    size_t n = 0;
    act_error err = {0};
    assert_int_equal(claims_box_list_live(store, &boxes, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(boxes[0].box, "box-hand");
    assert_false(boxes[0].live);
    assert_int_equal(boxes[0].expires_usec, 0);
    free(boxes);
    claims_store_free(store);
}

/* The daemon's way: put, renew, list and remove on its loop. */
typedef struct async_boxes {
    int step;
    bool failed;
    claims_box stored;
    size_t listed;
    act_error err;
} async_boxes;

static void on_async_box(claim_store *store, int result, const claims_box *record,
                         const act_error *err, void *userdata);

static void on_async_list(claim_store *store, int result, const claims_box *boxes, size_t n,
                          const act_error *err, void *userdata)
{
    async_boxes *s = userdata;
    s->listed = n;
    if (result < 0 || n != 1 || !boxes[0].live || strcmp(boxes[0].box, "box-a") != 0 ||
        claims_box_remove_async(store, &s->stored, on_async_box, s, &s->err) < 0)
        s->failed = true;
    s->step++;
}

static void on_async_box(claim_store *store, int result, const claims_box *record,
                         const act_error *err, void *userdata)
{
    async_boxes *s = userdata;
    if (result < 0) {
        s->failed = true;
        s->err = *err;
        return;
    }
    if (s->step == 0) {
        s->stored = *record;
        if (claims_box_keepalive_async(store, &s->stored, on_async_box, s, &s->err) < 0)
            s->failed = true;
    } else if (s->step == 1) {
        if (!record->live || claims_box_list_async(store, on_async_list, s, &s->err) < 0)
            s->failed = true;
    }
    s->step++;
}

static void asynchronous_calls_on_the_callers_loop(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    sd_event *event = NULL;
    assert_int_equal(sd_event_new(&event), 0);
    async_boxes s = {0};
    claims_box record = record_of("box-a", 30);
    assert_int_equal(claims_box_put_async(store, &record, on_async_box, &s, &s.err), -EBADFD);
    assert_int_equal(claims_store_attach_event(store, event, &s.err), 0);
    assert_int_equal(claims_box_put_async(store, &record, on_async_box, &s, &s.err), 0);
    /* Never inside the call: the callback comes from the loop. */
    assert_int_equal(s.step, 0);
    for (int i = 0; i < 200 && !s.failed && s.step < 4; i++)
        assert_true(sd_event_run(event, 100 * 1000) >= 0);
    if (s.failed)
        fail_msg("step %d: %s", s.step, s.err.message);
    assert_int_equal(s.step, 4);
    assert_int_equal(s.listed, 1);
    assert_false(listed(store, "box-a", NULL));
    claims_store_free(store);
    sd_event_unref(event);
}

static void on_never_answered(claim_store *store, int result, const claims_box *record,
                              const act_error *err, void *userdata)
{
    fail_msg("a call of a freed store was answered");
}

static void on_never_listed(claim_store *store, int result, const claims_box *boxes, size_t n,
                            const act_error *err, void *userdata)
{
    fail_msg("a list of a freed store was answered");
}

/* A daemon hands over or stops with a renewal in flight: freeing the store
 * ends every call without its callback, and frees what each held (the run's
 * leak check fails the test otherwise). */
static void a_store_freed_with_box_calls_in_flight_frees_them(void **state)
{
    char url[512];
    claim_store *store = open_fresh(url, sizeof(url));
    claims_box record = record_of("box-a", 30), stored;
    act_error err = {0};
    assert_int_equal(claims_box_put(store, &record, &stored, &err), 0);
    sd_event *event = NULL;
    assert_int_equal(sd_event_new(&event), 0);
    assert_int_equal(claims_store_attach_event(store, event, &err), 0);
    assert_int_equal(claims_box_keepalive_async(store, &stored, on_never_answered, NULL, &err), 0);
    assert_int_equal(claims_box_put_async(store, &record, on_never_answered, NULL, &err), 0);
    assert_int_equal(claims_box_list_async(store, on_never_listed, NULL, &err), 0);
    /* A tidy of a box's index entry, which nobody waits for, is freed too. */
    assert_int_equal(claims_index_tidy_async(store, "box-a", "web1", 5, NULL, NULL, &err), 0);
    claims_store_free(store);
    sd_event_unref(event);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "dir";
    int r = store_fixture_setup(&fixture, backend);
    if (r != 0)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_list_keepalive_remove),
        cmocka_unit_test(a_lease_not_renewed_makes_the_box_dead),
        cmocka_unit_test(records_are_never_claims),
        cmocka_unit_test(asynchronous_calls_on_the_callers_loop),
        cmocka_unit_test(a_liveness_listing_is_one_request),
        cmocka_unit_test(a_record_without_a_lease_is_not_live),
        cmocka_unit_test(a_drain_mark_outlives_the_record_until_undrained),
        cmocka_unit_test(a_takeover_lands_only_while_the_box_is_dead),
        cmocka_unit_test(a_store_freed_with_box_calls_in_flight_frees_them),
    };
    r = _cmocka_run_group_tests(backend, tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
    store_fixture_teardown(&fixture);
    return r;
}
