/* Reload: the configuration files applied again while the daemon runs.
 *
 * The files are read and their accounts looked up on a worker (a box may
 * have 10,000 host files, and the user database may be remote). Then, on
 * the loop and before anything changes, everything that can be checked on
 * this box is: the daemon keys that cannot change while it runs, each new
 * or changed host's account and SystemCallFilter=, its limits against what
 * the box enforces, each new listening address bound and each new host
 * made (its pipeline, its directory). Any problem refuses the whole
 * reload: nothing changes, and every problem is reported as FILE:LINE:
 * KEY: what is wrong, the lines --check-config prints. Otherwise it is
 * applied, and what is applied no longer needs a check: only the kernel
 * may still refuse a running leaf's new limits, which is reported with the
 * result (the next generation gets them anyway).
 *
 * A host added is bound, watched and served like one found at start. A
 * host removed is taken out of the table at once and parked: its
 * generation is retired with proof, its sockets closed and taken out of
 * the FD store, its claim left as it is; it stays among the removed hosts
 * until exit (hosts/table.c). A host changed gets its new [Listen] at once
 * (sockets that stay are kept, so no client of theirs is refused), its new
 * [Limits] values at once (written into its running leaves too), and the
 * rest of its file from its next start (pending; host/host.h). */
#include "activator/daemon/box/reload.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "activator/daemon/accounts/dynamic_users.h"
#include "activator/daemon/fleet/takeover.h"
#include "activator/daemon/generations/log_keeper_link.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/hosts/hosts.h"
#include "activator/daemon/parking/pressure.h"
#include "activator/daemon/box/telemetry.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strv.h"

/* hosts_directory/<host>.conf */
#define HOST_PATH_MAX (PATH_MAX + ACT_NAME_MAX + 8)

/* Replies waiting for one reload. */
typedef struct waiters {
    ctrl_reply **items;
    size_t n;
} waiters;

/* One reload, from the asking to the answer. The worker fills what the
 * files say; the loop checks and applies it. */
typedef struct reload_job {
    ad_daemon *daemon;
    waiters replies;
    char config_path[PATH_MAX];
    char hosts_directory[PATH_MAX]; /* the one in force: a new one is refused */
    int daemon_loaded;              /* cfg_load_daemon's result */
    cfg_daemon config;
    cfg_host *hosts; /* sorted by name */
    size_t n_hosts;
    cfg_errors problems;
} reload_job;

struct ad_reload_state {
    reload_job *running; /* reading the files on a worker */
    bool again;          /* asked for while one ran */
    waiters next;        /* the replies of the one that follows */
    char summary[256];
};

/* ---- what changes -------------------------------------------------------- */

typedef enum change_kind {
    CHANGE_ADDED,
    CHANGE_REMOVED,
    CHANGE_CHANGED,
} change_kind;

static const char *const change_names[] = {"added", "removed", "changed"};

/* One host that a reload adds, removes or changes. */
typedef struct host_change {
    change_kind kind;
    ad_host *host;     /* the host it is about */
    ad_host *prepared; /* a host to add, until it is in the table */
    /* Its file as loaded: owned by loaded, then by settings, then by the
     * host they go to; NULL once a failure freed it. */
    const cfg_host *file;
    cfg_host *loaded;
    ad_host_settings *settings; /* a changed host's for its next start */
    unsigned changes;           /* CFG_HOST_CHANGED_* */
    /* A new [Listen]: for each of its n_fds addresses, a socket bound here,
     * or -1 and the slot of a host that holds it now (kept, or moved). */
    int *fds;
    unsigned n_fds;
    ad_host **from;
    unsigned *from_index;
    char limits_error[1024]; /* a running leaf that refused its new limits */
    bool pending;           /* the rest waits for the next start */
} host_change;

typedef struct plan {
    host_change *items;
    size_t n;
    size_t unchanged;
    size_t removing;
    const char *daemon_keys[13]; /* daemon keys changed in place */
    size_t n_daemon_keys;
    met_server *metrics;  /* a new MetricsListen='s server */
    bool metrics_changed; /* ... or none at all */
} plan;

static void close_fds(host_change *change)
{
    for (unsigned i = 0; change->fds && i < change->n_fds; i++)
        if (change->fds[i] >= 0)
            close(change->fds[i]);
    free(TAKE_PTR(change->fds));
}

static void change_clear(host_change *change)
{
    close_fds(change);
    free(change->from);
    free(change->from_index);
    if (change->loaded) {
        cfg_host_free(change->loaded);
        free(change->loaded);
    }
    ad_host_settings_free(change->settings);
    ad_hosts_discard(change->prepared);
}

