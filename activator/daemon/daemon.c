/* activatord: start-up, the loop, and a clean stop that retires every
 * generation with proof before the process exits. */
#include "activator/daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-id128.h>

#include "activator/config/parse-account.h"
#include "activator/daemon/daemon_main.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"

/* How long a clean stop waits beyond the longest StopTimeoutSec for every
 * generation to be proven stopped. */
#define STOP_SLACK_USEC (15 * 1000 * 1000ull)

uint64_t act_daemon_now(const act_daemon *daemon)
{
    uint64_t now = 0;
    sd_event_now(daemon->loop, CLOCK_MONOTONIC, &now);
    return now;
}

static int compare_host_configs(const void *a, const void *b)
{
    return strcmp(((const act_host_config *)a)->name, ((const act_host_config *)b)->name);
}

static int open_directories(act_daemon *daemon, act_error *err)
{
    const act_daemon_config *config = &daemon->config;
    char notify_dir[4096];
    snprintf(notify_dir, sizeof(notify_dir), "%s/notify", config->runtime_directory);
    int r = act_mkdir_p(config->state_directory, 0755, err);
    if (r == 0)
        r = act_mkdir_p(notify_dir, 0755, err);
    if (r < 0)
        return r;
    daemon->state_dirfd = open(config->state_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (daemon->state_dirfd < 0)
        return act_error_set(err, errno, "cannot open StateDirectory=%s: %s",
                             config->state_directory, strerror(errno));
    char releases[4096];
    snprintf(releases, sizeof(releases), "%s/releases", config->state_directory);
    return rel_store_open(releases, &daemon->releases, err);
}

/* StorePasswordFile=: its first line, without the newline. */
static int read_store_password(const char *path, char **out, act_error *err)
{
    size_t len = 0;
    act_error why = {0};
    int r = act_read_file(AT_FDCWD, path, 4096, out, &len, &why);
    if (r < 0)
        return act_error_set(err, -r, "StorePasswordFile=%s: %s", path, why.message);
    (*out)[strcspn(*out, "\r\n")] = '\0';
    return 0;
}

static int open_store(act_daemon *daemon, act_error *err)
{
    const act_daemon_config *config = &daemon->config;
    claims_store_options options = {
        .ca_file = config->store_ca,
        .cert_file = config->store_certificate,
        .key_file = config->store_key,
        .username = config->store_user,
    };
    _cleanup_free_ char *password = NULL;
    int r = 0;
    if (config->store_password_file &&
        (r = read_store_password(config->store_password_file, &password, err)) < 0)
        return r;
    options.password = password;
    r = claims_store_open(config->store, &options, &daemon->store, err);
    /* The store keeps its own copy; ours goes now. */
    if (password)
        explicit_bzero(password, strlen(password));
    if (r < 0)
        return act_error_prefix(err, "Store=%s", daemon->config.store);
    r = claims_store_attach_event(daemon->store, daemon->loop, err);
    if (r < 0)
        return r;
    /* READY=1 promises that the store answered: ask it once. */
    claim probe;
    if (daemon->n_host_configs) {
        r = claims_read(daemon->store, daemon->host_configs[0].name, &probe, err);
        if (r < 0)
            return act_error_prefix(err, "Store=%s does not answer", daemon->config.store);
    }
    return 0;
}

static int open_messaging(act_daemon *daemon, act_error *err)
{
    const act_daemon_config *config = &daemon->config;
    act_events_options events = {.url = config->events, .box = config->box};
    int r = act_events_new(&events, &daemon->events, err);
    if (r < 0)
        return r;
    act_control_options control = {
        .url = config->control,
        .tls_url = config->control_listen,
        .tls_certificate = config->tls_certificate,
        .tls_key = config->tls_key,
        .tls_client_ca = config->tls_client_ca,
        .dispatch = act_dispatch,
        .userdata = daemon,
    };
    r = act_telemetry_open(daemon, &control.observe, err);
    if (r < 0)
        return r;
    if (config->control_group) {
        r = act_resolve_group("ControlGroup", config->control_group, &control.control_gid, err);
        if (r < 0)
            return r;
        control.have_control_gid = true;
        events.have_control_gid = true;
        events.control_gid = control.control_gid;
    }
    return act_control_new(daemon->loop, &control, &daemon->control, err);
}

void act_daemon_update_status(act_daemon *daemon)
{
    unsigned by_state[_ACT_HOST_STATE_MAX] = {0};
    for (size_t i = 0; i < daemon->n_hosts; i++)
        by_state[act_host_get_state(daemon->hosts[i].pipeline)]++;
    sd_notifyf(0, "STATUS=%zu hosts: %u serving, %u waking, %u parked, %u retiring%s",
               daemon->n_hosts, by_state[ACT_HOST_SERVING], by_state[ACT_HOST_WAKING],
               by_state[ACT_HOST_PARKED], by_state[ACT_HOST_RETIRING],
               daemon->stopping ? " (stopping)" : "");
}

static int on_status_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    act_daemon *daemon = userdata;
    daemon->status_timer = sd_event_source_disable_unref(daemon->status_timer);
    act_daemon_update_status(daemon);
    return 0;
}

