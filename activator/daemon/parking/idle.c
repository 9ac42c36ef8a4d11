/* Idle parking: a serving host with no connection on its sockets for
 * IdleTimeoutSec is parked, its generation retired with proof, and its
 * sockets watched again for the next client; or with ParkMode=freeze
 * frozen. What follows is the choice of whoever asked for the watch
 * (parking/freeze.c: ad_freeze_or_park). */
#include "activator/daemon/parking/idle.h"

#include <assert.h>
#include <inttypes.h>

#include "activator/connections/connections.h"
#include "common/clock.h"
#include "common/log.h"

/* Checks often enough that a host parks within a quarter of its timeout
 * late, and never more than every 2 s (a box may serve many hosts). */
static uint64_t check_interval(const cfg_host *config)
{
    uint64_t interval = config->idle_timeout_usec / 4;
    if (interval > 2 * 1000 * 1000)
        interval = 2 * 1000 * 1000;
    if (interval < 50 * 1000)
        interval = 50 * 1000;
    return interval;
}

static int on_idle_check(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_host *host = userdata;
    const cfg_host *config = ad_host_config(host);
    uint64_t now = act_loop_now_usec(host->daemon->loop);
    uint64_t connections = 0;
    act_error err = {0};
    if (conn_count(host->listen, host->n_listen, &connections, &err) < 0) {
        /* Unknown is not idle: never park a host on a failed count. */
        act_log(LOG_WARNING, "host %s: %s", config->name, err.message);
        connections = 1;
    }
    if (connections > 0)
        host->last_active_usec = now;
    if (now - host->last_active_usec >= config->idle_timeout_usec) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = config->name},
                       "host %s: no connection for %" PRIu64 " s; %s", config->name,
                       config->idle_timeout_usec / 1000000,
                       config->park_freeze ? "freezing" : "parking");
        ad_host_idle_fn on_idle = host->on_idle;
        ad_idle_unwatch(host);
        on_idle(host);
        return 0;
    }
    sd_event_source_set_time_relative(source, check_interval(config));
    sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
    return 0;
}

void ad_idle_unwatch(ad_host *host)
{
    assert(host);
    host->idle_timer = sd_event_source_disable_unref(host->idle_timer);
    host->on_idle = NULL;
}

void ad_idle_watch(ad_host *host, ad_host_idle_fn on_idle)
{
    assert(host && on_idle);
    const cfg_host *config = ad_host_config(host);
    ad_daemon *daemon = host->daemon;
    ad_idle_unwatch(host);
    /* Without sockets the daemon cannot see clients: such a host parks only
     * when its generation exits with status 0. */
    if (!config->idle_timeout_usec || !host->n_listen)
        return;
    host->on_idle = on_idle;
    host->last_active_usec = act_loop_now_usec(daemon->loop);
    if (sd_event_add_time_relative(daemon->loop, &host->idle_timer, CLOCK_MONOTONIC,
                                   check_interval(config), 0, on_idle_check, host) < 0)
        act_log(LOG_ERR, "host %s: cannot watch for idleness", config->name);
}
