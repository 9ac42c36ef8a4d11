/* The fleet's view of boxes and claims, on the dir store or a real etcd
 * (argv[1]: dir, etcd, etcd-tls), against real daemons and real activatorctl
 * runs:
 *   - a daemon's box record appears in the store while it runs, under a
 *     lease it keeps renewing, and is removed by a clean stop;
 *   - a lease the store lost is put back, and the daemon says so;
 *   - a handover keeps the record (renewed), and the next daemon puts its
 *     own;
 *   - activatorctl claims, boxes, hold, unhold, unpin and claim show answer
 *     alike through a daemon and straight against the store (--store);
 *   - claim assign refuses a box without a live lease, naming the claim's
 *     revision and its box, unless --force;
 *   - on etcd, claim assign and move learn which boxes are live from one
 *     range, not a lease request per box (etcd's own count), through the
 *     daemon and with --store;
 *   - an edit whose compare-and-swap meets the daemon's own write-back
 *     (held between its read and its write: ACTIVATOR_TEST_HOLD=fleet_cas)
 *     is written again over it, through the daemon and with --store; one
 *     that meets a write changing what it decided is refused claim_changed;
 *   - with two daemons on one store, assigning a host one of them serves to
 *     the other makes the first retire its generation and refuse wakes,
 *     and the second serve it under the next generation; and back. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "activator/daemon/fleet/claim_waits.h"
#include "claims/etcd_wire.h"
#include "claims/store_etcd.h"
#include "common/clock.h"
#include "common/json_fields.h"
#include "harness.h"

#ifndef DH_ACTIVATORCTL
#error "DH_ACTIVATORCTL must name the activatorctl executable"
#endif

/* The second box of the two-daemon tests: neither DH_BOX nor DH_OTHER_BOX,
 * which the harness's beacon claim names. */
#define SECOND_BOX "box-b"

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
    /* Control served to other machines over TLS; events only locally. */
    char certs[] = "/tmp/act-fleet-tls-XXXXXX";
    DH_CHECK(d, mkdtemp(certs), "mkdtemp: %s", strerror(errno));
    DH_CHECK(d, dh_make_tls_certs(certs), "cannot make the TLS certificates");
    char control_url[64], conf[4 * PATH_MAX];
    snprintf(control_url, sizeof(control_url), "tls+tcp://127.0.0.1:%d", dh_free_port());
    snprintf(conf, sizeof(conf),
             "BoxLeaseSec=3s\nControlListen=%s\nTLSCertificate=%s/server.crt\n"
             "TLSKey=%s/server.key\nTLSClientCA=%s/ca.crt\nControlViewers=viewer-1\n",
             control_url, certs, certs, certs);
    dh_setup(d, store_kind, conf);
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
    DH_CHECK(d, strcmp(record.control_url, control_url) == 0 && record.events_url[0] == '\0',
             "the record names control %s and events %s, expected %s and none",
             record.control_url, record.events_url, control_url);
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
    char rm[64];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", certs);
    DH_CHECK(d, system(rm) == 0, "cannot remove %s", certs);
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

/* A claim wait on demo past revision %PRIu64, for up to 30 s. */
#define DEMO_WAIT_BODY                                                                             \
    "{\"v\":1,\"op\":\"claim.wait\",\"host\":\"demo\",\"revision\":%" PRIu64 ",\"wait\":30}"

static void test_a_handover_keeps_the_box_record(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, "BoxLeaseSec=3s\n");
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    int64_t pid = dh_wake(d, "demo").pid;
    claims_box before;
    DH_CHECK(d, box_live_wait(d, DH_BOX, 5000, &before), "no live record of " DH_BOX);
    /* A claim wait open at the handover is left unanswered: the control
     * socket closes under it (the client sees its connection end). */
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    dh_async *wait = dh_request_start(d, 3000, DEMO_WAIT_BODY, c.revision);
    for (int i = 0; dh_open_claim_waits(d) < 1; i++) {
        DH_CHECK(d, i < 1000, "the claim wait is not open after 20 s");
        sleep_ms(20);
    }

    /* The box stays alive across a handover: its record is renewed, never
     * removed, so the fleet does not count it dead while the next daemon
     * starts. */
    dh_hand_over(d);
    DH_CHECK(d, dh_log_wait(d, "the record of box " DH_BOX " stays, renewed", 1000),
             "the handover did not say it renewed the record");
    DH_CHECK(d, !dh_log_wait(d, "removed the record of box", 0),
             "the handover removed the record of " DH_BOX);
    claims_box kept;
    DH_CHECK(d, box_record(d, DH_BOX, &kept) && kept.live,
             "the record of " DH_BOX " is gone or dead after a handover");
    DH_CHECK(d, strcmp(kept.incarnation, before.incarnation) == 0,
             "the record names incarnation %s after the handover, not %s", kept.incarnation,
             before.incarnation);

    /* The next daemon puts its own record, under its own incarnation, and
     * serves on what the first one left running. */
    dh_start(d, NULL);
    char incarnation[65];
    daemon_incarnation(d, incarnation, sizeof(incarnation));
    claims_box after = {0};
    uint64_t deadline = act_now_usec() + 5 * 1000000ull;
    while (act_now_usec() < deadline &&
           !(box_record(d, DH_BOX, &after) && after.live &&
             strcmp(after.incarnation, incarnation) == 0))
        sleep_ms(100);
    DH_CHECK(d, after.live && strcmp(after.incarnation, incarnation) == 0,
             "the record names incarnation %s, the next daemon is %s", after.incarnation,
             incarnation);
    DH_CHECK(d, dh_wake(d, "demo").pid == pid, "the next daemon did not resume demo");
    int rv = dh_request_finish_nng(wait);
    DH_CHECK(d, rv != 0, "the claim wait open at the handover was answered");
    /* One open at a clean stop is answered: the box is stopping. */
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    wait = dh_request_start(d, 60000, DEMO_WAIT_BODY, c.revision);
    for (int i = 0; dh_open_claim_waits(d) < 1; i++) {
        DH_CHECK(d, i < 1000, "the claim wait is not open after 20 s");
        sleep_ms(20);
    }
    dh_stop_and_check_clean(d);
    json_object *stopped = dh_request_finish(d, wait);
    DH_CHECK(d, !dh_reply_ok(stopped) && strcmp(dh_reply_code(stopped), "stopping") == 0,
             "the claim wait open at a clean stop: %s", json_object_to_json_string(stopped));
    json_object_put(stopped);
    DH_CHECK(d, !box_record(d, DH_BOX, NULL), "the record of " DH_BOX " outlived a clean stop");
}

