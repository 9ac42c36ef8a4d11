/* One generation of a host: created at `reserve`, spawned at `exec`, and
 * retired with proof of empty, whatever the reason it ends. */
#include "activator/daemon/generations/generation_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "activator/daemon/generations/announce.h"
#include "activator/daemon/generations/record_writes.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/strv.h"

/* Whether the default PidsMax= goes into the leaf (see the header). */
static bool default_pids_in_leaf(const cg_root *root, const cfg_limits *limits, bool own_uid)
{
    const cg_limits pids = {.pids_max = limits->pids_max};
    if (cg_limits_check(root, &pids, NULL) < 0)
        return false;
    return !own_uid || cg_limits_free_at_spawn(root, &pids);
}

void ad_limits_from_config(const cg_root *root, const cfg_limits *limits, bool own_uid,
                           cg_limits *out)
{
    bool pids_unset = limits->pids_max == CFG_LIMIT_INFINITY ||
                      (limits->pids_max_is_default && !default_pids_in_leaf(root, limits, own_uid));
    /* "infinity" is the cgroup's own default, so it is simply not written. */
    *out = (cg_limits){
        .memory_max = limits->memory_max == CFG_LIMIT_INFINITY ? 0 : limits->memory_max,
        .memory_high = limits->memory_high == CFG_LIMIT_INFINITY ? 0 : limits->memory_high,
        .pids_max = pids_unset ? 0 : limits->pids_max,
        .cpu_quota_percent = limits->cpu_quota_percent,
        .cpu_weight = limits->cpu_weight,
    };
}

int ad_generation_new(ad_host *host, const char *kind, uint64_t number, ad_generation **out,
                      act_error *err)
{
    assert(host && kind && out);
    char leaf_name[32];
    snprintf(leaf_name, sizeof(leaf_name), "%s-%" PRIu64, kind, number);
    const cfg_host *config = ad_host_config(host);
    cg_limits limits;
    ad_limits_from_config(host->daemon->cgroups, &config->limits, !config->user, &limits);

    ad_generation *gen = calloc(1, sizeof(*gen));
    if (!gen)
        return act_error_set(err, ENOMEM, "out of memory");
    gen->host = host;
    gen->number = number;
    gen->announced = strcmp(kind, "g") == 0;
    gen->process.pidfd = -1;
    gen->helper.pidfd = -1;
    gen->helper_stdout_fd = -1;
    int r =
        cg_leaf_create(host->daemon->cgroups, config->name, leaf_name, &limits, &gen->leaf, err);
    if (r < 0) {
        free(gen);
        return r;
    }
    *out = gen;
    return 0;
}

int ad_generation_set_limits(ad_generation *gen, const cfg_limits *limits, act_error *err)
{
    assert(gen && limits);
    cg_limits values;
    ad_limits_from_config(gen->host->daemon->cgroups, limits, !ad_host_config(gen->host)->user,
                          &values);
    return cg_leaf_set_limits(gen->leaf, &values, err);
}

void ad_generation_fill_record(ad_generation *gen, rec_generation_phase phase,
                               rec_generation_record *record)
{
    assert(gen && record);
    ad_host *host = gen->host;
    *record = (rec_generation_record){
        .generation = gen->number,
        .session = gen->session,
        .admission_revision = gen->admission_revision,
        .build = gen->build,
        .phase = phase,
        .pid = gen->process.pid,
        .started_usec = act_wallclock_usec(),
    };
    snprintf(record->host, sizeof(record->host), "%s", host->name);
    snprintf(record->incarnation, sizeof(record->incarnation), "%s", host->daemon->incarnation);
}

int ad_generation_write_record(ad_generation *gen, rec_generation_phase phase, act_error *err)
{
    rec_generation_record record;
    ad_generation_fill_record(gen, phase, &record);
    int dirfd = ad_host_dir(gen->host, err);
    return dirfd < 0 ? dirfd : rec_write_generation(dirfd, &record, err);
}

