/* The host table: one entry per configured host, sorted by name, and the
 * hosts a reload removed, kept until exit. A host is set up here with its
 * pipeline, whose hook is transitions.c's, and with its sockets
 * (sockets.c); a reload's changes are applied here once box/reload.c
 * checked them, so that applying cannot fail. */
#include "activator/daemon/hosts/hosts.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "activator/daemon/accounts/dynamic_users.h"
#include "activator/daemon/claim/release.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/hosts/fd_store.h"
#include "activator/daemon/hosts/internal.h"
#include "activator/daemon/moves/checkpoint_every.h"
#include "activator/daemon/moves/move.h"
#include "activator/daemon/parking/freeze.h"
#include "activator/daemon/parking/idle.h"
#include "activator/daemon/wake/ops.h"
#ifdef ACTIVATOR_TEST_HOOKS
#include "activator/daemon/host/step_holds.h"
#endif
#include "common/log.h"

static int compare_host_name(const void *key, const void *element)
{
    const ad_host *const *host = element;
    return strcmp(key, (*host)->name);
}

ad_host *ad_hosts_find(ad_daemon *daemon, const char *name)
{
    assert(daemon && name);
    ad_host **found =
        bsearch(name, daemon->hosts, daemon->n_hosts, sizeof(*daemon->hosts), compare_host_name);
    return found ? *found : NULL;
}

/* ---- set-up and teardown ---------------------------------------------------- */

/* The pipeline's operations: the daemon's own, wrapped in the tests' step
 * holds when the build has them. */
static const pl_ops *operations(ad_daemon *daemon)
{
#ifdef ACTIVATOR_TEST_HOOKS
    return ad_step_holds_ops(&ad_wake_ops, daemon->loop);
#else
    (void)daemon;
    return &ad_wake_ops;
#endif
}

static void teardown_host(ad_host *host)
{
    pl_host *pipeline = host->pipeline;
    if (pipeline && pl_host_free(pipeline) < 0)
        act_log(LOG_WARNING, "host %s: pipeline still busy at exit", host->name);
    host->pipeline = NULL;
    ad_wake_state_free(host->wake_state);
    host->wake_state = NULL;
    /* A frozen generation left running stays frozen: its record says so,
     * and the next daemon resumes it that way. */
    ad_freeze_forget(host);
    ad_checkpoint_every_stop(host, true);
    ad_generation_free(host->serving);
    host->serving = NULL;
    ad_generation_free(host->starting);
    host->starting = NULL;
    ad_generation_free(host->replaced);
    host->replaced = NULL;
    free(host->swap);
    host->swap = NULL;
    ad_claim_report_free(host);
    ad_claim_release_free(host);
    ad_move_free(host);
    ad_host_free(host);
}

/* A host with its settings (taken) and its pipeline; its sockets are the
 * caller's to fill. */
static int make_host(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err)
{
    ad_host *host = NULL;
    int r = ad_host_new(daemon, settings, &host, err);
    if (r < 0)
        return r;
    pl_config pipeline_config;
    ad_hosts_pipeline_config(daemon, ad_host_config(host), &pipeline_config);
    pl_host *pipeline = NULL;
    r = pl_host_new(daemon->loop, host->name, &pipeline_config, operations(daemon), host,
                    ad_hosts_on_transition, host, &pipeline, err);
    if (r < 0) {
        teardown_host(host);
        return r;
    }
    host->pipeline = pipeline;
    *out = host;
    return 0;
}

static int setup_host(ad_daemon *daemon, cfg_host *config, ad_hosts_binding *binding, ad_host **out,
                      act_error *err)
{
    ad_host_settings *settings = NULL;
    const char *failed_key = NULL;
    ad_host *host = NULL;
    int r = ad_host_settings_new(daemon, config, &settings, &failed_key, err);
    if (r == 0)
        r = make_host(daemon, settings, &host, err);
    /* hosts/<host>/ is made at the first wake (ad_host_dir), not here: two
     * mkdirs (an inode each) per parked host and start add up at 10,000. */
    if (r == 0 && (r = ad_hosts_bind_sockets(binding, host, err)) < 0)
        teardown_host(host);
    if (r == 0)
        *out = host;
    return r;
}

/* A heap copy of *config, which is left zeroed: the host owns it now. */
static cfg_host *take_config(cfg_host *config)
{
    cfg_host *owned = malloc(sizeof(*owned));
    if (owned)
        *owned = TAKE_STRUCT(*config);
    return owned;
}

