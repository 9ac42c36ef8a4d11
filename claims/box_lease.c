/* A box's record, kept alive (box_lease.h). */
#include "claims/box_lease.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

/* See schedule(). */
#define RENEWAL_ACCURACY_USEC 1000
/* The first retry after a failed renewal or put (schedule). */
#define RETRY_FIRST_USEC (250 * 1000ull)

struct claims_box_lease {
    claim_store *store;
    sd_event *loop;
    claims_box record;      /* as last stored: the lease to renew and to revoke */
    bool have_lease;        /* the store granted record's lease */
    bool in_flight;         /* a call is out; its answer schedules what follows */
    bool troubled;          /* the last call failed; said once until one succeeds */
    uint64_t retry_usec;    /* the wait after the next failed call (see schedule) */
    sd_event_source *timer; /* the next renewal */
    bool ending;            /* the owner asked for the record to go */
    bool stopped;           /* handed over or abandoned: no more calls */
    claims_box_lease_ended_fn ended;
    void *ended_userdata;
    /* CLOCK_MONOTONIC: when the call in flight was sent, and when the last
     * call the store acknowledged (a put or a renewal) was. The store's
     * lease runs at least lease_ttl_usec from the latter. */
    uint64_t sent_usec;
    uint64_t acked_sent_usec;
    claims_box_lease_fn observer;
    void *observer_userdata;
};

static void tell_observer(claims_box_lease *lease, bool lost)
{
    if (lease->observer)
        lease->observer(lease, lost, lease->observer_userdata);
}

static void renew(claims_box_lease *lease);

static void finish_end(claims_box_lease *lease)
{
    claims_box_lease_ended_fn ended = lease->ended;
    lease->ended = NULL;
    if (ended)
        ended(lease->ended_userdata);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    renew(userdata);
    return 0;
}

/* A third of the lease, less up to a fifth of that, drawn anew each time:
 * two renewals may fail in a row before it lapses, and boxes that started
 * together (a fleet restarted at once) do not keep renewing in step. The
 * timer's accuracy is a millisecond: sd-event would otherwise move every
 * renewal of the loop onto one shared instant of its 250 ms grid. */
static void schedule(claims_box_lease *lease)
{
    uint64_t third = lease->record.lease_ttl_usec / 3;
    uint64_t period = third - act_draw_below(third / 5 + 1);
    /* After a failed call the next comes sooner, from 250 ms doubling up to
     * the period: a store that answers again (a partition healed, etcd
     * back) is renewed within a moment, before the box's fence
     * (acked + TTL - M) can fall due on a lease that was never in danger,
     * while a store that stays down is not asked more than a few times a
     * second. */
    if (lease->troubled) {
        if (!lease->retry_usec)
            lease->retry_usec = RETRY_FIRST_USEC;
        if (lease->retry_usec < period)
            period = lease->retry_usec;
        lease->retry_usec *= 2;
    } else {
        lease->retry_usec = 0;
    }
    int r = lease->timer
                ? sd_event_source_set_time_relative(lease->timer, period)
                : sd_event_add_time_relative(lease->loop, &lease->timer, CLOCK_MONOTONIC, period,
                                             RENEWAL_ACCURACY_USEC, on_timer, lease);
    if (r >= 0)
        r = sd_event_source_set_enabled(lease->timer, SD_EVENT_ONESHOT);
    if (r < 0)
        act_log(LOG_ERR,
                "box lease: cannot arm the renewal timer (%s); box %s will look dead "
                "to the fleet once its lease runs out",
                strerror(-r), lease->record.box);
}

static void call_failed(claims_box_lease *lease, const char *what, const act_error *err)
{
    if (!lease->troubled)
        act_log(LOG_WARNING,
                "box lease: cannot %s the record of box %s: %s; retrying from %llu ms on, "
                "up to every %llu ms",
                what, lease->record.box, err ? err->message : "unknown error",
                (unsigned long long)RETRY_FIRST_USEC / 1000,
                (unsigned long long)lease->record.lease_ttl_usec / 3000);
    lease->troubled = true;
}

static void on_removed(claim_store *store, int result, const claims_box *record,
                       const act_error *err, void *userdata)
{
    claims_box_lease *lease = userdata;
    lease->in_flight = false;
    lease->have_lease = false;
    if (result < 0)
        act_log(LOG_WARNING,
                "box lease: cannot remove the record of box %s: %s; it lapses "
                "with its lease",
                lease->record.box, err ? err->message : "unknown error");
    else
        act_log(LOG_INFO, "box lease: removed the record of box %s", lease->record.box);
    finish_end(lease);
}

/* The end the owner asked for, once no call is out. */
static void remove_record(claims_box_lease *lease)
{
    if (!lease->have_lease) {
        finish_end(lease);
        return;
    }
    act_error err = {0};
    if (claims_box_remove_async(lease->store, &lease->record, on_removed, lease, &err) < 0) {
        act_log(LOG_WARNING, "box lease: cannot remove the record of box %s: %s", lease->record.box,
                err.message);
        finish_end(lease);
        return;
    }
    lease->in_flight = true;
}

