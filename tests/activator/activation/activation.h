/* What the activation tests share on top of the daemon harness
 * (tests/activator/daemon/harness.h): builds of their own to stage, an HTTP
 * client that records every answer of the app, a steady load of such
 * requests on threads, and small readers of what the daemon published.
 *
 * Every time here is wall-clock microseconds (CLOCK_REALTIME), the clock the
 * daemon stamps its events with, so a request can be placed before, during
 * or after a swap by comparing it with the events' time_usec. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/activator/daemon/harness.h"

/* ---- builds ---- */

/* Builds other than act-e2e-app are staged with dh_stage_file (harness.h). */

/* Stages a copy of act-e2e-app with the version's name appended after the
 * ELF image: it runs exactly as act-e2e-app but has a build digest of its
 * own, so a claim's pin can be told apart from the build it replaces. */
void ah_stage_variant(dh_daemon *d, const char *host, const char *version, bool promote,
                      rel_identity *identity);

/* ---- one request ---- */

/* One GET / and what came of it. */
typedef struct ah_sample {
    uint64_t start_usec;   /* before connect */
    uint64_t connect_usec; /* connect returned (the connection is established) */
    uint64_t end_usec;     /* the answer was read whole, or the request failed */
    int error;             /* 0, or the errno of the failure; EPROTO: not an app answer */
    const char *failed_at; /* "connect", "send", "recv", "answer" when error != 0 */
    char version[32];      /* from "demo version=V generation=G pid=P" */
    uint64_t generation;
    int pid;
} ah_sample;

/* GET http://127.0.0.1:port/ on a fresh connection (timeouts of 10 s);
 * fills out and returns its error (0 for an answer from act-testapp). */
int ah_get(int port, ah_sample *out);

/* ---- steady load ---- */

/* Threads that make one request after another (a fresh connection each)
 * until stopped, keeping every sample. */
typedef struct ah_load ah_load;

ah_load *ah_load_start(int port, unsigned threads);
/* Requests completed so far (answered or failed). */
size_t ah_load_done(ah_load *load);
/* Waits until at least count requests completed; false after timeout_ms. */
bool ah_load_wait(ah_load *load, size_t count, int timeout_ms);
/* Stops the threads and returns every sample (owned by load). */
const ah_sample *ah_load_stop(ah_load *load, size_t *n);
void ah_load_free(ah_load *load);

/* Prints the first few failed samples to stderr (for a failing check). */
void ah_print_failures(const ah_sample *samples, size_t n);

/* ---- events and numbers ---- */

/* The first event of host named name with seq > after_seq, generation gen
 * (0: any); NULL when none arrived (the harness pumps nothing here). */
const dh_event *ah_find_event(dh_daemon *d, const char *host, const char *name, uint64_t gen,
                              uint64_t after_seq);

/* Median of n values (sorts a copy). */
double ah_median(const double *values, size_t n);

/* The wall clock in microseconds, as the daemon stamps its events. */
uint64_t ah_wallclock_usec(void);

/* Sleeps ms milliseconds. */
void ah_sleep_ms(long ms);

/* ---- swap tests (swap_fixture.c) ---- */

/* The load a swap test runs, stopped by ah_load_fixture_teardown (before the
 * daemon's dh_teardown) also when a check failed. */
extern ah_load *ah_current_load;
int ah_load_fixture_setup(void **state);
int ah_load_fixture_teardown(void **state);
#define AH_LOAD_TEST(f)                                                                            \
    cmocka_unit_test_setup_teardown(f, ah_load_fixture_setup, ah_load_fixture_teardown)

/* Wakes host and returns the serving generation and its pid. */
void ah_wake_serving(dh_daemon *d, const char *host, uint64_t *generation, pid_t *pid);
