/* A pinned build this box has not staged, fetched from the registry source
 * its pin names: pulled, applied and staged on a release worker in the
 * host's lane, and kept only when it hashes to the pin's digest (a box
 * never runs a build whose digest differs from its pin). The waiter hears
 * of it on the loop; one that stops waiting detaches, and the fetch goes on
 * so that the next wake finds the build staged. */
#pragma once

#include "activator/daemon/host/host.h"
#include "release/release.h"

typedef struct ad_fetch ad_fetch;

/* On the loop: result 0 (the pin's build is staged), or a negative errno
 * with err. host is NULL, and result -ECANCELED, when the daemon stopped
 * with the fetch in flight: the waiter then only forgets it. */
typedef void (*ad_fetched_fn)(ad_host *host, int result, const act_error *err, void *userdata);

/* Starts the fetch of pin (version and digest) of host from source (a
 * registry image by digest); *out names it for ad_fetch_detach until done
 * is called. Returns 0, or a negative errno with err when it could not be
 * queued (done is then not called). */
int ad_fetch_start(ad_host *host, const rel_pin *pin, const char *source, ad_fetched_fn done,
                   void *userdata, ad_fetch **out, act_error *err);

/* The waiter is gone: done is not called. */
void ad_fetch_detach(ad_fetch *fetch);