static void plan_free(plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        change_clear(&p->items[i]);
    free(p->items);
    met_server_free(p->metrics);
    *p = (plan){0};
}

/* A change about host, with a heap copy of loaded (left zeroed), if any. */
static host_change *plan_add(plan *p, change_kind kind, ad_host *host, cfg_host *loaded)
{
    host_change *grown = realloc(p->items, (p->n + 1) * sizeof(*grown));
    if (!grown)
        return NULL;
    p->items = grown;
    host_change *change = &p->items[p->n];
    *change = (host_change){.kind = kind, .host = host};
    if (loaded) {
        if (!(change->loaded = malloc(sizeof(*change->loaded))))
            return NULL;
        *change->loaded = TAKE_STRUCT(*loaded);
        change->file = change->loaded;
    }
    p->n++;
    p->removing += kind == CHANGE_REMOVED;
    return change;
}

/* ---- the daemon's own keys ---------------------------------------------- */

/* The keys the daemon reads once, at start: a new value needs a new
 * daemon. */
static const struct {
    const char *name;
    size_t offset; /* of its string in cfg_daemon */
} fixed_keys[] = {
    {"Box", offsetof(cfg_daemon, box)},
    {"Store", offsetof(cfg_daemon, store)},
    {"StoreCA", offsetof(cfg_daemon, store_ca)},
    {"StoreCertificate", offsetof(cfg_daemon, store_certificate)},
    {"StoreKey", offsetof(cfg_daemon, store_key)},
    {"StoreUser", offsetof(cfg_daemon, store_user)},
    {"StorePasswordFile", offsetof(cfg_daemon, store_password_file)},
    {"StateDirectory", offsetof(cfg_daemon, state_directory)},
    {"RuntimeDirectory", offsetof(cfg_daemon, runtime_directory)},
    {"HostsDirectory", offsetof(cfg_daemon, hosts_directory)},
    {"CgroupRoot", offsetof(cfg_daemon, cgroup_root)},
    {"Control", offsetof(cfg_daemon, control)},
    {"Events", offsetof(cfg_daemon, events)},
    /* Claims name checkpoints by id in this directory: another directory
     * would leave every named one unreachable while a move may be reading
     * it. */
    {"Checkpoints", offsetof(cfg_daemon, checkpoints)},
    /* The control and events sockets are open with these: their peers'
     * checks and the TLS listener are set up with the sockets. */
    {"ControlGroup", offsetof(cfg_daemon, control_group)},
    {"ViewerGroup", offsetof(cfg_daemon, viewer_group)},
    {"ControlListen", offsetof(cfg_daemon, control_listen)},
    {"TLSCertificate", offsetof(cfg_daemon, tls_certificate)},
    {"TLSKey", offsetof(cfg_daemon, tls_key)},
    {"TLSClientCA", offsetof(cfg_daemon, tls_client_ca)},
};

static const char *string_at(const cfg_daemon *config, size_t offset)
{
    return *(char *const *)((const char *)config + offset);
}

