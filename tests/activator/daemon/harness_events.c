/* The daemon's events (NNG SUB): received, parsed, kept in order, and
 * searched by the tests. */
#include "harness.h"
#include "harness_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void record_event(dh_daemon *d, const dh_event *event)
{
    if (d->n_events == d->cap_events) {
        d->cap_events = d->cap_events ? d->cap_events * 2 : 64;
        d->events = realloc(d->events, d->cap_events * sizeof(*d->events));
        assert_non_null(d->events);
    }
    d->events[d->n_events++] = *event;
}

void dh_events_pump(dh_daemon *d, int wait_ms)
{
    /* Waits for the first event only; what follows it is taken as it is. */
    int wait = wait_ms > 0 ? wait_ms : 0;
    for (;;) {
        dh_event event;
        act_error err = {0};
        int r = dd_event_recv(&d->drv, wait, &event, &err);
        DH_CHECK(d, r >= 0, "%s", err.message);
        if (r == 0)
            return;
        record_event(d, &event);
        wait = 0;
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
    dh_waiting_for("event %s of host %s from box %s (up to %d ms)", name, host, d->box, timeout_ms);
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
 * daemon publish (a claim.changed of the beacon host, which another box
 * executes, so it is never woken here) until one such event arrives. The subscriber
 * is dd_start's: a second one in its place would close the first while its
 * connection is still being set up, where NNG 1.5.2's close can hang. */
void dh_events_subscribe(dh_daemon *d)
{
    dh_waiting_for("box %s's event subscriber to receive the beacon's claim.changed", d->box);
    claim beacon;
    /* Assigned to a box no daemon is, so that no box of a fleet wakes it. */
    dh_claim_beacon(d, DH_BEACON_BOX, &beacon);
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
