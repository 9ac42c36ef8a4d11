/* activatord: start-up, the loop, and a clean stop that retires every
 * generation with proof before the process exits. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-id128.h>

#include "activator/daemon/fleet/box_lease.h"
#include "activator/daemon/fleet/takeover.h"
#include "activator/daemon/moves/checkpoint_naming.h"
#include "activator/daemon/wake/build_prepare.h"
#include "activator/daemon/builds/gc.h"
#include "activator/daemon/claim/write_backs.h"
#include "activator/daemon/fleet/claim_waits.h"
#include "activator/daemon/fleet/claim_watch.h"
#include "activator/daemon/box/daemon_main.h"
#include "activator/daemon/box/dispatch.h"
#include "activator/daemon/parking/pressure.h"
#include "activator/daemon/accounts/dynamic_users.h"
#include "activator/daemon/accounts/userdb.h"
#include "activator/daemon/generations/log_keeper_link.h"
#include "activator/daemon/generations/output.h"
#include "activator/daemon/hosts/hosts.h"
#include "activator/daemon/generations/generation.h"
#include "activator/daemon/generations/leftovers.h"
#include "activator/daemon/box/lifetime.h"
#include "activator/daemon/hosts/recovery.h"
#include "activator/daemon/hosts/self_fence.h"
#include "activator/daemon/generations/record_writes.h"
#include "activator/daemon/generations/sweep.h"
#include "activator/daemon/box/reload.h"
#include "activator/daemon/box/telemetry.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"

/* How long a clean stop waits beyond the longest StopTimeoutSec for every
 * generation to be proven stopped. */
#define STOP_SLACK_USEC (15 * 1000 * 1000ull)

/* The daemon process: the context every part shares, and what only the
 * start-up, the signals and the stop here use. */
typedef struct daemon_process {
    ad_daemon daemon;
    cfg_host *loaded_hosts; /* the host files loaded at start, until the hosts take them */
    size_t n_loaded_hosts;
    ctrl_server *control;
    sd_event_source *status_timer;   /* a pending STATUS= update */
    sd_event_source *stop_timer;     /* the clean stop's deadline */
    size_t stop_cursor;              /* hosts before it are at rest, during a stop */
    int exit_code;
    bool handed_over; /* the generations run on for the next daemon */
} daemon_process;

/* The box's observers get the context; the process around it is found
 * from it, which needs the context first. */
static_assert(offsetof(daemon_process, daemon) == 0, "the context must open daemon_process");

static daemon_process *process_of(ad_daemon *daemon)
{
    return (daemon_process *)daemon;
}

static int open_directories(ad_daemon *daemon, act_error *err)
{
    const cfg_daemon *config = &daemon->config;
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
    /* hosts/ lets each host's user through to its own state directory but
     * lists none of them: an older daemon made it 0755, an older tmpfiles
     * entry 0700, which kept every unprivileged host out. */
    if ((mkdirat(daemon->state_dirfd, "hosts", 0711) < 0 && errno != EEXIST) ||
        fchmodat(daemon->state_dirfd, "hosts", 0711, 0) < 0)
        return act_error_set(err, errno, "cannot make %s/hosts mode 0711: %s",
                             config->state_directory, strerror(errno));
    r = ad_dynamic_users_open(daemon->state_dirfd, config->dynamic_uid_min, config->dynamic_uid_max,
                              &daemon->dynamic_users, err);
    if (r < 0)
        return act_error_prefix(err, "StateDirectory=%s", config->state_directory);
    char releases[4096];
    snprintf(releases, sizeof(releases), "%s/releases", config->state_directory);
    return rel_store_open(releases, &daemon->releases, err);
}

/* The hosts' dynamic users in the box's user database, so that ps and ls -l
 * name them and systemd hands none of their uids out. Names only: a box
 * that cannot take them still runs every host, and says so. */
