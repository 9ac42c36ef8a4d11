/* The host table: one entry per configured host, with the sockets the
 * daemon holds for it and its pipeline. */
#include "activator/daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "common/cleanup.h"
#include "common/log.h"

static int compare_host_name(const void *key, const void *element)
{
    const act_daemon_host *host = element;
    return strcmp(key, host->config->name);
}

act_daemon_host *act_hosts_find(act_daemon *daemon, const char *name)
{
    return bsearch(name, daemon->hosts, daemon->n_hosts, sizeof(*daemon->hosts),
                   compare_host_name);
}

/* Sockets handed back by systemd's FD store after a restart, by name. */
typedef struct inherited_fds {
    int *fds;
    char **names;
    size_t n;
} inherited_fds;

static void inherited_collect(inherited_fds *inherited)
{
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);
    if (n <= 0)
        return;
    inherited->fds = calloc((size_t)n, sizeof(int));
    inherited->names = names;
    inherited->n = (size_t)n;
    for (int i = 0; i < n; i++) {
        inherited->fds[i] = SD_LISTEN_FDS_START + i;
        fcntl(inherited->fds[i], F_SETFD, FD_CLOEXEC);
    }
}

/* Takes the inherited socket named "<host>/<index>" if it is still bound to
 * what the config says; a socket whose address changed is not reused. */
static int inherited_take(inherited_fds *inherited, const char *name,
                          const act_listen_address *address)
{
    for (size_t i = 0; i < inherited->n; i++) {
        if (inherited->fds[i] < 0 || strcmp(inherited->names[i], name) != 0)
            continue;
        int fd = inherited->fds[i];
        inherited->fds[i] = -1;
        if (act_listen_fd_matches(fd, address)) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            return fd;
        }
        close(fd);
    }
    return -1;
}

static void inherited_release(inherited_fds *inherited)
{
    for (size_t i = 0; i < inherited->n; i++) {
        if (inherited->fds[i] >= 0) {
            act_log(LOG_NOTICE, "closing inherited socket %s: no configured host uses it now",
                    inherited->names[i]);
            close(inherited->fds[i]);
        }
        free(inherited->names[i]);
    }
    free(inherited->fds);
    free(inherited->names);
}

/* Keeps the socket in systemd's FD store, so a restarted daemon gets the
 * same socket back and clients never see it closed. */
static void store_fd(const char *name, int fd)
{
    char state[320];
    snprintf(state, sizeof(state), "FDSTORE=1\nFDNAME=%s", name);
    sd_pid_notify_with_fds(0, 0, state, &fd, 1);
}

static int bind_sockets(act_daemon_host *host, inherited_fds *inherited, act_error *err)
{
    const act_host_config *config = host->config;
    host->listen_fds = calloc(config->n_listen ? config->n_listen : 1, sizeof(int));
    host->listen_names = calloc((size_t)config->n_listen + 1, sizeof(char *));
    host->demand_sources = calloc(config->n_listen ? config->n_listen : 1, sizeof(void *));
    if (!host->listen_fds || !host->listen_names || !host->demand_sources)
        return act_error_set(err, ENOMEM, "out of memory");
    for (uint16_t i = 0; i < config->n_listen; i++)
        host->listen_fds[i] = -1;
    for (uint16_t i = 0; i < config->n_listen; i++) {
        char name[ACT_NAME_MAX + 16];
        snprintf(name, sizeof(name), "%s/%u", config->name, i);
        host->listen_names[i] = strdup(name);
        if (!host->listen_names[i])
            return act_error_set(err, ENOMEM, "out of memory");
        int fd = inherited_take(inherited, name, &config->listen[i]);
        if (fd < 0) {
            fd = act_listen_bind(&config->listen[i], (int)config->backlog, err);
            if (fd == -EADDRINUSE) {
                int taken = act_recovery_take_socket(host->daemon, config->name, i,
                                                     &config->listen[i]);
                if (taken >= 0) {
                    act_error_clear(err);
                    fd = taken;
                }
            }
            if (fd < 0)
                return act_error_prefix(err, "host %s", config->name);
            store_fd(name, fd);
        }
        host->listen_fds[i] = fd;
    }
    return 0;
}