static bool same_string(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The same for the fixed keys that are not one string. */
static void check_fixed_values(const ad_daemon *daemon, reload_job *job)
{
    const cfg_daemon *now = &daemon->config, *next = &job->config;
    const struct {
        const char *name;
        bool changed;
    } keys[] = {
        {"StoreInsecure", now->store_insecure != next->store_insecure},
        {"StoreWatchTimeoutSec", now->store_watch_timeout_usec != next->store_watch_timeout_usec},
        /* The record's lease was granted with it. */
        {"BoxLeaseSec", now->box_lease_usec != next->box_lease_usec},
        /* Every host's uid was given out of it. */
        {"DynamicUserRange", now->dynamic_uid_min != next->dynamic_uid_min ||
                                 now->dynamic_uid_max != next->dynamic_uid_max},
        {"ControlOperators", !act_strv_equal(now->control_operators, next->control_operators)},
        {"ControlViewers", !act_strv_equal(now->control_viewers, next->control_viewers)},
    };
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        if (keys[i].changed)
            cfg_errors_add(&job->problems, job->config_path,
                           cfg_daemon_key_line(&job->config, keys[i].name), keys[i].name,
                           "cannot change while activatord runs; restart it to apply this: "
                           "systemctl restart activatord hands over to the new daemon and keeps "
                           "every app running");
}

static void check_fixed_keys(const ad_daemon *daemon, reload_job *job)
{
    check_fixed_values(daemon, job);
    for (size_t i = 0; i < ARRAY_SIZE(fixed_keys); i++) {
        const char *running = string_at(&daemon->config, fixed_keys[i].offset);
        const char *loaded = string_at(&job->config, fixed_keys[i].offset);
        if (same_string(running, loaded))
            continue;
        cfg_errors_add(&job->problems, job->config_path,
                       cfg_daemon_key_line(&job->config, fixed_keys[i].name), fixed_keys[i].name,
                       "cannot change while activatord runs (it runs with %s, the file now says "
                       "%s); restart it to apply this: systemctl restart activatord hands over "
                       "to the new daemon and keeps every app running",
                       running ? running : "none", loaded ? loaded : "none");
    }
}

/* The daemon's keys that change in place; notes which did. */
static void check_daemon(ad_daemon *daemon, reload_job *job, plan *p)
{
    if (job->daemon_loaded < 0)
        return; /* its problems are in the job already */
    check_fixed_keys(daemon, job);
    const cfg_daemon *now = &daemon->config, *next = &job->config;
    struct {
        const char *name;
        bool changed;
    } in_place[] = {
        {"MaxConcurrentStarts", now->max_concurrent_starts != next->max_concurrent_starts},
        {"FailureBackoffMaxSec", now->failure_backoff_max_usec != next->failure_backoff_max_usec},
        {"FailureResetSec", now->failure_reset_usec != next->failure_reset_usec},
        {"StartBudgetWaitSec", now->start_budget_wait_usec != next->start_budget_wait_usec},
        {"ClaimUnclaimed", now->claim_unclaimed != next->claim_unclaimed},
        /* Read at each listing of the boxes (fleet/takeover.c). */
        {"FailoverGraceSec", now->failover_grace_usec != next->failover_grace_usec},
        {"MetricsListen", !same_string(now->metrics_listen, next->metrics_listen)},
        {"HostLogMaxSize", now->host_log_max_bytes != next->host_log_max_bytes},
        {"CheckpointsKeep", now->checkpoints_keep != next->checkpoints_keep},
        {"FreezeMemoryPressure",
         now->freeze_memory_pressure_usec != next->freeze_memory_pressure_usec},
        /* Read by each stage when it is asked for. */
        {"RegistryAuthFile", !same_string(now->registry_auth_file, next->registry_auth_file)},
        {"RegistryInsecure", !act_strv_equal(now->registry_insecure, next->registry_insecure)},
        /* Read by each wake that fetches. */
        {"BuildFetchTimeoutSec", now->build_fetch_timeout_usec != next->build_fetch_timeout_usec},
    };
    static_assert(ARRAY_SIZE(in_place) <= ARRAY_SIZE(p->daemon_keys), "room for every key");
    for (size_t i = 0; i < ARRAY_SIZE(in_place); i++)
        if (in_place[i].changed)
            p->daemon_keys[p->n_daemon_keys++] = in_place[i].name;
    if (same_string(now->metrics_listen, next->metrics_listen))
        return;
    p->metrics_changed = true;
    act_error err = {0};
    if (ad_telemetry_listen(daemon, next->metrics_listen, &p->metrics, &err) < 0)
        cfg_errors_add(&job->problems, job->config_path,
                       cfg_daemon_key_line(next, "MetricsListen"), "MetricsListen",
                       "%s (an address that overlaps the one metrics are served on now "
                       "needs a restart)",
                       err.message);
}

/* ---- each host ----------------------------------------------------------- */

static void host_path(const reload_job *job, const char *host, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.conf", job->hosts_directory, host);
}

/* The limits the box cannot enforce, each on its line. */
static void check_limits(const ad_daemon *daemon, reload_job *job, const char *path,
                         const cfg_host *file)
{
    const cfg_limits *limits = &file->limits;
    const struct {
        const char *key;
        unsigned line;
        cfg_limits only;
    } keys[] = {
        {"MemoryMax",
         file->lines.memory_max,
         {.memory_max = limits->memory_max,
          .memory_max_is_default = limits->memory_max_is_default}},
        {"MemoryHigh", file->lines.memory_high, {.memory_high = limits->memory_high}},
        {"PidsMax",
         file->lines.pids_max,
         {.pids_max = limits->pids_max, .pids_max_is_default = limits->pids_max_is_default}},
        {"CPUQuota", file->lines.cpu_quota, {.cpu_quota_percent = limits->cpu_quota_percent}},
        {"CPUWeight", file->lines.cpu_weight, {.cpu_weight = limits->cpu_weight}},
    };
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        cg_limits values;
        ad_limits_from_config(daemon->cgroups, &keys[i].only, false, &values);
        act_error err = {0};
        if (cg_limits_check(daemon->cgroups, &values, &err) < 0)
            cfg_errors_add(&job->problems, path, keys[i].line, keys[i].key, "%s", err.message);
    }
}