/* "KEY=VALUE" formatted, or NULL when out of memory. */
static char *format_entry(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format_entry(const char *fmt, ...)
{
    char *entry = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&entry, fmt, ap);
    va_end(ap);
    return r < 0 ? NULL : entry;
}

/* Appends entry, taking it; the array stays NULL-terminated, so a failed
 * entry only marks the whole environment failed. */
static void add_entry(char **envp, size_t *n, char *entry, bool *failed)
{
    if (!entry)
        *failed = true;
    else
        envp[(*n)++] = entry;
}

/* The environment a generation starts with: its Environment= lines, then
 * what the activator tells every generation. LISTEN_* are added by cg_spawn. */
static char **build_environment(ad_generation *gen, const char *extra)
{
    const cfg_host *config = ad_host_config(gen->host);
    size_t n_config = act_strv_length(config->environment);
    _cleanup_(act_strv_freep) char **envp = calloc(n_config + 9, sizeof(*envp));
    if (!envp)
        return NULL;
    size_t n = 0;
    bool has_path = false, failed = false;
    for (size_t i = 0; i < n_config; i++) {
        has_path = has_path || strncmp(config->environment[i], "PATH=", 5) == 0;
        add_entry(envp, &n, strdup(config->environment[i]), &failed);
    }
    if (!has_path)
        add_entry(envp, &n,
                  strdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
                  &failed);
    if (gen->notify)
        add_entry(envp, &n, format_entry("NOTIFY_SOCKET=%s", ntf_socket_path(gen->notify)),
                  &failed);
    add_entry(envp, &n, format_entry("ACTIVATOR_HOST=%s", config->name), &failed);
    add_entry(envp, &n, format_entry("ACTIVATOR_GENERATION=%" PRIu64, gen->number), &failed);
    add_entry(envp, &n, format_entry("ACTIVATOR_VERSION=%s", gen->build.version), &failed);
    add_entry(envp, &n,
              format_entry("STATE_DIRECTORY=%s/hosts/%s/state",
                           gen->host->daemon->config.state_directory, config->name),
              &failed);
    if (extra)
        add_entry(envp, &n, strdup(extra), &failed);
    return failed ? NULL : TAKE_PTR(envp);
}

/* systemd's WATCHDOG_PID: the main process, the one whose keep-alives count. */
static const char *const watchdog_pid[] = {"WATCHDOG_PID", NULL};

/* What a spawn in a generation's leaf starts: its build, an operator's
 * helper (ExecRestore=, ExecReplicate=), or a probe (Ready=exec:,
 * HealthCheck=exec:). All three run as the host, in the leaf, with its
 * environment; the probe also joins the main process's mount namespace. */
typedef enum spawn_kind {
    SPAWN_MAIN,
    SPAWN_HELPER,
    SPAWN_PROBE,
} spawn_kind;

/* What the log's marker line says of a start (generations/output.h). */
static void start_marker(const ad_generation *gen, char *whose, size_t size)
{
    snprintf(whose, size, "%s %" PRIu64 " starts", gen->announced ? "generation" : "restore",
             gen->number);
}

/* held non-NULL: the child is held before its exec (cg_spawn_hold), and
 * out is not filled. */