/* Most hosts run the default profile: one compiled program serves them all. */
static int compile_filter(act_daemon *daemon, act_daemon_host *host, act_error *err)
{
    const act_syscall_filter *filter = &host->config->limits.syscall_filter;
    bool plain_default = filter->base == ACT_SYSCALLS_DEFAULT && !filter->allow && !filter->deny;
    if (plain_default && daemon->default_seccomp)
        return 0;
    cg_seccomp_program **out = plain_default ? &daemon->default_seccomp : &host->seccomp;
    int r = cg_seccomp_compile(filter->base == ACT_SYSCALLS_NONE ? "none" : "default",
                               (const char *const *)filter->allow,
                               (const char *const *)filter->deny, out, err);
    return r < 0 ? act_error_prefix(err, "host %s: SystemCallFilter=", host->config->name) : 0;
}

const cg_seccomp_program *act_host_seccomp(const act_daemon_host *host)
{
    const act_syscall_filter *filter = &host->config->limits.syscall_filter;
    if (filter->base == ACT_SYSCALLS_DEFAULT && !filter->allow && !filter->deny)
        return host->daemon->default_seccomp;
    return host->seccomp;
}

void act_host_format_handle(const act_daemon_host *host, uint64_t generation, char *out,
                            size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint16_t i = 0; i < host->config->n_listen && used + 2 < size; i++) {
        char address[160];
        act_listen_format(&host->config->listen[i], address, sizeof(address));
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? "," : "", address);
    }
    if (!out[0])
        snprintf(out, size, "%s/g-%" PRIu64, host->daemon->config.box, generation);
}

int act_host_dir(act_daemon_host *host, act_error *err)
{
    if (host->host_dirfd >= 0)
        return host->host_dirfd;
    int fd = act_records_open_host(host->daemon->state_dirfd, host->config->name, err);
    if (fd >= 0)
        host->host_dirfd = fd;
    return fd;
}

int act_host_state_directory(act_daemon_host *host, act_error *err)
{
    int dirfd = act_host_dir(host, err);
    if (dirfd < 0)
        return dirfd;
    if (mkdirat(dirfd, "state", 0750) < 0 && errno != EEXIST)
        return act_error_set(err, errno, "cannot create the state directory: %s",
                             strerror(errno));
    if (host->have_credentials &&
        fchownat(dirfd, "state", host->uid, host->gid, AT_SYMLINK_NOFOLLOW) < 0)
        return act_error_set(err, errno, "cannot hand the state directory to uid %u: %s",
                             (unsigned)host->uid, strerror(errno));
    return 0;
}

void act_host_dir_close(act_daemon_host *host)
{
    if (host->host_dirfd >= 0)
        close(host->host_dirfd);
    host->host_dirfd = -1;
}

static void pipeline_config_for(const act_daemon *daemon, const act_host_config *config,
                                act_pipeline_config *out)
{
    act_pipeline_config_init(out);
    out->max_starts = config->max_starts;
    out->ready_timeout_usec = config->ready_timeout_usec;
    out->park_backoff_max_usec = daemon->config.failure_backoff_max_usec;
    out->start_rate_per_sec = config->start_rate_limit;
    out->start_cap = (act_start_cap *)&daemon->start_cap;
}

static int setup_host(act_daemon *daemon, act_daemon_host *host, const act_host_config *config,
                      inherited_fds *inherited, act_error *err)
{
    host->daemon = daemon;
    host->config = config;
    host->host_dirfd = -1;
    int r = act_host_dir(host, err); /* creates hosts/<host>/ now, not at the first wake */
    act_host_dir_close(host);
    if (r < 0 || (r = bind_sockets(host, inherited, err)) < 0 ||
        (r = act_host_config_credentials(config, &host->uid, &host->gid,
                                         &host->have_credentials, err)) < 0 ||
        (r = compile_filter(daemon, host, err)) < 0)
        return r;
    act_pipeline_config pipeline_config;
    pipeline_config_for(daemon, config, &pipeline_config);
    return act_host_new(daemon->loop, config->name, &pipeline_config, &act_wake_ops, host,
                        act_announce, host, &host->pipeline, err);
}