/* Coalesces a burst of transitions (many hosts waking at once) into one
 * STATUS= update, so the count is walked at most ten times a second. */
void act_daemon_status_changed(act_daemon *daemon)
{
    if (!daemon->status_timer)
        sd_event_add_time_relative(daemon->loop, &daemon->status_timer, CLOCK_MONOTONIC,
                                   100 * 1000, 0, on_status_timer, daemon);
}

/* ---- stopping ------------------------------------------------------------ */

static bool all_stopped(const act_daemon *daemon)
{
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        const act_daemon_host *host = &daemon->hosts[i];
        if (act_host_get_state(host->pipeline) != ACT_HOST_PARKED || host->serving ||
            host->starting || host->w)
            return false;
    }
    return true;
}

static int on_stop_tick(sd_event_source *source, uint64_t usec, void *userdata)
{
    act_daemon *daemon = userdata;
    if (all_stopped(daemon)) {
        sd_event_exit(daemon->loop, daemon->exit_code);
        return 0;
    }
    if (act_daemon_now(daemon) >= daemon->stop_deadline_usec) {
        act_log(LOG_ERR, "stop: some generations are not proven stopped after the stop timeout; "
                         "exiting anyway, the next start retires them");
        daemon->exit_code = 1;
        sd_event_exit(daemon->loop, daemon->exit_code);
        return 0;
    }
    sd_event_source_set_time_relative(source, 20 * 1000);
    sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
    return 0;
}

static void begin_stop(act_daemon *daemon)
{
    if (daemon->stopping)
        return;
    daemon->stopping = true;
    sd_notify(0, "STOPPING=1");
    act_log(LOG_INFO, "stopping: retiring every generation with proof");
    uint64_t longest = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        act_daemon_host *host = &daemon->hosts[i];
        act_host_watch_demand(host, false);
        if (host->config->stop_timeout_usec > longest)
            longest = host->config->stop_timeout_usec;
        act_host_cancel(host->pipeline, ACT_REASON_CANCELLED, "host %s: the daemon is stopping",
                        host->config->name);
        act_host_park(host->pipeline, ACT_PARK_REQUEST);
    }
    daemon->stop_deadline_usec = act_daemon_now(daemon) + longest + STOP_SLACK_USEC;
    sd_event_add_time_relative(daemon->loop, NULL, CLOCK_MONOTONIC, 0, 0, on_stop_tick, daemon);
    act_daemon_update_status(daemon);
}

static int on_signal(sd_event_source *source, const struct signalfd_siginfo *info,
                     void *userdata)
{
    begin_stop(userdata);
    return 0;
}

/* ---- start and run ------------------------------------------------------- */

static int load_configuration(act_daemon *daemon, const char *path, act_error *err)
{
    act_config_errors errors = {0};
    int r = act_config_load_daemon(path, &daemon->config, &errors);
    if (r < 0) {
        act_config_errors_print(&errors, stderr);
        act_config_errors_free(&errors);
        return act_error_set(err, -r, "%s: configuration not usable; run activatord "
                                      "--check-config --config %s",
                             path, path);
    }
    r = act_config_load_hosts(daemon->config.hosts_directory, &daemon->host_configs,
                              &daemon->n_host_configs, &errors);
    if (r < 0) {
        act_config_errors_print(&errors, stderr);
        act_config_errors_free(&errors);
        return act_error_set(err, -r, "HostsDirectory=%s cannot be read",
                             daemon->config.hosts_directory);
    }
    /* A bad host file is skipped; the others are served. */
    for (size_t i = 0; i < errors.n; i++)
        act_log(LOG_ERR, "%s (host not loaded)", errors.items[i].text);
    act_config_errors_free(&errors);
    qsort(daemon->host_configs, daemon->n_host_configs, sizeof(*daemon->host_configs),
          compare_host_configs);
    return 0;
}

static int make_incarnation(act_daemon *daemon, act_error *err)
{
    sd_id128_t id;
    int r = sd_id128_randomize(&id);
    if (r < 0)
        return act_error_set(err, -r, "cannot mint an incarnation id: %s", strerror(-r));
    sd_id128_to_string(id, daemon->incarnation);
    return 0;
}

