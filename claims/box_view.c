/* A box's view of its own claims: list, watch, and list again when the
 * watch ends (box_view.h). */
#include "claims/box_view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/names.h"

/* Retries of a list that failed, and heals of a watch that ended soon after
 * it started: 100 ms doubling to 5 s, each delay drawn from its upper half
 * so that the boxes of a fleet do not return to the store in step. A watch
 * that lived longer than the longest delay is healed after a delay drawn
 * from 0 to a tenth of StoreWatchTimeoutSec=: what ends one box's watch
 * (an etcd member restarted, its history compacted) ends every box's at
 * once, and a fleet's boxes should not list together. */
#define HEAL_BACKOFF_FIRST_USEC (100 * 1000ull)
#define HEAL_BACKOFF_MAX_USEC (5 * 1000 * 1000ull)

struct claims_box_view {
    claim_store *store;
    sd_event *loop;
    char box[ACT_NAME_MAX + 1];
    uint64_t watch_timeout_usec;
    const claims_box_view_ops *ops;
    void *userdata;
    claims_watch *watch;
    uint64_t revision;           /* where the next watch starts */
    uint64_t watch_started_usec; /* CLOCK_MONOTONIC */
    sd_event_source *retry_timer;
    uint64_t backoff_usec;      /* the last delay; 0 while nothing failed */
    uint64_t heal_started_usec; /* the list in flight's request, CLOCK_MONOTONIC */
    bool listing;               /* a list is in flight */
    bool held;                  /* claims_box_view_hold: no more lists */
    /* The hosts whose claims did not parse in the list in flight: a bad
     * record is not an absent one, so the owner leaves them as they are. */
    char (*malformed)[ACT_NAME_MAX + 1];
    size_t n_malformed;
};

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata);

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata)
{
    claims_box_view *view = userdata;
    view->retry_timer = sd_event_source_disable_unref(view->retry_timer);
    claims_box_view_heal(view);
    return 0;
}

static void heal_after(claims_box_view *view, uint64_t delay)
{
    view->retry_timer = sd_event_source_disable_unref(view->retry_timer);
    if (sd_event_add_time_relative(view->loop, &view->retry_timer, CLOCK_MONOTONIC, delay, 0,
                                   on_retry, view) < 0)
        act_log(LOG_ERR,
                "claim watch of box %s: cannot arm its retry timer; claims are not "
                "watched",
                view->box);
}

/* Heals after the next delay of the backoff. */
static void heal_later(claims_box_view *view)
{
    if (view->held)
        return;
    view->backoff_usec = view->backoff_usec ? view->backoff_usec * 2 : HEAL_BACKOFF_FIRST_USEC;
    if (view->backoff_usec > HEAL_BACKOFF_MAX_USEC)
        view->backoff_usec = HEAL_BACKOFF_MAX_USEC;
    uint64_t half = view->backoff_usec / 2;
    heal_after(view, half + act_draw_below(half + 1));
}

/* Heals after a random part of a tenth of the watch timeout. */
static void heal_after_jitter(claims_box_view *view)
{
    if (view->held)
        return;
    view->backoff_usec = 0;
    heal_after(view, act_draw_below(view->watch_timeout_usec / 10 + 1));
}

static void heal_failed(claims_box_view *view, const act_error *err)
{
    view->ops->store_health(view, err, view->userdata);
    heal_later(view);
}

static void forget_malformed(claims_box_view *view)
{
    free(view->malformed);
    view->malformed = NULL;
    view->n_malformed = 0;
}

static void on_list_problem(const char *host, const act_error *problem, void *userdata)
{
    claims_box_view *view = userdata;
    act_log(LOG_WARNING, "claim watch: %s", problem->message);
    if (!act_name_is_valid(host))
        return; /* a key that names no host: no host to leave alone */
    char(*grown)[ACT_NAME_MAX + 1] =
        realloc(view->malformed, (view->n_malformed + 1) * sizeof(*view->malformed));
    if (!grown)
        return;
    view->malformed = grown;
    snprintf(view->malformed[view->n_malformed++], ACT_NAME_MAX + 1, "%s", host);
}

bool claims_box_view_is_malformed(const claims_box_view *view, const char *host)
{
    for (size_t i = 0; i < view->n_malformed; i++)
        if (strcmp(view->malformed[i], host) == 0)
            return true;
    return false;
}

int claims_box_view_watch_from(claims_box_view *view, uint64_t revision, act_error *err)
{
    view->revision = revision + 1;
    view->watch_started_usec = act_loop_now_usec(view->loop);
    claims_watch_free(view->watch);
    view->watch = NULL;
    return claims_watch_box_start(view->store, view->box, view->revision, on_change, view,
                                  &view->watch, err);
}