/* The slot of any host that holds a socket for address now: the host's own
 * first, then the others' (an address moved between hosts keeps its
 * socket). */
static bool find_socket(ad_daemon *daemon, ad_host *own, const lsn_address *address,
                        ad_host **from, unsigned *index)
{
    for (size_t h = 0; h <= daemon->n_hosts; h++) {
        ad_host *host = h == 0 ? own : daemon->hosts[h - 1];
        if (!host || (h > 0 && host == own))
            continue;
        const lsn_address *listen = host->listen;
        const int *fds = host->listen_fds;
        for (unsigned i = 0; i < host->n_listen; i++) {
            if (fds[i] >= 0 && lsn_address_equal(&listen[i], address) &&
                listen[i].dual_stack == address->dual_stack) {
                *from = host;
                *index = i;
                return true;
            }
        }
    }
    return false;
}

/* Where each socket of the new [Listen] comes from, new addresses bound. */
static int plan_sockets(ad_daemon *daemon, reload_job *job, const char *path,
                        host_change *change)
{
    const cfg_host *file = change->file;
    unsigned n = file->n_listen;
    change->n_fds = n;
    change->fds = malloc((n ? n : 1) * sizeof(*change->fds));
    change->from = calloc(n ? n : 1, sizeof(*change->from));
    change->from_index = calloc(n ? n : 1, sizeof(*change->from_index));
    if (!change->fds || !change->from || !change->from_index)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++)
        change->fds[i] = -1;
    ad_host *own = change->kind == CHANGE_CHANGED ? change->host : NULL;
    for (unsigned i = 0; i < n; i++) {
        if (find_socket(daemon, own, &file->listen[i], &change->from[i], &change->from_index[i]))
            continue;
        act_error err = {0};
        change->fds[i] = lsn_bind(&file->listen[i], (int)file->backlog, &err);
        if (change->fds[i] < 0)
            cfg_errors_add(&job->problems, path, file->listen_lines[i], "ListenStream", "%s",
                           err.message);
    }
    return 0;
}

/* The account and the filter of the loaded file, made on this box: the
 * settings a host added starts with, or a changed one's for its next start.
 * Takes change->loaded. */
static void make_settings(ad_daemon *daemon, reload_job *job, const char *path,
                          host_change *change)
{
    const cfg_host_lines lines = change->loaded->lines;
    const char *failed_key = NULL;
    act_error err = {0};
    if (ad_host_settings_new(daemon, TAKE_PTR(change->loaded), &change->settings, &failed_key,
                             &err) >= 0)
        return;
    change->file = NULL; /* freed with the failure */
    unsigned line = !failed_key                                   ? 0
                    : strcmp(failed_key, "SystemCallFilter") == 0 ? lines.system_call_filter
                    : strcmp(failed_key, "Group") == 0            ? lines.group
                    : strcmp(failed_key, "ReadWritePaths") == 0   ? lines.read_write_paths
                                                                  : lines.user;
    cfg_errors_add(&job->problems, path, line, failed_key, "%s", err.message);
}

/* A host whose file is new. Its name may be one a reload removed before:
 * that host must be at rest and proven stopped first, or two generations
 * of one host could run at once. */
static int plan_added(ad_daemon *daemon, reload_job *job, plan *p, cfg_host *loaded)
{
    char path[HOST_PATH_MAX];
    host_path(job, loaded->name, path, sizeof(path));
    ad_host *before = ad_hosts_find_removed(daemon, loaded->name);
    if (before && !ad_host_at_rest(before))
        cfg_errors_add(&job->problems, path, 0, NULL,
                       "host %s was removed by an earlier reload and its last generation is "
                       "not proven stopped yet; reload again once it is (see the log)",
                       loaded->name);
    host_change *change = plan_add(p, CHANGE_ADDED, NULL, loaded);
    if (!change)
        return -ENOMEM;
    check_limits(daemon, job, path, change->file);
    if (plan_sockets(daemon, job, path, change) < 0)
        return -ENOMEM;
    make_settings(daemon, job, path, change);
    if (!change->settings)
        return 0;
    act_error err = {0};
    if (ad_hosts_prepare(daemon, TAKE_PTR(change->settings), &change->prepared, &err) < 0) {
        change->file = NULL;
        cfg_errors_add(&job->problems, path, 0, NULL, "%s", err.message);
        return 0;
    }
    change->host = change->prepared;
    return 0;
}