static void on_renewed(claim_store *store, int result, const claims_box *record,
                       const act_error *err, void *userdata)
{
    claims_box_lease *lease = userdata;
    bool was_put = !lease->have_lease;
    lease->in_flight = false;
    if (result >= 0) {
        lease->record = *record;
        lease->have_lease = true;
        lease->acked_sent_usec = lease->sent_usec;
        if (lease->troubled)
            act_log(LOG_INFO, "box lease: the record of box %s is renewed again",
                    lease->record.box);
        lease->troubled = false;
    } else if (result == CLAIMS_LEASE_LOST && !was_put) {
        act_log(LOG_WARNING, "box lease lost: %s; putting the record of box %s again",
                err ? err->message : "the store no longer has it", lease->record.box);
        lease->have_lease = false;
        lease->troubled = false;
    } else {
        call_failed(lease, was_put ? "put" : "renew", err);
    }
    if (lease->stopped)
        return;
    if (lease->ending) {
        remove_record(lease);
        return;
    }
    /* A lost lease is put back at once: the box looks dead until then. */
    if (result == CLAIMS_LEASE_LOST && !was_put)
        renew(lease);
    else
        schedule(lease);
    if (result >= 0 || result == CLAIMS_LEASE_LOST)
        tell_observer(lease, result == CLAIMS_LEASE_LOST);
}

static void renew(claims_box_lease *lease)
{
    if (lease->in_flight || lease->ending || lease->stopped)
        return;
    act_error err = {0};
    lease->sent_usec = act_now_usec();
    int r = lease->have_lease
                ? claims_box_keepalive_async(lease->store, &lease->record, on_renewed, lease, &err)
                : claims_box_put_async(lease->store, &lease->record, on_renewed, lease, &err);
    if (r < 0) {
        call_failed(lease, lease->have_lease ? "renew" : "put", &err);
        schedule(lease);
        return;
    }
    lease->in_flight = true;
}

static int lease_new(claim_store *store, sd_event *loop, const claims_box *record,
                     claims_box_lease **out, act_error *err)
{
    int r = claims_box_validate(record, err);
    if (r < 0)
        return r;
    claims_box_lease *lease = calloc(1, sizeof(*lease));
    if (!lease)
        return act_error_set(err, ENOMEM, "box lease: out of memory");
    lease->store = store;
    lease->loop = loop;
    lease->record = *record;
    *out = lease;
    return 0;
}

int claims_box_lease_start(claim_store *store, sd_event *loop, const claims_box *record,
                           claims_box_lease **out, act_error *err)
{
    claims_box_lease *lease = NULL;
    int r = lease_new(store, loop, record, &lease, err);
    if (r < 0)
        return r;
    /* The loop does not run yet, so nothing waits on this call. */
    act_error why = {0};
    claims_box stored;
    uint64_t sent = act_now_usec();
    if (claims_box_put(store, record, &stored, &why) == 0) {
        lease->record = stored;
        lease->have_lease = true;
        lease->acked_sent_usec = sent;
    } else {
        call_failed(lease, "put", &why);
    }
    schedule(lease);
    *out = lease;
    return 0;
}

int claims_box_lease_start_async(claim_store *store, sd_event *loop, const claims_box *record,
                                 claims_box_lease **out, act_error *err)
{
    int r = lease_new(store, loop, record, out, err);
    if (r < 0)
        return r;
    renew(*out);
    return 0;
}

void claims_box_lease_end(claims_box_lease *lease, claims_box_lease_ended_fn ended, void *userdata)
{
    if (lease->ending)
        return;
    lease->ending = true;
    lease->ended = ended;
    lease->ended_userdata = userdata;
    lease->timer = sd_event_source_disable_unref(lease->timer);
    if (!lease->in_flight)
        remove_record(lease);
}

void claims_box_lease_hand_over(claims_box_lease *lease)
{
    if (lease->ending || lease->stopped)
        return;
    lease->stopped = true;
    lease->timer = sd_event_source_disable_unref(lease->timer);
    /* A store that failed the last call would most likely hold the
     * handover up for its whole timeout: the record then lapses, or the
     * next daemon puts it first. */
    if (!lease->have_lease || lease->troubled) {
        act_log(LOG_NOTICE,
                "handover: the record of box %s stays as it is for the next daemon "
                "to put again",
                lease->record.box);
        return;
    }
    act_error err = {0};
    claims_box renewed;
    if (claims_box_keepalive(lease->store, &lease->record, &renewed, &err) < 0) {
        act_log(LOG_WARNING,
                "handover: cannot renew the record of box %s: %s; it stays for "
                "the next daemon to put again",
                lease->record.box, err.message);
        return;
    }
    lease->record = renewed;
    act_log(LOG_INFO,
            "handover: the record of box %s stays, renewed for %llu ms, for the next "
            "daemon to take over",
            lease->record.box, (unsigned long long)lease->record.lease_ttl_usec / 1000);
}

void claims_box_lease_abandon(claims_box_lease *lease)
{
    lease->stopped = true;
    lease->timer = sd_event_source_disable_unref(lease->timer);
}

void claims_box_lease_free(claims_box_lease *lease)
{
    if (!lease)
        return;
    sd_event_source_disable_unref(lease->timer);
    free(lease);
}

void claims_box_lease_observe(claims_box_lease *lease, claims_box_lease_fn fn, void *userdata)
{
    lease->observer = fn;
    lease->observer_userdata = userdata;
}

uint64_t claims_box_lease_acked_sent(const claims_box_lease *lease)
{
    return lease && lease->have_lease ? lease->acked_sent_usec : 0;
}

uint64_t claims_box_lease_ttl(const claims_box_lease *lease)
{
    return lease ? lease->record.lease_ttl_usec : 0;
}

uint64_t claims_box_lease_margin(uint64_t ttl_usec)
{
    const uint64_t floor_usec = 500 * 1000;
    return ttl_usec / 5 < floor_usec ? floor_usec : ttl_usec / 5;
}
