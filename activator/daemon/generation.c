/* One generation of a host: created at `reserve`, spawned at `exec`, and
 * retired with proof of empty, whatever the reason it ends. */
#include "activator/daemon/generation.h"

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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "activator/daemon/announce.h"
#include "activator/daemon/record_writes.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strv.h"

/* How long a cgroup kill may take to show an empty leaf before the stop is
 * called unproven. The kernel kills synchronously; this only bounds a leaf
 * stuck in uninterruptible sleep (a hung NFS read, say). */
#define KILL_PROOF_TIMEOUT_USEC (10 * 1000 * 1000ull)

static void limits_from_config(const cfg_limits *limits, cg_limits *out)
{
    /* "infinity" is the cgroup's own default, so it is simply not written. */
    *out = (cg_limits){
        .memory_max = limits->memory_max == CFG_LIMIT_INFINITY ? 0 : limits->memory_max,
        .memory_high = limits->memory_high == CFG_LIMIT_INFINITY ? 0 : limits->memory_high,
        .pids_max = limits->pids_max == CFG_LIMIT_INFINITY ? 0 : limits->pids_max,
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
    limits_from_config(&config->limits, &limits);

    ad_generation *gen = calloc(1, sizeof(*gen));
    if (!gen)
        return act_error_set(err, ENOMEM, "out of memory");
    gen->host = host;
    gen->number = number;
    gen->announced = strcmp(kind, "g") == 0;
    gen->process.pidfd = -1;
    gen->helper.pidfd = -1;
    int r = cg_leaf_create(ad_host_daemon(host)->cgroups, config->name, leaf_name, &limits,
                           &gen->leaf, err);
    if (r < 0) {
        free(gen);
        return r;
    }
    *out = gen;
    return 0;
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
    snprintf(record->host, sizeof(record->host), "%s", ad_host_name(host));
    snprintf(record->incarnation, sizeof(record->incarnation), "%s",
             ad_host_daemon(host)->incarnation);
}

int ad_generation_write_record(ad_generation *gen, rec_generation_phase phase, act_error *err)
{
    rec_generation_record record;
    ad_generation_fill_record(gen, phase, &record);
    int dirfd = ad_host_dir(gen->host, err);
    return dirfd < 0 ? dirfd : rec_write_generation(dirfd, &record, err);
}

static int exit_status_of(const siginfo_t *info)
{
    return info->si_code == CLD_EXITED ? info->si_status : 128 + info->si_status;
}

static void start_kill(ad_generation *gen);

static int on_process_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    ad_generation *gen = userdata;
    siginfo_t info = {0};
    if (waitid(P_PIDFD, (id_t)fd, &info, WEXITED | WNOHANG) < 0) {
        if (errno != ECHILD || !gen->adopted)
            return 0;
        /* A resumed generation is not our child: the pidfd says it ended,
         * but its status went to whoever reaps orphans. Unknown is not a
         * clean exit, so it counts as a failure. */
        info.si_pid = gen->process.pid;
        info.si_code = CLD_EXITED;
        info.si_status = 255;
    } else if (info.si_pid == 0) {
        return 0;
    }
    gen->exit_source = sd_event_source_disable_unref(gen->exit_source);
    gen->exited = true;
    gen->exit_status = exit_status_of(&info);
    const char *name = ad_host_name(gen->host);
    act_log_fields(gen->exit_status == 0 ? LOG_INFO : LOG_WARNING,
                   &(act_log_ctx){.host = name, .generation = gen->number,
                                  .build = gen->build.version},
                   "host %s: generation %" PRIu64 " (pid %d) %s %d", name, gen->number,
                   (int)gen->process.pid,
                   info.si_code == CLD_EXITED ? "exited with status" : "was killed by signal",
                   info.si_status);

    if (gen->retired) {
        /* Retiring: the main process is gone, so the grace period is over
         * (and a kill in flight goes on to its proof). */
        if (gen->grace_timer) {
            gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
            start_kill(gen);
        }
        return 0;
    }
    if (gen->on_exit)
        gen->on_exit(gen, gen->on_exit_userdata);
    return 0;
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
                           ad_host_daemon(gen->host)->config.state_directory, config->name),
              &failed);
    if (extra)
        add_entry(envp, &n, strdup(extra), &failed);
    return failed ? NULL : TAKE_PTR(envp);
}