/* Enough for what a generation gets (stdio, a few listening sockets) and
 * the exec fd and report pipe; a spawn needing more copies the fd table. */
#define SPAWN_FD_WINDOW 64
/* Threads for the records' durable writes: hosts in different lanes write
 * side by side, and the filesystem commits their fsyncs together. */
#define RECORD_WRITERS 2

static int start(act_daemon *daemon, const char *config_path, act_error *err)
{
    int r = load_configuration(daemon, config_path, err);
    if (r < 0)
        return r;
    if ((r = sd_event_default(&daemon->loop)) < 0)
        return act_error_set(err, -r, "cannot create the event loop: %s", strerror(-r));
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sd_event_add_signal(daemon->loop, NULL, SIGTERM, on_signal, daemon);
    sd_event_add_signal(daemon->loop, NULL, SIGINT, on_signal, daemon);
    /* A child that dies while we write to its pipe must not kill us. */
    signal(SIGPIPE, SIG_IGN);

    /* One listening socket per ListenStream= of every host, plus notify
     * sockets and pidfds: far past the usual soft limit of 1024. The
     * generations get the limit we were started with back. */
    getrlimit(RLIMIT_NOFILE, &daemon->nofile);
    setrlimit(RLIMIT_NOFILE, &(struct rlimit){daemon->nofile.rlim_max, daemon->nofile.rlim_max});
    /* Before those sockets take the low fd numbers: with thousands of them
     * open, a spawn would otherwise copy and close them all (spawn_fds.c). */
    if ((r = cg_spawn_reserve_fds(SPAWN_FD_WINDOW, err)) < 0)
        return r;

    if ((r = make_incarnation(daemon, err)) < 0 || (r = open_directories(daemon, err)) < 0 ||
        (r = act_offload_new(daemon->loop, RECORD_WRITERS, &daemon->offload, err)) < 0)
        return r;
    r = cg_root_open(daemon->config.cgroup_root ? daemon->config.cgroup_root : "auto",
                     &daemon->cgroups, err);
    if (r < 0)
        return act_error_prefix(err, "CgroupRoot=%s",
                                daemon->config.cgroup_root ? daemon->config.cgroup_root : "auto");
    if ((r = act_start_cap_init(&daemon->start_cap, daemon->config.max_concurrent_starts, err)) <
            0 ||
        (r = open_store(daemon, err)) < 0 || (r = act_recovery_scan(daemon, err)) < 0 ||
        (r = act_hosts_setup(daemon, err)) < 0)
        return r;
    act_recover(daemon);
    if ((r = open_messaging(daemon, err)) < 0 || (r = act_claim_watch_start(daemon, err)) < 0)
        return r;
    sd_event_set_watchdog(daemon->loop, true);
    act_log(LOG_INFO, "activatord %s: box %s, incarnation %s, %zu hosts, store %s, cgroup %s",
            ACTIVATOR_VERSION, daemon->config.box, daemon->incarnation, daemon->n_hosts,
            daemon->config.store, cg_root_path(daemon->cgroups));
    sd_notify(0, "READY=1");
    act_daemon_update_status(daemon);
    return 0;
}

static void teardown(act_daemon *daemon)
{
    /* Lets the record writes already asked for land (a clean stop removes
     * the records of the generations it retired). */
    act_offload_free(daemon->offload);
    act_recovery_discard(daemon);
    sd_event_source_disable_unref(daemon->status_timer);
    act_control_free(daemon->control);
    act_telemetry_close(daemon);
    act_events_free(daemon->events);
    daemon->events = NULL;
    claims_watch_free(daemon->watch);
    act_hosts_teardown(daemon);
    claims_store_free(daemon->store);
    rel_store_free(daemon->releases);
    cg_root_free(daemon->cgroups);
    if (daemon->state_dirfd >= 0)
        close(daemon->state_dirfd);
    cg_seccomp_program_free(daemon->default_seccomp);
    act_host_configs_free(daemon->host_configs, daemon->n_host_configs);
    act_daemon_config_free(&daemon->config);
    sd_event_unref(daemon->loop);
}

int act_daemon_run(const char *config_path)
{
    act_daemon daemon = {.state_dirfd = -1};
    act_error err = {0};
    int r = start(&daemon, config_path, &err);
    if (r < 0) {
        act_log(LOG_ERR, "activatord: %s", err.message);
        if (daemon.loop && daemon.hosts)
            begin_stop(&daemon);
        if (daemon.stopping)
            sd_event_loop(daemon.loop);
        teardown(&daemon);
        return 1;
    }
    r = sd_event_loop(daemon.loop);
    teardown(&daemon);
    act_log(LOG_INFO, "activatord stopped");
    return r < 0 ? 1 : daemon.exit_code;
}
