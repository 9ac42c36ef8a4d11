/* One configured host: the struct, and what the host holds of its own. */
#include "activator/daemon/host.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/records/records.h"
#include "common/cleanup.h"

struct act_daemon_host {
    act_daemon *daemon;
    const act_host_config *config;
    act_host *pipeline;               /* hosts.c */
    int dirfd;                        /* <state>/hosts/<host>, or -1 */
    int *listen_fds;                  /* config->n_listen; bound by hosts.c */
    char **listen_names;              /* LISTEN_FDNAMES entries, NULL-terminated */
    sd_event_source **demand_sources; /* hosts.c: the sockets watched while parked */
    cg_seccomp_program *seccomp;      /* a filter of its own, or NULL for the shared default */
    uid_t uid;                        /* User=, when have_credentials */
    gid_t gid;
    bool have_credentials;

    act_generation *serving;          /* wake_ops.c */
    act_generation *starting;
    act_generation *replaced;
    act_wake_state *wake_state;       /* wake_ops.c */
    act_swap *swap;                   /* swap.c */
    sd_event_source *idle_timer;      /* idle.c */
    uint64_t last_active_usec;
    uint64_t wake_started_usec;       /* announce.c */
    uint64_t failed_attempts;         /* wake_ops.c */
    bool claim_ours;                  /* wake_ops.c, claim_watch.c */
    bool unproven_at_start;           /* recovery.c */
    char last_reason[32];             /* hosts.c, wake_ops.c */
    char last_message[256];
};

static bool uses_plain_default_filter(const act_host_config *config)
{
    const act_syscall_filter *filter = &config->limits.syscall_filter;
    return filter->base == ACT_SYSCALLS_DEFAULT && !filter->allow && !filter->deny;
}

/* Most hosts run the default profile: one compiled program serves them all. */
static int compile_filter(act_daemon_host *host, act_error *err)
{
    const act_syscall_filter *filter = &host->config->limits.syscall_filter;
    bool plain_default = uses_plain_default_filter(host->config);
    if (plain_default && host->daemon->default_seccomp)
        return 0;
    cg_seccomp_program **out = plain_default ? &host->daemon->default_seccomp : &host->seccomp;
    int r = cg_seccomp_compile(filter->base == ACT_SYSCALLS_NONE ? "none" : "default",
                               (const char *const *)filter->allow,
                               (const char *const *)filter->deny, out, err);
    return r < 0 ? act_error_prefix(err, "host %s: SystemCallFilter=", host->config->name) : 0;
}

static int allocate_sockets(act_daemon_host *host, act_error *err)
{
    size_t n = host->config->n_listen;
    host->listen_fds = calloc(n ? n : 1, sizeof(*host->listen_fds));
    host->listen_names = calloc(n + 1, sizeof(*host->listen_names));
    host->demand_sources = calloc(n ? n : 1, sizeof(*host->demand_sources));
    if (!host->listen_fds || !host->listen_names || !host->demand_sources)
        return act_error_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        host->listen_fds[i] = -1;
        if (asprintf(&host->listen_names[i], "%s/%zu", host->config->name, i) < 0) {
            host->listen_names[i] = NULL;
            return act_error_set(err, ENOMEM, "out of memory");
        }
    }
    return 0;
}

int act_daemon_host_new(act_daemon *daemon, const act_host_config *config,
                        act_daemon_host **out, act_error *err)
{
    assert(daemon && config && out);
    act_daemon_host *host = calloc(1, sizeof(*host));
    if (!host)
        return act_error_set(err, ENOMEM, "out of memory");
    *host = (act_daemon_host){.daemon = daemon, .config = config, .dirfd = -1};
    int r = allocate_sockets(host, err);
    if (r == 0)
        r = act_host_config_credentials(config, &host->uid, &host->gid,
                                        &host->have_credentials, err);
    if (r == 0)
        r = compile_filter(host, err);
    if (r < 0) {
        act_daemon_host_free(host);
        return r;
    }
    *out = host;
    return 0;
}

void act_daemon_host_free(act_daemon_host *host)
{
    if (!host)
        return;
    assert(!host->serving && !host->starting && !host->replaced && !host->wake_state &&
           !host->swap && !host->pipeline);
    for (uint16_t i = 0; host->listen_fds && i < host->config->n_listen; i++) {
        if (host->demand_sources)
            sd_event_source_disable_unref(host->demand_sources[i]);
        if (host->listen_fds[i] >= 0)
            close(host->listen_fds[i]);
    }
    for (char **name = host->listen_names; name && *name; name++)
        free(*name);
    free(host->demand_sources);
    free(host->listen_fds);
    free(host->listen_names);
    cg_seccomp_program_free(host->seccomp);
    sd_event_source_disable_unref(host->idle_timer);
    act_daemon_host_dir_close(host);
    free(host);
}

act_daemon *act_daemon_host_daemon(const act_daemon_host *host)
{
    return host->daemon;
}

const act_host_config *act_daemon_host_config(const act_daemon_host *host)
{
    return host->config;
}

const char *act_daemon_host_name(const act_daemon_host *host)
{
    return host->config->name;
}

act_host *act_daemon_host_pipeline(const act_daemon_host *host)
{
    return host->pipeline;
}

void act_daemon_host_set_pipeline(act_daemon_host *host, act_host *pipeline)
{
    host->pipeline = pipeline;
}

