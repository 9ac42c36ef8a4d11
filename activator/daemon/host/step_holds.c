#include "activator/daemon/host/step_holds.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "activator/daemon/host/host.h"
#include "common/log.h"

#define HOLD_PATH_MAX 4096

static const pl_ops *base;
static pl_ops held;
static sd_event *hold_loop;
static char *hold_paths[_PL_STEP_MAX]; /* by step; NULL: not held */

/* Points outside the pipeline's steps: a move's, the admission's answer,
 * a failed swap's write-back, and a fleet op's compare-and-swap. */
static const char *const point_names[] = {"drained", "checkpointed", "admitted", "swap_failed",
                                          "fleet_cas"};
#define N_POINTS (sizeof(point_names) / sizeof(point_names[0]))
static char *point_paths[N_POINTS];

typedef struct pending_hold {
    pl_wake *wake;
    void *userdata;
    pl_step step;
    const char *path;               /* what it waits for */
    void (*go)(ad_host *host);      /* a move's point: what goes on, with userdata */
    void (*go_call)(void *userdata); /* a point of no host's (ad_step_holds_call) */
} pending_hold;

static pl_step_fn base_op(pl_step step)
{
    switch (step) {
    case PL_STEP_READ:
        return base->read;
    case PL_STEP_ADMIT:
        return base->admit;
    case PL_STEP_RESTORE:
        return base->restore;
    case PL_STEP_RESERVE:
        return base->reserve;
    case PL_STEP_MATERIALIZE:
        return base->materialize;
    case PL_STEP_PREPARE:
        return base->prepare;
    case PL_STEP_GATE:
        return base->gate;
    case PL_STEP_EXEC:
        return base->exec;
    case PL_STEP_READY:
        return base->ready;
    case PL_STEP_REPLICATE:
        return base->replicate;
    case PL_STEP_PUBLISH:
        return base->publish;
    case PL_STEP_HEALTHY:
        return base->healthy;
    case PL_STEP_FAILED:
        return base->failed;
    default:
        return NULL;
    }
}

/* The operation itself, as the pipeline would have called it; a NULL
 * entry is a step with nothing to do. */
static void run_base(pl_wake *wake, pl_step step, void *userdata)
{
    pl_step_fn op = base_op(step);
    if (!op) {
        if (step == PL_STEP_FAILED)
            pl_wake_retired(wake, true, "nothing to retire");
        else
            pl_wake_ok(wake);
        return;
    }
    op(wake, userdata);
}

static void release(sd_event_source *source, pending_hold *hold)
{
    pl_wake *wake = hold->wake;
    void *userdata = hold->userdata;
    pl_step step = hold->step;
    void (*go)(ad_host *host) = hold->go;
    void (*go_call)(void *userdata) = hold->go_call;
    /* The source is floating, the loop's only: taking it back drops that
     * last reference, which frees hold too. */
    sd_event_source_set_enabled(source, SD_EVENT_OFF);
    sd_event_source_set_floating(source, false);
    if (go_call)
        go_call(userdata);
    else if (go)
        go(userdata);
    else
        run_base(wake, step, userdata);
}

static int on_directory_change(sd_event_source *source, const struct inotify_event *event,
                               void *userdata)
{
    pending_hold *hold = userdata;
    if (access(hold->path, F_OK) == 0)
        release(source, hold);
    return 0;
}

/* Watches path's directory for hold; false when it cannot. */
static bool watch_for(pending_hold *hold)
{
    char directory[HOLD_PATH_MAX];
    snprintf(directory, sizeof(directory), "%s", hold->path);
    sd_event_source *source = NULL;
    if (sd_event_add_inotify(hold_loop, &source, dirname(directory),
                             IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE,
                             on_directory_change, hold) < 0)
        return false;
    sd_event_source_set_destroy_callback(source, free);
    sd_event_source_set_floating(source, true);
    sd_event_source_unref(source);
    /* Created between the first look and the watch: no event will come. */
    if (access(hold->path, F_OK) == 0)
        release(source, hold);
    return true;
}

static const char *point_path(const char *point)
{
    for (size_t i = 0; i < N_POINTS; i++)
        if (strcmp(point_names[i], point) == 0)
            return point_paths[i];
    return NULL;
}

void ad_step_holds_call(const char *point, const char *what, void (*go)(void *userdata),
                        void *userdata)
{
    const char *path = point_path(point);
    if (!path || !hold_loop || access(path, F_OK) == 0) {
        go(userdata);
        return;
    }
    pending_hold *hold = calloc(1, sizeof(*hold));
    if (!hold) {
        go(userdata);
        return;
    }
    *hold = (pending_hold){.userdata = userdata, .path = path, .go_call = go};
    act_log(LOG_NOTICE, "%s: point %s held: waiting for %s", what, point, path);
    if (!watch_for(hold)) {
        act_log(LOG_ERR, "test hold %s: cannot watch %s; not holding", point, path);
        free(hold);
        go(userdata);
    }
}

void ad_step_holds_point(ad_host *host, const char *point, void (*go)(ad_host *host))
{
    const char *path = point_path(point);
    if (!path || !hold_loop || access(path, F_OK) == 0) {
        go(host);
        return;
    }
    pending_hold *hold = calloc(1, sizeof(*hold));
    if (!hold) {
        go(host);
        return;
    }
    *hold = (pending_hold){.userdata = host, .path = path, .go = go};
    act_log(LOG_NOTICE, "host %s: point %s held: waiting for %s", host->name, point, path);
    if (!watch_for(hold)) {
        act_log(LOG_ERR, "test hold %s: cannot watch %s; not holding", point, path);
        free(hold);
        go(host);
    }
}

