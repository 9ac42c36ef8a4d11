/* A host's program in a leaf of its own (generations/helper_leaf.h). */
#include "activator/daemon/generations/helper_leaf.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ad_helper {
    ad_generation *gen;
    sd_event_source *timer;
    bool ending;
    ad_helper_spec spec;
};

static void on_retired(ad_generation *gen, bool proven, const char *why, void *userdata)
{
    ad_helper *helper = userdata;
    helper->spec.retired(proven, why, helper->spec.userdata);
    ad_generation_free(helper->gen);
    free(helper);
}

void ad_helper_end(ad_helper *helper)
{
    if (!helper || helper->ending)
        return;
    helper->ending = true;
    helper->timer = sd_event_source_disable_unref(helper->timer);
    helper->gen->on_exit = NULL;
    ad_generation_retire(helper->gen, false, on_retired, helper);
}

static void on_exit_(ad_generation *gen, void *userdata)
{
    ad_helper *helper = userdata;
    helper->spec.exited(gen->exit_status, helper->spec.userdata);
    ad_helper_end(helper);
}

static int on_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_helper *helper = userdata;
    helper->spec.timed_out(helper->spec.userdata);
    ad_helper_end(helper);
    return 0;
}

int ad_helper_start(ad_host *host, const ad_helper_spec *spec, ad_helper **out, act_error *err)
{
    assert(host && spec && spec->exited && spec->timed_out && spec->retired && out);
    *out = NULL;
    ad_helper *helper = calloc(1, sizeof(*helper));
    if (!helper)
        return act_error_set(err, ENOMEM, "out of memory");
    helper->spec = *spec;
    int r = ad_host_state_directory(host, err);
    if (r == 0)
        r = ad_generation_new(host, spec->kind, spec->number, &helper->gen, err);
    if (r < 0) {
        free(helper);
        return r;
    }
    *out = helper;
    helper->gen->on_exit = on_exit_;
    helper->gen->on_exit_userdata = helper;
    helper->gen->helper_stdout_fd = spec->stdout_fd;
    r = ad_generation_spawn_helper(helper->gen, spec->argv, spec->extra_env, true, err);
    helper->gen->helper_stdout_fd = -1;
    if (r < 0)
        return r;
    r = sd_event_add_time_relative(host->daemon->loop, &helper->timer, CLOCK_MONOTONIC,
                                   spec->timeout_usec, 0, on_timeout, helper);
    if (r < 0)
        return act_error_set(err, -r, "cannot arm its timeout: %s", strerror(-r));
    return 0;
}
