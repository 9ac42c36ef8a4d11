/* claim.wait: read the claim; if it is not yet written after the request's
 * revision, watch that one claim's key (one watch on the store, however
 * large the fleet) and read again at its first change, or at the end of the
 * wait. What answers is decided by activator/control/fleet.c, as
 * activatorctl --store decides it. A reader such as activatorctl move so
 * hears each phase as it is written, instead of asking twenty times a
 * second. */
#include "activator/daemon/fleet/claim_waits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "activator/control/fleet.h"
#include "activator/daemon/fleet/requests.h"
#include "common/clock.h"
#include "common/log.h"

#define USEC_PER_SEC 1000000ull

struct ad_claim_wait {
    ad_daemon *daemon;
    /* The daemon's waits: the open ones, and answered ones whose read is
     * still out (freed when it answers, or at the daemon's exit). */
    struct ad_claim_wait *prev, *next;
    ctrl_reply *reply;                 /* NULL once answered */
    ctrl_request request;              /* a copy: the dispatcher's is gone once it returns */
    uint64_t started_usec;
    sd_event_source *deadline;
    claims_watch *watch;
    bool reading;   /* a read is out: its callback frees an answered wait */
    bool last_look; /* the wait ran out: the next read answers */
    bool from_now;  /* the history was compacted past the claim: watch from now */
};

static void unlink_wait(ad_claim_wait *wait)
{
    ad_daemon *daemon = wait->daemon;
    if (wait->prev)
        wait->prev->next = wait->next;
    else if (daemon->claim_waits == wait)
        daemon->claim_waits = wait->next;
    if (wait->next)
        wait->next->prev = wait->prev;
    wait->prev = wait->next = NULL;
}

static void free_wait(ad_claim_wait *wait)
{
    unlink_wait(wait);
    claims_watch_free(wait->watch);
    sd_event_source_disable_unref(wait->deadline);
    free(wait);
}

/* Ends the wait's watch and timer and sends nothing more; the memory goes
 * now, or when the read still out answers. */
static void finish(ad_claim_wait *wait)
{
    if (wait->reply)
        wait->daemon->n_claim_waits--;
    wait->reply = NULL;
    claims_watch_free(wait->watch);
    wait->watch = NULL;
    wait->deadline = sd_event_source_disable_unref(wait->deadline);
    if (!wait->reading)
        free_wait(wait);
}

static void answer(ad_claim_wait *wait, ctrl_fleet_outcome *outcome)
{
    ad_fleet_reply(wait->reply, outcome);
    finish(wait);
}

static void store_failed(ad_claim_wait *wait, const act_error *err)
{
    ctrl_fleet_outcome outcome;
    ctrl_fleet_store_error(&wait->request, err, &outcome);
    answer(wait, &outcome);
}

static void read_again(ad_claim_wait *wait);

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata)
{
    ad_claim_wait *wait = userdata;
    if (error == -ENODATA && !wait->from_now) {
        /* The claim was last written before the compaction: it is still as
         * read, so the watch starts again from now. */
        wait->from_now = true;
    } else if (error < 0) {
        store_failed(wait, err);
        return;
    } else if (strcmp(change->claim.host, wait->request.host) != 0) {
        return; /* a journal line that names no host */
    }
    claims_watch_free(wait->watch);
    wait->watch = NULL;
    read_again(wait);
}

static void on_read(claim_store *store, int result, const claim *c, const act_error *err,
                    void *userdata)
{
    ad_claim_wait *wait = userdata;
    wait->reading = false;
    if (!wait->reply) {
        free_wait(wait);
        return;
    }
    if (result < 0) {
        store_failed(wait, err);
        return;
    }
    claim current = result > 0 ? *c : (claim){0};
    uint64_t from = 0;
    uint64_t waited = act_loop_now_usec(wait->daemon->loop) - wait->started_usec;
    ctrl_fleet_outcome outcome;
    if (ctrl_fleet_wait_plan(&wait->request, result, &current, waited, wait->last_look, &from,
                             &outcome) != 0) {
        answer(wait, &outcome);
        return;
    }
    act_error watch_err = {0};
    if (claims_watch_host_start(store, wait->request.host, wait->from_now ? 0 : from, on_change,
                                wait, &wait->watch, &watch_err) < 0)
        store_failed(wait, &watch_err);
}

static void read_again(ad_claim_wait *wait)
{
    act_error err = {0};
    if (claims_read_async(wait->daemon->store, wait->request.host, on_read, wait, &err) < 0) {
        store_failed(wait, &err);
        return;
    }
    wait->reading = true;
}

static int on_deadline(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_claim_wait *wait = userdata;
    wait->last_look = true;
    claims_watch_free(wait->watch);
    wait->watch = NULL;
    if (!wait->reading)
        read_again(wait);
    return 0;
}

void ad_claim_wait_start(ad_daemon *daemon, const ctrl_request *request, ctrl_reply *reply)
{
    if (daemon->stopping) {
        ctrl_reply_error(reply, "stopping", "box %s is stopping; ask another box, or again",
                         daemon->config.box);
        return;
    }
    if (daemon->n_claim_waits >= AD_CLAIM_WAITS_MAX) {
        ctrl_reply_error(reply, "busy",
                         "box %s already has %u claim waits open, the most it holds at once "
                         "(each holds a control context); ask again when one ends, or read "
                         "the claim with activatorctl claim show %s",
                         daemon->config.box, daemon->n_claim_waits, request->host);
        return;
    }
    ad_claim_wait *wait = calloc(1, sizeof(*wait));
    if (!wait) {
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    *wait = (ad_claim_wait){.daemon = daemon,
                            .reply = reply,
                            .request = *request,
                            .started_usec = act_loop_now_usec(daemon->loop),
                            .next = daemon->claim_waits};
    if (daemon->claim_waits)
        daemon->claim_waits->prev = wait;
    daemon->claim_waits = wait;
    daemon->n_claim_waits++;
    uint64_t wait_usec = (uint64_t)ctrl_fleet_wait_sec(request) * USEC_PER_SEC;
    int r = sd_event_add_time(daemon->loop, &wait->deadline, CLOCK_MONOTONIC,
                              wait->started_usec + wait_usec, 0, on_deadline, wait);
    if (r < 0) {
        ctrl_reply_error(reply, "internal", "cannot arm the wait's timer: %s", strerror(-r));
        finish(wait);
        return;
    }
    read_again(wait);
}

void ad_claim_waits_end(ad_daemon *daemon, bool handover)
{
    ad_claim_wait *next;
    for (ad_claim_wait *wait = daemon->claim_waits; wait; wait = next) {
        next = wait->next;
        if (!wait->reply)
            continue;
        if (!handover)
            ctrl_reply_error(wait->reply, "stopping",
                             "box %s is stopping; the wait for host %s's claim ended; ask another "
                             "box, or again",
                             daemon->config.box, wait->request.host);
        finish(wait);
    }
}

void ad_claim_waits_free(ad_daemon *daemon)
{
    ad_claim_wait *next;
    for (ad_claim_wait *wait = daemon->claim_waits; wait; wait = next) {
        next = wait->next;
        free_wait(wait);
    }
}