/* The hosts of box's index entries in d's etcd, "demo gone " (keys only,
 * deletes' marks included). */
static void index_hosts(dh_daemon *d, const char *box, char *out, size_t size)
{
    const char *prefix = strchr(d->store_url + strlen("etcd://"), '/');
    char key[512], end[512];
    snprintf(key, sizeof(key), "%s" ETCD_INDEX_SUFFIX "/%s/", prefix, box);
    snprintf(end, sizeof(end), "%s" ETCD_INDEX_SUFFIX "/%s0", prefix, box);
    char *key64 = etcd_b64_encode(key, strlen(key)), *end64 = etcd_b64_encode(end, strlen(end));
    char body[1200], *response = NULL;
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"range_end\":\"%s\",\"keys_only\":true}", key64,
             end64);
    free(key64);
    free(end64);
    DH_CHECK(d, etcd_harness_post(&d->etcd, "/v3/kv/range", body, NULL, &response) == 200,
             "etcd does not answer a range of %s", key);
    json_object *answer = json_tokener_parse(response);
    free(response);
    json_object *kvs = act_json_find(answer, "kvs", json_type_array);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; kvs && i < json_object_array_length(kvs); i++) {
        char *name = NULL;
        size_t len = 0;
        const char *k64 = act_json_string_or(json_object_array_get_idx(kvs, i), "key", "");
        if (etcd_b64_decode(k64, &name, &len) == 0 && len > strlen(key))
            used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s ",
                                     name + strlen(key));
        free(name);
    }
    json_object_put(answer);
}

/* Entries of this box's index whose claim left the box or was deleted are
 * removed by the box once it heard them, so its index (and every heal's
 * listing) holds only what concerns it now. */
