/* A box's own claims (claims.h): its listing and watch hold every claim that
 * names it, tell it once when a claim stops naming it, and nothing else;
 * and the layout marker. Run once per backend:
 *   test_box_index dir | etcd */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "claims/etcd_wire.h"
#include "common/clock.h"
#include "store_fixture.h"

static store_fixture fixture;

/* host's claim executed by exec, held by holder ("" = no holder). */
static claim named(const char *host, const char *holder, const char *exec)
{
    claim c = fixture_claim(host, 1);
    snprintf(c.holder.box, sizeof(c.holder.box), "%s", holder);
    if (!holder[0])
        memset(&c.holder, 0, sizeof(c.holder));
    snprintf(c.op.exec, sizeof(c.op.exec), "%s", exec);
    snprintf(c.op.phase, sizeof(c.op.phase), "%s", holder[0] ? "serving" : "assigned");
    return c;
}

static uint64_t write_claim(claim_store *store, const claim *c, uint64_t expected)
{
    act_error err = {0};
    uint64_t revision = 0;
    int r = claims_cas(store, c->host, expected, c, &revision, NULL, &err);
    if (r != 0)
        fail_msg("writing %s at %" PRIu64 ": %d %s", c->host, expected, r, err.message);
    return revision;
}

/* box's listing as "host@names-box host@left ..." with revisions checked
 * against the store's own reads for the claims that name box. */
static void listing(claim_store *store, const char *box, char *out, size_t size)
{
    claim *claims = NULL;
    size_t n = 0;
    uint64_t revision = 0;
    act_error err = {0};
    assert_int_equal(claims_list_box_at(store, box, &claims, &n, &revision, NULL, NULL, &err), 0);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        bool names = claim_names_box(&claims[i], box);
        if (names) {
            claim now;
            assert_int_equal(claims_read(store, claims[i].host, &now, &err), 1);
            assert_int_equal(now.revision, claims[i].revision);
        }
        size_t len = strlen(out);
        snprintf(out + len, size - len, "%s%s@%s", len ? " " : "", claims[i].host,
                 names ? "names" : "left");
    }
    free(claims);
}

