/* Claims that change under us, and the watch that tells us: it heals by
 * listing every claim again whenever it ends, and keeps the store's health
 * (daemon->store_state) meanwhile. */
#pragma once

#include <json-c/json.h>

#include "activator/daemon/host/context.h"

/* Lists every claim (the daemon is not ready before the store answered)
 * and watches from there. */
int ad_claim_watch_start(ad_daemon *daemon, act_error *err);
/* A clean stop: the watch goes on telling changes, but one that ends is not
 * healed any more. */
void ad_claim_watch_hold(ad_daemon *daemon);
void ad_claim_watch_stop(ad_daemon *daemon);
/* The store as status shows it: {url, state ok|unavailable, since_usec,
 * error}. */
json_object *ad_claim_watch_store_status(const ad_daemon *daemon);