static void test_the_index_forgets_hosts_that_left_or_were_deleted(void **state)
{
    dh_daemon *d = *state;
    if (store_kind == DH_STORE_DIR)
        skip(); /* the dir store's index is hints beside the claims, never tidied */
    dh_setup(d, store_kind, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    dh_wake(d, "demo");
    claim left, gone;
    dh_claim_assigned("left", DH_BOX, &left);
    dh_claim_assigned("gone", DH_BOX, &gone);
    uint64_t left_revision = dh_claim_put(d, &left);
    uint64_t gone_revision = dh_claim_put(d, &gone);
    char hosts[1024];
    index_hosts(d, DH_BOX, hosts, sizeof(hosts));
    /* The harness's beacon names this box too (harness.h). */
    DH_CHECK(d, strcmp(hosts, "beacon demo gone left ") == 0, "box-1's index holds %s", hosts);
    /* left goes to another box; gone's claim is deleted. */
    snprintf(left.op.exec, sizeof(left.op.exec), "%s", DH_OTHER_BOX);
    left.revision = left_revision;
    dh_claim_put(d, &left);
    act_error err = {0};
    DH_CHECK(d, claims_delete(d->store, "gone", gone_revision, NULL, &err) == 0,
             "deleting gone's claim: %s", err.message);
    for (int i = 0;; i++) {
        index_hosts(d, DH_BOX, hosts, sizeof(hosts));
        if (strcmp(hosts, "beacon demo ") == 0)
            break;
        DH_CHECK(d, i < 500, "box-1's index still holds %s 10 s after left left and gone went",
                 hosts);
        sleep_ms(20);
    }
    index_hosts(d, DH_OTHER_BOX, hosts, sizeof(hosts));
    DH_CHECK(d, strcmp(hosts, "left ") == 0, "%s's index holds %s", DH_OTHER_BOX, hosts);
    dh_stop_and_check_clean(d);
}

/* How activatorctl reaches the fleet: through d's daemon, or straight
 * against d's claim store. */
typedef enum via {
    VIA_DAEMON,
    VIA_STORE,
} via;

static const char *via_name(via how)
{
    return how == VIA_STORE ? "activatorctl --store" : "activatorctl through the daemon";
}

/* Runs activatorctl with the NULL-terminated arguments after how's
 * options; returns its exit status, its output in out. */
static int ctl(dh_daemon *d, via how, char *out, size_t size, ...)
{
    char *argv[24] = {(char *)DH_ACTIVATORCTL, (char *)"--no-color"};
    size_t n = 2;
    argv[n++] = (char *)(how == VIA_STORE ? "--store" : "--connect");
    argv[n++] = how == VIA_STORE ? d->store_url : d->drv.control_url;
    if (how == VIA_STORE && d->store_kind == DH_STORE_ETCD_TLS) {
        argv[n++] = (char *)"--store-ca";
        argv[n++] = d->etcd.ca_file;
        argv[n++] = (char *)"--store-cert";
        argv[n++] = d->etcd.cert_file;
        argv[n++] = (char *)"--store-key";
        argv[n++] = d->etcd.key_file;
    }
    va_list ap;
    va_start(ap, size);
    for (const char *arg; (arg = va_arg(ap, const char *)) && n < 23;)
        argv[n++] = (char *)arg;
    va_end(ap);
    argv[n] = NULL;
    return dh_run(argv, out, size);
}

/* The result of an activatorctl --json run that must succeed. */
static json_object *ctl_json(dh_daemon *d, via how, const char *command, const char *arg)
{
    char out[65536];
    int status = ctl(d, how, out, sizeof(out), "--json", command, arg, NULL);
    json_object *reply = json_tokener_parse(out);
    DH_CHECK(d, status == 0 && reply && dh_reply_ok(reply), "%s --json %s %s: exit %d:\n%s",
             via_name(how), command, arg ? arg : "", status, out);
    json_object *result = json_object_get(dh_reply_result(reply));
    json_object_put(reply);
    return result;
}

/* Whether a line of out starts with first (and a blank) and holds then: a
 * table's row, whatever the widths of its columns. */
static bool has_row(const char *out, const char *first, const char *then)
{
    size_t len = strlen(first);
    for (const char *line = out; *line;) {
        const char *end = strchrnul(line, '\n');
        char row[512];
        snprintf(row, sizeof(row), "%.*s", (int)(end - line), line);
        if (strncmp(row, first, len) == 0 && row[len] == ' ' && strstr(row + len, then))
            return true;
        line = *end ? end + 1 : end;
    }
    return false;
}

/* The entry of list (an array of objects) whose key is value, or NULL. */
static json_object *entry_of(json_object *list, const char *key, const char *value)
{
    for (size_t i = 0; list && i < json_object_array_length(list); i++) {
        json_object *entry = json_object_array_get_idx(list, i);
        if (strcmp(dh_json_str(entry, key), value) == 0)
            return entry;
    }
    return NULL;
}

static json_object *array_of(json_object *result, const char *key)
{
    json_object *list = NULL;
    json_object_object_get_ex(result, key, &list);
    return list;
}

static const char *test_digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/* One round of the fleet commands through how, on demo (serving on DH_BOX
 * as generation) and other (assigned to DH_OTHER_BOX, which never ran). */
static void fleet_commands(dh_daemon *d, via how, uint64_t generation)
{
    const char *name = via_name(how);
    char out[16384];
    int status = ctl(d, how, out, sizeof(out), "claims", NULL);
    DH_CHECK(d, status == 0 && strstr(out, "HOST") && strstr(out, "demo") && strstr(out, "other") &&
                    strstr(out, DH_OTHER_BOX) && strstr(out, "serving"),
             "%s claims: exit %d:\n%s", name, status, out);

    /* One host, as JSON: its box, phase, generation; the version it runs is
     * known to the daemon that runs it, the store alone knows none. */
    json_object *result = ctl_json(d, how, "claims", "demo");
    json_object *claims = array_of(result, "claims");
    json_object *demo = entry_of(claims, "host", "demo");
    DH_CHECK(d, claims && json_object_array_length(claims) == 1 && demo,
             "%s claims demo listed %s", name, json_object_to_json_string(result));
    DH_CHECK(d, strcmp(dh_json_str(demo, "box"), DH_BOX) == 0 &&
                    strcmp(dh_json_str(demo, "phase"), "serving") == 0 &&
                    dh_json_u64(demo, "generation") == generation &&
                    dh_json_u64(demo, "session") >= 1 && dh_json_u64(demo, "revision") > 0 &&
                    dh_json_u64(demo, "stamp_usec") > 0,
             "%s claims demo: %s", name, json_object_to_json_string(demo));
    const char *expected_version = how == VIA_DAEMON ? "v1" : "";
    DH_CHECK(d, strcmp(dh_json_str(demo, "version"), expected_version) == 0,
             "%s claims demo: version \"%s\", expected \"%s\"", name, dh_json_str(demo, "version"),
             expected_version);
    json_object_put(result);
    status = ctl(d, how, out, sizeof(out), "claims", "demo", "nohost", NULL);
    DH_CHECK(d, status == 1 && strstr(out, "host nohost has no claim") && strstr(out, "demo"),
             "%s claims demo nohost: exit %d:\n%s", name, status, out);

    /* The boxes: this one live with its host; the other box only the
     * claims name, with no record at all. */
    result = ctl_json(d, how, "boxes", NULL);
    json_object *boxes = array_of(result, "boxes");
    json_object *ours = entry_of(boxes, "box", DH_BOX);
    json_object *other = entry_of(boxes, "box", DH_OTHER_BOX);
    json_object *live = NULL, *record = NULL;
    DH_CHECK(d, ours && json_object_object_get_ex(ours, "live", &live) &&
                    json_object_get_boolean(live) && dh_json_u64(ours, "hosts") == 1 &&
                    dh_json_u64(ours, "refreshed_usec") > 0 &&
                    dh_json_u64(ours, "lease_ttl_usec") == 10000000 &&
                    !json_object_object_get_ex(ours, "control_url", NULL) &&
                    !json_object_object_get_ex(ours, "events_url", NULL),
             "%s boxes (a box with no ControlListen= and ipc events names no URL): %s", name,
             json_object_to_json_string(result));
    DH_CHECK(d, other && json_object_object_get_ex(other, "live", &live) &&
                    !json_object_get_boolean(live) &&
                    json_object_object_get_ex(other, "record", &record) &&
                    !json_object_get_boolean(record),
             "%s boxes, the box without a record: %s", name, json_object_to_json_string(result));
    json_object_put(result);
    status = ctl(d, how, out, sizeof(out), "boxes", NULL);
    DH_CHECK(d, status == 0 && has_row(out, DH_BOX, " live ") && strstr(out, "unknown"),
             "%s boxes: exit %d:\n%s", name, status, out);

    /* hold, unhold: a compare-and-swap each; one that changes nothing says so. */
    claim c;
    status = ctl(d, how, out, sizeof(out), "hold", "demo", "v1", NULL);
    DH_CHECK(d, status == 0 && strstr(out, "held on v1") && dh_claim_get(d, "demo", &c) &&
                    strcmp(c.held, "v1") == 0,
             "%s hold demo v1: exit %d, held \"%s\":\n%s", name, status, c.held, out);
    status = ctl(d, how, out, sizeof(out), "hold", "demo", "v1", NULL);
    DH_CHECK(d, status == 0 && strstr(out, "(unchanged)"), "%s hold demo v1 again: exit %d:\n%s",
             name, status, out);
    status = ctl(d, how, out, sizeof(out), "unhold", "demo", NULL);
    DH_CHECK(d, status == 0 && strstr(out, "not held") && dh_claim_get(d, "demo", &c) &&
                    c.held[0] == '\0',
             "%s unhold demo: exit %d, held \"%s\":\n%s", name, status, c.held, out);

    /* A pin (as a swap leaves it) is the version claims shows; unpin drops it. */
    dh_claim_get(d, "demo", &c);
    c.has_pin = true;
    snprintf(c.pin.version, sizeof(c.pin.version), "v1");
    snprintf(c.pin.digest, sizeof(c.pin.digest), "%s", test_digest);
    dh_claim_put(d, &c);
    result = ctl_json(d, how, "claims", "demo");
    demo = entry_of(array_of(result, "claims"), "host", "demo");
    DH_CHECK(d, demo && strcmp(dh_json_str(demo, "pin"), "v1") == 0 &&
                    strcmp(dh_json_str(demo, "version"), "v1") == 0,
             "%s claims demo with a pin: %s", name, json_object_to_json_string(result));
    json_object_put(result);
    status = ctl(d, how, out, sizeof(out), "unpin", "demo", NULL);
    DH_CHECK(d, status == 0 && strstr(out, "no pin") && dh_claim_get(d, "demo", &c) && !c.has_pin,
             "%s unpin demo: exit %d:\n%s", name, status, out);

    status = ctl(d, how, out, sizeof(out), "hold", "nohost", "v1", NULL);
    DH_CHECK(d, status == 1 && strstr(out, "no_claim") && !dh_claim_get(d, "nohost", &c),
             "%s hold of a host without a claim: exit %d:\n%s", name, status, out);
    status = ctl(d, how, out, sizeof(out), "claim", "show", "demo", NULL);
    DH_CHECK(d, status == 0 && strstr(out, "claim.holder.box") && strstr(out, DH_BOX),
             "%s claim show demo: exit %d:\n%s", name, status, out);
}

/* claim wait through how: at once past the revision named, the claim as it
 * is once the wait runs out, no_claim for a host without one. */
static void claim_wait_commands(dh_daemon *d, via how)
{
    const char *name = via_name(how);
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    char out[16384], revision[32], older[32];
    snprintf(revision, sizeof(revision), "%" PRIu64, c.revision);
    snprintf(older, sizeof(older), "%" PRIu64, c.revision - 1);
    int status =
        ctl(d, how, out, sizeof(out), "--json", "claim", "wait", "demo", "--revision", older, NULL);
    json_object *reply = json_tokener_parse(out);
    json_object *result = reply ? dh_reply_result(reply) : NULL;
    DH_CHECK(d,
             status == 0 && result && act_json_bool_or(result, "changed", false) &&
                 act_json_u64_or(act_json_find(result, "claim", json_type_object), "revision", 0) ==
                     c.revision,
             "%s claim wait demo --revision %s (the claim is at %s): exit %d:\n%s", name, older,
             revision, status, out);
    json_object_put(reply);
    status = ctl(d, how, out, sizeof(out), "--json", "claim", "wait", "demo", "--revision",
                 revision, "--wait", "1", NULL);
    reply = json_tokener_parse(out);
    result = reply ? dh_reply_result(reply) : NULL;
    DH_CHECK(d,
             status == 0 && result && !act_json_bool_or(result, "changed", true) &&
                 act_json_u64_or(result, "waited_ms", 0) >= 1000,
             "%s claim wait demo --revision %s --wait 1 (nothing writes it): exit %d:\n%s", name,
             revision, status, out);
    json_object_put(reply);
    status = ctl(d, how, out, sizeof(out), "claim", "wait", "nohost", "--revision", "7", NULL);
    DH_CHECK(d, status == 1 && strstr(out, "no_claim") && strstr(out, "deleted after revision 7"),
             "%s claim wait nohost --revision 7: exit %d:\n%s", name, status, out);
    status = ctl(d, how, out, sizeof(out), "claim", "wait", "demo", "--revision", "-3", NULL);
    DH_CHECK(d, status == 2 && strstr(out, "bad value '-3' for option '--revision'"),
             "%s claim wait demo --revision -3: exit %d:\n%s", name, status, out);
    status = ctl(d, how, out, sizeof(out), "claim", "wait", "demo", "--wait", "301", NULL);
    /* Refused by the daemon (1), or before any store call by --store (2). */
    DH_CHECK(d, status == (how == VIA_STORE ? 2 : 1) && strstr(out, "wait 1 to 300 seconds"),
             "%s claim wait demo --wait 301: exit %d:\n%s", name, status, out);
}

/* Claim waits through the daemon hear a write made while they wait (the
 * daemon watches the claim), as many at once as the daemon holds; one
 * more is refused as busy, and the refusal says what to do. */
static void claim_waits_hear_a_write(dh_daemon *d)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    dh_async *waits[AD_CLAIM_WAITS_MAX];
    for (size_t i = 0; i < AD_CLAIM_WAITS_MAX; i++)
        waits[i] = dh_request_start(d, 90000,
                                    "{\"v\":1,\"op\":\"claim.wait\",\"host\":\"demo\","
                                    "\"revision\":%" PRIu64 ",\"wait\":60}",
                                    c.revision);
    /* Each is watching once the daemon counts it open. */
    for (int i = 0; dh_open_claim_waits(d) < AD_CLAIM_WAITS_MAX; i++) {
        DH_CHECK(d, i < 1000, "the daemon holds %" PRIu64 " claim waits of %d after 20 s",
                 dh_open_claim_waits(d), AD_CLAIM_WAITS_MAX);
        sleep_ms(20);
    }
    json_object *busy = dh_request(d, 5000,
                                   "{\"v\":1,\"op\":\"claim.wait\",\"host\":\"demo\","
                                   "\"revision\":%" PRIu64 "}",
                                   c.revision);
    DH_CHECK(d,
             !dh_reply_ok(busy) && strcmp(dh_reply_code(busy), "busy") == 0 &&
                 strstr(json_object_to_json_string(busy), "claim show demo"),
             "claim wait beyond the %d a box holds: %s", AD_CLAIM_WAITS_MAX,
             json_object_to_json_string(busy));
    json_object_put(busy);
    c.holder.stamp_usec++;
    uint64_t written = dh_claim_put(d, &c);
    for (size_t i = 0; i < AD_CLAIM_WAITS_MAX; i++) {
        json_object *reply = dh_request_finish(d, waits[i]);
        json_object *result = dh_reply_result(reply);
        /* Answered by the write, not by the last look at the end of the wait. */
        DH_CHECK(d,
                 dh_reply_ok(reply) && act_json_bool_or(result, "changed", false) &&
                     act_json_u64_or(result, "waited_ms", UINT64_MAX) < 60 * 1000 &&
                     act_json_u64_or(act_json_find(result, "claim", json_type_object), "revision",
                                     0) == written,
                 "claim wait %zu after the write of revision %" PRIu64 ": %s", i, written,
                 json_object_to_json_string(reply));
        json_object_put(reply);
    }
    DH_CHECK(d, dh_open_claim_waits(d) == 0, "claim waits still open after they were answered");
}

