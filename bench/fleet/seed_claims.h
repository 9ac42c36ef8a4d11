/* Claims planted straight into a real etcd, laid out as this project's etcd
 * store lays them out, so that a benchmark can start beside a hundred
 * thousand of them in seconds rather than minutes of compare-and-swaps. */
#pragma once

#include <stddef.h>

#include "claims/claims.h"
#include "tests/claims/etcd_harness.h"

/* Writes each of the n claims under <prefix>/<host> and its copy under
 * <prefix>.by-box/<box>/<host> for every box it names (claim_named_boxes),
 * as unconditional puts, a few dozen claims to a txn (within etcd's
 * default --max-txn-ops of 128). */
int seed_claims_write(const etcd_harness *etcd, const char *prefix, const claim *claims, size_t n,
                      act_error *err);