static int spawn(ad_generation *gen, int exec_fd, spawn_kind kind, const char *const *argv,
                 char **envp, cg_process *out, cg_held_spawn **held, act_error *err)
{
    bool is_helper = kind != SPAWN_MAIN;
    ad_host *host = gen->host;
    const cfg_host *config = ad_host_config(host);
    const ad_daemon *daemon = host->daemon;

    char state_dir[4096];
    snprintf(state_dir, sizeof(state_dir), "%s/hosts/%s/state", daemon->config.state_directory,
             config->name);

    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.exec_fd = exec_fd;
    /* Scripts (helpers, and builds whose executable prepare found to start
     * with "#!") run from their fd only if it survives the exec. */
    spec.exec_fd_survives = is_helper || gen->exec_is_script;
    spec.argv = argv;
    spec.envp = (const char *const *)envp;
    /* Never our own stream: see generations/output.h. A held child's marker waits
     * for its release: an early start that is discarded ran nothing. */
    if (!gen->log) {
        char whose[64];
        start_marker(gen, whose, sizeof(whose));
        int r = ad_host_log_open(host, held ? NULL : whose, &gen->log, err);
        if (r < 0)
            return act_error_prefix(err, "host %s: output", config->name);
    }
    /* ExecCheckpoint= answers on its stdout, which the daemon reads. */
    spec.stdout_fd = is_helper && gen->helper_stdout_fd >= 0 ? gen->helper_stdout_fd
                                                             : ad_host_log_fd(gen->log);
    spec.stderr_fd = ad_host_log_fd(gen->log);
    spec.journal_socket = ad_host_log_journal_socket(gen->log);
    spec.journal_header = ad_host_log_journal_header(gen->log);
    if (!is_helper) {
        spec.listen_fds = host->listen_fds;
        spec.n_listen_fds = host->n_listen;
        spec.listen_fdnames = (const char *const *)host->listen_names;
        if (config->watchdog_usec)
            spec.pid_variables = watchdog_pid;
    }
    uid_t uid;
    gid_t gid;
    ad_host_run_as(host, &uid, &gid);
    spec.uid = uid;
    spec.gid = gid;
    spec.drop_capabilities = true;
    spec.ambient_capabilities = config->ambient_capabilities;
    /* A probe sees the files its generation sees: it joins the namespace
     * through the main process, which is alive while a probe is due (a
     * probe of a generation whose main process ended fails, as it should). */
    if (kind == SPAWN_PROBE && gen->process.pidfd >= 0 && !gen->exited)
        spec.join_mount_ns_fd = gen->process.pidfd;
    spec.working_directory = state_dir;
    cg_rlimit rlimits[2] = {{.resource = RLIMIT_NOFILE, .limit = daemon->nofile}};
    size_t n_rlimits = 1;
    /* Where the default PidsMax= is not in the leaf (no pids controller, as
     * in a container, or only a v1 one, which every spawn would pay a
     * migration to join), RLIMIT_NPROC holds the host to it instead: the
     * kernel counts a real uid's tasks, and a host without User= has a uid
     * of its own and no capability that would let it past. A User= may name
     * a user others share, and root is never held by it, so those hosts get
     * no such stand-in. */
    cg_limits enforced;
    ad_limits_from_config(daemon->cgroups, &config->limits, !config->user, &enforced);
    if (config->limits.pids_max_is_default && enforced.pids_max == 0 && !config->user && uid != 0)
        rlimits[n_rlimits++] = (cg_rlimit){
            .resource = RLIMIT_NPROC,
            .limit = {.rlim_cur = config->limits.pids_max, .rlim_max = config->limits.pids_max},
        };
    spec.rlimits = rlimits;
    spec.n_rlimits = n_rlimits;
    spec.no_new_privs = true;
    spec.seccomp = ad_host_seccomp(host);
    /* The build runs in the host's filesystem view, reaching its notify
     * socket there through the socket's directory, not the socket file: a
     * daemon that restarts binds a new socket at the same path, which a
     * bound file would not show; helpers (ExecRestore=, ExecReplicate=) are
     * the operator's tools and see the box's filesystem. */
    char notify_dir[4096] = "";
    if (gen->notify)
        snprintf(notify_dir, sizeof(notify_dir), "%.*s",
                 (int)(strrchr(ntf_socket_path(gen->notify), '/') -
                       ntf_socket_path(gen->notify)),
                 ntf_socket_path(gen->notify));
    /* The state directory too: most hosts share one view that knows no
     * host's own (ad_host_fs_view). */
    const char *passed[3] = {state_dir, NULL, NULL};
    if (notify_dir[0])
        passed[1] = notify_dir;
    /* And the build it runs, read-only: a "#!" interpreter or libraries
     * ($ORIGIN) inside the build are opened by path. The other versions and
     * the other hosts' releases stay hidden. */
    char build_dir[4096];
    snprintf(build_dir, sizeof(build_dir), "%s/releases/%s/%s", daemon->config.state_directory,
             config->name, gen->build.version);
    const char *read_only[] = {gen->build.version[0] ? build_dir : NULL, NULL};
    if (!is_helper) {
        spec.fs_view = ad_host_fs_view(host);
        spec.fs_passed = passed;
        spec.fs_read_only = read_only;
    }

    return held ? cg_spawn_hold(gen->leaf, &spec, held, err) : cg_spawn(gen->leaf, &spec, out, err);
}