/* claim assign to a box with no live lease: refused with the claim's
 * revision and box, and the claim untouched; with --force it is done. */
static void assign_needs_a_live_box(dh_daemon *d, via how, const char *dead_box)
{
    const char *name = via_name(how);
    claim before, after;
    DH_CHECK(d, dh_claim_get(d, "other", &before), "other has no claim");
    char out[16384], revision[64], box[64];
    snprintf(revision, sizeof(revision), "revision %" PRIu64, before.revision);
    snprintf(box, sizeof(box), "box %s", claim_executor(&before));
    int status = ctl(d, how, out, sizeof(out), "claim", "assign", "other", dead_box, NULL);
    DH_CHECK(d, status == 1 && strstr(out, "no live lease") && strstr(out, "box_not_live") &&
                    strstr(out, revision) && strstr(out, box) && strstr(out, "--force"),
             "%s claim assign other %s: exit %d (expected 1 naming %s and %s):\n%s", name,
             dead_box, status, revision, box, out);
    DH_CHECK(d, dh_claim_get(d, "other", &after) && after.revision == before.revision,
             "the refused assignment changed the claim");
    status = ctl(d, how, out, sizeof(out), "claim", "assign", "other", dead_box, "--force", NULL);
    DH_CHECK(d, status == 0 && dh_claim_get(d, "other", &after) &&
                    strcmp(claim_executor(&after), dead_box) == 0,
             "%s claim assign other %s --force: exit %d, executor %s:\n%s", name, dead_box, status,
             claim_executor(&after), out);
}