int ad_hosts_setup(ad_daemon *daemon, cfg_host *configs, size_t n_configs, act_error *err)
{
    assert(daemon && daemon->loop);
    daemon->hosts = calloc(n_configs ? n_configs : 1, sizeof(*daemon->hosts));
    if (!daemon->hosts) {
        cfg_hosts_free(configs, n_configs);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    daemon->cap_hosts = n_configs ? n_configs : 1;
    /* Before any host is given a dynamic user: none may get a uid another
     * host names by number. */
    int excluded = ad_dynamic_users_exclude_hosts(daemon->dynamic_users, configs, n_configs, err);
    if (excluded < 0) {
        cfg_hosts_free(configs, n_configs);
        return excluded;
    }
    /* The accounts of the box, listed once rather than looked up twice per
     * host; and one fsync for every record made, before any uid is used. */
    act_error list_err = {0};
    if (ad_dynamic_users_read_system(daemon->dynamic_users, &list_err) < 0)
        act_log(LOG_WARNING, "dynamic users: %s; looking each uid up instead", list_err.message);
    ad_dynamic_users_defer_sync(daemon->dynamic_users);
    ad_hosts_binding binding;
    ad_hosts_binding_open(&binding);
    /* A host that cannot be set up (its port is taken, its User= is
     * missing) is left out with an error; the others are served. The table
     * stays sorted because the configs are. */
    size_t n = 0;
    for (size_t i = 0; i < n_configs; i++) {
        act_error host_err = {0};
        char name[ACT_NAME_MAX + 1];
        snprintf(name, sizeof(name), "%s", configs[i].name);
        cfg_host *config = take_config(&configs[i]);
        int r = config ? setup_host(daemon, config, &binding, &daemon->hosts[n], &host_err)
                       : act_error_set(&host_err, ENOMEM, "host %s: out of memory", name);
        if (r < 0) {
            act_log_fields(LOG_ERR, &(act_log_ctx){.host = name}, "%s (host not served)",
                           host_err.message);
            continue;
        }
        ad_hosts_binding_offer(&binding);
        n++;
    }
    cfg_hosts_free(configs, n_configs);
    daemon->n_hosts = n;
    ad_hosts_binding_close(&binding);
    int synced = ad_dynamic_users_sync(daemon->dynamic_users, err);
    if (synced < 0)
        return synced;
    for (size_t i = 0; i < daemon->n_hosts; i++)
        ad_hosts_watch_demand(daemon->hosts[i], true);
    return 0;
}

void ad_hosts_teardown(ad_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_hosts; i++)
        teardown_host(daemon->hosts[i]);
    for (size_t i = 0; i < daemon->n_removed_hosts; i++)
        teardown_host(daemon->removed_hosts[i]);
    free(daemon->hosts);
    free(daemon->removed_hosts);
    ad_fd_store_close();
    daemon->hosts = daemon->removed_hosts = NULL;
    daemon->n_hosts = daemon->n_removed_hosts = 0;
    daemon->cap_hosts = daemon->cap_removed_hosts = 0;
}

/* ---- reload ------------------------------------------------------------------ */

/* A table of hosts grown to hold more, so that what a reload applies once
 * it has checked everything cannot fail for want of memory. */
static int reserve(ad_host ***table, size_t n, size_t *cap, size_t more, act_error *err)
{
    if (n + more <= *cap)
        return 0;
    ad_host **grown = realloc(*table, (n + more) * sizeof(**table));
    if (!grown)
        return act_error_set(err, ENOMEM, "out of memory");
    *table = grown;
    *cap = n + more;
    return 0;
}

int ad_hosts_reserve(ad_daemon *daemon, size_t adding, size_t removing, act_error *err)
{
    assert(daemon);
    int r = reserve(&daemon->hosts, daemon->n_hosts, &daemon->cap_hosts, adding, err);
    if (r == 0)
        r = reserve(&daemon->removed_hosts, daemon->n_removed_hosts, &daemon->cap_removed_hosts,
                    removing, err);
    return r;
}

int ad_hosts_prepare(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err)
{
    assert(daemon && settings && out);
    return make_host(daemon, settings, out, err);
}

void ad_hosts_discard(ad_host *host)
{
    if (host)
        teardown_host(host);
}

void ad_hosts_insert(ad_daemon *daemon, ad_host *host)
{
    assert(daemon && host && daemon->n_hosts < daemon->cap_hosts);
    assert(!ad_hosts_find(daemon, host->name));
    size_t at = 0;
    while (at < daemon->n_hosts && strcmp(daemon->hosts[at]->name, host->name) < 0)
        at++;
    memmove(&daemon->hosts[at + 1], &daemon->hosts[at],
            (daemon->n_hosts - at) * sizeof(*daemon->hosts));
    daemon->hosts[at] = host;
    daemon->n_hosts++;
    ad_hosts_store_fds(host);
    ad_hosts_watch_demand(host, true);
}

