/* Scripted operations for the pipeline tests (see fake-ops.h). */
#include "fake-ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

typedef struct later {
    pl_wake *wake;
    pl_reason reason;
    bool retire;
    bool proven;
} later;

static int complete_later(sd_event_source *source, uint64_t usec, void *userdata)
{
    later *what = userdata;
    if (what->retire)
        pl_wake_retired(what->wake, what->proven, what->proven ? NULL : "fake: cgroup not empty");
    else
        pl_wake_complete(what->wake, what->reason, what->reason ? "fake: step %s said %s" : NULL,
                         pl_step_to_string(pl_wake_step(what->wake)),
                         pl_reason_to_string(what->reason));
    free(what);
    sd_event_source_disable_unref(source);
    return 0;
}

static void fake_step(pl_wake *wake, void *userdata)
{
    fake_ops *fake = userdata;
    pl_step step = pl_wake_step(wake);
    unsigned index = fake->calls[step]++;
    if (fake->log_len < FAKE_MAX_LOG) {
        fake->log_swap[fake->log_len] = pl_wake_is_swap(wake);
        fake->log[fake->log_len++] = step;
    }
    if (step == PL_STEP_RESERVE && fake->reserve_order) {
        snprintf(fake->reserve_order[*fake->reserve_order_len], 16, "%s", fake->label);
        (*fake->reserve_order_len)++;
    }
    if (fake->on_call)
        fake->on_call(fake, wake, step);

    bool retire = step == PL_STEP_FAILED;
    if (retire && index < FAKE_MAX_CALLS)
        fake->retirements[index] = *pl_wake_retirement(wake);
    pl_reason reason = index < FAKE_MAX_CALLS ? fake->outcome[step][index] : PL_REASON_NONE;
    bool proven = !(retire && index < FAKE_MAX_CALLS && fake->unproven[index]);

    if (fake->hang[step]) {
        fake->hanging = wake;
        return;
    }
    if (fake->delay_usec[step]) {
        later *what = calloc(1, sizeof(*what));
        if (!what)
            abort();
        *what = (later){.wake = wake, .reason = reason, .retire = retire, .proven = proven};
        if (sd_event_add_time_relative(fake->loop, NULL, CLOCK_MONOTONIC, fake->delay_usec[step], 1,
                                       complete_later, what) < 0)
            abort();
        return;
    }
    if (retire)
        pl_wake_retired(wake, proven, proven ? NULL : "fake: cgroup not empty");
    else
        pl_wake_complete(wake, reason, reason ? "fake: step %s said %s" : NULL,
                         pl_step_to_string(step), pl_reason_to_string(reason));
}

static void fake_abandon(pl_wake *wake, pl_step step, void *userdata)
{
    fake_ops *fake = userdata;
    fake->abandoned++;
    fake->hanging = NULL;
}

void fake_ops_init(fake_ops *fake, sd_event *loop)
{
    memset(fake, 0, sizeof(*fake));
    fake->loop = loop;
    fake->label = "host";
    fake->table = (pl_ops){
        .read = fake_step,
        .admit = fake_step,
        .restore = fake_step,
        .reserve = fake_step,
        .materialize = fake_step,
        .prepare = fake_step,
        .gate = fake_step,
        .exec = fake_step,
        .ready = fake_step,
        .replicate = fake_step,
        .publish = fake_step,
        .healthy = fake_step,
        .failed = fake_step,
        .abandon = fake_abandon,
    };
}

void fake_on_event(pl_host *host, const pl_wake_event *event, void *userdata)
{
    fake_ops *fake = userdata;
    if (fake->n_events >= FAKE_MAX_LOG)
        return;
    fake->events[fake->n_events++] = (fake_event){
        .type = event->type,
        .step = event->step,
        .attempt = event->attempt,
        .reason = event->reason,
        .delay_usec = event->delay_usec,
        .at_usec = event->at_usec,
        .swap = event->swap,
    };
}

void fake_on_done(pl_host *host, const pl_wake_result *result, void *userdata)
{
    fake_result *out = userdata;
    out->count++;
    out->kind = result->kind;
    out->reason = result->reason;
    out->step = result->step;
    out->attempts = result->attempts;
    out->unproven = result->unproven;
    snprintf(out->message, sizeof(out->message), "%s", result->message ? result->message : "");
}

bool fake_run_until(sd_event *loop, const unsigned *flag, unsigned timeout_msec)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_msec * 1000;
    while (!*flag && act_now_usec() < deadline)
        if (sd_event_run(loop, 10 * 1000) < 0)
            return false;
    return *flag != 0;
}

void fake_run_for(sd_event *loop, unsigned msec)
{
    uint64_t deadline = act_now_usec() + (uint64_t)msec * 1000;
    while (act_now_usec() < deadline)
        sd_event_run(loop, 5 * 1000);
}

unsigned fake_count_events(const fake_ops *fake, pl_wake_event_type type)
{
    unsigned count = 0;
    for (unsigned i = 0; i < fake->n_events; i++)
        count += fake->events[i].type == type;
    return count;
}

int fake_find_event(const fake_ops *fake, pl_wake_event_type type, unsigned nth)
{
    for (unsigned i = 0; i < fake->n_events; i++)
        if (fake->events[i].type == type && nth-- == 0)
            return (int)i;
    return -1;
}
