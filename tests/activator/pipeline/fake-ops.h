/* Scripted operations for the pipeline's unit tests: every step completes
 * with the outcome the test set for that call, synchronously, after a timer,
 * or never (until abandoned); every call, retirement and event is logged. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/pipeline/pipeline.h"

#define FAKE_MAX_CALLS 16
#define FAKE_MAX_LOG 512

typedef struct fake_event {
    pl_wake_event_type type;
    pl_step step;
    unsigned attempt;
    pl_reason reason;
    uint64_t delay_usec;
    uint64_t at_usec;
    bool swap;
} fake_event;

typedef struct fake_result {
    unsigned count;
    pl_wake_kind kind;
    pl_reason reason;
    pl_step step;
    unsigned attempts;
    bool unproven;
    char message[1024];
} fake_result;

typedef struct fake_ops fake_ops;

struct fake_ops {
    sd_event *loop;
    pl_ops table;
    const char *label; /* distinguishes hosts sharing a log */

    /* The script. */
    pl_reason outcome[_PL_STEP_MAX][FAKE_MAX_CALLS];   /* by call index; NONE = ok */
    bool hang[_PL_STEP_MAX];                           /* never complete: wait for abandon */
    uint64_t delay_usec[_PL_STEP_MAX];                 /* complete after this long; 0 = at once */
    bool unproven[FAKE_MAX_CALLS];                     /* `failed` call i cannot prove the stop */
    void (*on_call)(fake_ops *fake, pl_wake *wake, pl_step step);

    /* What happened. */
    unsigned calls[_PL_STEP_MAX];
    pl_step log[FAKE_MAX_LOG];
    bool log_swap[FAKE_MAX_LOG]; /* pl_wake_is_swap for that call */
    unsigned log_len;
    pl_retirement retirements[FAKE_MAX_CALLS];
    unsigned abandoned;
    pl_wake *hanging;

    fake_event events[FAKE_MAX_LOG];
    unsigned n_events;

    /* Shared across hosts: the order in which hosts reserved. */
    char (*reserve_order)[16];
    unsigned *reserve_order_len;
};

void fake_ops_init(fake_ops *fake, sd_event *loop);

/* Event hook for pl_host_new with a fake_ops as userdata. */
void fake_on_event(pl_host *host, const pl_wake_event *event, void *userdata);

/* Joiner callback with a fake_result as userdata. */
void fake_on_done(pl_host *host, const pl_wake_result *result, void *userdata);

/* Runs the loop until *flag is nonzero or timeout_msec passed; returns
 * whether the flag was reached. */
bool fake_run_until(sd_event *loop, const unsigned *flag, unsigned timeout_msec);

/* Runs the loop for about msec. */
void fake_run_for(sd_event *loop, unsigned msec);

unsigned fake_count_events(const fake_ops *fake, pl_wake_event_type type);
/* Index of the n-th (0-based) event of type, or -1. */
int fake_find_event(const fake_ops *fake, pl_wake_event_type type, unsigned nth);