/* The lease requests (/v3/lease/timetolive) etcd has served. */
static long long lease_asks(dh_daemon *d)
{
    long long asks = etcd_harness_grpc_calls(&d->etcd, "LeaseTimeToLive");
    DH_CHECK(d, asks >= 0, "etcd's /metrics at %s does not answer", d->etcd.endpoint);
    return asks;
}

#define MANY_BOXES 30

/* On etcd a box record is there only while its lease lives, so the edits
 * that need a live box (claim assign, move) learn it from one range of the
 * records: with MANY_BOXES of them, neither through the daemon nor with
 * --store do they ask etcd about any lease; only boxes, which shows each
 * lease's renewal, asks each. */
static void edits_ask_no_lease_per_box(dh_daemon *d)
{
    claims_box records[MANY_BOXES];
    act_error err = {0};
    for (size_t i = 0; i < MANY_BOXES; i++) {
        records[i] =
            (claims_box){.started_usec = act_wallclock_usec(), .lease_ttl_usec = 60 * 1000000ull};
        snprintf(records[i].box, sizeof(records[i].box), "box-p%02zu", i);
        snprintf(records[i].incarnation, sizeof(records[i].incarnation), "inc-p%02zu", i);
        DH_CHECK(d, claims_box_put(d->store, &records[i], &records[i], &err) == 0,
                 "putting %s's record: %s", records[i].box, err.message);
    }
    char out[16384];
    const via hows[] = {VIA_DAEMON, VIA_STORE};
    const char *targets[] = {"box-p07", "box-p13"};
    for (size_t i = 0; i < 2; i++) {
        const char *name = via_name(hows[i]);
        long long before = lease_asks(d);
        int status =
            ctl(d, hows[i], out, sizeof(out), "claim", "assign", "other", targets[i], NULL);
        DH_CHECK(d, status == 0, "%s claim assign other %s: exit %d:\n%s", name, targets[i], status,
                 out);
        status = ctl(d, hows[i], out, sizeof(out), "move", "other", "box-nope", NULL);
        DH_CHECK(d, status == 1 && strstr(out, "unknown_box"),
                 "%s move other box-nope: exit %d (expected 1, unknown_box):\n%s", name, status,
                 out);
        long long asks = lease_asks(d) - before;
        DH_CHECK(d, asks == 0,
                 "%s claim assign and move with %d box records asked etcd about %lld leases; "
                 "which boxes are live is one range",
                 name, MANY_BOXES, asks);
    }
    long long before = lease_asks(d);
    int status = ctl(d, VIA_STORE, out, sizeof(out), "boxes", NULL);
    long long asks = lease_asks(d) - before;
    DH_CHECK(d, status == 0 && asks >= MANY_BOXES,
             "activatorctl --store boxes: exit %d, %lld lease asks for %d records:\n%s", status,
             asks, MANY_BOXES, out);
    for (size_t i = 0; i < MANY_BOXES; i++)
        DH_CHECK(d, claims_box_remove(d->store, &records[i], &err) == 0, "removing %s's record: %s",
                 records[i].box, err.message);
}

static void write_text(dh_daemon *d, const char *path, const char *text)
{
    FILE *out = fopen(path, "w");
    DH_CHECK(d, out && fputs(text, out) >= 0 && fclose(out) == 0, "cannot write %s", path);
}

/* claim export and import with the daemon serving: the export holds every
 * claim; an import with one wrong line writes nothing; an import puts back
 * a claim that was deleted, with its body, and leaves the others be. */
static void claims_export_and_import(dh_daemon *d)
{
    static char out[32768], more[65536];
    int status = ctl(d, VIA_STORE, out, sizeof(out), "claim", "export", NULL);
    DH_CHECK(
        d, status == 0 && strstr(out, "{\"host\":\"demo\",") && strstr(out, "{\"host\":\"other\","),
        "activatorctl --store claim export: exit %d:\n%s", status, out);
    char exported[PATH_MAX], wrong[PATH_MAX];
    snprintf(exported, sizeof(exported), "%s/claims.jsonl", d->drv.dir);
    snprintf(wrong, sizeof(wrong), "%s/wrong.jsonl", d->drv.dir);
    write_text(d, exported, out);
    claim other, demo;
    DH_CHECK(d, dh_claim_get(d, "other", &other) && dh_claim_get(d, "demo", &demo),
             "no claims to import over");

    snprintf(more, sizeof(more),
             "{\"host\":\"fresh\",\"claim\":{\"op\":{\"id\":\"a\","
             "\"kind\":\"serving\",\"phase\":\"assigned\",\"exec\":\"b\"}}}\n"
             "%s{\"host\":\"x1\",\"claim\":{\"bogus\":1}}\n",
             out);
    write_text(d, wrong, more);
    status = ctl(d, VIA_STORE, more, sizeof(more), "claim", "import", wrong, NULL);
    claim after;
    DH_CHECK(d,
             status == 1 && strstr(more, "wrong.jsonl:") && strstr(more, "bogus") &&
                 strstr(more, "nothing was written") && !dh_claim_get(d, "fresh", &after),
             "an import with a wrong line: exit %d:\n%s", status, more);

    act_error err = {0};
    DH_CHECK(d, claims_delete(d->store, "other", other.revision, NULL, &err) == 0,
             "deleting other's claim: %s", err.message);
    status = ctl(d, VIA_STORE, more, sizeof(more), "claim", "import", exported, NULL);
    DH_CHECK(d, status == 0 && strstr(more, "other written") && strstr(more, "demo unchanged"),
             "activatorctl --store claim import: exit %d:\n%s", status, more);
    char *was = claim_to_json(&other), *now = NULL;
    DH_CHECK(d, dh_claim_get(d, "other", &after), "the import did not put other's claim back");
    now = claim_to_json(&after);
    DH_CHECK(d, strcmp(was, now) == 0 && after.revision > other.revision,
             "other's claim came back as %s (revision %" PRIu64 "), not %s", now, after.revision,
             was);
    free(was);
    free(now);
    DH_CHECK(d, dh_claim_get(d, "demo", &after) && after.revision == demo.revision,
             "the import wrote demo's claim, which it held already");

    status = ctl(d, VIA_DAEMON, more, sizeof(more), "claim", "import", exported, NULL);
    DH_CHECK(d, status == 2 && strstr(more, "--store"),
             "claim import without --store: exit %d:\n%s", status, more);
    status = ctl(d, VIA_STORE, more, sizeof(more), "claim", "export", "extra", NULL);
    DH_CHECK(d, status == 2 && strstr(more, "no argument"),
             "claim export with an argument: exit %d:\n%s", status, more);
    status = ctl(d, VIA_STORE, more, sizeof(more), "claim", "import", "/nonexistent.jsonl", NULL);
    DH_CHECK(d, status == 1 && strstr(more, "cannot open /nonexistent.jsonl"),
             "claim import of a missing file: exit %d:\n%s", status, more);
    /* The same host twice: nothing written, both lines named. */
    snprintf(more, sizeof(more), "%s%s", out, out);
    write_text(d, wrong, more);
    status = ctl(d, VIA_STORE, more, sizeof(more), "claim", "import", wrong, NULL);
    DH_CHECK(d, status == 1 && strstr(more, "is on line") && strstr(more, "nothing"),
             "an import naming a host twice: exit %d:\n%s", status, more);
}