static int watch_exit(ad_generation *gen, act_error *err)
{
    gen->exec_usec = act_now_usec();
    int r = ad_generation_watch_exit(gen);
    if (r < 0)
        return act_error_set(err, -r, "cannot watch pid %d: %s", (int)gen->process.pid,
                             strerror(-r));
    return 0;
}

/* The main process's environment and spawn, held (held non-NULL) or not. */
static int spawn_main(ad_generation *gen, int exec_fd, cg_held_spawn **held, act_error *err)
{
    /* As systemd tells a service with WatchdogSec=; WATCHDOG_PID is its pid,
     * which only the child knows (cg_spawn's pid variables). */
    uint64_t watchdog_usec = ad_host_config(gen->host)->watchdog_usec;
    char watchdog[48];
    snprintf(watchdog, sizeof(watchdog), "WATCHDOG_USEC=%" PRIu64, watchdog_usec);
    _cleanup_(act_strv_freep) char **envp = build_environment(gen, watchdog_usec ? watchdog : NULL);
    if (!envp)
        return act_error_set(err, ENOMEM, "out of memory building the environment");
    return spawn(gen, exec_fd, SPAWN_MAIN,
                 (const char *const *)ad_host_config(gen->host)->exec_argv, envp, &gen->process,
                 held, err);
}

int ad_generation_spawn(ad_generation *gen, int exec_fd, act_error *err)
{
    assert(gen);
    int r;
    if (gen->held) {
        char whose[64];
        start_marker(gen, whose, sizeof(whose));
        ad_host_log_mark(gen->log, whose);
        r = cg_held_release(TAKE_PTR(gen->held), &gen->process, err);
    } else {
        assert(exec_fd >= 0);
        r = spawn_main(gen, exec_fd, NULL, err);
    }
    return r < 0 ? r : watch_exit(gen, err);
}

int ad_generation_spawn_held(ad_generation *gen, int exec_fd, act_error *err)
{
    assert(gen && exec_fd >= 0 && !gen->held && gen->process.pidfd < 0);
    return spawn_main(gen, exec_fd, &gen->held, err);
}

/* Helpers (ExecRestore=, ExecReplicate=) are absolute paths the operator
 * installed, not staged builds: opened here, never through the live link. */
static int open_helper(const char *path, act_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
    return fd;
}

int ad_generation_spawn_helper(ad_generation *gen, char *const *argv, const char *extra_env,
                               bool main_process, act_error *err)
{
    assert(gen && argv && argv[0]);
    _cleanup_close_ int fd = open_helper(argv[0], err);
    if (fd < 0)
        return fd;
    _cleanup_(act_strv_freep) char **envp = build_environment(gen, extra_env);
    if (!envp)
        return act_error_set(err, ENOMEM, "out of memory building the environment");
    cg_process *process = main_process ? &gen->process : &gen->helper;
    int r = spawn(gen, fd, SPAWN_HELPER, (const char *const *)argv, envp, process, NULL, err);
    if (r < 0 || !main_process)
        return r;
    return watch_exit(gen, err);
}

/* probe_spawn_fn: the probe's command as the host, in the leaf, where the
 * proof of empty at retirement covers whatever it leaves behind. */