static void a_box_lists_only_the_claims_that_name_it(void **state)
{
    char url[512], seen[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    claim h1 = named("h1", "b1", "b1");
    claim h2 = named("h2", "b2", "b2");
    claim h3 = named("h3", "b1", "b2"); /* b1 ran it; assigned to b2 */
    claim h4 = named("h4", "", "b2");
    snprintf(h4.op.from, sizeof(h4.op.from), "b2");
    snprintf(h4.op.to, sizeof(h4.op.to), "b3");
    h4.op.kind = CLAIM_OP_MOVE;
    snprintf(h4.op.phase, sizeof(h4.op.phase), "draining");
    write_claim(store, &h1, 0);
    write_claim(store, &h2, 0);
    write_claim(store, &h3, 0);
    write_claim(store, &h4, 0);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h1@names h3@names");
    listing(store, "b2", seen, sizeof(seen));
    assert_string_equal(seen, "h2@names h3@names h4@names");
    listing(store, "b3", seen, sizeof(seen));
    assert_string_equal(seen, "h4@names");
    listing(store, "b9", seen, sizeof(seen));
    assert_string_equal(seen, "");
    claims_store_free(store);
}

static void a_claim_that_leaves_a_box_stays_there_only_as_not_naming_it(void **state)
{
    char url[512], seen[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    claim h1 = named("h1", "", "b1");
    uint64_t revision = write_claim(store, &h1, 0);
    /* Reassigned to b2 before b1 ran it: b1 is not named any more. */
    snprintf(h1.op.exec, sizeof(h1.op.exec), "b2");
    revision = write_claim(store, &h1, revision);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h1@left");
    listing(store, "b2", seen, sizeof(seen));
    assert_string_equal(seen, "h1@names");
    /* Later writes that never name b1 leave it so. */
    snprintf(h1.op.phase, sizeof(h1.op.phase), "parked");
    h1.op.kind = CLAIM_OP_SERVING;
    revision = write_claim(store, &h1, revision);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h1@left");
    /* Named again: current again. */
    snprintf(h1.op.exec, sizeof(h1.op.exec), "b1");
    revision = write_claim(store, &h1, revision);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h1@names");
    /* Deleted: gone from every box that it named. */
    act_error err = {0};
    assert_int_equal(claims_delete(store, "h1", revision, NULL, &err), 0);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "");
    claims_store_free(store);
}

/* A box that saw a claim leave it removes the entry (etcd), unless a write
 * named the box again since; the dir store keeps its index a superset. */
static void a_box_tidies_an_entry_that_no_longer_names_it(void **state)
{
    char url[512], seen[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    claim h1 = named("h1", "", "b1");
    uint64_t named_b1 = write_claim(store, &h1, 0);
    snprintf(h1.op.exec, sizeof(h1.op.exec), "b2");
    uint64_t left_b1 = write_claim(store, &h1, named_b1);
    act_error err = {0};
    /* The entry as b1 saw it before it left: not the entry now. */
    int r = claims_index_tidy(store, "b1", "h1", named_b1, &err);
    assert_int_equal(r, fixture.etcd ? CLAIMS_CHANGED : 0);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h1@left");
    /* The entry that told b1 the claim left it: removed. */
    assert_int_equal(claims_index_tidy(store, "b1", "h1", left_b1, &err), 0);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, fixture.etcd ? "" : "h1@left");
    listing(store, "b2", seen, sizeof(seen));
    assert_string_equal(seen, "h1@names");
    /* Named again: the write puts the entry back. */
    snprintf(h1.op.exec, sizeof(h1.op.exec), "b1");
    write_claim(store, &h1, left_b1);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h1@names");
    /* A bad name changes nothing. */
    assert_int_equal(claims_index_tidy(store, "b/1", "h1", left_b1, &err), -EINVAL);
    claims_store_free(store);
}

/* Whether box's index in url's etcd holds an entry (a mark included) for
 * host. */
static bool index_has(const char *url, const char *box, const char *host)
{
    const char *prefix = strchr(url + strlen("etcd://"), '/');
    char key[512];
    snprintf(key, sizeof(key), "%s.by-box/%s/%s", prefix, box, host);
    char *key64 = etcd_b64_encode(key, strlen(key));
    char body[1024], *response = NULL;
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"keys_only\":true}", key64);
    free(key64);
    assert_int_equal(etcd_harness_post(&fixture.harness, "/v3/kv/range", body, NULL, &response),
                     200);
    bool has = strstr(response, "\"kvs\"") != NULL;
    free(response);
    return has;
}

/* A delete leaves a mark in the index of each box the claim named, so
 * their watches hear it; a box's list passes over marks and removes them
 * (it has heard the delete), unless the box was named again since. */