static void publish_users(ad_daemon *daemon)
{
    const char *directory = daemon->config.user_database_directory;
    act_error err = {0};
    if (directory &&
        ad_userdb_start(daemon->loop, directory, daemon->dynamic_users, &daemon->userdb, &err) < 0)
        act_log(LOG_WARNING, "the hosts' users are not in the box's user database: %s",
                err.message);
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

/* probe_host: a host to read the claim of, or NULL. */
static int open_store(ad_daemon *daemon, const char *probe_host, act_error *err)
{
    const cfg_daemon *config = &daemon->config;
    claims_store_options options = {
        .ca_file = config->store_ca,
        .cert_file = config->store_certificate,
        .key_file = config->store_key,
        .username = config->store_user,
        .watch_timeout_ms = (int)(config->store_watch_timeout_usec / 1000),
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
    claims_store_set_observer(daemon->store, ad_telemetry_observe_store, daemon);
    /* A store laid out otherwise would hide claims from this box's index. */
    r = claims_store_check_layout(daemon->store, err);
    if (r < 0)
        return act_error_prefix(err, "Store=%s", daemon->config.store);
    /* READY=1 promises that the store answered: ask it once. */
    claim probe;
    if (probe_host) {
        r = claims_read(daemon->store, probe_host, &probe, err);
        if (r < 0)
            return act_error_prefix(err, "Store=%s does not answer", daemon->config.store);
    }
    return 0;
}

static int open_messaging(daemon_process *process, act_error *err)
{
    ad_daemon *daemon = &process->daemon;
    const cfg_daemon *config = &daemon->config;
    /* Who gets which role, resolved before either socket listens, so that
     * the groups may subscribe to events as well as send requests. */
    ctrl_access access = {
        .control_group = config->control_group,
        .viewer_group = config->viewer_group,
        .operators = config->control_operators,
        .viewers = config->control_viewers,
    };
    int r = cfg_resolve_control_groups(config, &access.control_gid, &access.viewer_gid, err);
    if (r < 0)
        return r;
    ev_options events = {
        .url = config->events, .box = config->box, .access = access, .probe_listener = true};
    r = ev_new(&events, &daemon->events, err);
    if (r < 0)
        return r;
    ctrl_options control = {
        .url = config->control,
        .access = access,
        .tls_url = config->control_listen,
        .tls_certificate = config->tls_certificate,
        .tls_key = config->tls_key,
        .tls_client_ca = config->tls_client_ca,
        .dispatch = ad_dispatch,
        .userdata = daemon,
    };
    r = ad_telemetry_open(daemon, &control.observe, err);
    if (r < 0)
        return r;
    return ctrl_new(daemon->loop, &control, &process->control, err);
}

/* STATUS= for systemctl status, with counts of hosts by state. */
static void update_status(ad_daemon *daemon)
{
    unsigned by_state[_PL_HOST_STATE_MAX] = {0};
    for (size_t i = 0; i < daemon->n_hosts; i++)
        by_state[pl_host_get_state(daemon->hosts[i]->pipeline)]++;
    const char *reload = ad_reload_summary(daemon);
    sd_notifyf(0, "STATUS=%zu hosts: %u serving, %u waking, %u parked, %u retiring%s%s%s",
               daemon->n_hosts, by_state[PL_HOST_SERVING], by_state[PL_HOST_WAKING],
               by_state[PL_HOST_PARKED], by_state[PL_HOST_RETIRING],
               daemon->stopping ? " (stopping)" : "", reload[0] ? "; " : "", reload);
}

static int on_status_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
    daemon_process *process = userdata;
    process->status_timer = sd_event_source_disable_unref(process->status_timer);
    update_status(&process->daemon);
    return 0;
}

/* Coalesces a burst of transitions (many hosts waking at once) into one
 * STATUS= update, so the count is walked at most ten times a second. */
static void status_changed(daemon_process *process)
{
    if (!process->status_timer)
        sd_event_add_time_relative(process->daemon.loop, &process->status_timer,
                                   CLOCK_MONOTONIC, 100 * 1000, 0, on_status_timer, process);
}

/* ---- stopping ------------------------------------------------------------ */

static void on_box_lease_ended(void *userdata)
{
    ad_daemon *daemon = userdata;
    sd_event_exit(daemon->loop, process_of(daemon)->exit_code);
}

/* A clean stop ends when every host is at rest and its claim says so (the
 * parked write-backs of the stop's own parks have landed). Nothing starts
 * once the stop began, so a host found so stays so and the cursor only moves
 * forward: each transition costs a step, not a walk of the table. The
 * box's record goes last, after those writes, so the fleet sees the box
 * alive while it still runs anything or its claims still say it does. */
static void check_stopped(daemon_process *process)
{
    ad_daemon *daemon = &process->daemon;
    while (process->stop_cursor < daemon->n_hosts &&
           ad_host_at_rest(daemon->hosts[process->stop_cursor]) &&
           !ad_claim_report_busy(daemon->hosts[process->stop_cursor]))
        process->stop_cursor++;
    /* Hosts a reload removed are few, and were parking already. */
    if (process->stop_cursor == daemon->n_hosts && ad_hosts_removed_at_rest(daemon))
        ad_box_lease_end(daemon, on_box_lease_ended);
}

static int on_stop_deadline(sd_event_source *source, uint64_t usec, void *userdata)
{
    daemon_process *process = userdata;
    ad_daemon *daemon = &process->daemon;
    bool generations_left = false;
    for (size_t i = process->stop_cursor; i < daemon->n_hosts && !generations_left; i++)
        generations_left = !ad_host_at_rest(daemon->hosts[i]);
    if (generations_left) {
        act_log(LOG_ERR, "stop: some generations are not proven stopped after the stop timeout; "
                         "exiting anyway, the next start retires them");
        process->exit_code = 1;
    } else if (process->stop_cursor < daemon->n_hosts) {
        /* Every generation is stopped; only the store is slow. */
        act_log(LOG_WARNING, "stop: some claims were not written back as parked before the "
                             "stop timeout; they may still say serving until the host wakes "
                             "again");
    } else {
        /* Every claim is written; only the record's removal is out. */
        act_log(LOG_WARNING, "stop: the record of box %s was not removed from the claim store "
                             "before the stop timeout; it lapses with its lease",
                daemon->config.box);
    }
    sd_event_exit(daemon->loop, process->exit_code);
    return 0;
}

/* Every transition of every host, after the host's own reactions. */
static void observe_host(ad_daemon *daemon, ad_host *host, const pl_wake_event *event)
{
    daemon_process *process = process_of(daemon);
    if (event->type == PL_WAKE_EVENT_SERVING || event->type == PL_WAKE_EVENT_PARKED)
        status_changed(process);
    /* A host whose last retirement was not proven is at rest once the
     * sweep proves it. */
    if (daemon->stopping &&
        (event->type == PL_WAKE_EVENT_ENDED || event->type == PL_WAKE_EVENT_PROVEN))
        check_stopped(process);
}

static void observe_claim_reports(ad_daemon *daemon, ad_host *host)
{
    if (daemon->stopping)
        check_stopped(process_of(daemon));
}

/* What the box observes of its hosts (host/context.h): STATUS= and the end
 * of a clean stop. Neither changes a host. */
static const ad_box_observers box_observers = {
    .host_transition = observe_host,
    .claim_reports_ended = observe_claim_reports,
};

static void begin_stop(daemon_process *process)
{
    ad_daemon *daemon = &process->daemon;
    if (daemon->stopping)
        return;
    daemon->stopping = true;
    ad_claim_watch_hold(daemon);
    /* Answered now, while the replies can still be sent. */
    ad_claim_waits_end(daemon, false);
    sd_notify(0, "STOPPING=1");
    act_log(LOG_INFO, "stopping: retiring every generation with proof");
    uint64_t longest = 0;
    for (size_t i = 0; i < daemon->n_hosts; i++) {
        ad_host *host = daemon->hosts[i];
        const cfg_host *config = ad_host_config(host);
        pl_host *pipeline = host->pipeline;
        if (config->stop_timeout_usec > longest)
            longest = config->stop_timeout_usec;
        pl_host_cancel(pipeline, PL_REASON_CANCELLED, "host %s: the daemon is stopping",
                       config->name);
        pl_host_park(pipeline, PL_PARK_REQUEST);
    }
    if (sd_event_add_time_relative(daemon->loop, &process->stop_timer, CLOCK_MONOTONIC,
                                   longest + STOP_SLACK_USEC, 0, on_stop_deadline, process) < 0)
        act_log(LOG_WARNING, "stop: cannot arm the stop deadline; waiting for every proof");
    update_status(daemon);
    check_stopped(process);
}

/* systemctl restart (the unit's RestartKillSignal=): the next daemon takes
 * every generation over, as it would after a crash, and nothing is lost in
 * between. No control request is taken from here on, every listening socket
 * is in the FD store (and held by its generation), every record written is
 * left to land, and the daemon exits 0 with every generation running. Wakes
 * in flight are left too: their generations are not serving, so the next
 * daemon retires them with proof, and their clients wait in the sockets'
 * backlogs for it. The box's record in the claim store is not removed, as a
 * clean stop does: the box stays alive under the next daemon, so the record
 * is renewed instead (fleet/box_lease.c), and the next daemon puts its own. */
static void begin_handover(daemon_process *process)
{
    ad_daemon *daemon = &process->daemon;
    if (daemon->stopping)
        return;
    daemon->stopping = true;
    ad_claim_waits_end(daemon, true);
    ctrl_free(TAKE_PTR(process->control));
    ad_claim_watch_stop(daemon);
    size_t serving = ad_hosts_hand_over(daemon);
    ad_lifetime_handover(daemon, &daemon->lifetime);
    /* The box's record stays (renewed): the box is alive throughout, and
     * the next daemon puts its own record over it. */
    ad_box_lease_hand_over(daemon);
    sd_notifyf(0, "STOPPING=1\nSTATUS=handing over to the next daemon: %zu generations keep running",
               serving);
    act_log(LOG_INFO, "handover: %zu serving generations keep running for the next daemon",
            serving);
    process->exit_code = 0;
    process->handed_over = true;
    sd_event_exit(daemon->loop, 0);
}

static int on_signal(sd_event_source *source, const struct signalfd_siginfo *info,
                     void *userdata)
{
    daemon_process *process = userdata;
    if (info->ssi_signo == AD_HANDOVER_SIGNAL)
        begin_handover(process);
    else if (info->ssi_signo == SIGHUP)
        ad_reload(&process->daemon, NULL);
    else
        begin_stop(process);
    return 0;
}

/* ---- start and run ------------------------------------------------------- */

static int load_configuration(daemon_process *process, const char *path, act_error *err)
{
    ad_daemon *daemon = &process->daemon;
    _cleanup_(cfg_errors_free) cfg_errors errors = {0};
    int r = cfg_load_daemon(path, &daemon->config, &errors);
    if (r < 0) {
        cfg_errors_print(&errors, stderr);
        return act_error_set(err, -r, "%s: configuration not usable; run activatord "
                                      "--check-config --config %s",
                             path, path);
    }
    r = cfg_load_hosts(daemon->config.hosts_directory, &process->loaded_hosts,
                       &process->n_loaded_hosts, &errors);
    if (r < 0) {
        cfg_errors_print(&errors, stderr);
        return act_error_set(err, -r, "HostsDirectory=%s cannot be read",
                             daemon->config.hosts_directory);
    }
    /* A bad host file is skipped; the others are served. */
    for (size_t i = 0; i < errors.n; i++)
        act_log(LOG_ERR, "%s (host not loaded)", errors.items[i].text);
    return 0;
}

static int make_incarnation(ad_daemon *daemon, act_error *err)
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
/* Whole-build work (stage, promote, swap verification, gc) of two hosts at
 * once; a host's own run in order in its lane. Background workers: hashing
 * a large build must leave the CPU to the wakes beside it. */
#define RELEASE_WORKERS 2

static int start(daemon_process *process, const char *config_path, act_error *err)
{
    ad_daemon *daemon = &process->daemon;
    daemon->config_path = config_path;
    int r = load_configuration(process, config_path, err);
    if (r < 0)
        return r;
    if ((r = sd_event_default(&daemon->loop)) < 0)
        return act_error_set(err, -r, "cannot create the event loop: %s", strerror(-r));
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, AD_HANDOVER_SIGNAL);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sd_event_add_signal(daemon->loop, NULL, SIGTERM, on_signal, process);
    sd_event_add_signal(daemon->loop, NULL, SIGINT, on_signal, process);
    sd_event_add_signal(daemon->loop, NULL, AD_HANDOVER_SIGNAL, on_signal, process);
    sd_event_add_signal(daemon->loop, NULL, SIGHUP, on_signal, process);
    /* A child that dies while we write to its pipe must not kill us. */
    signal(SIGPIPE, SIG_IGN);

    /* One listening socket per ListenStream= of every host, plus notify
     * sockets and pidfds: far past the usual soft limit of 1024. The
     * generations get their host's LimitNOFILE= instead. */
    struct rlimit nofile;
    getrlimit(RLIMIT_NOFILE, &nofile);
    setrlimit(RLIMIT_NOFILE, &(struct rlimit){nofile.rlim_max, nofile.rlim_max});
    /* Before those sockets take the low fd numbers: with thousands of them
     * open, a spawn would otherwise copy and close them all (spawn_fds.c). */
    if ((r = cg_spawn_reserve_fds(SPAWN_FD_WINDOW, err)) < 0)
        return r;

    if ((r = make_incarnation(daemon, err)) < 0 || (r = open_directories(daemon, err)) < 0)
        return r;
    ad_lifetime_start(daemon, &daemon->lifetime);
    if ((r = act_offload_new(daemon->loop, RECORD_WRITERS, &daemon->offload, err)) < 0 ||
        (r = act_offload_new_background(daemon->loop, RELEASE_WORKERS, &daemon->release_work,
                                        err)) < 0)
        return r;
    r = cg_root_open(daemon->config.cgroup_root ? daemon->config.cgroup_root : "auto",
                     &daemon->cgroups, err);
    if (r < 0)
        return act_error_prefix(err, "CgroupRoot=%s",
                                daemon->config.cgroup_root ? daemon->config.cgroup_root : "auto");
    act_error pids_err = {0};
    if (cg_limits_check(daemon->cgroups, &(cg_limits){.pids_max = CFG_PIDS_MAX_DEFAULT},
                        &pids_err) < 0)
        act_log(LOG_WARNING,
                "hosts without PidsMax= are held to its default of %d tasks by RLIMIT_NPROC on "
                "their dynamic user (those with User= not at all) on this box: %s",
                CFG_PIDS_MAX_DEFAULT, pids_err.message);
    else if (!cg_limits_free_at_spawn(daemon->cgroups,
                                      &(cg_limits){.pids_max = CFG_PIDS_MAX_DEFAULT}))
        act_log(LOG_INFO,
                "this box has the pids, memory and cpu limits in cgroup v1 only: a host whose "
                "limits need them joins them at each start, which the kernel makes wait out an "
                "RCU grace period (milliseconds; mount the hierarchies with favordynmods to "
                "avoid it); hosts without User= are held to the default PidsMax=%d by "
                "RLIMIT_NPROC on their dynamic user instead",
                CFG_PIDS_MAX_DEFAULT);
    uint64_t memory_default = cfg_memory_max_default();
    if (memory_default && !ad_default_memory_in_leaf(daemon->cgroups, memory_default))
        act_log(LOG_WARNING,
                "hosts without MemoryMax= run without its default of %s of the box's memory "
                "here: this box's memory controller is not in cgroup v2, and a v1 group would "
                "cost every start an RCU grace period; set MemoryMax= for a host that needs a "
                "limit (its starts pay that wait)",
                CFG_MEMORY_MAX_DEFAULT);
    if ((r = ad_log_keeper_open(daemon, ad_host_output_kept(), err)) < 0 ||
        (r = pl_start_cap_init(&daemon->start_cap, daemon->config.max_concurrent_starts, err)) <
            0 ||
        (r = open_store(daemon, process->n_loaded_hosts ? process->loaded_hosts[0].name : NULL,
                        err)) < 0 ||
        (r = ad_leftovers_scan(daemon, err)) < 0)
        return r;
    daemon->observers = &box_observers;
    r = ad_hosts_setup(daemon, TAKE_PTR(process->loaded_hosts),
                       TAKE_STRUCT(process->n_loaded_hosts), err);
    if (r < 0)
        return r;
    /* The lease is put before anything is resumed: a failover host whose
     * lease this daemon cannot prove is resumed fenced (hosts/self_fence.h). */
    if ((r = ad_box_lease_start(daemon, err)) < 0)
        return r;
    ad_self_fence_start(daemon);
    ad_recover(daemon);
    ad_pressure_configure(daemon);
    publish_users(daemon);
    if ((r = open_messaging(process, err)) < 0 || (r = ad_claim_watch_start(daemon, err)) < 0)
        return r;
    ad_takeover_start(daemon);
    sd_event_set_watchdog(daemon->loop, true);
    act_log(LOG_INFO, "activatord %s: box %s, incarnation %s, %zu hosts, store %s, cgroup %s",
            ACTIVATOR_VERSION, daemon->config.box, daemon->incarnation, daemon->n_hosts,
            daemon->config.store, cg_root_path(daemon->cgroups));
    sd_notify(0, "READY=1");
    update_status(daemon);
    return 0;
}

