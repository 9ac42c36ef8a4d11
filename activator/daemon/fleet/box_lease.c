/* This box's record in the claim store (claims.h: box records), so the
 * fleet can tell a live box from a dead one: put at start-up, renewed every
 * third of BoxLeaseSec=, put again when the store lost the lease (etcd
 * restarted without its data, or the store was out of reach for longer
 * than the lease), and removed when a clean stop has retired everything.
 * A handover (AD_HANDOVER_SIGNAL) never removes it: the box stays alive
 * under the next daemon, which puts its own record (its incarnation, under
 * a new lease) before READY=1; the record is renewed once more instead, so
 * it does not lapse while the next daemon starts.
 * Once the loop runs every call is asynchronous; at most one is in flight. */
#include "activator/daemon/fleet/box_lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

#ifndef ACTIVATOR_VERSION
#define ACTIVATOR_VERSION "unknown"
#endif

struct ad_box_lease {
    ad_daemon *daemon;
    claims_box record;      /* as last stored: the lease to renew and to revoke */
    bool have_lease;        /* the store granted record's lease */
    bool in_flight;         /* a call is out; its answer schedules what follows */
    bool troubled;          /* the last call failed; said once until one succeeds */
    sd_event_source *timer; /* the next renewal */
    bool ending;            /* a clean stop asked for the record to go */
    bool handed_over;       /* a handover: the record stays for the next daemon */
    ad_box_lease_ended_fn ended;
};

static void renew(ad_box_lease *lease);

static void finish_end(ad_box_lease *lease)
{
    ad_box_lease_ended_fn ended = lease->ended;
    lease->ended = NULL;
    if (ended)
        ended(lease->daemon);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    renew(userdata);
    return 0;
}

/* A third of the lease: two renewals may fail in a row before it lapses. */
static void schedule(ad_box_lease *lease)
{
    uint64_t period = lease->daemon->config.box_lease_usec / 3;
    int r = lease->timer ? sd_event_source_set_time_relative(lease->timer, period)
                         : sd_event_add_time_relative(lease->daemon->loop, &lease->timer,
                                                      CLOCK_MONOTONIC, period, 0, on_timer, lease);
    if (r >= 0)
        r = sd_event_source_set_enabled(lease->timer, SD_EVENT_ONESHOT);
    if (r < 0)
        act_log(LOG_ERR,
                "box lease: cannot arm the renewal timer (%s); box %s will look dead "
                "to the fleet once its lease runs out",
                strerror(-r), lease->daemon->config.box);
}

static void call_failed(ad_box_lease *lease, const char *what, const act_error *err)
{
    if (!lease->troubled)
        act_log(LOG_WARNING,
                "box lease: cannot %s the record of box %s: %s; retrying every "
                "%llu ms",
                what, lease->daemon->config.box, err ? err->message : "unknown error",
                (unsigned long long)lease->daemon->config.box_lease_usec / 3000);
    lease->troubled = true;
}

static void on_removed(claim_store *store, int result, const claims_box *record,
                       const act_error *err, void *userdata)
{
    ad_box_lease *lease = userdata;
    lease->in_flight = false;
    lease->have_lease = false;
    if (result < 0)
        act_log(LOG_WARNING,
                "box lease: cannot remove the record of box %s: %s; it lapses "
                "with its lease",
                lease->daemon->config.box, err ? err->message : "unknown error");
    else
        act_log(LOG_INFO, "box lease: removed the record of box %s", lease->daemon->config.box);
    finish_end(lease);
}

/* The end a stop asked for, once no call is out. */
static void remove_record(ad_box_lease *lease)
{
    if (!lease->have_lease) {
        finish_end(lease);
        return;
    }
    act_error err = {0};
    if (claims_box_remove_async(lease->daemon->store, &lease->record, on_removed, lease, &err) <
        0) {
        act_log(LOG_WARNING, "box lease: cannot remove the record of box %s: %s",
                lease->daemon->config.box, err.message);
        finish_end(lease);
        return;
    }
    lease->in_flight = true;
}

static void on_renewed(claim_store *store, int result, const claims_box *record,
                       const act_error *err, void *userdata)
{
    ad_box_lease *lease = userdata;
    bool was_put = !lease->have_lease;
    lease->in_flight = false;
    if (result >= 0) {
        lease->record = *record;
        lease->have_lease = true;
        if (lease->troubled)
            act_log(LOG_INFO, "box lease: the record of box %s is renewed again",
                    lease->daemon->config.box);
        lease->troubled = false;
    } else if (result == CLAIMS_LEASE_LOST && !was_put) {
        act_log(LOG_WARNING, "box lease lost: %s; putting the record of box %s again",
                err ? err->message : "the store no longer has it", lease->daemon->config.box);
        lease->have_lease = false;
        lease->troubled = false;
    } else {
        call_failed(lease, was_put ? "put" : "renew", err);
    }
    if (lease->handed_over)
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
}

