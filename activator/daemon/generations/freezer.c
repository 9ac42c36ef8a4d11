/* The freezer of a generation's leaf (ParkMode=freeze; parking/freeze.c
 * decides when): cgroup.freeze written, then the freeze or the thaw
 * settling, learnt through the leaf's cgroup.events. A retirement takes the
 * events fd over (ad_generation_stop_settling); killing a frozen leaf and
 * thawing it after is the retirement's own (retire.c). */
#include "activator/daemon/generations/internal.h"

#include <assert.h>
#include <errno.h>
#include <sys/epoll.h>

#include "common/log.h"

void ad_generation_stop_settling(ad_generation *gen)
{
    gen->freeze_source = sd_event_source_disable_unref(gen->freeze_source);
    gen->settled = NULL;
}

static void check_settled(ad_generation *gen)
{
    bool frozen = !gen->frozen;
    act_error err = {0};
    if (cg_leaf_frozen(gen->leaf, &frozen, &err) < 0) {
        act_log(LOG_WARNING, "host %s: %s", gen->host->name, err.message);
        return;
    }
    if (frozen != gen->frozen)
        return;
    void (*settled)(ad_generation *, void *) = gen->settled;
    void *userdata = gen->settled_userdata;
    ad_generation_stop_settling(gen);
    if (settled)
        settled(gen, userdata);
}

static int on_freeze_events(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    check_settled(userdata);
    return 0;
}

static int set_frozen(ad_generation *gen, bool frozen, void (*settled)(ad_generation *, void *),
                      void *userdata, act_error *err)
{
    assert(gen && !gen->retired);
    ad_generation_stop_settling(gen);
    int r = cg_leaf_freeze(gen->leaf, frozen, err);
    if (r < 0)
        return r;
    gen->frozen = frozen;
    gen->freezer_writes++;
    gen->settled = settled;
    gen->settled_userdata = userdata;
    int events_fd = cg_leaf_events_fd(gen->leaf, err);
    if (events_fd < 0)
        return events_fd;
    if (sd_event_add_io(gen->host->daemon->loop, &gen->freeze_source, events_fd,
                        CG_LEAF_EVENTS_POLL, on_freeze_events, gen) < 0)
        return act_error_set(err, EIO, "cannot watch %s/cgroup.events", cg_leaf_path(gen->leaf));
    check_settled(gen);
    return 0;
}

int ad_generation_freeze(ad_generation *gen, void (*settled)(ad_generation *, void *),
                         void *userdata, act_error *err)
{
    ad_generation_stop_supervision(gen);
    return set_frozen(gen, true, settled, userdata, err);
}

int ad_generation_thaw(ad_generation *gen, void (*settled)(ad_generation *, void *), void *userdata,
                       act_error *err)
{
    return set_frozen(gen, false, settled, userdata, err);
}