void ad_hosts_remove(ad_daemon *daemon, ad_host *host)
{
    assert(daemon && host && daemon->n_removed_hosts < daemon->cap_removed_hosts);
    size_t at = 0;
    while (at < daemon->n_hosts && daemon->hosts[at] != host)
        at++;
    assert(at < daemon->n_hosts);
    memmove(&daemon->hosts[at], &daemon->hosts[at + 1],
            (daemon->n_hosts - at - 1) * sizeof(*daemon->hosts));
    daemon->n_hosts--;
    daemon->removed_hosts[daemon->n_removed_hosts++] = host;

    /* Out of the table, nothing can trigger it: its sockets close now (its
     * generation keeps its own copies until it is retired), and what runs
     * is retired with proof. The claim is left as it is. */
    host->removed = true;
    /* Its freeze watches the sockets about to close; the park below
     * retires the generation, thawed first. */
    ad_freeze_forget(host);
    ad_hosts_unstore_fds(host);
    act_error err = {0};
    if (ad_host_replace_sockets(host, &(cfg_host){0}, NULL, &err) < 0)
        act_log(LOG_ERR, "host %s: its sockets stay open: %s", host->name, err.message);
    ad_idle_unwatch(host);
    pl_host *pipeline = host->pipeline;
    pl_host_cancel(pipeline, PL_REASON_CANCELLED,
                   "host %s: removed from the configuration by a reload", host->name);
    pl_host_park(pipeline, PL_PARK_REQUEST);
}

bool ad_hosts_removed_at_rest(const ad_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_removed_hosts; i++)
        if (!ad_host_at_rest(daemon->removed_hosts[i]))
            return false;
    return true;
}

ad_host *ad_hosts_find_removed(ad_daemon *daemon, const char *name)
{
    assert(daemon && name);
    for (size_t i = daemon->n_removed_hosts; i-- > 0;)
        if (strcmp(daemon->removed_hosts[i]->name, name) == 0)
            return daemon->removed_hosts[i];
    return NULL;
}

int ad_hosts_rebind(ad_host *host, const cfg_host *loaded, int *fds, act_error *err)
{
    assert(host && loaded);
    /* A frozen generation's watch is on the sockets being replaced: it is
     * thawed, and freezes again once idle, watching the new ones. */
    act_error thaw_err = {0};
    if (ad_freeze_active(host, NULL) && ad_freeze_thaw(host, "reload", &thaw_err) < 0)
        act_log(LOG_WARNING, "host %s: %s", host->name, thaw_err.message);
    /* Names follow positions: what moved is stored again under its new
     * name, once the old names are gone. */
    ad_hosts_unstore_fds(host);
    int r = ad_host_replace_sockets(host, loaded, fds, err);
    if (r < 0) {
        ad_hosts_store_fds(host);
        return act_error_prefix(err, "host %s", host->name);
    }
    for (unsigned i = 0; i < loaded->n_listen; i++)
        /* A kept socket takes Backlog= as it is now (listen again on a
         * listening socket changes only that). */
        if (listen(fds[i], (int)loaded->backlog) < 0)
            act_log(LOG_WARNING, "host %s: cannot set the backlog of %s: %s", host->name,
                    host->listen_names[i], strerror(errno));
    ad_hosts_store_fds(host);
    if (pl_host_get_state(host->pipeline) == PL_HOST_PARKED && !host->daemon->stopping)
        ad_hosts_watch_demand(host, true);
    return 0;
}

int ad_hosts_set_limits(ad_host *host, const cfg_limits *limits, act_error *err)
{
    assert(host && limits);
    ad_host_set_limits(host, limits);
    ad_generation *running[] = {host->serving, host->starting, host->replaced};
    int result = 0;
    for (size_t i = 0; i < ARRAY_SIZE(running); i++) {
        act_error gen_err = {0};
        int r = running[i] ? ad_generation_set_limits(running[i], limits, &gen_err) : 0;
        if (r < 0 && result == 0) {
            result = r;
            if (err)
                *err = gen_err;
        }
    }
    return result;
}

bool ad_hosts_set_pending(ad_host *host, ad_host_settings *settings)
{
    assert(host);
    ad_host_set_pending(host, settings);
    if (ad_host_at_rest(host))
        ad_hosts_apply_pending(host);
    return host->pending != NULL;
}

void ad_hosts_update_budgets(ad_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_hosts; i++)
        ad_hosts_update_pipeline(daemon->hosts[i]);
    for (size_t i = 0; i < daemon->n_removed_hosts; i++)
        ad_hosts_update_pipeline(daemon->removed_hosts[i]);
}
