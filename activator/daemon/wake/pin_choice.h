/* Which build a start must run, as the claim's pin and hold decide it.
 *
 *   claim                            the start runs            choice
 *   -------------------------------  ------------------------  ----------------
 *   no pin, no hold naming a build   the live link             AD_PIN_NONE
 *   no pin, a hold with its digest   exactly the held build    AD_PIN_HELD
 *   a pin, no failure                exactly the pin           AD_PIN_EXACT
 *   a failed pin with a fallback     exactly the fallback      AD_PIN_FALLBACK
 *   a failed pin, no fallback        nothing: pin_failed       AD_PIN_FAILED
 *
 * A failed pin is never run again by a wake: only a new swap (a fresh pin),
 * unpin or a promote of another version lift it. A hold still refuses any
 * other version than its own (prepare and the gate check it), whatever the
 * choice. Pure: no I/O. */
#pragma once

#include <stdbool.h>

#include "claims/claims.h"
#include "release/release.h"

typedef enum ad_pin_choice {
    AD_PIN_NONE = 0,
    AD_PIN_EXACT,
    AD_PIN_FALLBACK,
    AD_PIN_FAILED,
    AD_PIN_HELD,
} ad_pin_choice;

/* The choice for c, and in *out the build it names (zeroed for NONE and
 * FAILED). */
ad_pin_choice ad_pin_choose(const claim *c, rel_pin *out);

/* True when the build identified by version and build_digest is not what
 * c's pin (or its fallback) asks for; a failed pin without a fallback
 * matches nothing, no pin matches everything. */
bool ad_pin_mismatch(const claim *c, const char *version, const char *build_digest);
