/* A pinned, fallback or held build this box has not staged, waited for by
 * prepare (wake/internal.h): fetched from the registry source the claim names through
 * fetch/fetch.h within BuildFetchTimeoutSec=, with the waiting clients
 * held as for any cold wake; refused build_unavailable, saying why, when
 * the pin names no source, the fetch fails, or it takes too long. A fetch
 * that outlasts its wake goes on, so the next wake finds the build. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activator/daemon/fetch/fetch.h"
#include "activator/daemon/wake/internal.h"
#include "common/log.h"

/* What the claim names to fetch: the pin's build, the failed pin's
 * fallback, or the held one when no pin decides; "pinned", "fallback" or
 * "held" says which in messages. NULL for nothing a fetch could bring (no
 * pin or hold naming a build, a failed pin without a fallback). */
static const char *fetchable(const claim *c, rel_pin *pin, const char **source)
{
    switch (ad_pin_choose(c, pin)) {
    case AD_PIN_EXACT:
        *source = c->pin.source;
        return "pinned";
    case AD_PIN_HELD:
        *source = c->held_source;
        return "held";
    case AD_PIN_FALLBACK:
        *source = c->pin.fallback_source;
        return "fallback";
    default:
        return NULL;
    }
}

static void stop_waiting(ad_wake_state *w)
{
    ad_fetch_detach(TAKE_PTR(w->fetch));
    w->fetch_timer = sd_event_source_disable_unref(w->fetch_timer);
}

void ad_wake_fetch_forget(ad_wake_state *w)
{
    stop_waiting(w);
}

static void on_fetched(ad_host *host, int result, const act_error *err, void *userdata)
{
    ad_wake_state *w = userdata;
    w->fetch = NULL; /* it frees itself */
    if (!host)
        return; /* the daemon stops: the wake ends with it */
    w->fetch_timer = sd_event_source_disable_unref(w->fetch_timer);
    pl_wake *wake = take_wake(host);
    if (!wake)
        return; /* abandoned meanwhile (a park) */
    rel_pin pin;
    const char *source = "";
    const char *which = fetchable(&w->admitted, &pin, &source);
    if (result < 0) {
        pl_wake_complete(wake, PL_REASON_BUILD_UNAVAILABLE,
                         "host %s: the %s build %s could not be fetched from %s: %s", host->name,
                         which ? which : "pinned", pin.version, source, err->message);
        return;
    }
    w->fetched = pin; /* not fetched again in this wake */
    w->fetch_again(host, wake);
}

static int on_fetch_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    (void)source;
    (void)usec;
    ad_wake_state *w = userdata;
    ad_host *host = w->host;
    stop_waiting(w);
    pl_wake *wake = take_wake(host);
    rel_pin pin;
    const char *from = "";
    const char *which = fetchable(&w->admitted, &pin, &from);
    if (wake)
        pl_wake_complete(wake, PL_REASON_BUILD_UNAVAILABLE,
                         "host %s: the %s build %s was not fetched from %s within %" PRIu64
                         " s (BuildFetchTimeoutSec=); the fetch goes on, and a wake once it is "
                         "staged runs it",
                         host->name, which ? which : "pinned", pin.version, from,
                         host->daemon->config.build_fetch_timeout_usec / 1000000);
    return 0;
}

bool ad_wake_fetch_missing_pin(ad_host *host, pl_wake *wake, int resolve_result,
                               ad_wake_fetched_fn *again)
{
    ad_wake_state *w = host->wake_state;
    rel_pin pin;
    const char *source = "";
    const char *which = fetchable(&w->admitted, &pin, &source);
    if (resolve_result != -ENOENT || !which ||
        (strcmp(w->fetched.version, pin.version) == 0 &&
         strcmp(w->fetched.digest, pin.digest) == 0))
        return false;
    if (!source[0]) {
        pl_wake_complete(wake, PL_REASON_BUILD_UNAVAILABLE,
                         "host %s: the %s build %s (digest %s) is not staged on this box, and "
                         "the claim names no source to fetch it from: it was staged from a "
                         "directory or a local image layout; stage the same build here "
                         "(activatorctl stage %s %s PATH), or use a build staged from a "
                         "registry (docker://)",
                         host->name, which, pin.version, pin.digest, host->name, pin.version);
        return true;
    }
    ad_daemon *daemon = host->daemon;
    act_error err = {0};
    uint64_t now = 0;
    if (ad_fetch_start(host, &pin, source, on_fetched, w, &w->fetch, &err) < 0) {
        pl_wake_complete(wake, PL_REASON_BUILD_UNAVAILABLE,
                         "host %s: cannot start the fetch of the %s build %s: %s", host->name,
                         which, pin.version, err.message);
        return true;
    }
    if (sd_event_now(daemon->loop, CLOCK_MONOTONIC, &now) < 0 ||
        sd_event_add_time(daemon->loop, &w->fetch_timer, CLOCK_MONOTONIC,
                          now + daemon->config.build_fetch_timeout_usec, 0, on_fetch_timeout,
                          w) < 0) {
        stop_waiting(w);
        pl_wake_complete(wake, PL_REASON_BUILD_UNAVAILABLE,
                         "host %s: cannot arm BuildFetchTimeoutSec= for the fetch of %s; it goes "
                         "on, and a wake once it is staged runs it",
                         host->name, pin.version);
        return true;
    }
    w->fetch_again = again;
    w->waiting_wake = wake;
    return true;
}