/* A host whose file changed since it was set up or last reloaded. */
static int plan_changed(ad_daemon *daemon, reload_job *job, plan *p, ad_host *host,
                        cfg_host *loaded)
{
    unsigned changes = cfg_host_changes(ad_host_config(host), loaded);
    /* A file put back as the host runs drops what was pending. */
    if (!changes && !host->pending) {
        p->unchanged++;
        return 0;
    }
    char path[HOST_PATH_MAX];
    host_path(job, loaded->name, path, sizeof(path));
    host_change *change = plan_add(p, CHANGE_CHANGED, host, loaded);
    if (!change)
        return -ENOMEM;
    change->changes = changes;
    if (changes & CFG_HOST_CHANGED_LIMITS)
        check_limits(daemon, job, path, change->file);
    if ((changes & CFG_HOST_CHANGED_LISTEN) && plan_sockets(daemon, job, path, change) < 0)
        return -ENOMEM;
    if (changes & CFG_HOST_CHANGED_START)
        make_settings(daemon, job, path, change);
    return 0;
}

/* The current hosts and the loaded files, both sorted by name, side by
 * side. */
static int plan_hosts(ad_daemon *daemon, reload_job *job, plan *p)
{
    size_t h = 0, f = 0;
    /* Before a host added gets a dynamic user: none may get a uid a host of
     * the new configuration names by number. */
    act_error err = {0};
    int r = ad_dynamic_users_exclude_hosts(daemon->dynamic_users, job->hosts, job->n_hosts, &err);
    /* Accounts added since the last start or reload are seen. */
    act_error list_err = {0};
    if (r == 0 && ad_dynamic_users_read_system(daemon->dynamic_users, &list_err) < 0)
        act_log(LOG_WARNING, "dynamic users: %s; looking each uid up instead", list_err.message);
    if (r < 0)
        cfg_errors_add(&job->problems, job->config_path, 0, NULL, "%s", err.message);
    /* The records of the hosts added are written once, below. */
    ad_dynamic_users_defer_sync(daemon->dynamic_users);
    while (r == 0 && (h < daemon->n_hosts || f < job->n_hosts)) {
        ad_host *host = h < daemon->n_hosts ? daemon->hosts[h] : NULL;
        cfg_host *loaded = f < job->n_hosts ? &job->hosts[f] : NULL;
        int order = !host ? 1 : !loaded ? -1 : strcmp(host->name, loaded->name);
        if (order < 0) {
            /* A file that is there but was refused is not a removal: the
             * reload fails on its problems. */
            char path[HOST_PATH_MAX];
            host_path(job, host->name, path, sizeof(path));
            if (!cfg_errors_count_file(&job->problems, path) &&
                !plan_add(p, CHANGE_REMOVED, host, NULL))
                r = -ENOMEM;
            h++;
        } else if (order > 0) {
            r = plan_added(daemon, job, p, loaded);
            f++;
        } else {
            r = plan_changed(daemon, job, p, host, loaded);
            h++;
            f++;
        }
    }
    /* Before any uid given here is used, whatever the plan's fate (a
     * record is never dropped); a failure refuses the reload. */
    err = (act_error){0};
    if (ad_dynamic_users_sync(daemon->dynamic_users, &err) < 0)
        cfg_errors_add(&job->problems, job->config_path, 0, NULL, "%s", err.message);
    return r;
}

/* ---- answering ----------------------------------------------------------- */

static void waiters_free(waiters *list)
{
    free(list->items);
    *list = (waiters){0};
}

