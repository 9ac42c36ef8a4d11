/* Starting processes in a generation's leaf, all of them as the host: the
 * environment every start gets, the main process (the build, started at
 * once, or held just before its exec and let go on later), the operator's
 * helpers (ExecRestore=, ExecReplicate=) and the probes (Ready=exec:,
 * HealthCheck=exec:). The main process's exit is watched from its start
 * (retire.c). */
#include "activator/daemon/generations/internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/strv.h"

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

/* What a spawn's spec points into, alive until cg_spawn has returned. */
typedef struct spawn_storage {
    char state_dir[4096];
    char notify_dir[4096];
    char build_dir[4096];
    char script[4096 + REL_PATH_SIZE]; /* a "#!" build's path in the release store */
    const char *passed[3];
    const char *read_only[2];
    cg_rlimit rlimits[2];
} spawn_storage;

/* Its stdout and stderr: the host's log, opened at the generation's first
 * spawn. */
static int connect_output(ad_generation *gen, bool is_helper, bool held, cg_spawn_spec *spec,
                          act_error *err)
{
    /* Never our own stream: see generations/output.h. A held child's marker waits
     * for its release: an early start that is discarded ran nothing. */
    if (!gen->log) {
        char whose[64];
        start_marker(gen, whose, sizeof(whose));
        int r = ad_host_log_open(gen->host, held ? NULL : whose, &gen->log, err);
        if (r < 0)
            return act_error_prefix(err, "host %s: output", ad_host_config(gen->host)->name);
    }
    /* ExecCheckpoint= answers on its stdout, which the daemon reads, and
     * which the journal must not take. */
    bool answers = is_helper && gen->helper_stdout_fd >= 0;
    spec->stdout_fd = answers ? gen->helper_stdout_fd : ad_host_log_fd(gen->log);
    spec->stderr_fd = ad_host_log_fd(gen->log);
    spec->journal_socket = ad_host_log_journal_socket(gen->log);
    spec->journal_header = ad_host_log_journal_header(gen->log);
    spec->journal_stderr_only = answers;
    return 0;
}

/* The main process's sockets (LISTEN_FDS), and its pid as WATCHDOG_PID. */
static void pass_listen_sockets(const ad_generation *gen, cg_spawn_spec *spec)
{
    const ad_host *host = gen->host;
    spec->listen_fds = host->listen_fds;
    spec->n_listen_fds = host->n_listen;
    spec->listen_fdnames = (const char *const *)host->listen_names;
    if (ad_host_config(host)->watchdog_usec)
        spec->pid_variables = watchdog_pid;
}

/* The host's user and group, no capability but its ambient ones, no new
 * privileges, and its seccomp filter. */
static void run_as_host(const ad_generation *gen, cg_spawn_spec *spec)
{
    uid_t uid;
    gid_t gid;
    ad_host_run_as(gen->host, &uid, &gid);
    spec->uid = uid;
    spec->gid = gid;
    spec->drop_capabilities = true;
    /* A root host has no AmbientCapabilities= (host/host.c refuses them). */
    spec->root_in_user_namespace = ad_host_root_in_user_namespace(gen->host);
    spec->ambient_capabilities = ad_host_config(gen->host)->ambient_capabilities;
    spec->no_new_privs = true;
    spec->seccomp = ad_host_seccomp(gen->host);
    spec->private_ipc = ad_host_config(gen->host)->private_ipc;
}

/* A probe sees the files its generation sees: it joins the namespace
 * through the main process, which is alive while a probe is due (a
 * probe of a generation whose main process ended fails, as it should). */
static void join_main_mount_ns(const ad_generation *gen, cg_spawn_spec *spec)
{
    if (gen->process.pidfd >= 0 && !gen->exited)
        spec->join_mount_ns_fd = gen->process.pidfd;
}

/* Every start runs in the host's state directory. */
static void run_in_state_directory(const ad_generation *gen, spawn_storage *storage,
                                   cg_spawn_spec *spec)
{
    snprintf(storage->state_dir, sizeof(storage->state_dir), "%s/hosts/%s/state",
             gen->host->daemon->config.state_directory, ad_host_config(gen->host)->name);
    spec->working_directory = storage->state_dir;
}

/* RLIMIT_NOFILE as LimitNOFILE= sets it (the daemon's own is far higher,
 * and a tenant must not hold that many of the box's files), and
 * RLIMIT_NPROC where it stands in for PidsMax=. Needs the uid
 * (run_as_host). */
static void set_rlimits(const ad_generation *gen, spawn_storage *storage, cg_spawn_spec *spec)
{
    const cfg_host *config = ad_host_config(gen->host);
    const ad_daemon *daemon = gen->host->daemon;
    cg_rlimit *rlimits = storage->rlimits;
    /* A configuration not read from a file (0: not set) gets the default.
     * The child sets it after giving up its privileges, when it can lower
     * a hard limit but not raise it: what the daemon was given is the
     * ceiling (a box whose service runs with less gets that). */
    rlim_t soft = config->limits.nofile_soft ? config->limits.nofile_soft : CFG_NOFILE_DEFAULT;
    rlim_t hard = config->limits.nofile_hard ? config->limits.nofile_hard : CFG_NOFILE_DEFAULT;
    struct rlimit ours;
    if (getrlimit(RLIMIT_NOFILE, &ours) == 0 && hard > ours.rlim_max)
        hard = ours.rlim_max;
    if (soft > hard)
        soft = hard;
    rlimits[0] =
        (cg_rlimit){.resource = RLIMIT_NOFILE, .limit = {.rlim_cur = soft, .rlim_max = hard}};
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
    if (config->limits.pids_max_is_default && enforced.pids_max == 0 && !config->user &&
        spec->uid != 0)
        rlimits[n_rlimits++] = (cg_rlimit){
            .resource = RLIMIT_NPROC,
            .limit = {.rlim_cur = config->limits.pids_max, .rlim_max = config->limits.pids_max},
        };
    spec->rlimits = rlimits;
    spec->n_rlimits = n_rlimits;
}