static int spawn(ad_generation *gen, int exec_fd, bool is_helper, const char *const *argv,
                 char **envp, cg_process *out, act_error *err)
{
    ad_host *host = gen->host;
    const cfg_host *config = ad_host_config(host);
    const ad_daemon *daemon = ad_host_daemon(host);

    char state_dir[4096];
    snprintf(state_dir, sizeof(state_dir), "%s/hosts/%s/state", daemon->config.state_directory,
             config->name);

    cg_spawn_spec spec;
    cg_spawn_spec_init(&spec);
    spec.exec_fd = exec_fd;
    /* Helpers may be scripts, which run from their fd only if it survives. */
    spec.exec_fd_survives = is_helper;
    spec.argv = argv;
    spec.envp = (const char *const *)envp;
    /* The generation's output goes where ours goes: the journal under
     * systemd, so its lines carry the unit's context. */
    spec.stdout_fd = STDERR_FILENO;
    spec.stderr_fd = STDERR_FILENO;
    if (!is_helper) {
        spec.listen_fds = ad_host_listen_fds(host);
        spec.n_listen_fds = config->n_listen;
        spec.listen_fdnames = (const char *const *)ad_host_listen_names(host);
    }
    uid_t uid;
    gid_t gid;
    if (ad_host_credentials(host, &uid, &gid)) {
        spec.uid = uid;
        spec.gid = gid;
    }
    spec.working_directory = state_dir;
    cg_rlimit nofile = {.resource = RLIMIT_NOFILE, .limit = daemon->nofile};
    spec.rlimits = &nofile;
    spec.n_rlimits = 1;
    spec.no_new_privs = true;
    spec.seccomp = ad_host_seccomp(host);

    return cg_spawn(gen->leaf, &spec, out, err);
}

static int watch_exit(ad_generation *gen, act_error *err)
{
    gen->exec_usec = act_now_usec();
    /* The pidfd is watched for readability and reaped with waitid(P_PIDFD)
     * rather than through sd_event_add_child_pidfd: an adopted generation
     * is not our child (one path serves both), and child sources need
     * SIGCHLD blocked in every thread, NNG's and the workers' included. */
    int r = sd_event_add_io(ad_host_daemon(gen->host)->loop, &gen->exit_source, gen->process.pidfd,
                            EPOLLIN, on_process_exit, gen);
    if (r < 0)
        return act_error_set(err, -r, "cannot watch pid %d: %s", (int)gen->process.pid,
                             strerror(-r));
    return 0;
}

int ad_generation_spawn(ad_generation *gen, int exec_fd, act_error *err)
{
    assert(gen && exec_fd >= 0);
    _cleanup_(act_strv_freep) char **envp = build_environment(gen, NULL);
    if (!envp)
        return act_error_set(err, ENOMEM, "out of memory building the environment");
    int r = spawn(gen, exec_fd, false, (const char *const *)ad_host_config(gen->host)->exec_argv,
                  envp, &gen->process, err);
    return r < 0 ? r : watch_exit(gen, err);
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
    int r = spawn(gen, fd, true, (const char *const *)argv, envp, process, err);
    if (r < 0 || !main_process)
        return r;
    return watch_exit(gen, err);
}

/* Reaps the main process if it is still ours to reap, so no zombie stays. */
static void reap(ad_generation *gen)
{
    gen->exit_source = sd_event_source_disable_unref(gen->exit_source);
    if (gen->helper.pidfd >= 0) {
        /* The helper lived in the same leaf, so the proof of empty covers
         * it; this only collects its exit status. */
        siginfo_t info = {0};
        waitid(P_PIDFD, (id_t)gen->helper.pidfd, &info, WEXITED | WNOHANG);
        close(gen->helper.pidfd);
        gen->helper.pidfd = -1;
    }
    if (gen->process.pidfd >= 0 && !gen->exited) {
        siginfo_t info = {0};
        if (waitid(P_PIDFD, (id_t)gen->process.pidfd, &info, WEXITED | WNOHANG) == 0 &&
            info.si_pid != 0) {
            gen->exited = true;
            gen->exit_status = exit_status_of(&info);
        }
    }
}

/* The end of a retirement: the event, then whoever asked. */
static void announce_retired(ad_generation *gen, bool proven, const char *why)
{
    ntf_free(TAKE_PTR(gen->notify));
    if (gen->announced)
        ad_publish(gen->host, proven ? EV_EVENT_RETIRED : EV_EVENT_FAILED, gen,
                   proven ? NULL : "unproven_stop");
    void (*done)(ad_generation *, bool, const char *, void *) = gen->retired;
    gen->retired = NULL;
    if (done)
        done(gen, proven, why, gen->retired_userdata);
}

static void on_record_removed(void *userdata)
{
    announce_retired(userdata, true, NULL);
}

static void finish_retire(ad_generation *gen, bool proven, const char *why)
{
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    gen->empty_source = sd_event_source_disable_unref(gen->empty_source);
    gen->kill_timer = sd_event_source_disable_unref(gen->kill_timer);
    reap(gen);
    if (!proven) {
        announce_retired(gen, false, why);
        return;
    }
    act_error err = {0};
    if (cg_leaf_remove(gen->leaf, &err) < 0)
        act_log(LOG_WARNING, "host %s: %s", ad_host_name(gen->host), err.message);
    /* Retired is announced once the record is gone too: whoever sees the
     * event finds nothing of the generation left. */
    ad_record_remove_async(gen->host, gen->number, on_record_removed, gen);
}

static void check_empty(ad_generation *gen)
{
    bool populated = true;
    act_error err = {0};
    if (cg_leaf_populated(gen->leaf, &populated, &err) < 0) {
        finish_retire(gen, false, err.message);
        return;
    }
    if (!populated)
        finish_retire(gen, true, NULL);
}

