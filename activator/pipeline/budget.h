/* Start budgets, so that one crash-looping host degrades only itself.
 *
 *   - pl_token_bucket: a host's start rate. Each start takes one token; the
 *     bucket refills at rate tokens per second and holds at most one second of
 *     tokens (at least one), so a quiet host can start a burst at once and a
 *     looping host is paced to the rate.
 *   - pl_start_cap: the box-wide cap of starts in flight. A start over the
 *     cap is held, and held starts get freed slots in the order they asked.
 *
 * Both are pure: time comes in as an argument, and nothing here sleeps, arms
 * timers or does I/O. The pipeline owns the timers. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* The bucket is kept as the time at which it would be full again ("theoretical
 * arrival time", GCRA): exact in integers, one field of state. */
typedef struct pl_token_bucket {
    uint64_t interval_usec;  /* time to earn one token: 1 s / rate */
    uint64_t tolerance_usec; /* (burst - 1) · interval: how far ahead starts may run */
    uint64_t full_at_usec;   /* monotonic time at which the bucket is full again */
} pl_token_bucket;

/* Sets the bucket up full at now_usec. rate_per_sec must be a finite number
 * > 0 and at most 1e6; anything else is -EINVAL with a sentence in err. */
int pl_token_bucket_init(pl_token_bucket *bucket, double rate_per_sec, uint64_t now_usec,
                         act_error *err);

/* Takes one token at now_usec and returns 0, or takes nothing and returns how
 * many microseconds until a token is there (always > 0). */
uint64_t pl_token_bucket_take(pl_token_bucket *bucket, uint64_t now_usec);

/* Whole tokens available at now_usec, for status output and tests. */
unsigned pl_token_bucket_available(const pl_token_bucket *bucket, uint64_t now_usec);

typedef struct pl_start_waiter pl_start_waiter;
typedef void (*pl_start_granted_fn)(pl_start_waiter *waiter, void *userdata);

/* One held start. It lives in its owner's memory (no allocation), and must
 * stay there until granted or withdrawn. */
struct pl_start_waiter {
    pl_start_waiter *prev, *next;
    pl_start_granted_fn granted;
    void *userdata;
    bool queued;
};

typedef struct pl_start_cap {
    unsigned limit;     /* starts allowed in flight at once, >= 1 */
    unsigned in_flight; /* slots taken, granted ones included */
    unsigned held;      /* waiters in the queue */
    pl_start_waiter *head, *tail;
} pl_start_cap;

/* limit must be 1 or more (the daemon's default is twice the cores). */
int pl_start_cap_init(pl_start_cap *cap, unsigned limit, act_error *err);

/* Changes the limit (1 or more) while starts run: a raised limit grants
 * held starts, in order, up to it before this returns; a lowered one lets
 * the starts in flight finish and grants nothing until they are below it. */
int pl_start_cap_set_limit(pl_start_cap *cap, unsigned limit, act_error *err);

/* Takes a slot and returns true, or queues waiter at the tail and returns
 * false; granted(waiter, userdata) is then called, from a later
 * pl_start_cap_release, with the slot already taken for it. */
bool pl_start_cap_acquire(pl_start_cap *cap, pl_start_waiter *waiter, pl_start_granted_fn granted,
                          void *userdata);

/* Gives a slot back. When starts are held, the slot goes straight to the one
 * held longest, whose granted callback runs before this returns. */
void pl_start_cap_release(pl_start_cap *cap);

/* Takes a held waiter out of the queue (a cancelled wake). No-op when it is
 * not queued. */
void pl_start_cap_withdraw(pl_start_cap *cap, pl_start_waiter *waiter);
