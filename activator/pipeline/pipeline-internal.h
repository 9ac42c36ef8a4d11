/* Internals shared by the host API (host.c) and the step machine (wake.c). */
#pragma once

#include <stdarg.h>

#include "activator/pipeline/pipeline.h"
#include "common/names.h"

#define ACT_MESSAGE_MAX 512

/* A trigger waiting for a wake's outcome. */
typedef struct act_joiner {
    struct act_joiner *next;
    act_wake_done_fn done;
    void *userdata;
} act_joiner;

typedef struct act_joiner_list {
    act_joiner *head, *tail;
} act_joiner_list;

typedef enum act_wake_mode {
    ACT_WAKE_MODE_START,  /* the pipeline proper: read .. healthy */
    ACT_WAKE_MODE_RETIRE, /* only `failed`, for a serving generation */
    ACT_WAKE_MODE_SWAP,   /* the pipeline for N+1 beside a serving N, then `failed` for N */
} act_wake_mode;

/* Where a wake is. Every phase but OP waits for the loop: a timer, the
 * advance defer source, or a slot grant. */
typedef enum act_wake_phase {
    ACT_PHASE_QUEUED,    /* created; the advance source starts it */
    ACT_PHASE_DELAY,     /* waits out the failure-park backoff */
    ACT_PHASE_TOKEN,     /* waits for a start token */
    ACT_PHASE_SLOT,      /* held in the box-wide cap's queue */
    ACT_PHASE_GRANTED,   /* got a slot; the advance source reserves */
    ACT_PHASE_OP,        /* an operation is in flight */
    ACT_PHASE_COMPLETED, /* the operation completed; the advance source moves on */
    ACT_PHASE_BACKOFF,   /* waits between attempts */
    ACT_PHASE_STOPPING,  /* cancelled during a wait; the advance source cleans up */
    ACT_PHASE_DONE,
} act_wake_phase;

struct act_wake {
    act_host *host;
    act_wake_mode mode;
    act_wake_phase phase;
    act_trigger trigger;

    act_step step;               /* the operation in flight or just completed */
    act_reason completed_reason; /* its completion */
    bool completed_proven;       /* `failed`'s completion */
    char completed_message[ACT_MESSAGE_MAX];

    unsigned attempt;  /* 1-based attempt of the loop; 0 before it */
    unsigned starts;   /* attempts whose reserve was called */
    bool attempt_live; /* reserve was called and `failed` has not retired it */
    bool exec_started; /* the current attempt's build runs */
    bool published;

    /* The failure being handled while `failed` runs. */
    act_reason failure_reason;
    act_step failure_step;
    bool failure_refused;
    bool failure_retry;
    char failure_message[ACT_MESSAGE_MAX];
    act_retirement retirement;

    bool cancel_requested;
    act_reason cancel_reason;
    char cancel_message[ACT_MESSAGE_MAX];

    bool holds_slot;
    act_start_waiter waiter;

    sd_event_source *advance; /* defer: moves the machine on from the loop */
    sd_event_source *timer;   /* delay, token, slot timeout, backoff */
    sd_event_source *window;  /* the ready window */

    /* A swap only: the retirement of the serving generation that a park or
     * N's exit asked for. It is allocated when asked, so nothing can fail
     * later, and it becomes the host's current wake when the swap ends;
     * triggers arriving meanwhile follow it. */
    act_wake *queued_retirement;

    act_joiner_list joiners;   /* get this wake's outcome */
    act_joiner_list followers; /* arrived during a retirement or after a cancel: start
                                * the next wake */

    void *data;
    void (*destroy)(void *data);
};

struct act_host {
    sd_event *loop;
    char name[ACT_NAME_MAX + 1];
    act_pipeline_config config;
    const act_pipeline_ops *ops;
    void *ops_userdata;
    act_wake_event_fn on_event;
    void *event_userdata;

    act_host_state state;
    bool unproven;
    unsigned failure_streak;
    uint64_t last_failure_park_usec;
    bool rate_limited;
    act_token_bucket bucket;

    act_wake *current; /* the wake or retirement in flight */
};

uint64_t act_host_now(const act_host *host);
void act_host_emit(act_host *host, const act_wake_event *event);

/* wake.c */
int act_wake_new(act_host *host, act_wake_mode mode, act_trigger trigger, act_wake **ret);
void act_wake_free(act_wake *wake);
void act_wake_kick(act_wake *wake);
void act_wake_request_cancel(act_wake *wake, act_reason reason, const char *message);
/* A swap whose N+1 is healthy and whose `failed` is retiring N: past cancelling. */
bool act_wake_is_replacing(const act_wake *wake);

void act_joiner_list_append(act_joiner_list *list, act_joiner *joiner);
void act_joiner_list_move(act_joiner_list *to, act_joiner_list *from);
