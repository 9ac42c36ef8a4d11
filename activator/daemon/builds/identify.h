/* Which build a staged version of a host is, by its manifest: the version
 * and build digest a pin or a hold names, and the registry source another
 * box fetches it from. For workers: it reads the release store. */
#pragma once

#include "claims/claims.h"
#include "release/release.h"

/* Fills pin (version, build digest) and source ("" when the build came from
 * no registry) for host's staged version. -ENOENT (code "not_staged") when
 * it is not staged, -EBADMSG (code "digest_mismatch") when its manifest
 * does not hold, with err saying so and what to do. */
int ad_build_identify(rel_store *releases, const char *host, const char *version, rel_pin *pin,
                      char source[CLAIM_SOURCE_SIZE], const char **code, act_error *err);
