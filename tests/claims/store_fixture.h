/* Shared by the claim store tests: a fresh, empty store namespace per test on
 * either backend, claims to write, and raw planting of bad values. */
#pragma once

#include <stdbool.h>

#include "claims/claims.h"
#include "etcd_harness.h"

typedef struct store_fixture {
    bool etcd;
    etcd_harness harness; /* etcd only */
    char root[256];       /* dir only: temp dir holding one store per test */
    unsigned counter;
} store_fixture;

/* Starts what the backend needs; returns 77 (skip) when it cannot run here. */
int store_fixture_setup(store_fixture *f, const char *backend);
void store_fixture_teardown(store_fixture *f);
/* A URL naming a namespace no earlier test used. */
void store_fixture_fresh_url(store_fixture *f, char *url, size_t size);
/* A store opened on such a URL (in url), with a 5 s timeout; aborts when it
 * cannot be opened. */
claim_store *store_fixture_open_fresh(store_fixture *f, char *url, size_t size);
/* Writes text as host's raw stored value, bypassing every check. */
void store_fixture_plant(store_fixture *f, const char *url, const char *host, const char *text,
                         size_t len);
/* A valid serving claim for host with the given session. */
claim fixture_claim(const char *host, uint64_t session);
