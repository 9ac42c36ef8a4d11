/* Garbage collection of a host's staged builds: `activatorctl gc` and the
 * one after a promote or a successful swap.
 *
 * A gc keeps the live version, every version in use and the newest
 * ReleasesKeep= (or --keep N) others. In use means: named by the claim (the
 * pin, a failed pin's fallback, the held version), run by one of the host's
 * generations here (serving, starting, replaced), or the target of a swap
 * in flight. The claim is read first; the removal runs on the release
 * workers (daemon->release_work), in the host's lane, so it is ordered with
 * the host's promotes and swap verifications, and never on the loop. */
#pragma once

#include <stdbool.h>

#include "activator/control/control.h"
#include "activator/daemon/host/host.h"

/* Collects host's builds, keeping keep versions besides those in use, and
 * answers reply with what went (or, with dry_run, would go). reply NULL:
 * the automatic gc, which only logs. */
void ad_gc_start(ad_host *host, unsigned keep, bool dry_run, ctrl_reply *reply);

/* The automatic gc after a promote or a successful swap: ReleasesKeep=. */
void ad_gc_after_change(ad_host *host);