static int on_leaf_events(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
    check_empty(userdata);
    return 0;
}

static int on_kill_timeout(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    char why[160];
    snprintf(why, sizeof(why), "cgroup %s still has processes %llu s after the kill",
             cg_leaf_path(gen->leaf), KILL_PROOF_TIMEOUT_USEC / 1000000ull);
    finish_retire(gen, false, why);
    return 0;
}

static void start_kill(ad_generation *gen)
{
    ad_daemon *daemon = ad_host_daemon(gen->host);
    act_error err = {0};
    int events_fd = cg_leaf_events_fd(gen->leaf, &err);
    if (events_fd < 0 ||
        sd_event_add_io(daemon->loop, &gen->empty_source, events_fd, EPOLLIN, on_leaf_events,
                        gen) < 0 ||
        sd_event_add_time_relative(daemon->loop, &gen->kill_timer, CLOCK_MONOTONIC,
                                   KILL_PROOF_TIMEOUT_USEC, 0, on_kill_timeout, gen) < 0) {
        finish_retire(gen, false, events_fd < 0 ? err.message : "cannot watch cgroup.events");
        return;
    }
    if (cg_leaf_kill_start(gen->leaf, &err) < 0) {
        finish_retire(gen, false, err.message);
        return;
    }
    check_empty(gen);
}

static int on_grace_over(sd_event_source *source, uint64_t usec, void *userdata)
{
    ad_generation *gen = userdata;
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    act_log(LOG_NOTICE,
            "host %s: generation %" PRIu64 " did not stop within StopTimeoutSec; killing",
            ad_host_name(gen->host), gen->number);
    start_kill(gen);
    return 0;
}

void ad_generation_retire(ad_generation *gen, bool graceful, ad_generation_retired_fn done,
                          void *userdata)
{
    assert(gen && !gen->retired);
    gen->retired = done;
    gen->retired_userdata = userdata;
    if (gen->announced)
        ad_publish(gen->host, EV_EVENT_RETIRING, gen, NULL);
    const ad_host *host = gen->host;
    bool running = gen->process.pidfd >= 0 && !gen->exited;
    if (graceful && running &&
        syscall(SYS_pidfd_send_signal, gen->process.pidfd, SIGTERM, NULL, 0) == 0 &&
        sd_event_add_time_relative(ad_host_daemon(host)->loop, &gen->grace_timer, CLOCK_MONOTONIC,
                                   ad_host_config(host)->stop_timeout_usec, 0, on_grace_over,
                                   gen) >= 0)
        return; /* on_process_exit or on_grace_over goes on */
    start_kill(gen);
}

int ad_generation_open_notify(ad_generation *gen, ntf_handler on_message, act_error *err)
{
    assert(gen && on_message);
    const ad_daemon *daemon = ad_host_daemon(gen->host);
    char path[256], cgroup[4096];
    snprintf(path, sizeof(path), "%s/notify/%s.%" PRIu64, daemon->config.runtime_directory,
             ad_host_name(gen->host), gen->number);
    snprintf(cgroup, sizeof(cgroup), "/%s", cg_leaf_relative_path(gen->leaf));
    return ntf_open(daemon->loop, path, cgroup, on_message, gen, &gen->notify, err);
}

static void on_adopted_notify(ntf_socket *notify, const ntf_message *message, void *userdata)
{
    /* Already serving: STATUS= and WATCHDOG=1 are only logged. */
    ad_generation *gen = userdata;
    if (message->status)
        act_log_fields(LOG_DEBUG,
                       &(act_log_ctx){.host = ad_host_name(gen->host), .generation = gen->number},
                       "host %s: generation %" PRIu64 " status: %s", ad_host_name(gen->host),
                       gen->number, message->status);
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
        .on_exit = on_exit,
        .on_exit_userdata = host,
        .adopted = true,
        .ready = true,
        .exec_usec = act_now_usec(),
        .serving_usec = act_now_usec(),
    };
    const cfg_host *config = ad_host_config(host);
    int r = cg_leaf_open(ad_host_daemon(host)->cgroups, config->name, leaf_name, &gen->leaf, err);
    /* The app still holds the NOTIFY_SOCKET path it was started with. */
    if (r == 0 && config->ready.kind == PROBE_NOTIFY)
        r = ad_generation_open_notify(gen, on_adopted_notify, err);
    if (r == 0)
        r = sd_event_add_io(ad_host_daemon(host)->loop, &gen->exit_source, main_pidfd, EPOLLIN,
                            on_process_exit, gen) < 0
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
    gen->grace_timer = sd_event_source_disable_unref(gen->grace_timer);
    gen->empty_source = sd_event_source_disable_unref(gen->empty_source);
    gen->kill_timer = sd_event_source_disable_unref(gen->kill_timer);
    reap(gen);
    ntf_free(gen->notify);
    if (gen->process.pidfd >= 0)
        close(gen->process.pidfd);
    cg_leaf_free(gen->leaf);
    free(gen);
}