static void test_fleet_commands_through_the_daemon_and_the_store(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    claim elsewhere;
    dh_claim_assigned("other", DH_OTHER_BOX, &elsewhere);
    dh_claim_put(d, &elsewhere);
    dh_start(d, NULL);
    dh_served served = dh_wake(d, "demo");

    fleet_commands(d, VIA_DAEMON, served.generation);
    fleet_commands(d, VIA_STORE, served.generation);
    claim_wait_commands(d, VIA_DAEMON);
    claim_wait_commands(d, VIA_STORE);
    claim_waits_hear_a_write(d);
    assign_needs_a_live_box(d, VIA_DAEMON, "box-8");
    assign_needs_a_live_box(d, VIA_STORE, "box-9");
    if (d->store_kind != DH_STORE_DIR)
        edits_ask_no_lease_per_box(d);
    claims_export_and_import(d);

    /* --store runs the fleet ops only: a wake needs a daemon. */
    char out[4096];
    int status = ctl(d, VIA_STORE, out, sizeof(out), "wake", "demo", NULL);
    DH_CHECK(d, status == 2 && strstr(out, "needs a daemon"),
             "activatorctl --store wake: exit %d:\n%s", status, out);

    /* None of it disturbed the host this box serves. */
    json_object *now = dh_status(d, "demo");
    DH_CHECK(d, strcmp(dh_json_str(now, "state"), "serving") == 0 &&
                    dh_json_u64(now, "generation") == served.generation,
             "demo is %s (generation %" PRIu64 ") after the fleet commands",
             dh_json_str(now, "state"), dh_json_u64(now, "generation"));
    json_object_put(now);
    dh_stop_and_check_clean(d);
}

/* ---- an edit between its read and its write ------------------------------- */

static void touch(dh_daemon *d, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    DH_CHECK(d, fd >= 0, "cannot create %s: %s", path, strerror(errno));
    close(fd);
}

/* How many times text is in the daemon's log. */
/* Waits up to timeout_ms for text to be in the daemon's log count times. */
static bool log_count_wait(dh_daemon *d, const char *text, size_t count, int timeout_ms)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    while (dh_log_count(d, text) < count) {
        if (act_now_usec() >= deadline)
            return false;
        sleep_ms(20);
    }
    return true;
}

static bool path_wait(const char *path, int timeout_ms)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    while (access(path, F_OK) != 0) {
        if (act_now_usec() >= deadline)
            return false;
        sleep_ms(20);
    }
    return true;
}

/* demo's claim pinned on version (as a swap leaves it), its digest digit. */
static uint64_t pin_demo(dh_daemon *d, const char *version, char digit)
{
    claim c;
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    c.has_pin = true;
    c.pin = (claim_pin){0};
    snprintf(c.pin.version, sizeof(c.pin.version), "%s", version);
    memset(c.pin.digest, digit, 64);
    return dh_claim_put(d, &c);
}

/* activatorctl --store --json COMMAND... on a thread of its own, held
 * before its write (ACTIVATOR_TEST_HOLD=fleet_cas:hold, set around the
 * thread's start). */
typedef struct ctl_run {
    dh_daemon *d;
    const char *command;
    char *argv[16];
    pthread_t thread;
    int status;
    char out[16384];
} ctl_run;

static void *ctl_thread(void *arg)
{
    ctl_run *run = arg;
    run->status = dh_run(run->argv, run->out, sizeof(run->out));
    return NULL;
}

static void ctl_start_held(dh_daemon *d, ctl_run *run, const char *hold, const char *command,
                           const char *host, const char *arg)
{
    *run = (ctl_run){.d = d, .command = command};
    size_t n = 0;
    run->argv[n++] = (char *)DH_ACTIVATORCTL;
    run->argv[n++] = (char *)"--no-color";
    run->argv[n++] = (char *)"--store";
    run->argv[n++] = d->store_url;
    if (d->store_kind == DH_STORE_ETCD_TLS) {
        run->argv[n++] = (char *)"--store-ca";
        run->argv[n++] = d->etcd.ca_file;
        run->argv[n++] = (char *)"--store-cert";
        run->argv[n++] = d->etcd.cert_file;
        run->argv[n++] = (char *)"--store-key";
        run->argv[n++] = d->etcd.key_file;
    }
    run->argv[n++] = (char *)"--json";
    run->argv[n++] = (char *)command;
    run->argv[n++] = (char *)host;
    if (arg)
        run->argv[n++] = (char *)arg;
    char env[PATH_MAX + 32];
    snprintf(env, sizeof(env), "fleet_cas:%s", hold);
    setenv("ACTIVATOR_TEST_HOLD", env, 1);
    DH_CHECK(d, pthread_create(&run->thread, NULL, ctl_thread, run) == 0,
             "cannot start activatorctl's thread");
    char held[PATH_MAX + 8];
    snprintf(held, sizeof(held), "%s.held", hold);
    bool reached = path_wait(held, 30000);
    /* Only now: the thread hands environ to activatorctl as it starts it. */
    unsetenv("ACTIVATOR_TEST_HOLD");
    DH_CHECK(d, reached, "activatorctl --store %s %s never reached its write", command, host);
}

