/* Internals shared by the host API (host.c) and the step machine (wake.c). */
#pragma once

#include <stdarg.h>

#include "activator/pipeline/pipeline.h"
#include "common/names.h"

#define PL_MESSAGE_MAX 512

/* A trigger waiting for a wake's outcome. */
typedef struct pl_joiner {
    struct pl_joiner *next;
    pl_wake_done_fn done;
    void *userdata;
} pl_joiner;

typedef struct pl_joiner_list {
    pl_joiner *head, *tail;
} pl_joiner_list;

typedef enum pl_wake_mode {
    PL_WAKE_MODE_START,  /* the pipeline proper: read .. healthy */
    PL_WAKE_MODE_RETIRE, /* only `failed`, for a serving generation */
    PL_WAKE_MODE_SWAP,   /* the pipeline for N+1 beside a serving N, then `failed` for N */
} pl_wake_mode;

/* Where a wake is. Every phase but OP waits for the loop: a timer, the
 * advance defer source, or a slot grant. */
typedef enum pl_wake_phase {
    PL_PHASE_QUEUED,    /* created; the advance source starts it */
    PL_PHASE_DELAY,     /* waits out the failure-park backoff */
    PL_PHASE_TOKEN,     /* waits for a start token */
    PL_PHASE_SLOT,      /* held in the box-wide cap's queue */
    PL_PHASE_GRANTED,   /* got a slot; the advance source reserves */
    PL_PHASE_OP,        /* an operation is in flight */
    PL_PHASE_COMPLETED, /* the operation completed; the advance source moves on */
    PL_PHASE_BACKOFF,   /* waits between attempts */
    PL_PHASE_STOPPING,  /* cancelled during a wait; the advance source cleans up */
    PL_PHASE_DONE,
} pl_wake_phase;

struct pl_wake {
    pl_host *host;
    pl_wake_mode mode;
    pl_wake_phase phase;
    pl_trigger trigger;

    pl_step step;                /* the operation in flight or just completed */
    pl_reason completed_reason;  /* its completion */
    bool completed_proven;       /* `failed`'s completion */
    char completed_message[PL_MESSAGE_MAX];

    unsigned attempt;  /* 1-based attempt of the loop; 0 before it */
    unsigned starts;   /* attempts whose reserve was called */
    bool attempt_live; /* reserve was called and `failed` has not retired it */
    bool exec_started; /* the current attempt's build runs */
    bool published;
    /* When read began (loop clock): WakeTimeoutSec= counts from here. */
    uint64_t read_usec;
    bool room_for_fallback; /* this attempt's window leaves a fallback's */
    bool next_attempt_now;  /* `failed` asked for the next attempt without backoff */
    uint64_t window_usec;   /* the ready window armed: below ReadyTimeoutSec= when
                             * WakeTimeoutSec= cut it */

    /* The failure being handled while `failed` runs. */
    pl_reason failure_reason;
    pl_step failure_step;
    bool failure_refused;
    bool failure_retry;
    char failure_message[PL_MESSAGE_MAX];
    pl_retirement retirement;

    bool cancel_requested;
    pl_reason cancel_reason;
    char cancel_message[PL_MESSAGE_MAX];

    bool holds_slot;
    pl_start_waiter waiter;

    sd_event_source *advance; /* defer: moves the machine on from the loop */
    sd_event_source *timer;   /* delay, token, slot timeout, backoff */
    sd_event_source *window;  /* the ready window */

    /* A swap only: the retirement of the serving generation that a park or
     * N's exit asked for. It is allocated when asked, so nothing can fail
     * later, and it becomes the host's current wake when the swap ends;
     * triggers arriving meanwhile follow it. */
    pl_wake *queued_retirement;

    pl_joiner_list joiners;   /* get this wake's outcome */
    pl_joiner_list followers; /* arrived during a retirement or after a cancel: start
                               * the next wake */

    void *data;
    void (*destroy)(void *data);
};

struct pl_host {
    sd_event *loop;
    char name[ACT_NAME_MAX + 1];
    pl_config config;
    const pl_ops *ops;
    void *ops_userdata;
    pl_wake_event_fn on_event;
    void *event_userdata;

    pl_host_state state;
    bool unproven;
    unsigned failure_streak;
    uint64_t last_failure_park_usec;
    bool rate_limited;
    pl_token_bucket bucket;

    pl_wake *current; /* the wake or retirement in flight */
};

/* host_emit.c */
void pl_host_emit(pl_host *host, const pl_wake_event *event);

/* wake.c */
int pl_wake_new(pl_host *host, pl_wake_mode mode, pl_trigger trigger, pl_wake **ret);
void pl_wake_free(pl_wake *wake);
void pl_wake_kick(pl_wake *wake);
void pl_wake_request_cancel(pl_wake *wake, pl_reason reason, const char *message);
/* A swap whose N+1 is healthy and whose `failed` is retiring N: past cancelling. */
bool pl_wake_is_replacing(const pl_wake *wake);

void pl_joiner_list_append(pl_joiner_list *list, pl_joiner *joiner);
void pl_joiner_list_move(pl_joiner_list *to, pl_joiner_list *from);
