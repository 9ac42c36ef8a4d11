/* This box's record in the claim store, so the fleet can tell a live box
 * from a dead one: the record says who this daemon is (incarnation, start,
 * version, the URLs it serves to other machines), and claims/box_lease.c
 * keeps it alive under BoxLeaseSec=. It is put before READY=1 and removed
 * when a clean stop has retired everything. A handover
 * (AD_HANDOVER_SIGNAL) never removes it: the box stays alive under the next
 * daemon, which puts its own record (its incarnation, under a new lease)
 * before READY=1; the record is renewed once more instead, so it does not
 * lapse while the next daemon starts. */
#include "activator/daemon/fleet/box_lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/box_lease.h"
#include "common/clock.h"

#ifndef ACTIVATOR_VERSION
#define ACTIVATOR_VERSION "unknown"
#endif

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
    claims_box record = {0};
    snprintf(record.box, sizeof(record.box), "%s", daemon->config.box);
    snprintf(record.incarnation, sizeof(record.incarnation), "%s", daemon->incarnation);
    snprintf(record.version, sizeof(record.version), "%s", ACTIVATOR_VERSION);
    record.started_usec = act_wallclock_usec();
    record.lease_ttl_usec = daemon->config.box_lease_usec;
    remote_url(record.control_url, sizeof(record.control_url), daemon->config.control_listen);
    remote_url(record.events_url, sizeof(record.events_url), daemon->config.events);
    /* Before READY=1, as the store's first answer is: a box that says it is
     * ready is one the fleet sees alive and may assign hosts to. */
    return claims_box_lease_start(daemon->store, daemon->loop, &record, &daemon->box_lease, err);
}

void ad_box_lease_end(ad_daemon *daemon, ad_box_lease_ended_fn ended)
{
    if (!daemon->box_lease) {
        ended(daemon);
        return;
    }
    claims_box_lease_end(daemon->box_lease, ended, daemon);
}

void ad_box_lease_hand_over(ad_daemon *daemon)
{
    if (daemon->box_lease)
        claims_box_lease_hand_over(daemon->box_lease);
}

void ad_box_lease_free(ad_daemon *daemon)
{
    claims_box_lease_free(daemon->box_lease);
    daemon->box_lease = NULL;
}
