/* The fleet's view of boxes and claims, on the dir store or a real etcd
 * (argv[1]: dir, etcd), against real daemons:
 *   - a daemon's box record appears in the store while it runs, under a
 *     lease it keeps renewing, and is removed by a clean stop;
 *   - a lease the store lost is put back, and the daemon says so. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"

static dh_store_kind store_kind = DH_STORE_DIR;

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

/* box's record as the store lists it now; false when it has none. */
static bool box_record(dh_daemon *d, const char *box, claims_box *out)
{
    claims_box *boxes = NULL;
    size_t n = 0;
    act_error err = {0};
    DH_CHECK(d, claims_box_list(d->store, &boxes, &n, &err) == 0, "listing the boxes: %s",
             err.message);
    const claims_box *found = claims_box_find(boxes, n, box);
    if (found && out)
        *out = *found;
    free(boxes);
    return found != NULL;
}

/* Waits up to timeout_ms for box's record to be live. */
static bool box_live_wait(dh_daemon *d, const char *box, int timeout_ms, claims_box *out)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    do {
        claims_box record;
        if (box_record(d, box, &record) && record.live) {
            if (out)
                *out = record;
            return true;
        }
        sleep_ms(100);
    } while (act_now_usec() < deadline);
    return false;
}

static void daemon_incarnation(dh_daemon *d, char *out, size_t size)
{
    json_object *reply = dh_request(d, 5000, "{\"v\":1,\"op\":\"version\"}");
    snprintf(out, size, "%s", dh_json_str(dh_reply_result(reply), "incarnation"));
    json_object_put(reply);
}

static void test_box_record_lives_with_the_daemon(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, "BoxLeaseSec=3s\n");
    dh_add_app_host(d, "demo", NULL, NULL);
    DH_CHECK(d, !box_record(d, DH_BOX, NULL), "a box record before the daemon ran");
    dh_start(d, NULL);

    claims_box record;
    DH_CHECK(d, box_live_wait(d, DH_BOX, 5000, &record), "no live record of " DH_BOX);
    char incarnation[65];
    daemon_incarnation(d, incarnation, sizeof(incarnation));
    DH_CHECK(d, strcmp(record.incarnation, incarnation) == 0,
             "the record names incarnation %s, the daemon is %s", record.incarnation,
             incarnation);
    DH_CHECK(d, strcmp(record.version, "0.1.0") == 0, "the record names version %s",
             record.version);
    DH_CHECK(d, record.lease_ttl_usec == 3000000, "the record's lease is %" PRIu64 " us",
             record.lease_ttl_usec);
    DH_CHECK(d, record.control_url[0] == '\0' && record.events_url[0] == '\0',
             "a daemon without ControlListen= names URLs: control %s, events %s",
             record.control_url, record.events_url);
    uint64_t now = act_wallclock_usec();
    DH_CHECK(d, record.started_usec <= now && now - record.started_usec < 60 * 1000000ull,
             "the record's start time %" PRIu64 " is not this start's", record.started_usec);

    /* Three leases long it stays live: the daemon renews it. */
    uint64_t until = act_now_usec() + 9 * 1000000ull;
    while (act_now_usec() < until) {
        DH_CHECK(d, box_record(d, DH_BOX, &record) && record.live,
                 "the record of " DH_BOX " lapsed while the daemon ran");
        sleep_ms(300);
    }

    dh_stop_and_check_clean(d);
    DH_CHECK(d, dh_log_wait(d, "removed the record of box " DH_BOX, 1000),
             "the clean stop did not say it removed the record");
    DH_CHECK(d, !box_record(d, DH_BOX, NULL), "the record of " DH_BOX " outlived a clean stop");
}

static void test_a_lost_lease_is_put_again(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, "BoxLeaseSec=3s\n");
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    claims_box before;
    DH_CHECK(d, box_live_wait(d, DH_BOX, 5000, &before), "no live record of " DH_BOX);

    /* The store loses the lease: etcd revokes it (as an etcd that lost its
     * data would not know it), or the record's file goes. */
    if (store_kind == DH_STORE_DIR) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/claims/.boxes/" DH_BOX ".json", d->drv.state_dir);
        DH_CHECK(d, unlink(path) == 0, "cannot remove %s: %s", path, strerror(errno));
    } else {
        char body[64];
        snprintf(body, sizeof(body), "{\"ID\":\"%" PRIu64 "\"}", before.lease_id);
        long status = etcd_harness_post(&d->etcd, "/v3/lease/revoke", body, NULL, NULL);
        DH_CHECK(d, status == 200, "revoking lease %" PRIu64 ": HTTP %ld", before.lease_id,
                 status);
    }
    DH_CHECK(d, dh_log_wait(d, "box lease lost", 5000), "the daemon did not report the lost lease");
    claims_box after;
    DH_CHECK(d, box_live_wait(d, DH_BOX, 5000, &after), "the record was not put back");
    DH_CHECK(d, strcmp(after.incarnation, before.incarnation) == 0,
             "the record put back names incarnation %s, not %s", after.incarnation,
             before.incarnation);
    DH_CHECK(d, store_kind == DH_STORE_DIR || after.lease_id != before.lease_id,
             "the record was put back under the revoked lease %" PRIu64, after.lease_id);
    dh_stop_and_check_clean(d);
}

int main(int argc, char **argv)
{
    store_kind = dh_store_kind_from(argc > 1 ? argv[1] : "dir");
    int r = dh_check_can_run(store_kind == DH_STORE_ETCD ? "daemon-fleet-etcd" : "daemon-fleet-dir",
                             store_kind);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_box_record_lives_with_the_daemon),
        DH_TEST(test_a_lost_lease_is_put_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