static void a_list_removes_the_delete_marks_it_passes(void **state)
{
    if (!fixture.etcd)
        skip(); /* the dir store's index is hints beside the claims: no marks */
    char url[512], seen[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    claim h1 = named("h1", "b1", "b1"), h2 = named("h2", "b1", "b1");
    uint64_t h1_revision = write_claim(store, &h1, 0);
    uint64_t h2_revision = write_claim(store, &h2, 0);
    act_error err = {0};
    assert_int_equal(claims_delete(store, "h1", h1_revision, NULL, &err), 0);
    assert_int_equal(claims_delete(store, "h2", h2_revision, NULL, &err), 0);
    assert_true(index_has(url, "b1", "h1"));
    assert_true(index_has(url, "b1", "h2"));
    /* h2 is made again, naming b1: its entry is a claim, not a mark. */
    write_claim(store, &h2, 0);
    listing(store, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h2@names");
    assert_false(index_has(url, "b1", "h1"));
    assert_true(index_has(url, "b1", "h2"));
    claims_store_free(store);
}

/* A writer that never saw the claim it replaces (a store opened afresh:
 * nothing remembered) still updates the index of the boxes it named. */
static void a_writer_that_never_read_the_claim_keeps_the_index(void **state)
{
    char url[512], seen[512];
    claim_store *first = store_fixture_open_fresh(&fixture, url, sizeof(url));
    claim h1 = named("h1", "b1", "b1");
    uint64_t revision = write_claim(first, &h1, 0);
    claim_store *second = NULL;
    act_error err = {0};
    assert_int_equal(claims_store_open(url, NULL, &second, &err), 0);
    claim moved = named("h1", "b2", "b2");
    moved.holder.session = 2;
    write_claim(second, &moved, revision);
    listing(first, "b1", seen, sizeof(seen));
    assert_string_equal(seen, "h1@left");
    listing(first, "b2", seen, sizeof(seen));
    assert_string_equal(seen, "h1@names");
    /* And a stale writer is still refused, with the claim there now. */
    claim stale = named("h1", "b3", "b3");
    claim current = {0};
    claims_store_free(second);
    assert_int_equal(claims_store_open(url, NULL, &second, &err), 0);
    assert_int_equal(claims_cas(second, "h1", revision, &stale, NULL, &current, &err),
                     CLAIMS_CHANGED);
    assert_string_equal(current.holder.box, "b2");
    listing(first, "b3", seen, sizeof(seen));
    assert_string_equal(seen, "");
    claims_store_free(second);
    claims_store_free(first);
}

static claims_watch *box_watch(claim_store *store, const char *box, uint64_t from,
                               fixture_seen *seen)
{
    claims_watch *watch = NULL;
    act_error err = {0};
    if (claims_watch_box_start(store, box, from, fixture_seen_on_watch, seen, &watch, &err) < 0)
        fail_msg("cannot watch box %s: %s", box, err.message);
    return watch;
}

static void a_box_watch_tells_only_what_concerns_it(void **state)
{
    char url[512];
    sd_event *event = NULL;
    claim_store *store = fixture_open_on_loop(&fixture, url, sizeof(url), NULL, &event);
    claim *claims = NULL;
    size_t n = 0;
    uint64_t from = 0;
    act_error err = {0};
    assert_int_equal(claims_list_box_at(store, "b1", &claims, &n, &from, NULL, NULL, &err), 0);
    free(claims);
    fixture_seen seen = {0};
    claims_watch *watch = box_watch(store, "b1", from + 1, &seen);
    claim other = named("other", "b2", "b2");
    uint64_t other_revision = write_claim(store, &other, 0);
    claim h1 = named("h1", "", "b1");
    uint64_t revision = write_claim(store, &h1, 0);
    for (int i = 0; i < 3; i++) {
        other.holder.session++;
        other_revision = write_claim(store, &other, other_revision);
    }
    snprintf(h1.op.exec, sizeof(h1.op.exec), "b2"); /* leaves b1 */
    revision = write_claim(store, &h1, revision);
    uint64_t left = revision;
    snprintf(h1.op.phase, sizeof(h1.op.phase), "parked"); /* b2's business */
    revision = write_claim(store, &h1, revision);
    assert_int_equal(claims_delete(store, "h1", revision, NULL, &err), 0);
    /* Back on b1, then deleted while it names b1. */
    claim h2 = named("h2", "b1", "b1");
    uint64_t h2_revision = write_claim(store, &h2, 0);
    assert_int_equal(claims_delete(store, "h2", h2_revision, NULL, &err), 0);
    fixture_seen_run(event, &seen, 4, 10000);
    /* Anything more would have come in order before a later write of b1's. */
    claim h3 = named("h3", "b1", "b1");
    uint64_t last = write_claim(store, &h3, 0);
    fixture_seen_run(event, &seen, 5, 10000);
    assert_int_equal(seen.error, 0);
    assert_int_equal(seen.n, 5);
    assert_int_equal(seen.changes[0].kind, CLAIM_CHANGE_PUT);
    assert_string_equal(seen.changes[0].claim.host, "h1");
    assert_true(claim_names_box(&seen.changes[0].claim, "b1"));
    assert_int_equal(seen.changes[1].kind, CLAIM_CHANGE_PUT);
    assert_int_equal(seen.changes[1].revision, left);
    assert_false(claim_names_box(&seen.changes[1].claim, "b1"));
    assert_string_equal(seen.changes[2].claim.host, "h2");
    assert_int_equal(seen.changes[2].kind, CLAIM_CHANGE_PUT);
    assert_string_equal(seen.changes[3].claim.host, "h2");
    assert_int_equal(seen.changes[3].kind, CLAIM_CHANGE_DELETE);
    assert_string_equal(seen.changes[4].claim.host, "h3");
    assert_int_equal(seen.changes[4].revision, last);
    claims_watch_free(watch);
    fixture_close_on_loop(store, event);
}

/* Other boxes' writes move the store's revision and never reach this
 * box's stream: a quiet stream must not be taken for dead for that. */
static void a_box_watch_outlives_other_boxes_writes(void **state)
{
    if (!fixture.etcd)
        skip(); /* the dir store's watch reads a local journal: it has no silence */
    char url[512];
    sd_event *event = NULL;
    claims_store_options options = {.watch_timeout_ms = 200};
    claim_store *store = fixture_open_on_loop(&fixture, url, sizeof(url), &options, &event);
    /* b1's index is not empty: its entries from before the watch started
     * are no sign of a missed write (etcd's count of a range ignores
     * min_mod_revision, which a probe that counted took for one). */
    claim mine = named("mine", "b1", "b1");
    write_claim(store, &mine, 0);
    claim other = named("other", "b2", "b2");
    uint64_t revision = write_claim(store, &other, 0);
    fixture_seen seen = {0};
    claims_watch *watch = box_watch(store, "b1", revision + 1, &seen);
    /* Past five silences of the stream, with writes between each. */
    uint64_t end = act_now_usec() + 5 * 200 * 1000ull;
    while (act_now_usec() < end && !seen.error) {
        other.holder.session++;
        revision = write_claim(store, &other, revision);
        fixture_seen_run(event, &seen, 0, 50);
    }
    assert_int_equal(seen.error, 0);
    assert_int_equal(seen.n, 0);
    /* And it still hears its own. */
    claim h1 = named("h1", "b1", "b1");
    write_claim(store, &h1, 0);
    fixture_seen_run(event, &seen, 1, 10000);
    assert_int_equal(seen.error, 0);
    assert_int_equal(seen.n, 1);
    claims_watch_free(watch);
    fixture_close_on_loop(store, event);
}

typedef struct probe_racer {
    claim_store *other; /* another store of the same URL, with synchronous calls */
    unsigned probes;
    uint64_t revision;
} probe_racer;

/* The first time the watch asks whether it missed a write, one lands just
 * before the question: the stream has not told it yet, and will. */
static void write_before_probe(void *userdata)
{
    probe_racer *racer = userdata;
    if (racer->probes++ != 0)
        return;
    claim h1 = named("h1", "b1", "b1");
    racer->revision = write_claim(racer->other, &h1, 0);
}

/* A write of the box's own index that lands as the silence probe is asked
 * is no sign of a dead stream: the stream tells it a moment later. */
static void a_write_racing_the_silence_probe_is_not_a_dead_stream(void **state)
{
    if (!fixture.etcd)
        skip(); /* the dir store's watch reads a local journal: it has no silence */
    char url[512];
    probe_racer racer = {0};
    claims_store_options options = {.watch_timeout_ms = 200,
                                    .before_silence_probe = write_before_probe,
                                    .before_silence_probe_userdata = &racer};
    sd_event *event = NULL;
    claim_store *store = fixture_open_on_loop(&fixture, url, sizeof(url), &options, &event);
    act_error err = {0};
    assert_int_equal(claims_store_open(url, NULL, &racer.other, &err), 0);
    claim other = named("other", "b2", "b2");
    uint64_t revision = write_claim(store, &other, 0);
    fixture_seen seen = {0};
    claims_watch *watch = box_watch(store, "b1", revision + 1, &seen);
    /* The racing write is told, and the watch outlives three more silences. */
    fixture_seen_run(event, &seen, 1, 10000);
    assert_int_equal(seen.error, 0);
    assert_int_equal(seen.n, 1);
    assert_int_equal(seen.changes[0].revision, racer.revision);
    while (racer.probes < 4 && !seen.error)
        fixture_seen_run(event, &seen, 2, 50);
    assert_int_equal(seen.error, 0);
    assert_int_equal(seen.n, 1);
    claims_watch_free(watch);
    claims_store_free(racer.other);
    fixture_close_on_loop(store, event);
}

typedef struct page_writer {
    claim_store *other; /* another store of the same URL: the listing one is busy */
    unsigned pages;
    uint64_t h1_revision, h5_revision;
} page_writer;

/* After the first page: one claim already read and one not yet read are
 * written again. */
static void write_between_pages(void *userdata)
{
    page_writer *w = userdata;
    if (w->pages++ != 0)
        return;
    claim h1 = named("h1", "b1", "b1"), h5 = named("h5", "b1", "b1");
    h1.holder.session = h5.holder.session = 2;
    w->h1_revision = write_claim(w->other, &h1, w->h1_revision);
    w->h5_revision = write_claim(w->other, &h5, w->h5_revision);
}

static void a_list_in_pages_is_the_store_at_one_revision(void **state)
{
    if (!fixture.etcd)
        skip(); /* the dir store lists under its lock, in one go */
    char url[512];
    page_writer writer = {0};
    claims_store_options options = {.list_page_keys = 2,
                                    .between_pages = write_between_pages,
                                    .between_pages_userdata = &writer};
    sd_event *event = NULL;
    claim_store *store = fixture_open_on_loop(&fixture, url, sizeof(url), &options, &event);
    act_error err = {0};
    assert_int_equal(claims_store_open(url, NULL, &writer.other, &err), 0);
    uint64_t first = 0;
    for (int i = 1; i <= 5; i++) {
        char host[8];
        snprintf(host, sizeof(host), "h%d", i);
        claim c = named(host, "b1", "b1");
        uint64_t revision = write_claim(writer.other, &c, 0);
        first = first ? first : revision;
        if (i == 1)
            writer.h1_revision = revision;
        if (i == 5)
            writer.h5_revision = revision;
    }
    uint64_t before = writer.h5_revision;
    claim *claims = NULL;
    size_t n = 0;
    uint64_t revision = 0;
    assert_int_equal(claims_list_box_at(store, "b1", &claims, &n, &revision, NULL, NULL, &err), 0);
    assert_true(writer.pages >= 2);
    /* All five, each as it stood at the first page's revision. */
    assert_int_equal(n, 5);
    assert_int_equal(revision, before);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(claims[i].holder.session, 1);
        assert_true(claims[i].revision >= first && claims[i].revision <= before);
    }
    free(claims);
    /* The watch from there tells both writes made between the pages. */
    fixture_seen seen = {0};
    claims_watch *watch = box_watch(store, "b1", revision + 1, &seen);
    fixture_seen_run(event, &seen, 2, 10000);
    assert_int_equal(seen.error, 0);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.changes[0].revision, writer.h1_revision);
    assert_int_equal(seen.changes[1].revision, writer.h5_revision);
    claims_watch_free(watch);
    claims_store_free(writer.other);
    fixture_close_on_loop(store, event);
}