static void held_op(pl_wake *wake, void *userdata)
{
    pl_step step = pl_wake_step(wake);
    const char *path = hold_paths[step];
    if (!path || access(path, F_OK) == 0) {
        run_base(wake, step, userdata);
        return;
    }
    pending_hold *hold = calloc(1, sizeof(*hold));
    if (!hold) {
        run_base(wake, step, userdata);
        return;
    }
    *hold = (pending_hold){.wake = wake, .userdata = userdata, .step = step, .path = path};
    act_log(LOG_NOTICE, "host %s: step %s held: waiting for %s", ((ad_host *)userdata)->name,
            pl_step_to_string(step), path);
    if (!watch_for(hold)) {
        act_log(LOG_ERR, "test hold %s: cannot watch %s; not holding", pl_step_to_string(step),
                path);
        free(hold);
        run_base(wake, step, userdata);
    }
}

static pl_step step_named(const char *name)
{
    for (int step = PL_STEP_READ; step < _PL_STEP_MAX; step++)
        if (strcmp(pl_step_to_string((pl_step)step), name) == 0)
            return (pl_step)step;
    return PL_STEP_NONE;
}

/* "gate:/tmp/x,publish:/tmp/y"; false (and a logged reason) when bad. */
static bool parse_holds(const char *spec)
{
    char *copy = strdup(spec);
    bool ok = copy != NULL;
    char *save = NULL;
    for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; ok && item;
         item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        pl_step step = PL_STEP_NONE;
        if (colon) {
            *colon = '\0';
            step = step_named(item);
            for (size_t i = 0; step == PL_STEP_NONE && i < N_POINTS; i++) {
                if (strcmp(point_names[i], item) != 0 || colon[1] != '/')
                    continue;
                free(point_paths[i]);
                point_paths[i] = strdup(colon + 1);
                ok = point_paths[i] != NULL;
                step = _PL_STEP_MAX; /* a point, not a step */
            }
            if (step == _PL_STEP_MAX)
                continue;
        }
        if (step == PL_STEP_NONE || step == PL_STEP_READY || !colon || colon[1] != '/' ||
            strlen(colon + 1) >= HOLD_PATH_MAX) {
            act_log(LOG_ERR, "ACTIVATOR_TEST_HOLD=%s: \"%s\" is not STEP:/ABSOLUTE/PATH with a "
                             "step other than ready; no step is held",
                    spec, item);
            ok = false;
            break;
        }
        free(hold_paths[step]);
        hold_paths[step] = strdup(colon + 1);
        ok = hold_paths[step] != NULL;
    }
    free(copy);
    return ok;
}

const pl_ops *ad_step_holds_ops(const pl_ops *ops, sd_event *loop)
{
    const char *spec = getenv("ACTIVATOR_TEST_HOLD");
    if (!spec || !spec[0])
        return ops;
    if (base)
        return &held; /* parsed once, for every host */
    if (!parse_holds(spec))
        return ops;
    base = ops;
    hold_loop = loop;
    held = *ops;
    held.read = held.admit = held.restore = held.reserve = held.materialize = held.prepare =
        held.gate = held.exec = held.replicate = held.publish = held.healthy = held.failed =
            held_op;
    return &held;
}

void ad_test_hold_release_work(const char *what, const char *host)
{
    /* On a worker thread, which may block: a poll is enough for a test. */
    const char *path = getenv("ACTIVATOR_TEST_RELEASE_HOLD");
    if (!path || !path[0] || access(path, F_OK) == 0)
        return;
    act_log(LOG_NOTICE, "release work %s of host %s held: waiting for %s", what, host, path);
    while (access(path, F_OK) != 0)
        usleep(10 * 1000);
}

typedef struct freeze_hold {
    char path[HOLD_PATH_MAX];
    void (*fn)(void *);
    void *userdata;
} freeze_hold;

static void freeze_hold_release(sd_event_source *source, freeze_hold *hold)
{
    void (*fn)(void *) = hold->fn;
    void *userdata = hold->userdata;
    sd_event_source_set_enabled(source, SD_EVENT_OFF);
    sd_event_source_set_floating(source, false); /* frees hold */
    fn(userdata);
}

static int on_freeze_hold_change(sd_event_source *source, const struct inotify_event *event,
                                 void *userdata)
{
    freeze_hold *hold = userdata;
    if (access(hold->path, F_OK) == 0)
        freeze_hold_release(source, hold);
    return 0;
}

bool ad_test_hold_freeze(const char *host, sd_event *loop, void (*fn)(void *), void *userdata)
{
    const char *path = getenv("ACTIVATOR_TEST_FREEZE_HOLD");
    if (!path || path[0] != '/' || strlen(path) >= HOLD_PATH_MAX || access(path, F_OK) == 0)
        return false;
    freeze_hold *hold = calloc(1, sizeof(*hold));
    if (!hold)
        return false;
    snprintf(hold->path, sizeof(hold->path), "%s", path);
    hold->fn = fn;
    hold->userdata = userdata;
    char directory[HOLD_PATH_MAX];
    snprintf(directory, sizeof(directory), "%s", path);
    sd_event_source *source = NULL;
    if (sd_event_add_inotify(loop, &source, dirname(directory),
                             IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE,
                             on_freeze_hold_change, hold) < 0) {
        act_log(LOG_ERR, "test freeze hold: cannot watch %s; not holding", path);
        free(hold);
        return false;
    }
    sd_event_source_set_destroy_callback(source, free);
    sd_event_source_set_floating(source, true);
    sd_event_source_unref(source);
    act_log(LOG_NOTICE, "host %s: freeze held: waiting for %s", host, path);
    if (access(path, F_OK) == 0)
        freeze_hold_release(source, hold);
    return true;
}