static void teardown_host(act_daemon_host *host)
{
    if (!host->daemon)
        return;
    if (host->pipeline && act_host_free(host->pipeline) < 0)
        act_log(LOG_WARNING, "host %s: pipeline still busy at exit", host->config->name);
    for (uint16_t j = 0; host->listen_fds && j < host->config->n_listen; j++) {
        sd_event_source_disable_unref(host->demand_sources[j]);
        if (host->listen_fds[j] >= 0)
            close(host->listen_fds[j]);
        free(host->listen_names[j]);
    }
    free(host->demand_sources);
    free(host->listen_fds);
    free(host->listen_names);
    cg_seccomp_program_free(host->seccomp);
    act_wake_state_free(host->w);
    sd_event_source_disable_unref(host->idle_timer);
    act_generation_free(host->serving);
    act_generation_free(host->starting);
    act_generation_free(host->replaced);
    free(host->swap);
    act_host_dir_close(host);
    *host = (act_daemon_host){0};
}

int act_hosts_setup(act_daemon *daemon, act_error *err)
{
    daemon->hosts =
        calloc(daemon->n_host_configs ? daemon->n_host_configs : 1, sizeof(*daemon->hosts));
    if (!daemon->hosts)
        return act_error_set(err, ENOMEM, "out of memory");
    inherited_fds inherited = {0};
    inherited_collect(&inherited);
    /* A host that cannot be set up (its port is taken, its User= is
     * missing) is left out with an error; the others are served. The table
     * stays sorted because the configs are. */
    size_t n = 0;
    for (size_t i = 0; i < daemon->n_host_configs; i++) {
        act_error host_err = {0};
        act_daemon_host *host = &daemon->hosts[n];
        if (setup_host(daemon, host, &daemon->host_configs[i], &inherited, &host_err) < 0) {
            act_log_fields(LOG_ERR, &(act_log_ctx){.host = daemon->host_configs[i].name},
                           "%s (host not served)", host_err.message);
            teardown_host(host);
            continue;
        }
        n++;
    }
    daemon->n_hosts = n;
    inherited_release(&inherited);
    for (size_t i = 0; i < daemon->n_hosts; i++)
        act_host_watch_demand(&daemon->hosts[i], true);
    return 0;
}

/* A connection waits in a parked host's backlog: it wakes the host and stays
 * there until the new generation accepts it. */
static int on_demand(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    act_daemon_host *host = userdata;
    act_host_watch_demand(host, false);
    act_host_wake(host->pipeline, ACT_TRIGGER_CONNECTION, NULL, NULL);
    return 0;
}

void act_host_watch_demand(act_daemon_host *host, bool watch)
{
    for (uint16_t i = 0; i < host->config->n_listen; i++) {
        sd_event_source **source = &host->demand_sources[i];
        if (!watch) {
            if (*source)
                sd_event_source_set_enabled(*source, SD_EVENT_OFF);
            continue;
        }
        if (!*source &&
            sd_event_add_io(host->daemon->loop, source, host->listen_fds[i], EPOLLIN, on_demand,
                            host) < 0) {
            act_log(LOG_ERR, "host %s: cannot watch its socket for connections", host->config->name);
            continue;
        }
        sd_event_source_set_enabled(*source, SD_EVENT_ON);
    }
}

/* A host we must not serve (refused for good) answers waiting clients by
 * closing their connections, rather than leaving them hanging until their
 * own timeout, and so that the backlog does not trigger wake after wake. */
void act_host_drain_backlog(act_daemon_host *host)
{
    for (uint16_t i = 0; i < host->config->n_listen; i++) {
        int fd;
        while ((fd = accept4(host->listen_fds[i], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0)
            close(fd);
    }
}

void act_hosts_teardown(act_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_hosts; i++)
        teardown_host(&daemon->hosts[i]);
    free(daemon->hosts);
    daemon->hosts = NULL;
    daemon->n_hosts = 0;
}