/* Writes the layout marker as another activator would have. */
static void plant_marker(const char *url, const char *text)
{
    if (!fixture.etcd) {
        char path[512];
        snprintf(path, sizeof(path), "%s/.layout", url + strlen("dir://"));
        FILE *out = fopen(path, "w");
        assert_non_null(out);
        fputs(text, out);
        assert_int_equal(fclose(out), 0);
        return;
    }
    char key[256], *body = NULL;
    snprintf(key, sizeof(key), "%s.layout", strchr(url + strlen("etcd://"), '/'));
    char *key64 = etcd_b64_encode(key, strlen(key));
    char *value64 = etcd_b64_encode(text, strlen(text));
    assert_true(asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\"}", key64, value64) > 0);
    assert_int_equal(etcd_harness_post(&fixture.harness, "/v3/kv/put", body, NULL, NULL), 200);
    free(body);
    free(key64);
    free(value64);
}

static void the_layout_marker_is_written_once_and_checked(void **state)
{
    char url[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    act_error err = {0};
    assert_int_equal(claims_store_check_layout(store, &err), 0);
    assert_int_equal(claims_store_check_layout(store, &err), 0);
    claims_store_free(store);

    store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    plant_marker(url, "{\"layout\":9}");
    assert_int_equal(claims_store_check_layout(store, &err), -EPROTONOSUPPORT);
    assert_non_null(strstr(err.message, "layout"));
    assert_non_null(strstr(err.message, "9"));
    assert_non_null(strstr(err.message, "Store="));
    plant_marker(url, "not json");
    assert_int_equal(claims_store_check_layout(store, &err), -EPROTONOSUPPORT);
    claims_store_free(store);
}

/* The wire's cost by operation, for the daemon's metrics: etcd counts each
 * gateway path; a dir store has no wire. */
static void the_store_counts_its_traffic(void **state)
{
    char url[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    claim h1 = named("h1", "b1", "b1");
    write_claim(store, &h1, 0);
    char seen[64];
    listing(store, "b1", seen, sizeof(seen));
    claims_store_traffic traffic[16];
    size_t n = claims_store_traffic_get(store, traffic, 16);
    if (!fixture.etcd) {
        assert_int_equal(n, 0);
        claims_store_free(store);
        return;
    }
    bool txn = false, range = false;
    for (size_t i = 0; i < n; i++) {
        const claims_store_traffic *t = &traffic[i];
        assert_true(t->requests > 0 && t->bytes_sent > 0 && t->bytes_received > 0);
        txn |= strcmp(t->operation, "kv/txn") == 0;
        range |= strcmp(t->operation, "kv/range") == 0;
    }
    assert_true(txn && range);
    claims_store_free(store);
}

static void a_bad_box_name_is_refused(void **state)
{
    char url[512];
    claim_store *store = store_fixture_open_fresh(&fixture, url, sizeof(url));
    claim *claims = NULL;
    size_t n = 0;
    uint64_t revision = 0;
    act_error err = {0};
    assert_int_equal(claims_list_box_at(store, "../b1", &claims, &n, &revision, NULL, NULL, &err),
                     -EINVAL);
    assert_non_null(strstr(err.message, "../b1"));
    claims_store_free(store);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "dir";
    int r = store_fixture_setup(&fixture, backend);
    if (r != 0)
        return r;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_box_lists_only_the_claims_that_name_it),
        cmocka_unit_test(a_claim_that_leaves_a_box_stays_there_only_as_not_naming_it),
        cmocka_unit_test(a_box_tidies_an_entry_that_no_longer_names_it),
        cmocka_unit_test(a_writer_that_never_read_the_claim_keeps_the_index),
        cmocka_unit_test(a_list_removes_the_delete_marks_it_passes),
        cmocka_unit_test(a_box_watch_tells_only_what_concerns_it),
        cmocka_unit_test(a_box_watch_outlives_other_boxes_writes),
        cmocka_unit_test(a_write_racing_the_silence_probe_is_not_a_dead_stream),
        cmocka_unit_test(a_list_in_pages_is_the_store_at_one_revision),
        cmocka_unit_test(the_layout_marker_is_written_once_and_checked),
        cmocka_unit_test(the_store_counts_its_traffic),
        cmocka_unit_test(a_bad_box_name_is_refused),
    };
    r = _cmocka_run_group_tests(backend, tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
    store_fixture_teardown(&fixture);
    return r;
}
