/* Start budgets: per-host token bucket and box-wide cap (see budget.h). */
#include "activator/pipeline/budget.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#define USEC_PER_SEC 1000000ULL

int pl_token_bucket_init(pl_token_bucket *bucket, double rate_per_sec, uint64_t now_usec,
                         act_error *err)
{
    assert(bucket);
    if (!isfinite(rate_per_sec) || rate_per_sec <= 0 || rate_per_sec > 1e6)
        return act_error_set(err, EINVAL,
                             "start rate %g per second is out of range: use a number above 0 "
                             "and at most 1000000",
                             rate_per_sec);
    uint64_t interval = (uint64_t)llround((double)USEC_PER_SEC / rate_per_sec);
    if (interval == 0)
        interval = 1;
    /* One second of tokens, and never less than one token: a host limited
     * to one start every five seconds must still be able to start. */
    uint64_t burst = rate_per_sec < 1.0 ? 1 : (uint64_t)floor(rate_per_sec);
    *bucket = (pl_token_bucket){
        .interval_usec = interval,
        .tolerance_usec = (burst - 1) * interval,
        .full_at_usec = now_usec,
    };
    return 0;
}

uint64_t pl_token_bucket_take(pl_token_bucket *bucket, uint64_t now_usec)
{
    assert(bucket);
    uint64_t full_at = bucket->full_at_usec > now_usec ? bucket->full_at_usec : now_usec;
    /* A token is there when the debt ahead of now stays within the burst. */
    if (full_at - now_usec > bucket->tolerance_usec)
        return full_at - now_usec - bucket->tolerance_usec;
    bucket->full_at_usec = full_at + bucket->interval_usec;
    return 0;
}

unsigned pl_token_bucket_available(const pl_token_bucket *bucket, uint64_t now_usec)
{
    assert(bucket);
    uint64_t debt = bucket->full_at_usec > now_usec ? bucket->full_at_usec - now_usec : 0;
    uint64_t capacity = bucket->tolerance_usec + bucket->interval_usec;
    if (debt >= capacity)
        return 0;
    return (unsigned)((capacity - debt) / bucket->interval_usec);
}

static int check_limit(unsigned limit, act_error *err)
{
    if (limit < 1)
        return act_error_set(err, EINVAL,
                             "a cap of 0 starts in flight would never start anything: use 1 or "
                             "more");
    return 0;
}

int pl_start_cap_init(pl_start_cap *cap, unsigned limit, act_error *err)
{
    assert(cap);
    int r = check_limit(limit, err);
    if (r < 0)
        return r;
    *cap = (pl_start_cap){.limit = limit};
    return 0;
}

bool pl_start_cap_acquire(pl_start_cap *cap, pl_start_waiter *waiter, pl_start_granted_fn granted,
                          void *userdata)
{
    assert(cap);
    assert(waiter);
    /* A free slot goes to a newcomer only when nobody is held; release hands
     * slots to held starts directly, so that cannot jump the queue anyway. */
    if (cap->in_flight < cap->limit && cap->held == 0) {
        cap->in_flight++;
        return true;
    }
    /* Only a start that is held needs to be told when its turn comes. */
    assert(granted);
    *waiter = (pl_start_waiter){
        .prev = cap->tail,
        .granted = granted,
        .userdata = userdata,
        .queued = true,
    };
    if (cap->tail)
        cap->tail->next = waiter;
    else
        cap->head = waiter;
    cap->tail = waiter;
    cap->held++;
    return false;
}

static void unlink_waiter(pl_start_cap *cap, pl_start_waiter *waiter)
{
    if (waiter->prev)
        waiter->prev->next = waiter->next;
    else
        cap->head = waiter->next;
    if (waiter->next)
        waiter->next->prev = waiter->prev;
    else
        cap->tail = waiter->prev;
    waiter->prev = waiter->next = NULL;
    waiter->queued = false;
    cap->held--;
}

void pl_start_cap_release(pl_start_cap *cap)
{
    assert(cap);
    if (cap->in_flight == 0)
        return;
    pl_start_waiter *first = cap->head;
    /* Above a lowered limit the slot is given back, not passed on. */
    if (!first || cap->in_flight > cap->limit) {
        cap->in_flight--;
        return;
    }
    unlink_waiter(cap, first);
    /* The slot passes from the releaser to the first held start unchanged,
     * so in_flight stays as it is. */
    first->granted(first, first->userdata);
}

int pl_start_cap_set_limit(pl_start_cap *cap, unsigned limit, act_error *err)
{
    assert(cap);
    int r = check_limit(limit, err);
    if (r < 0)
        return r;
    cap->limit = limit;
    while (cap->head && cap->in_flight < cap->limit) {
        pl_start_waiter *first = cap->head;
        unlink_waiter(cap, first);
        cap->in_flight++;
        first->granted(first, first->userdata);
    }
    return 0;
}

void pl_start_cap_withdraw(pl_start_cap *cap, pl_start_waiter *waiter)
{
    assert(cap);
    assert(waiter);
    if (waiter->queued)
        unlink_waiter(cap, waiter);
}