static int spawn_probe(char *const *argv, void *userdata, act_error *err)
{
    ad_generation *gen = userdata;
    if (gen->process.pidfd < 0 || gen->exited)
        return act_error_set(err, ESRCH,
                             "generation %" PRIu64 " has no main process to probe beside",
                             gen->number);
    _cleanup_close_ int fd = open_helper(argv[0], err);
    if (fd < 0)
        return fd;
    _cleanup_(act_strv_freep) char **envp = build_environment(gen, NULL);
    if (!envp)
        return act_error_set(err, ENOMEM, "out of memory building the environment");
    cg_process probe = {.pidfd = -1};
    int r = spawn(gen, fd, SPAWN_PROBE, (const char *const *)argv, envp, &probe, NULL, err);
    return r < 0 ? r : probe.pidfd;
}

probe_runner ad_generation_probe_runner(ad_generation *gen)
{
    assert(gen);
    return (probe_runner){.spawn = spawn_probe, .userdata = gen};
}

/* ---- counters --------------------------------------------------------------- */

/* Fresh enough for a person and for a scraper that polls every few seconds. */
#define STATS_MAX_AGE_USEC (1000 * 1000ull)

int ad_generation_stats(const ad_generation *gen, cg_stats *out)
{
    assert(gen && out);
    /* The cache is not the generation's state: refreshing it through a
     * const pointer changes nothing anyone decides by. */
    ad_generation *cache = (ad_generation *)gen;
    uint64_t now = act_now_usec();
    if (!cache->stats_usec || now - cache->stats_usec >= STATS_MAX_AGE_USEC) {
        cache->stats_result = cg_leaf_stats(cache->leaf, &cache->stats, NULL);
        cache->stats_usec = now;
    }
    *out = cache->stats;
    return cache->stats_result;
}

uint64_t ad_generation_notify_refused(const ad_generation *gen)
{
    return gen->notify ? ntf_refused_count(gen->notify) : 0;
}

/* ---- notify socket -------------------------------------------------------- */

bool ad_generation_wants_notify(const cfg_host *config)
{
    return config->ready.kind == PROBE_NOTIFY || config->watchdog_usec;
}

/* What a datagram says to the generation itself, then to whoever opened
 * the socket. Before the generation serves, only READY=1 counts (its
 * opener's): a keep-alive has no deadline yet, and a STOPPING=1 is followed
 * by the exit that decides. */
static void on_notify(ntf_socket *notify, const ntf_message *message, void *userdata)
{
    ad_generation *gen = userdata;
    if (message->status)
        act_log_fields(LOG_DEBUG,
                       &(act_log_ctx){.host = gen->host->name, .generation = gen->number},
                       "host %s: generation %" PRIu64 " status: %s", gen->host->name, gen->number,
                       message->status);
    ad_generation_supervision_heard(gen, message);
    if (gen->on_message)
        gen->on_message(notify, message, gen);
}

/* Whether gen's main process was given NOTIFY_SOCKET=path: read once, from
 * its environment as the kernel keeps it (what it was exec'd with). */
static bool started_with_notify_socket(const ad_generation *gen, const char *path)
{
    char environ_path[64];
    snprintf(environ_path, sizeof(environ_path), "/proc/%d/environ", (int)gen->process.pid);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (act_read_file(AT_FDCWD, environ_path, 1 << 20, &text, &len, NULL) < 0)
        return false;
    for (size_t at = 0; at < len; at += strlen(text + at) + 1)
        if (strncmp(text + at, "NOTIFY_SOCKET=", 14) == 0)
            return strcmp(text + at + 14, path) == 0;
    return false;
}