/* What a test checks of a reply, taken out of it before it is put: a failed
 * check leaves the test at once, and must leave no reply to LeakSanitizer. */
typedef struct reply_seen {
    bool ok;
    char code[64];
    uint64_t revision; /* the result's */
    char text[4096];
} reply_seen;

static reply_seen seen_and_put(json_object *reply)
{
    reply_seen seen = {.ok = dh_reply_ok(reply)};
    snprintf(seen.code, sizeof(seen.code), "%s", dh_reply_code(reply));
    seen.revision = seen.ok ? dh_json_u64(dh_reply_result(reply), "revision") : 0;
    snprintf(seen.text, sizeof(seen.text), "%s", json_object_to_json_string(reply));
    json_object_put(reply);
    return seen;
}

static reply_seen ctl_finish(ctl_run *run)
{
    pthread_join(run->thread, NULL);
    /* Its reply, after what it said on stderr while it was held. */
    const char *json = strchr(run->out, '{');
    json_object *reply = json ? json_tokener_parse(json) : NULL;
    DH_CHECK(run->d, reply, "activatorctl --store %s: exit %d, no JSON reply:\n%s", run->command,
             run->status, run->out);
    return seen_and_put(reply);
}

/* The daemon's write-back of a park, and an admission's and a publication's,
 * land between an operator's read and write: the edit is written again over
 * them and succeeds; a write that changes what it decided is refused. */
static void test_an_edit_is_written_over_the_daemons_write_back(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, store_kind, NULL);
    dh_add_app_host(d, "demo", NULL, NULL);
    char hold[PATH_MAX], ctl_hold[PATH_MAX];
    dh_hold_path(d, "fleet-go", hold, sizeof(hold));
    dh_start_holding(d, "fleet_cas", hold);
    dh_wake(d, "demo");

    /* unpin through the daemon, held; the park's write-back lands. */
    pin_demo(d, "v1", 'a');
    dh_step("unpin held at its write while demo parks");
    dh_async *unpin = dh_request_start(d, 30000, "{\"v\":1,\"op\":\"unpin\",\"host\":\"demo\"}");
    DH_CHECK(d, log_count_wait(d, "host demo: unpin: point fleet_cas held", 1, 10000),
             "the unpin never reached its write");
    dh_park(d, "demo");
    claim parked;
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "parked", 10000, &parked) && parked.has_pin,
             "demo's claim did not say parked with its pin (phase %s)", parked.op.phase);
    touch(d, hold);
    reply_seen reply = seen_and_put(dh_request_finish(d, unpin));
    claim c;
    DH_CHECK(d, reply.ok && reply.revision > parked.revision,
             "unpin over the park's write-back (revision %" PRIu64 "): %s", parked.revision,
             reply.text);
    DH_CHECK(d, dh_claim_get(d, "demo", &c) && !c.has_pin && strcmp(c.op.phase, "parked") == 0,
             "after the unpin: pin %s, phase %s", c.has_pin ? c.pin.version : "none",
             c.op.phase);
    DH_CHECK(d, dh_log_wait(d, "unpin lost its compare-and-swap", 0),
             "the unpin did not say it wrote again over the park");

    /* hold through the daemon, held; a wake admits and publishes. */
    unlink(hold);
    dh_step("hold held at its write while demo wakes");
    dh_async *held = dh_request_start(d, 30000,
                                      "{\"v\":1,\"op\":\"hold\",\"host\":\"demo\",\"version\":\"v1\"}");
    DH_CHECK(d, log_count_wait(d, "host demo: hold: point fleet_cas held", 1, 10000),
             "the hold never reached its write");
    dh_wake(d, "demo");
    claim serving;
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "serving", 10000, &serving),
             "demo's claim did not say serving (phase %s)", serving.op.phase);
    touch(d, hold);
    reply = seen_and_put(dh_request_finish(d, held));
    DH_CHECK(d, reply.ok && dh_claim_get(d, "demo", &c) && strcmp(c.held, "v1") == 0 &&
                    strcmp(c.op.phase, "serving") == 0 &&
                    c.holder.session == serving.holder.session,
             "hold over the wake's write-backs: held \"%s\", phase %s: %s", c.held, c.op.phase,
             reply.text);

    /* A write that changes the decision: the pin unpin read is replaced. */
    unlink(hold);
    pin_demo(d, "v1", 'a');
    dh_step("unpin held at its write while another pin is written");
    unpin = dh_request_start(d, 30000, "{\"v\":1,\"op\":\"unpin\",\"host\":\"demo\"}");
    DH_CHECK(d, log_count_wait(d, "host demo: unpin: point fleet_cas held", 2, 10000),
             "the second unpin never reached its write");
    pin_demo(d, "v2", 'b');
    touch(d, hold);
    reply = seen_and_put(dh_request_finish(d, unpin));
    DH_CHECK(d, !reply.ok && strcmp(reply.code, "claim_changed") == 0 &&
                    strstr(reply.text, "its pin is now v2 (it was v1)"),
             "unpin of v1 over a pin of v2: %s", reply.text);
    DH_CHECK(d, dh_claim_get(d, "demo", &c) && c.has_pin && strcmp(c.pin.version, "v2") == 0,
             "the refused unpin changed the pin: %s", c.has_pin ? c.pin.version : "none");

    /* --store: unpin over a park's write-back, then a hold over another's. */
    dh_hold_path(d, "ctl-go", ctl_hold, sizeof(ctl_hold));
    ctl_run run;
    dh_step("activatorctl --store unpin held at its write while demo parks");
    ctl_start_held(d, &run, ctl_hold, "unpin", "demo", NULL);
    dh_park(d, "demo");
    DH_CHECK(d, dh_claim_wait_phase(d, "demo", "parked", 10000, &parked) && parked.has_pin,
             "demo's claim did not say parked with its pin (phase %s)", parked.op.phase);
    touch(d, ctl_hold);
    reply = ctl_finish(&run);
    DH_CHECK(d, run.status == 0 && reply.ok && dh_claim_get(d, "demo", &c) && !c.has_pin &&
                    strcmp(c.op.phase, "parked") == 0 && c.revision > parked.revision,
             "activatorctl --store unpin over the park's write-back: exit %d, pin %s:\n%s",
             run.status, c.has_pin ? c.pin.version : "none", run.out);

    unlink(ctl_hold);
    char ctl_held[PATH_MAX + 8];
    snprintf(ctl_held, sizeof(ctl_held), "%s.held", ctl_hold);
    unlink(ctl_held);
    dh_step("activatorctl --store hold held at its write while another hold is written");
    ctl_start_held(d, &run, ctl_hold, "hold", "demo", "v2");
    DH_CHECK(d, dh_claim_get(d, "demo", &c), "demo has no claim");
    snprintf(c.held, sizeof(c.held), "v3");
    dh_claim_put(d, &c);
    touch(d, ctl_hold);
    reply = ctl_finish(&run);
    DH_CHECK(d, run.status == 1 && !reply.ok && strcmp(reply.code, "claim_changed") == 0 &&
                    strstr(run.out, "its hold is now v3 (it was v1)"),
             "activatorctl --store hold v2 over a hold of v3: exit %d:\n%s", run.status, run.out);
    DH_CHECK(d, dh_claim_get(d, "demo", &c) && strcmp(c.held, "v3") == 0,
             "the refused hold changed the hold to %s", c.held);
    dh_stop_and_check_clean(d);
}