static void teardown(daemon_process *process)
{
    ad_daemon *daemon = &process->daemon;
    /* Lets the record writes already asked for land (a clean stop removes
     * the records of the generations it retired). */
    act_offload_free(daemon->offload);
    ad_record_writes_forget(daemon);
    ad_build_prepares_forget(daemon);
    act_offload_free(daemon->release_work);
    ad_reload_free(daemon);
    ad_leftovers_free(daemon);
    ad_sweep_free(daemon);
    sd_event_source_disable_unref(process->status_timer);
    sd_event_source_disable_unref(process->stop_timer);
    ad_claim_waits_end(daemon, false);
    ctrl_free(process->control);
    ad_telemetry_close(daemon);
    ev_free(daemon->events);
    daemon->events = NULL;
    ad_claim_watch_stop(daemon);
    ad_takeover_free(daemon);
    ad_self_fence_free(daemon);
    ad_box_lease_free(daemon);
    ad_pressure_close(daemon);
    ad_hosts_teardown(daemon);
    /* After the hosts, whose logs held the pipes' write ends. */
    ad_log_keeper_close(daemon, daemon->stopping && !process->handed_over);
    claims_store_free(daemon->store);
    ad_checkpoint_namings_free(daemon);
    ad_claim_waits_free(daemon);
    rel_store_free(daemon->releases);
    cg_root_free(daemon->cgroups);
    if (daemon->state_dirfd >= 0)
        close(daemon->state_dirfd);
    cg_seccomp_program_free(daemon->default_seccomp);
    cg_fs_view_free(daemon->shared_fs_view);
    ad_userdb_free(daemon->userdb);
    ad_dynamic_users_free(daemon->dynamic_users);
    cfg_hosts_free(process->loaded_hosts, process->n_loaded_hosts);
    cfg_daemon_free(&daemon->config);
    sd_event_unref(daemon->loop);
}

int ad_run(const char *config_path)
{
    daemon_process process = {.daemon = {.state_dirfd = -1}};
    ad_daemon *daemon = &process.daemon;
    act_error err = {0};
    int r = start(&process, config_path, &err);
    if (r < 0) {
        /* Nothing of ours ran yet: the loop never did. What recovery resumed
         * keeps running and what it was to retire is left as it was found,
         * so the next start, once what failed is fixed, takes both up again
         * (a clean stop here would retire every generation on the box). */
        size_t resumed = 0;
        for (size_t i = 0; i < daemon->n_hosts; i++)
            resumed += daemon->hosts[i]->serving != NULL;
        act_log(LOG_ERR, "activatord: %s", err.message);
        if (resumed)
            act_log(LOG_NOTICE,
                    "activatord: not started; %zu resumed generations keep running for the "
                    "next start",
                    resumed);
        teardown(&process);
        return 1;
    }
    r = sd_event_loop(daemon->loop);
    teardown(&process);
    act_log(LOG_INFO, "activatord stopped");
    return r < 0 ? 1 : process.exit_code;
}
