/* The holder's side of a handover between boxes. When the claim names
 * another box while this box holds it (an operator's assignment), this box
 * retires what runs of the host with proof and then writes its release on
 * the claim (holder.released_usec). Only then may the box named admit
 * itself (claims.h: claim_release_pending), so two boxes never run the host
 * at once. */
#pragma once

#include "activator/daemon/host/host.h"

/* Releases host's claim if this box holds it unreleased while another box
 * executes it, and nothing of the host runs here (it is at rest, and no
 * generation waits for a proof of its stop). current is the claim as just
 * seen (a watch change or a list), or NULL to read it from the store. Does
 * nothing while the daemon stops. */
void ad_claim_release(ad_host *host, const claim *current);

/* Frees the release in flight of host, if any. The store must not call
 * back any more (it is freed, or nothing is in flight). */
void ad_claim_release_free(ad_host *host);
