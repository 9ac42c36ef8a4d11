#include "activator/daemon/step_holds.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "activator/daemon/host.h"
#include "common/log.h"

#define HOLD_PATH_MAX 4096

static const act_pipeline_ops *base;
static act_pipeline_ops held;
static sd_event *hold_loop;
static char *hold_paths[_ACT_STEP_MAX]; /* by step; NULL: not held */

typedef struct pending_hold {
    act_wake *wake;
    void *userdata;
    act_step step;
} pending_hold;

static act_step_fn base_op(act_step step)
{
    switch (step) {
    case ACT_STEP_READ:
        return base->read;
    case ACT_STEP_ADMIT:
        return base->admit;
    case ACT_STEP_RESTORE:
        return base->restore;
    case ACT_STEP_RESERVE:
        return base->reserve;
    case ACT_STEP_MATERIALIZE:
        return base->materialize;
    case ACT_STEP_PREPARE:
        return base->prepare;
    case ACT_STEP_GATE:
        return base->gate;
    case ACT_STEP_EXEC:
        return base->exec;
    case ACT_STEP_READY:
        return base->ready;
    case ACT_STEP_REPLICATE:
        return base->replicate;
    case ACT_STEP_PUBLISH:
        return base->publish;
    case ACT_STEP_HEALTHY:
        return base->healthy;
    case ACT_STEP_FAILED:
        return base->failed;
    default:
        return NULL;
    }
}

/* The operation itself, as the pipeline would have called it; a NULL
 * entry is a step with nothing to do. */
static void run_base(act_wake *wake, act_step step, void *userdata)
{
    act_step_fn op = base_op(step);
    if (!op) {
        if (step == ACT_STEP_FAILED)
            act_wake_retired(wake, true, "nothing to retire");
        else
            act_wake_ok(wake);
        return;
    }
    op(wake, userdata);
}

static void release(sd_event_source *source, pending_hold *hold)
{
    act_wake *wake = hold->wake;
    void *userdata = hold->userdata;
    act_step step = hold->step;
    /* The source is floating, the loop's only: taking it back drops that
     * last reference, which frees hold too. */
    sd_event_source_set_enabled(source, SD_EVENT_OFF);
    sd_event_source_set_floating(source, false);
    run_base(wake, step, userdata);
}

static int on_directory_change(sd_event_source *source, const struct inotify_event *event,
                               void *userdata)
{
    pending_hold *hold = userdata;
    if (access(hold_paths[hold->step], F_OK) == 0)
        release(source, hold);
    return 0;
}

static void held_op(act_wake *wake, void *userdata)
{
    act_step step = act_wake_step(wake);
    const char *path = hold_paths[step];
    if (!path || access(path, F_OK) == 0) {
        run_base(wake, step, userdata);
        return;
    }
    char directory[HOLD_PATH_MAX];
    snprintf(directory, sizeof(directory), "%s", path);
    pending_hold *hold = calloc(1, sizeof(*hold));
    sd_event_source *source = NULL;
    if (!hold ||
        sd_event_add_inotify(hold_loop, &source, dirname(directory),
                             IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE,
                             on_directory_change, hold) < 0) {
        act_log(LOG_ERR, "test hold %s: cannot watch %s; not holding", act_step_to_string(step),
                path);
        free(hold);
        run_base(wake, step, userdata);
        return;
    }
    *hold = (pending_hold){.wake = wake, .userdata = userdata, .step = step};
    sd_event_source_set_destroy_callback(source, free);
    sd_event_source_set_floating(source, true);
    sd_event_source_unref(source);
    act_log(LOG_NOTICE, "host %s: step %s held: waiting for %s",
            act_daemon_host_name(userdata), act_step_to_string(step), path);
    /* Created between the first look and the watch: no event will come. */
    if (access(path, F_OK) == 0)
        release(source, hold);
}

static act_step step_named(const char *name)
{
    for (int step = ACT_STEP_READ; step < _ACT_STEP_MAX; step++)
        if (strcmp(act_step_to_string((act_step)step), name) == 0)
            return (act_step)step;
    return ACT_STEP_NONE;
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
        act_step step = ACT_STEP_NONE;
        if (colon) {
            *colon = '\0';
            step = step_named(item);
        }
        if (step == ACT_STEP_NONE || step == ACT_STEP_READY || !colon || colon[1] != '/' ||
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

const act_pipeline_ops *act_step_holds_ops(const act_pipeline_ops *ops, sd_event *loop)
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