/* ---- two boxes on one store ---------------------------------------------- */

/* Waits up to timeout_ms for the box that held demo to write its release
 * (or for to_box to hold it already: its watch wakes demo on the release).
 * The old box parks before its release reaches the store, and a wake on
 * to_box in between is refused with release_pending, as it should be. */
static bool handed_over_wait(dh_daemon *d, const char *to_box, int timeout_ms)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    for (;;) {
        claim c;
        if (dh_claim_get(d, "demo", &c) &&
            (c.holder.released_usec || strcmp(c.holder.box, to_box) == 0))
            return true;
        if (act_now_usec() >= deadline)
            return false;
        sleep_ms(20);
    }
}

/* from served host demo as generation; assigning it to to_box through how
 * makes from retire it and refuse it, and to serve it as the next one. */
static dh_served move_by_assignment(dh_daemon *from, dh_served served, dh_daemon *to,
                                    const char *to_box, via how)
{
    char out[16384];
    int status = ctl(how == VIA_DAEMON ? from : to, how, out, sizeof(out), "claim", "assign",
                     "demo", to_box, NULL);
    DH_CHECK(from, status == 0, "%s claim assign demo %s: exit %d:\n%s", via_name(how), to_box,
             status, out);
    DH_CHECK(from, dh_wait_state(from, "demo", "parked", 15000),
             "the old box did not retire demo after it was assigned to %s", to_box);
    DH_CHECK(from, dh_leaf_count(from, "demo") == 0, "the old box keeps %zu leaves of demo",
             dh_leaf_count(from, "demo"));
    DH_CHECK(from, dh_pid_gone(served.pid), "generation %" PRIu64 " (pid %d) still runs",
             served.generation, (int)served.pid);
    json_object *reply = dh_wake_reply(from, "demo", 15000);
    DH_CHECK(from, !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "not_owner") == 0,
             "a wake on the old box: %s", json_object_to_json_string(reply));
    json_object_put(reply);

    DH_CHECK(from, handed_over_wait(from, to_box, 15000),
             "the old box did not release demo's claim to %s", to_box);
    dh_served next = dh_wake(to, "demo");
    claim c;
    DH_CHECK(to, dh_claim_get(to, "demo", &c) && strcmp(c.holder.box, to_box) == 0 &&
                     strcmp(claim_executor(&c), to_box) == 0 &&
                     c.holder.generation == served.generation + 1 &&
                     next.generation == c.holder.generation,
             "after the move: holder %s, executor %s, generation %" PRIu64 " (served %" PRIu64
             ", was %" PRIu64 ")",
             c.holder.box, claim_executor(&c), c.holder.generation, next.generation,
             served.generation);
    DH_CHECK(from, dh_leaf_count(from, "demo") == 0,
             "the old box started demo again while the new one serves it");
    return next;
}

static void test_assign_moves_a_served_host_to_another_box(void **state)
{
    dh_two_boxes *boxes = *state;
    dh_daemon *first = &boxes->first, *second = &boxes->second;
    dh_setup(first, store_kind, NULL);
    dh_add_app_host(first, "demo", NULL, NULL);
    dh_setup_beside(second, first, SECOND_BOX, NULL);
    dh_add_app_host(second, "demo", NULL, NULL);
    claim assigned;
    dh_claim_assigned("demo", DH_BOX, &assigned);
    dh_claim_put(first, &assigned);
    dh_start(first, NULL);
    dh_start(second, NULL);

    dh_served served = dh_wake(first, "demo");
    json_object *reply = dh_wake_reply(second, "demo", 15000);
    DH_CHECK(second, !dh_reply_ok(reply) && strcmp(dh_reply_code(reply), "not_owner") == 0,
             "the second box woke a host assigned to the first: %s",
             json_object_to_json_string(reply));
    json_object_put(reply);

    /* Through the serving box's own daemon, then back straight in the store. */
    served = move_by_assignment(first, served, second, SECOND_BOX, VIA_DAEMON);
    move_by_assignment(second, served, first, DH_BOX, VIA_STORE);

    dh_stop_and_check_clean(second);
    dh_stop_and_check_clean(first);
}

int main(int argc, char **argv)
{
    store_kind = dh_store_kind_from(argc > 1 ? argv[1] : "dir");
    char suite[64];
    snprintf(suite, sizeof(suite), "daemon-fleet-%s", argc > 1 ? argv[1] : "dir");
    int r = dh_check_can_run(suite, store_kind);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_box_record_lives_with_the_daemon),
        DH_TEST(test_a_lost_lease_is_put_again),
        DH_TEST(test_a_handover_keeps_the_box_record),
        DH_TEST(test_fleet_commands_through_the_daemon_and_the_store),
        DH_TEST(test_the_index_forgets_hosts_that_left_or_were_deleted),
        DH_TEST(test_an_edit_is_written_over_the_daemons_write_back),
        DH_TEST_TWO_BOXES(test_assign_moves_a_served_host_to_another_box),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
