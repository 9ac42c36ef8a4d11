/* The pin's choice of build (wake/pin_choice.h has the table). */
#include "activator/daemon/wake/pin_choice.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

ad_pin_choice ad_pin_choose(const claim *c, rel_pin *out)
{
    assert(c && out);
    *out = (rel_pin){0};
    if (!c->has_pin && c->held[0] && c->held_digest[0]) {
        snprintf(out->version, sizeof(out->version), "%s", c->held);
        snprintf(out->digest, sizeof(out->digest), "%s", c->held_digest);
        return AD_PIN_HELD;
    }
    if (!c->has_pin)
        return AD_PIN_NONE;
    if (!claim_pin_failed(c)) {
        snprintf(out->version, sizeof(out->version), "%s", c->pin.version);
        snprintf(out->digest, sizeof(out->digest), "%s", c->pin.digest);
        return AD_PIN_EXACT;
    }
    if (!c->pin.fallback_version[0])
        return AD_PIN_FAILED;
    snprintf(out->version, sizeof(out->version), "%s", c->pin.fallback_version);
    snprintf(out->digest, sizeof(out->digest), "%s", c->pin.fallback_digest);
    return AD_PIN_FALLBACK;
}

bool ad_pin_mismatch(const claim *c, const char *version, const char *build_digest)
{
    rel_pin wanted;
    switch (ad_pin_choose(c, &wanted)) {
    case AD_PIN_NONE:
        return false;
    case AD_PIN_FAILED:
        return true;
    case AD_PIN_EXACT:
    case AD_PIN_FALLBACK:
    case AD_PIN_HELD:
        break;
    }
    return strcmp(wanted.version, version) != 0 || strcmp(wanted.digest, build_digest) != 0;
}
