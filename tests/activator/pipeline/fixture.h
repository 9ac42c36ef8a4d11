/* The CMocka fixture the pipeline's machine tests share: a real sd-event
 * loop, one host named web1 over scripted operations, and timings scaled down
 * to milliseconds (backoff unit 20 ms, ready window 30 ms, failure-park
 * backoff 40 ms .. 1 s) so that the suites stay fast. */
#pragma once

#include "activator/pipeline/pipeline.h"
#include "fake-ops.h"

#define MSEC 1000ULL

typedef struct fixture {
    sd_event *loop;
    fake_ops fake;
    pl_config config;
    pl_host *host;
} fixture;

/* CMocka setup and teardown; the host is made by the test, after it has
 * adjusted the config and the script. */
int setup(void **state);
int teardown(void **state);

void make_host(fixture *f);

/* A connection trigger on a parked host, run until its outcome. */
void wake_and_wait(fixture *f, fake_result *result);

/* Brings the host to serving with a wake. */
void serve(fixture *f);

/* Runs the loop until the host is parked (fails after about 5 s). */
void wait_parked(fixture *f);
