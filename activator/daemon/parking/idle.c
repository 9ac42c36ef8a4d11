/* Idle parking: a serving host with no connection on its sockets for
 * IdleTimeoutSec is parked, its generation retired with proof, and its
 * sockets watched again for the next client; or with ParkMode=freeze
 * frozen (what follows is hosts/hosts.c's choice, through daemon->host_idle). */
#include "activator/daemon/parking/idle.h"

#include <assert.h>
#include <inttypes.h>

#include "activator/connections/connections.h"
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
    uint64_t now = ad_now(ad_host_daemon(host));
    uint64_t connections = 0;
    act_error err = {0};
    if (conn_count(ad_host_listen_addresses(host), ad_host_n_listen(host), &connections,
                   &err) < 0) {
        /* Unknown is not idle: never park a host on a failed count. */
        act_log(LOG_WARNING, "host %s: %s", config->name, err.message);
        connections = 1;
    }
    if (connections > 0)
        ad_host_set_last_active(host, now);
    if (now - ad_host_last_active(host) >= config->idle_timeout_usec) {
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = config->name},
                       "host %s: no connection for %" PRIu64 " s; %s", config->name,
                       config->idle_timeout_usec / 1000000,
                       config->park_freeze ? "freezing" : "parking");
        sd_event_source **timer = ad_host_idle_timer(host);
        *timer = sd_event_source_disable_unref(*timer);
        ad_daemon *daemon = ad_host_daemon(host);
        if (daemon->host_idle)
            daemon->host_idle(host);
        else
            pl_host_park(ad_host_pipeline(host), PL_PARK_IDLE);
        return 0;
    }
    sd_event_source_set_time_relative(source, check_interval(config));
    sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
    return 0;
}

void ad_idle_watch(ad_host *host, bool watch)
{
    assert(host);
    const cfg_host *config = ad_host_config(host);
    ad_daemon *daemon = ad_host_daemon(host);
    sd_event_source **timer = ad_host_idle_timer(host);
    *timer = sd_event_source_disable_unref(*timer);
    /* Without sockets the daemon cannot see clients: such a host parks only
     * when its generation exits with status 0. */
    if (!watch || !config->idle_timeout_usec || !ad_host_n_listen(host))
        return;
    ad_host_set_last_active(host, ad_now(daemon));
    if (sd_event_add_time_relative(daemon->loop, timer, CLOCK_MONOTONIC, check_interval(config),
                                   0, on_idle_check, host) < 0)
        act_log(LOG_ERR, "host %s: cannot watch for idleness", config->name);
}