/* An entry whose claim no longer names the box, or that marks the claim's
 * delete, has told the box so; it is removed (if still that entry) so the
 * box's index does not grow with every host that ever left it or was
 * deleted. Not waited for: one left behind is tidied at the next heal (a
 * listing removes the delete marks it passes over itself). */
static void tidy(claims_box_view *view, const claim *c, uint64_t revision)
{
    if (claim_names_box(c, view->box))
        return;
    act_error err = {0};
    if (claims_index_tidy_async(view->store, view->box, c->host, revision, NULL, NULL, &err) < 0)
        act_log(LOG_DEBUG, "claim watch of box %s: cannot tidy the index entry of %s: %s",
                view->box, c->host, err.message);
}

static void on_listed(claim_store *store, int result, claim *claims, size_t n, uint64_t revision,
                      const act_error *err, void *userdata)
{
    claims_box_view *view = userdata;
    view->listing = false;
    if (view->ops->heal_ended)
        view->ops->heal_ended(view, result, n,
                              act_loop_now_usec(view->loop) - view->heal_started_usec,
                              view->userdata);
    if (result < 0 || view->held) {
        free(claims);
        forget_malformed(view);
        if (result < 0)
            heal_failed(view, err);
        return;
    }
    view->ops->listed(view, claims, n, revision, view->userdata);
    for (size_t i = 0; i < n; i++)
        tidy(view, &claims[i], claims[i].revision);
    free(claims);
    forget_malformed(view);
    act_error start_err = {0};
    if (claims_box_view_watch_from(view, revision, &start_err) < 0) {
        heal_failed(view, &start_err);
        return;
    }
    view->backoff_usec = 0;
    view->ops->store_health(view, NULL, view->userdata);
}

void claims_box_view_heal(claims_box_view *view)
{
    if (view->held || view->listing)
        return;
    act_error err = {0};
    view->heal_started_usec = act_loop_now_usec(view->loop);
    if (claims_list_box_async(view->store, view->box, on_list_problem, view, on_listed, view,
                              &err) < 0) {
        heal_failed(view, &err);
        return;
    }
    view->listing = true;
}

static void on_change(claims_watch *watch, const claim_change *change, int error,
                      const act_error *err, void *userdata)
{
    claims_box_view *view = userdata;
    if (error < 0) {
        /* Logged once per end: a heal makes a new watch, so an end that
         * repeats (a compacted history) is not logged in a loop. */
        act_log(error == -ENODATA ? LOG_NOTICE : LOG_WARNING,
                "claim watch of box %s ended: %s; listing this box's claims again at one revision",
                view->box, err ? err->message : "unknown error");
        claims_watch_free(view->watch);
        view->watch = NULL;
        if (view->ops->watch_ended)
            view->ops->watch_ended(view, err, view->userdata);
        if (act_loop_now_usec(view->loop) - view->watch_started_usec >= HEAL_BACKOFF_MAX_USEC)
            heal_after_jitter(view);
        else
            heal_later(view);
        return;
    }
    if (change->revision >= view->revision)
        view->revision = change->revision + 1;
    if (change->kind == CLAIM_CHANGE_MALFORMED)
        act_log(LOG_WARNING, "claim watch: %s", change->problem.message);
    view->ops->changed(view, change, view->userdata);
    /* A delete's claim names no box: its mark is tidied too. */
    if (change->kind == CLAIM_CHANGE_PUT || change->kind == CLAIM_CHANGE_DELETE)
        tidy(view, &change->claim, change->revision);
}

int claims_box_view_new(claim_store *store, sd_event *loop, const char *box,
                        uint64_t watch_timeout_usec, const claims_box_view_ops *ops, void *userdata,
                        claims_box_view **out, act_error *err)
{
    if (!act_name_is_valid(box))
        return act_error_set(err, EINVAL, "claim watch: '%s' is not a valid box name", box);
    claims_box_view *view = calloc(1, sizeof(*view));
    if (!view)
        return act_error_set(err, ENOMEM, "claim watch: out of memory");
    view->store = store;
    view->loop = loop;
    snprintf(view->box, sizeof(view->box), "%s", box);
    view->watch_timeout_usec = watch_timeout_usec;
    view->ops = ops;
    view->userdata = userdata;
    *out = view;
    return 0;
}

void claims_box_view_hold(claims_box_view *view)
{
    view->held = true;
    view->retry_timer = sd_event_source_disable_unref(view->retry_timer);
}

uint64_t claims_box_view_revision(const claims_box_view *view)
{
    return view->revision;
}

void claims_box_view_free(claims_box_view *view)
{
    if (!view)
        return;
    claims_watch_free(view->watch);
    sd_event_source_disable_unref(view->retry_timer);
    forget_malformed(view);
    free(view);
}
