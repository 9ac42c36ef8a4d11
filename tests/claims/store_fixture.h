/* Shared by the claim store tests: a fresh, empty store namespace per test on
 * either backend, claims to write, and raw planting of bad values. */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

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

/* Opens a store at a fresh URL (url gets it) attached to a new loop of its
 * own (*event), as the daemon uses one; options may be NULL. */
claim_store *fixture_open_on_loop(store_fixture *f, char *url, size_t size,
                                  const claims_store_options *options, sd_event **event);

/* Frees a store fixture_open_on_loop opened, then its loop. */
void fixture_close_on_loop(claim_store *store, sd_event *event);

/* What a watch told: its first changes, and the error that ended it. */
typedef struct fixture_seen {
    claim_change changes[16];
    size_t n;
    int error;
    char message[1024];
} fixture_seen;

/* The claims_watch_fn that fills a fixture_seen (the userdata). */
void fixture_seen_on_watch(claims_watch *watch, const claim_change *change, int error,
                           const act_error *err, void *userdata);
/* Starts a watch of store (attached) from from_revision that fills seen. */
claims_watch *fixture_seen_start(claim_store *store, uint64_t from_revision, fixture_seen *seen);
/* Runs event until seen has n changes or an error, or timeout_ms passed
 * (n 0: for all of timeout_ms unless an error comes). */
void fixture_seen_run(sd_event *event, fixture_seen *seen, size_t n, int timeout_ms);