/* ---- sockets ------------------------------------------------------------- */

const int *act_daemon_host_listen_fds(const act_daemon_host *host)
{
    return host->listen_fds;
}

char *const *act_daemon_host_listen_names(const act_daemon_host *host)
{
    return host->listen_names;
}

void act_daemon_host_set_listen_fd(act_daemon_host *host, unsigned index, int fd)
{
    assert(index < host->config->n_listen);
    if (host->listen_fds[index] >= 0)
        close(host->listen_fds[index]);
    host->listen_fds[index] = fd;
}

sd_event_source **act_daemon_host_demand_source(act_daemon_host *host, unsigned index)
{
    assert(index < host->config->n_listen);
    return &host->demand_sources[index];
}

/* ---- what a generation runs as ------------------------------------------- */

bool act_daemon_host_credentials(const act_daemon_host *host, uid_t *uid, gid_t *gid)
{
    *uid = host->uid;
    *gid = host->gid;
    return host->have_credentials;
}

const cg_seccomp_program *act_daemon_host_seccomp(const act_daemon_host *host)
{
    return uses_plain_default_filter(host->config) ? host->daemon->default_seccomp
                                                   : host->seccomp;
}

/* ---- directories --------------------------------------------------------- */

int act_daemon_host_dir(act_daemon_host *host, act_error *err)
{
    if (host->dirfd >= 0)
        return host->dirfd;
    int fd = act_records_open_host(host->daemon->state_dirfd, host->config->name, err);
    if (fd >= 0)
        host->dirfd = fd;
    return fd;
}

void act_daemon_host_dir_close(act_daemon_host *host)
{
    act_closep(&host->dirfd);
    host->dirfd = -1;
}

int act_daemon_host_state_directory(act_daemon_host *host, act_error *err)
{
    int dirfd = act_daemon_host_dir(host, err);
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

void act_daemon_host_format_handle(const act_daemon_host *host, uint64_t generation, char *out,
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

/* ---- generations, wake, swap --------------------------------------------- */

act_generation *act_daemon_host_serving(const act_daemon_host *host)
{
    return host->serving;
}

void act_daemon_host_set_serving(act_daemon_host *host, act_generation *gen)
{
    host->serving = gen;
}

act_generation *act_daemon_host_starting(const act_daemon_host *host)
{
    return host->starting;
}

void act_daemon_host_set_starting(act_daemon_host *host, act_generation *gen)
{
    host->starting = gen;
}

act_generation *act_daemon_host_replaced(const act_daemon_host *host)
{
    return host->replaced;
}

void act_daemon_host_set_replaced(act_daemon_host *host, act_generation *gen)
{
    host->replaced = gen;
}

const act_generation *act_daemon_host_current_generation(const act_daemon_host *host)
{
    return host->starting ? host->starting : host->serving;
}

act_wake_state *act_daemon_host_wake_state(const act_daemon_host *host)
{
    return host->wake_state;
}

void act_daemon_host_set_wake_state(act_daemon_host *host, act_wake_state *state)
{
    host->wake_state = state;
}

act_swap *act_daemon_host_swap(const act_daemon_host *host)
{
    return host->swap;
}

void act_daemon_host_set_swap(act_daemon_host *host, act_swap *swap)
{
    host->swap = swap;
}

/* ---- idle parking -------------------------------------------------------- */

sd_event_source **act_daemon_host_idle_timer(act_daemon_host *host)
{
    return &host->idle_timer;
}

uint64_t act_daemon_host_last_active(const act_daemon_host *host)
{
    return host->last_active_usec;
}

void act_daemon_host_set_last_active(act_daemon_host *host, uint64_t usec)
{
    host->last_active_usec = usec;
}

/* ---- claim, previous daemon ---------------------------------------------- */

bool act_daemon_host_claim_ours(const act_daemon_host *host)
{
    return host->claim_ours;
}

void act_daemon_host_set_claim_ours(act_daemon_host *host, bool ours)
{
    host->claim_ours = ours;
}

bool act_daemon_host_unproven_at_start(const act_daemon_host *host)
{
    return host->unproven_at_start;
}

void act_daemon_host_set_unproven_at_start(act_daemon_host *host)
{
    host->unproven_at_start = true;
}

/* ---- status -------------------------------------------------------------- */

const char *act_daemon_host_last_reason(const act_daemon_host *host)
{
    return host->last_reason;
}

const char *act_daemon_host_last_message(const act_daemon_host *host)
{
    return host->last_message;
}

void act_daemon_host_set_last_failure(act_daemon_host *host, const char *reason,
                                      const char *message)
{
    snprintf(host->last_reason, sizeof(host->last_reason), "%s", reason ? reason : "");
    snprintf(host->last_message, sizeof(host->last_message), "%s", message ? message : "");
}

uint64_t act_daemon_host_failed_attempts(const act_daemon_host *host)
{
    return host->failed_attempts;
}

void act_daemon_host_count_failed_attempt(act_daemon_host *host, const char *reason)
{
    host->failed_attempts++;
    snprintf(host->last_reason, sizeof(host->last_reason), "%s", reason);
}

uint64_t act_daemon_host_wake_started(const act_daemon_host *host)
{
    return host->wake_started_usec;
}

void act_daemon_host_set_wake_started(act_daemon_host *host, uint64_t usec)
{
    host->wake_started_usec = usec;
}