static void renew(ad_box_lease *lease)
{
    if (lease->in_flight || lease->ending || lease->handed_over)
        return;
    act_error err = {0};
    claim_store *store = lease->daemon->store;
    int r = lease->have_lease
                ? claims_box_keepalive_async(store, &lease->record, on_renewed, lease, &err)
                : claims_box_put_async(store, &lease->record, on_renewed, lease, &err);
    if (r < 0) {
        call_failed(lease, lease->have_lease ? "renew" : "put", &err);
        schedule(lease);
        return;
    }
    lease->in_flight = true;
}

/* The URL other machines reach us on, or "" when only this box can. */
static void remote_url(char *out, size_t size, const char *url)
{
    if (url && strncmp(url, "ipc://", 6) != 0 && strlen(url) < size)
        snprintf(out, size, "%s", url);
    else
        out[0] = '\0';
}

int ad_box_lease_start(ad_daemon *daemon, act_error *err)
{
    ad_box_lease *lease = calloc(1, sizeof(*lease));
    if (!lease)
        return act_error_set(err, ENOMEM, "box lease: out of memory");
    lease->daemon = daemon;
    claims_box *record = &lease->record;
    snprintf(record->box, sizeof(record->box), "%s", daemon->config.box);
    snprintf(record->incarnation, sizeof(record->incarnation), "%s", daemon->incarnation);
    snprintf(record->version, sizeof(record->version), "%s", ACTIVATOR_VERSION);
    record->started_usec = act_wallclock_usec();
    record->lease_ttl_usec = daemon->config.box_lease_usec;
    remote_url(record->control_url, sizeof(record->control_url), daemon->config.control_listen);
    remote_url(record->events_url, sizeof(record->events_url), daemon->config.events);
    int r = claims_box_validate(record, err);
    if (r < 0) {
        free(lease);
        return r;
    }
    daemon->box_lease = lease;
    /* Before READY=1, as the store's first answer is: a box that says it is
     * ready is one the fleet sees alive and may assign hosts to. The loop
     * does not run yet, so nothing waits on this call. */
    act_error why = {0};
    claims_box stored;
    if (claims_box_put(daemon->store, record, &stored, &why) == 0) {
        lease->record = stored;
        lease->have_lease = true;
    } else {
        call_failed(lease, "put", &why);
    }
    schedule(lease);
    return 0;
}

void ad_box_lease_end(ad_daemon *daemon, ad_box_lease_ended_fn ended)
{
    ad_box_lease *lease = daemon->box_lease;
    if (!lease) {
        ended(daemon);
        return;
    }
    if (lease->ending)
        return;
    lease->ending = true;
    lease->ended = ended;
    lease->timer = sd_event_source_disable_unref(lease->timer);
    if (!lease->in_flight)
        remove_record(lease);
}

void ad_box_lease_hand_over(ad_daemon *daemon)
{
    ad_box_lease *lease = daemon->box_lease;
    if (!lease || lease->ending || lease->handed_over)
        return;
    lease->handed_over = true;
    lease->timer = sd_event_source_disable_unref(lease->timer);
    /* A store that failed the last call would most likely hold the
     * handover up for its whole timeout: the record then lapses, or the
     * next daemon puts it first. */
    if (!lease->have_lease || lease->troubled) {
        act_log(LOG_NOTICE,
                "handover: the record of box %s stays as it is for the next daemon "
                "to put again",
                lease->daemon->config.box);
        return;
    }
    act_error err = {0};
    claims_box renewed;
    if (claims_box_keepalive(lease->daemon->store, &lease->record, &renewed, &err) < 0) {
        act_log(LOG_WARNING,
                "handover: cannot renew the record of box %s: %s; it stays for "
                "the next daemon to put again",
                lease->daemon->config.box, err.message);
        return;
    }
    lease->record = renewed;
    act_log(LOG_INFO,
            "handover: the record of box %s stays, renewed for %llu ms, for the next "
            "daemon to take over",
            lease->daemon->config.box, (unsigned long long)lease->record.lease_ttl_usec / 1000);
}

void ad_box_lease_free(ad_daemon *daemon)
{
    ad_box_lease *lease = daemon->box_lease;
    if (!lease)
        return;
    sd_event_source_disable_unref(lease->timer);
    free(lease);
    daemon->box_lease = NULL;
}