static int waiters_add(waiters *list, ctrl_reply *reply)
{
    if (!reply)
        return 0;
    ctrl_reply **grown = realloc(list->items, (list->n + 1) * sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    list->items = grown;
    list->items[list->n++] = reply;
    return 0;
}

/* Every reply in list gets the same refusal. */
static void waiters_refuse(waiters *list, const char *code, const char *message)
{
    for (size_t i = 0; i < list->n; i++)
        ctrl_reply_error(list->items[i], code, "%s", message);
    waiters_free(list);
}

static void notify_ready(const char *status)
{
    sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

/* Nothing changed: every problem is logged, told to whoever asked, and in
 * STATUS=. */
static void refuse(ad_reload_state *state, reload_job *job)
{
    json_object *problems = json_object_new_array();
    for (size_t i = 0; i < job->problems.n; i++) {
        act_log(LOG_ERR, "reload: %s", job->problems.items[i].text);
        json_object_array_add(problems, json_object_new_string(job->problems.items[i].text));
    }
    char message[256];
    snprintf(message, sizeof(message),
             "reload refused: %zu problem%s in the configuration; nothing changed",
             job->problems.n, job->problems.n == 1 ? "" : "s");
    act_log(LOG_ERR, "%s", message);
    for (size_t i = 0; i < job->replies.n; i++) {
        json_object *details = json_object_new_object();
        json_object_object_add(details, "problems", json_object_get(problems));
        ctrl_reply_error_details(job->replies.items[i], "bad_config", details, "%s", message);
    }
    json_object_put(problems);
    waiters_free(&job->replies);
    snprintf(state->summary, sizeof(state->summary), "%s", message);
    notify_ready(message);
}

/* ---- applying ------------------------------------------------------------- */

static void apply_daemon(ad_daemon *daemon, reload_job *job, plan *p)
{
    if (job->daemon_loaded < 0)
        return;
    cfg_daemon *config = &daemon->config;
    const cfg_daemon *next = &job->config;
    config->max_concurrent_starts = next->max_concurrent_starts;
    config->failure_backoff_max_usec = next->failure_backoff_max_usec;
    config->failure_reset_usec = next->failure_reset_usec;
    config->start_budget_wait_usec = next->start_budget_wait_usec;
    config->claim_unclaimed = next->claim_unclaimed;
    config->failover_grace_usec = next->failover_grace_usec;
    if (config->host_log_max_bytes != next->host_log_max_bytes)
        ad_log_keeper_set_bound(daemon, next->host_log_max_bytes);
    config->host_log_max_bytes = next->host_log_max_bytes;
    config->checkpoints_keep = next->checkpoints_keep;
    config->build_fetch_timeout_usec = next->build_fetch_timeout_usec;
    /* A stage in flight has its own copies. */
    free(config->registry_auth_file);
    config->registry_auth_file = TAKE_PTR(job->config.registry_auth_file);
    act_strv_free(config->registry_insecure);
    config->registry_insecure = TAKE_PTR(job->config.registry_insecure);
    if (config->freeze_memory_pressure_usec != next->freeze_memory_pressure_usec) {
        config->freeze_memory_pressure_usec = next->freeze_memory_pressure_usec;
        ad_pressure_configure(daemon);
    }
    memcpy(config->key_lines, next->key_lines, sizeof(config->key_lines));
    act_error err = {0};
    if (pl_start_cap_set_limit(&daemon->start_cap, next->max_concurrent_starts, &err) < 0)
        act_log(LOG_ERR, "reload: MaxConcurrentStarts=: %s", err.message);
    if (p->metrics_changed) {
        ad_telemetry_replace(daemon, TAKE_PTR(p->metrics));
        free(config->metrics_listen);
        config->metrics_listen = TAKE_PTR(job->config.metrics_listen);
    }
}

/* The sockets each new [Listen] keeps come out of the slots that hold them
 * now, all before any host's sockets are replaced. */
static void take_kept_sockets(plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        host_change *change = &p->items[i];
        for (unsigned j = 0; change->fds && j < change->n_fds; j++)
            if (change->fds[j] < 0)
                change->fds[j] = ad_host_take_listen_fd(change->from[j], change->from_index[j]);
    }
}

static void apply_changed(host_change *change)
{
    ad_host *host = change->host;
    act_error err = {0};
    if (change->changes & CFG_HOST_CHANGED_LISTEN) {
        if (ad_hosts_rebind(host, change->file, change->fds, &err) < 0)
            act_log(LOG_ERR, "reload: %s; the sockets of its new [Listen] are closed",
                    err.message);
        else
            free(TAKE_PTR(change->fds)); /* the host's now */
    }
    if ((change->changes & CFG_HOST_CHANGED_LIMITS) &&
        ad_hosts_set_limits(host, &change->file->limits, &err) < 0) {
        snprintf(change->limits_error, sizeof(change->limits_error), "%s", err.message);
        act_log(LOG_WARNING, "reload: %s (the next generation gets the new limits)",
                err.message);
    }
    change->pending = ad_hosts_set_pending(host, TAKE_PTR(change->settings));
}

static void apply_added(ad_daemon *daemon, host_change *change)
{
    ad_host *host = TAKE_PTR(change->prepared);
    for (unsigned i = 0; i < change->n_fds; i++)
        ad_host_set_listen_fd(host, i, change->fds[i]);
    free(TAKE_PTR(change->fds));
    ad_hosts_insert(daemon, host);
}

/* What a reload did, for whoever asked, the journal and STATUS=. */
static json_object *summarize(const plan *p, char *status, size_t size)
{
    json_object *result = json_object_new_object();
    json_object *hosts = json_object_new_array();
    size_t by_kind[3] = {0};
    for (size_t i = 0; i < p->n; i++) {
        const host_change *change = &p->items[i];
        by_kind[change->kind]++;
        json_object *entry = json_object_new_object();
        json_object_object_add(entry, "host", json_object_new_string(change->host->name));
        json_object_object_add(entry, "change", json_object_new_string(change_names[change->kind]));
        if (change->changes & CFG_HOST_CHANGED_LISTEN)
            json_object_object_add(entry, "listen", json_object_new_string("changed"));
        if (change->changes & CFG_HOST_CHANGED_LIMITS)
            json_object_object_add(entry, "limits",
                                   json_object_new_string(change->limits_error[0]
                                                              ? change->limits_error
                                                              : "applied"));
        /* The rest of the file: waiting for the next start, in force at
         * once (the host was at rest), or, put back as the host runs, what
         * was waiting dropped. */
        if (change->kind == CHANGE_CHANGED && (change->pending || !change->changes ||
                                               change->changes & CFG_HOST_CHANGED_START))
            json_object_object_add(entry, "config",
                                   json_object_new_string(change->pending ? "pending next start"
                                                          : change->changes ? "applied"
                                                                            : "pending dropped"));
        json_object_array_add(hosts, entry);
    }
    json_object_object_add(result, "hosts", hosts);
    json_object_object_add(result, "unchanged", json_object_new_uint64(p->unchanged));
    json_object *keys = json_object_new_array();
    for (size_t i = 0; i < p->n_daemon_keys; i++)
        json_object_array_add(keys, json_object_new_string(p->daemon_keys[i]));
    json_object_object_add(result, "daemon", keys);

    int used = snprintf(status, size,
                        "reloaded: hosts %zu added, %zu removed, %zu changed, %zu unchanged",
                        by_kind[CHANGE_ADDED], by_kind[CHANGE_REMOVED], by_kind[CHANGE_CHANGED],
                        p->unchanged);
    for (size_t i = 0; i < p->n_daemon_keys && used > 0 && (size_t)used < size; i++)
        used += snprintf(status + used, size - (size_t)used, "%s%s=", i ? ", " : "; daemon ",
                         p->daemon_keys[i]);
    return result;
}

static void apply(ad_daemon *daemon, ad_reload_state *state, reload_job *job, plan *p)
{
    apply_daemon(daemon, job, p);
    take_kept_sockets(p);
    for (size_t i = 0; i < p->n; i++) {
        host_change *change = &p->items[i];
        if (change->kind == CHANGE_CHANGED)
            apply_changed(change);
        else if (change->kind == CHANGE_ADDED)
            apply_added(daemon, change);
    }
    for (size_t i = 0; i < p->n; i++) {
        if (p->items[i].kind != CHANGE_REMOVED)
            continue;
        ad_hosts_remove(daemon, p->items[i].host);
        ad_telemetry_forget_host(daemon, p->items[i].host->name);
    }
    ad_hosts_update_budgets(daemon);
    /* A host added with Failover=yes: this box watches for dead boxes now. */
    ad_takeover_start(daemon);

    char status[256];
    _cleanup_(json_object_putp) json_object *result =
        summarize(p, status, sizeof(status));
    for (size_t i = 0; i < p->n; i++) {
        const host_change *change = &p->items[i];
        act_log_fields(LOG_INFO, &(act_log_ctx){.host = change->host->name}, "reload: host %s %s",
                       change->host->name, change_names[change->kind]);
    }
    act_log(LOG_INFO, "%s", status);
    for (size_t i = 0; i < job->replies.n; i++)
        ctrl_reply_ok(job->replies.items[i], json_object_get(result));
    waiters_free(&job->replies);
    snprintf(state->summary, sizeof(state->summary), "%s", status);
    notify_ready(status);
}

/* ---- the job ---------------------------------------------------------------- */

/* On a worker: reads the files and looks their accounts up. The user and
 * group databases are not thread-safe, and nothing else looks them up
 * meanwhile: the loop does only at start and in files_read, after this. */
static void read_files(void *data)
{
    reload_job *job = data;
    job->daemon_loaded = cfg_load_daemon(job->config_path, &job->config, &job->problems);
    if (cfg_load_hosts(job->hosts_directory, &job->hosts, &job->n_hosts, &job->problems) < 0)
        return;
    /* The hosts are where the running daemon finds them. */
    cfg_daemon where = job->config;
    where.hosts_directory = job->hosts_directory;
    cfg_check_accounts(job->config_path, &where, job->hosts, job->n_hosts, &job->problems);
    cfg_check_view_paths(&where, job->hosts, job->n_hosts, &job->problems);
}

/* The replies go with it unanswered: each path of files_read answers them,
 * and at exit their handles are gone with the control server. */
static void job_free(reload_job *job)
{
    if (!job)
        return;
    waiters_free(&job->replies);
    cfg_daemon_free(&job->config);
    cfg_hosts_free(job->hosts, job->n_hosts);
    cfg_errors_free(&job->problems);
    free(job);
}

static void start_job(ad_daemon *daemon, ad_reload_state *state, waiters *replies);

/* On the loop: checks what the files say and applies it, or nothing. */
static void files_read(void *data)
{
    reload_job *job = data;
    ad_daemon *daemon = job->daemon;
    ad_reload_state *state = daemon->reload;
    state->running = NULL;
    if (daemon->stopping) {
        waiters_refuse(&job->replies, "stopping",
                       "the daemon is stopping; the reload did not apply");
    } else {
        plan p = {0};
        check_daemon(daemon, job, &p);
        int r = plan_hosts(daemon, job, &p);
        act_error err = {0};
        if (r == 0 && !job->problems.n)
            r = ad_hosts_reserve(daemon, p.n, p.removing, &err);
        if (r < 0)
            cfg_errors_add(&job->problems, job->config_path, 0, NULL,
                           "out of memory while checking the configuration; try again");
        if (job->problems.n)
            refuse(state, job);
        else
            apply(daemon, state, job, &p);
        plan_free(&p);
    }
    job_free(job);
    if (!state->again)
        return;
    waiters next = TAKE_STRUCT(state->next);
    state->again = false;
    if (!daemon->stopping) {
        start_job(daemon, state, &next);
        return;
    }
    waiters_refuse(&next, "stopping", "the daemon is stopping; the reload did not start");
}

static void start_job(ad_daemon *daemon, ad_reload_state *state, waiters *replies)
{
    reload_job *job = calloc(1, sizeof(*job));
    if (!job) {
        waiters_refuse(replies, "internal", "out of memory");
        return;
    }
    *job = (reload_job){.daemon = daemon, .replies = TAKE_STRUCT(*replies)};
    snprintf(job->config_path, sizeof(job->config_path), "%s", daemon->config_path);
    snprintf(job->hosts_directory, sizeof(job->hosts_directory), "%s",
             daemon->config.hosts_directory);
    sd_notifyf(0, "RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=%" PRIu64,
               act_now_usec());
    act_log(LOG_INFO, "reload: reading %s and %s", job->config_path, job->hosts_directory);
    act_error err = {0};
    if (act_offload_submit(daemon->offload, act_offload_lane("reload"), read_files, files_read,
                           job, &err) < 0) {
        waiters_refuse(&job->replies, "internal", err.message);
        notify_ready("reload failed: the files could not be read");
        job_free(job);
        return;
    }
    state->running = job;
}

void ad_reload(ad_daemon *daemon, ctrl_reply *reply)
{
    assert(daemon);
    if (daemon->stopping) {
        if (reply)
            ctrl_reply_error(reply, "stopping", "box %s is stopping; reload refused",
                             daemon->config.box);
        return;
    }
    if (!daemon->reload && !(daemon->reload = calloc(1, sizeof(*daemon->reload)))) {
        if (reply)
            ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    ad_reload_state *state = daemon->reload;
    if (state->running) {
        /* It read the files before this was asked: one more follows. */
        state->again = true;
        if (waiters_add(&state->next, reply) < 0)
            ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    waiters replies = {0};
    if (waiters_add(&replies, reply) < 0) {
        ctrl_reply_error(reply, "internal", "out of memory");
        return;
    }
    start_job(daemon, state, &replies);
}

const char *ad_reload_summary(const ad_daemon *daemon)
{
    return daemon->reload ? daemon->reload->summary : "";
}

void ad_reload_free(ad_daemon *daemon)
{
    ad_reload_state *state = daemon->reload;
    if (!state)
        return;
    job_free(state->running);
    waiters_free(&state->next);
    free(state);
    daemon->reload = NULL;
}