/* The build runs in the host's filesystem view, reaching its notify
 * socket there through the socket's directory, not the socket file: a
 * daemon that restarts binds a new socket at the same path, which a
 * bound file would not show. Helpers (ExecRestore=, ExecCheckpoint=,
 * ExecReplicate=) run in a view of their own made the same way: they run
 * as the host, whose processes see them in /proc, and outside a view
 * /proc/<helper>/root would be the box's whole filesystem. Needs the state
 * directory (run_in_state_directory). */
static void enter_fs_view(const ad_generation *gen, spawn_storage *storage, cg_spawn_spec *spec)
{
    const ad_host *host = gen->host;
    storage->notify_dir[0] = '\0';
    if (gen->notify)
        snprintf(storage->notify_dir, sizeof(storage->notify_dir), "%.*s",
                 (int)(strrchr(ntf_socket_path(gen->notify), '/') - ntf_socket_path(gen->notify)),
                 ntf_socket_path(gen->notify));
    /* The state directory too: most hosts share one view that knows no
     * host's own (ad_host_fs_view). */
    storage->passed[0] = storage->state_dir;
    storage->passed[1] = storage->notify_dir[0] ? storage->notify_dir : NULL;
    storage->passed[2] = NULL;
    /* And the build it runs, read-only: a "#!" interpreter or libraries
     * ($ORIGIN) inside the build are opened by path. The other versions and
     * the other hosts' releases stay hidden. */
    snprintf(storage->build_dir, sizeof(storage->build_dir), "%s/releases/%s/%s",
             host->daemon->config.state_directory, ad_host_config(host)->name, gen->build.version);
    storage->read_only[0] = gen->build.version[0] ? storage->build_dir : NULL;
    storage->read_only[1] = NULL;
    spec->fs_view = ad_host_fs_view(host);
    spec->fs_passed = storage->passed;
    spec->fs_read_only = storage->read_only;
}

/* A build whose executable is a "#!" script runs by its path in the release
 * store, which its view shows read-only where it was staged: $0 is then a
 * path in its build, so "$(dirname "$0")/app" finds its own files (run from
 * its fd it would be /dev/fd/N). The child checks that the path names the
 * very file that was verified just before the exec. */
static void run_script_by_path(const ad_generation *gen, spawn_storage *storage,
                               cg_spawn_spec *spec)
{
    if (!gen->script_path[0] || !gen->build.version[0])
        return;
    const ad_host *host = gen->host;
    snprintf(storage->script, sizeof(storage->script), "%s/releases/%s/%s/%s",
             host->daemon->config.state_directory, ad_host_config(host)->name, gen->build.version,
             gen->script_path);
    spec->exec_path = storage->script;
}

/* held non-NULL: the child is held before its exec (cg_spawn_hold), and
 * out is not filled. */
static int spawn(ad_generation *gen, int exec_fd, spawn_kind kind, const char *const *argv,
                 char **envp, cg_process *out, cg_held_spawn **held, act_error *err)
{
    bool is_helper = kind != SPAWN_MAIN;
    spawn_storage storage;
    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.exec_fd = exec_fd;
    /* Helpers, which may be scripts, run from their fd, which must then
     * survive the exec (the interpreter opens /dev/fd/N). */
    spec.exec_fd_survives = is_helper;
    spec.argv = argv;
    spec.envp = (const char *const *)envp;
    int r = connect_output(gen, is_helper, held != NULL, &spec, err);
    if (r < 0)
        return r;
    if (!is_helper) {
        pass_listen_sockets(gen, &spec);
        /* Helpers keep the box's network: a replicator or a checkpoint
         * talks to storage elsewhere, and a probe to the host's sockets,
         * which live in the box's. */
        spec.private_network = ad_host_config(gen->host)->private_network;
    }
    run_as_host(gen, &spec);
    if (kind == SPAWN_PROBE)
        join_main_mount_ns(gen, &spec);
    run_in_state_directory(gen, &storage, &spec);
    set_rlimits(gen, &storage, &spec);
    if (kind != SPAWN_PROBE) /* a probe joins its generation's view */
        enter_fs_view(gen, &storage, &spec);
    if (kind == SPAWN_MAIN)
        run_script_by_path(gen, &storage, &spec);
    return held ? cg_spawn_hold(gen->leaf, &spec, held, err) : cg_spawn(gen->leaf, &spec, out, err);
}

/* The main process runs: when it was exec'd, and its exit watched from now
 * on (retire.c). */
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
    cg_process *process = main_process ? &gen->process : &gen->replica.process;
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