int ad_generation_open_notify(ad_generation *gen, ntf_handler on_message, act_error *err)
{
    assert(gen);
    const ad_daemon *daemon = gen->host->daemon;
    const char *name = gen->host->name;
    char directory[256], socket_name[32], cgroup[4096], label[128];
    /* One directory per host, its user's alone; one socket per generation
     * in it, so N and N+1 of a swap each hear only their own. */
    snprintf(directory, sizeof(directory), "%s/notify/%s", daemon->config.runtime_directory, name);
    snprintf(socket_name, sizeof(socket_name), "g-%" PRIu64, gen->number);
    snprintf(cgroup, sizeof(cgroup), "/%s", cg_leaf_relative_path(gen->leaf));
    snprintf(label, sizeof(label), "host %s: generation %" PRIu64, name, gen->number);
    ntf_options options = {
        .directory = directory,
        .name = socket_name,
        .cgroup_path = cgroup,
        .label = label,
    };
    ad_host_run_as(gen->host, &options.uid, &options.gid);
    /* A generation resumed from a daemon of the layout before per-host
     * directories still sends to <runtime>/notify/<host>.<N>: it is heard
     * there, as before, until it retires. */
    char legacy_directory[256], legacy_name[160], legacy_path[420];
    snprintf(legacy_directory, sizeof(legacy_directory), "%s/notify",
             daemon->config.runtime_directory);
    snprintf(legacy_name, sizeof(legacy_name), "%s.%" PRIu64, name, gen->number);
    snprintf(legacy_path, sizeof(legacy_path), "%s/%s", legacy_directory, legacy_name);
    if (gen->adopted && started_with_notify_socket(gen, legacy_path)) {
        options.directory = legacy_directory;
        options.name = legacy_name;
        options.legacy = true;
    }
    /* Without the id, senders are checked through /proc (older kernels). */
    if (ntf_cgroup_id(cg_leaf_path(gen->leaf), &options.cgroup_id) < 0)
        options.cgroup_id = 0;
    gen->on_message = on_message;
    return ntf_open(daemon->loop, &options, on_notify, gen, &gen->notify, err);
}

int ad_generation_adopt(ad_host *host, const char *leaf_name, const rec_generation_record *record,
                        const claim *current, int main_pidfd, ad_generation_exit_fn on_exit,
                        ad_generation **out, act_error *err)
{
    assert(host && leaf_name && record && current && main_pidfd >= 0 && out);
    ad_generation *gen = calloc(1, sizeof(*gen));
    if (!gen)
        return act_error_set(err, ENOMEM, "out of memory");
    *gen = (ad_generation){
        .host = host,
        .number = record->generation,
        .announced = true,
        .session = record->session,
        .admission_revision = current->revision,
        .build = record->build,
        .process = {.pid = record->pid, .pidfd = main_pidfd},
        .helper = {.pidfd = -1},
        .helper_stdout_fd = -1,
        .on_exit = on_exit,
        .on_exit_userdata = host,
        .adopted = true,
        .ready = true,
        .exec_usec = act_now_usec(),
        .serving_usec = act_now_usec(),
    };
    const cfg_host *config = ad_host_config(host);
    int r = cg_leaf_open(host->daemon->cgroups, config->name, leaf_name, &gen->leaf, err);
    /* The app still holds the NOTIFY_SOCKET path it was started with. */
    if (r == 0 && ad_generation_wants_notify(config))
        r = ad_generation_open_notify(gen, NULL, err);
    /* Its output goes on where it went; the log is for its probes, and
     * keeps the file it may write to within its size. */
    char whose[80];
    snprintf(whose, sizeof(whose), "generation %" PRIu64 " resumed by a new daemon", gen->number);
    if (r == 0)
        r = ad_host_log_open(host, whose, &gen->log, err);
    if (r == 0)
        r = ad_generation_watch_exit(gen) < 0
                ? act_error_set(err, EIO, "cannot watch pid %d", (int)record->pid)
                : 0;
    if (r < 0) {
        gen->process.pidfd = -1; /* still the caller's */
        ad_generation_free(gen);
        return r;
    }
    *out = gen;
    return 0;
}

void ad_generation_free(ad_generation *gen)
{
    if (!gen)
        return;
    ad_generation_stop_supervision(gen);
    ad_generation_stop_settling(gen);
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    gen->empty_source = sd_event_source_disable_unref(gen->empty_source);
    gen->kill_timer = sd_event_source_disable_unref(gen->kill_timer);
    ad_generation_reap(gen);
    ad_generation_drop_held(gen);
    ntf_free(gen->notify);
    ad_host_log_free(gen->log);
    if (gen->process.pidfd >= 0)
        close(gen->process.pidfd);
    cg_leaf_free(gen->leaf);
    free(gen);
}
