/* The daemon's events (NNG SUB): received, parsed, kept in order, and
 * searched by the tests. */
#include "harness.h"
#include "harness_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/protocol/pubsub0/sub.h>

static void copy_json_string(json_object *obj, const char *key, char *out, size_t size)
{
    snprintf(out, size, "%s", dh_json_str(obj, key));
}

static void record_event(dh_daemon *d, const char *data, size_t len)
{
    const char *space = memchr(data, ' ', len);
    DH_CHECK(d, space, "an event without a space between topic and JSON: %.*s", (int)len, data);
    char *json_text = strndup(space + 1, len - (size_t)(space + 1 - data));
    json_object *obj = json_tokener_parse(json_text);
    DH_CHECK(d, obj, "an event whose JSON does not parse: %.*s", (int)len, data);
    free(json_text);
    if (d->n_events == d->cap_events) {
        d->cap_events = d->cap_events ? d->cap_events * 2 : 64;
        d->events = realloc(d->events, d->cap_events * sizeof(*d->events));
        assert_non_null(d->events);
    }
    dh_event *event = &d->events[d->n_events++];
    memset(event, 0, sizeof(*event));
    event->seq = dh_json_u64(obj, "seq");
    event->time_usec = dh_json_u64(obj, "time_usec");
    event->generation = dh_json_u64(obj, "generation");
    event->pid = (int64_t)dh_json_u64(obj, "pid");
    copy_json_string(obj, "event", event->name, sizeof(event->name));
    copy_json_string(obj, "host", event->host, sizeof(event->host));
    copy_json_string(obj, "box", event->box, sizeof(event->box));
    copy_json_string(obj, "version", event->version, sizeof(event->version));
    copy_json_string(obj, "reason", event->reason, sizeof(event->reason));
    /* The topic must say the same as the body: host.<host>.<event>. */
    char topic[160];
    snprintf(topic, sizeof(topic), "host.%s.%s", event->host, event->name);
    DH_CHECK(d, strlen(topic) == (size_t)(space - data) && memcmp(topic, data, strlen(topic)) == 0,
             "event topic %.*s does not match its body %s", (int)(space - data), data,
             json_object_to_json_string(obj));
    json_object_put(obj);
}

void dh_events_pump(dh_daemon *d, int wait_ms)
{
    DH_CHECK(d, d->sub_open, "the event subscriber is not connected");
    uint64_t deadline = dh_now_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
    bool got_one = false;
    for (;;) {
        nng_msg *msg = NULL;
        int rv = nng_recvmsg(d->sub, &msg, NNG_FLAG_NONBLOCK);
        if (rv == 0) {
            record_event(d, nng_msg_body(msg), nng_msg_len(msg));
            nng_msg_free(msg);
            got_one = true;
            continue;
        }
        DH_CHECK(d, rv == NNG_EAGAIN, "receiving events: %s", nng_strerror(rv));
        if (got_one || dh_now_ms() >= deadline)
            return;
        dh_sleep_ms(5);
    }
}

void dh_events_mark(dh_daemon *d)
{
    dh_events_pump(d, 0);
    d->mark = d->n_events ? d->events[d->n_events - 1].seq : 0;
}

static bool find_event(dh_daemon *d, const char *host, const char *name, dh_event *out)
{
    for (size_t i = 0; i < d->n_events; i++) {
        const dh_event *event = &d->events[i];
        if (event->seq > d->mark && strcmp(event->host, host) == 0 &&
            strcmp(event->name, name) == 0) {
            if (out)
                *out = *event;
            return true;
        }
    }
    return false;
}

bool dh_event_wait(dh_daemon *d, const char *host, const char *name, int timeout_ms, dh_event *out)
{
    uint64_t deadline = dh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (find_event(d, host, name, out))
            return true;
        uint64_t now = dh_now_ms();
        if (now >= deadline)
            return false;
        dh_events_pump(d, (int)(deadline - now < 50 ? deadline - now : 50));
    }
}

size_t dh_events_count(dh_daemon *d, const char *host, const char *name)
{
    dh_events_pump(d, 0);
    size_t count = 0;
    for (size_t i = 0; i < d->n_events; i++)
        count += d->events[i].seq > d->mark && strcmp(d->events[i].host, host) == 0 &&
                 strcmp(d->events[i].name, name) == 0;
    return count;
}

/* PUB learns of a subscriber asynchronously, so the harness makes the
 * daemon publish (a claim.changed of the beacon host, which names another
 * box and so is never woken) until one such event arrives. */
void dh_events_subscribe(dh_daemon *d)
{
    int rv = nng_sub0_open(&d->sub);
    DH_CHECK(d, rv == 0, "nng_sub0_open: %s", nng_strerror(rv));
    d->sub_open = true;
    nng_socket_set(d->sub, NNG_OPT_SUB_SUBSCRIBE, "", 0);
    nng_socket_set_int(d->sub, NNG_OPT_RECVBUF, 8192);
    rv = nng_dial(d->sub, d->events_url, NULL, 0);
    DH_CHECK(d, rv == 0, "dial %s: %s", d->events_url, nng_strerror(rv));
    claim beacon;
    dh_claim_assigned(DH_BEACON_HOST, DH_OTHER_BOX, &beacon);
    for (int i = 0; i < 100; i++) {
        dh_claim_put(d, &beacon);
        if (dh_event_wait(d, DH_BEACON_HOST, "claim.changed", 100, NULL)) {
            dh_events_mark(d);
            return;
        }
    }
    dh_dump_log(d);
    fail_msg("the event subscriber never received the beacon's claim.changed");
}
