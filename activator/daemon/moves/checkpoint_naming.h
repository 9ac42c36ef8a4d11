/* A written checkpoint named in the host's claim (claim.state), by
 * compare-and-swap over a fresh read, and only while the claim still says
 * this box runs the host: what an operator's checkpoint and a periodic one
 * both do once the archive is written. */
#pragma once

#include <stdint.h>

#include "activator/daemon/host/host.h"
#include "claims/claims.h"

/* Called once, on the loop: result 0 with new_revision, or a negative
 * errno with code ("not_owner", "claim_changed", "store_error") and err
 * saying why the checkpoint was not named. */
typedef void (*ad_checkpoint_named_fn)(ad_host *host, int result, uint64_t new_revision,
                                       const char *code, const act_error *err, void *userdata);

/* Reads host's claim and names written in it. session, when not 0, is the
 * admission the state belongs to: a claim of another admission (another
 * start meanwhile, here or elsewhere) is not_owner too. Other writes
 * meanwhile are read again and the state written over them a few times.
 * Returns 0 (done follows, never from inside the call) or -errno with err. */
int ad_checkpoint_name(ad_host *host, const claim_state *written, uint64_t session,
                       ad_checkpoint_named_fn done, void *userdata, act_error *err);

/* Teardown, once the store is freed: the namings whose call it dropped. */
void ad_checkpoint_namings_free(ad_daemon *daemon);
