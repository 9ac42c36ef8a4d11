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

struct ad_host {
    ad_daemon *daemon;
    const cfg_host *config;
    pl_host *pipeline;                /* hosts.c */
    int dirfd;                        /* <state>/hosts/<host>, or -1 */
    int *listen_fds;                  /* config->n_listen; bound by hosts.c */
    char **listen_names;              /* LISTEN_FDNAMES entries, NULL-terminated */
    sd_event_source **demand_sources; /* hosts.c: the sockets watched while parked */
    cg_seccomp_program *seccomp;      /* a filter of its own, or NULL for the shared default */
    uid_t uid;                        /* User=, when have_credentials */
    gid_t gid;
    bool have_credentials;

    ad_generation *serving; /* wake_ops.c */
    ad_generation *starting;
    ad_generation *replaced;
    ad_wake_state *wake_state;        /* wake_ops.c */
    ad_swap *swap;                    /* swap.c */
    ad_claim_report *claim_report;    /* claim_report.c */
    sd_event_source *idle_timer;      /* idle.c */
    uint64_t last_active_usec;
    uint64_t wake_started_usec;       /* announce.c */
    uint64_t failed_attempts;         /* wake_ops.c */
    bool claim_ours;                  /* wake_ops.c, claim_watch.c */
    bool unproven_at_start;           /* recovery.c */
    bool releasing;                   /* claim_release.c */
    char last_reason[32];             /* hosts.c, wake_ops.c */
    char last_message[256];
};

static bool uses_plain_default_filter(const cfg_host *config)
{
    const cfg_syscall_filter *filter = &config->limits.syscall_filter;
    return filter->base == CFG_SYSCALLS_DEFAULT && !filter->allow && !filter->deny;
}

/* Most hosts run the default profile: one compiled program serves them all. */
static int compile_filter(ad_host *host, act_error *err)
{
    const cfg_syscall_filter *filter = &host->config->limits.syscall_filter;
    bool plain_default = uses_plain_default_filter(host->config);
    if (plain_default && host->daemon->default_seccomp)
        return 0;
    cg_seccomp_program **out = plain_default ? &host->daemon->default_seccomp : &host->seccomp;
    int r = cg_seccomp_compile(filter->base == CFG_SYSCALLS_NONE ? "none" : "default",
                               (const char *const *)filter->allow,
                               (const char *const *)filter->deny, out, err);
    return r < 0 ? act_error_prefix(err, "host %s: SystemCallFilter=", host->config->name) : 0;
}

static int allocate_sockets(ad_host *host, act_error *err)
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

int ad_host_new(ad_daemon *daemon, const cfg_host *config, ad_host **out, act_error *err)
{
    assert(daemon && config && out);
    ad_host *host = calloc(1, sizeof(*host));
    if (!host)
        return act_error_set(err, ENOMEM, "out of memory");
    *host = (ad_host){.daemon = daemon, .config = config, .dirfd = -1};
    int r = allocate_sockets(host, err);
    if (r == 0)
        r = cfg_host_credentials(config, &host->uid, &host->gid, &host->have_credentials, err);
    if (r == 0)
        r = compile_filter(host, err);
    if (r < 0) {
        ad_host_free(host);
        return r;
    }
    *out = host;
    return 0;
}

void ad_host_free(ad_host *host)
{
    if (!host)
        return;
    assert(!host->serving && !host->starting && !host->replaced && !host->wake_state &&
           !host->swap && !host->claim_report && !host->pipeline);
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
    ad_host_dir_close(host);
    free(host);
}

ad_daemon *ad_host_daemon(const ad_host *host)
{
    return host->daemon;
}

const cfg_host *ad_host_config(const ad_host *host)
{
    return host->config;
}

const char *ad_host_name(const ad_host *host)
{
    return host->config->name;
}

pl_host *ad_host_pipeline(const ad_host *host)
{
    return host->pipeline;
}

void ad_host_set_pipeline(ad_host *host, pl_host *pipeline)
{
    host->pipeline = pipeline;
}

/* ---- sockets ------------------------------------------------------------- */

const int *ad_host_listen_fds(const ad_host *host)
{
    return host->listen_fds;
}

char *const *ad_host_listen_names(const ad_host *host)
{
    return host->listen_names;
}

void ad_host_set_listen_fd(ad_host *host, unsigned index, int fd)
{
    assert(index < host->config->n_listen);
    if (host->listen_fds[index] >= 0)
        close(host->listen_fds[index]);
    host->listen_fds[index] = fd;
}

sd_event_source **ad_host_demand_source(ad_host *host, unsigned index)
{
    assert(index < host->config->n_listen);
    return &host->demand_sources[index];
}

/* ---- what a generation runs as ------------------------------------------- */

bool ad_host_credentials(const ad_host *host, uid_t *uid, gid_t *gid)
{
    *uid = host->uid;
    *gid = host->gid;
    return host->have_credentials;
}

const cg_seccomp_program *ad_host_seccomp(const ad_host *host)
{
    return uses_plain_default_filter(host->config) ? host->daemon->default_seccomp
                                                   : host->seccomp;
}

/* ---- directories --------------------------------------------------------- */

int ad_host_dir(ad_host *host, act_error *err)
{
    if (host->dirfd >= 0)
        return host->dirfd;
    int fd = rec_open_host(host->daemon->state_dirfd, host->config->name, err);
    if (fd >= 0)
        host->dirfd = fd;
    return fd;
}

void ad_host_dir_close(ad_host *host)
{
    act_closep(&host->dirfd);
    host->dirfd = -1;
}

int ad_host_state_directory(ad_host *host, act_error *err)
{
    int dirfd = ad_host_dir(host, err);
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

void ad_host_format_handle(const ad_host *host, uint64_t generation, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint16_t i = 0; i < host->config->n_listen && used + 2 < size; i++) {
        char address[160];
        lsn_format(&host->config->listen[i], address, sizeof(address));
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? "," : "", address);
    }
    if (!out[0])
        snprintf(out, size, "%s/g-%" PRIu64, host->daemon->config.box, generation);
}

/* ---- generations, wake, swap --------------------------------------------- */

ad_generation *ad_host_serving(const ad_host *host)
{
    return host->serving;
}

void ad_host_set_serving(ad_host *host, ad_generation *gen)
{
    host->serving = gen;
}

ad_generation *ad_host_starting(const ad_host *host)
{
    return host->starting;
}

void ad_host_set_starting(ad_host *host, ad_generation *gen)
{
    host->starting = gen;
}

ad_generation *ad_host_replaced(const ad_host *host)
{
    return host->replaced;
}

void ad_host_set_replaced(ad_host *host, ad_generation *gen)
{
    host->replaced = gen;
}

const ad_generation *ad_host_current_generation(const ad_host *host)
{
    return host->starting ? host->starting : host->serving;
}

ad_wake_state *ad_host_wake_state(const ad_host *host)
{
    return host->wake_state;
}

void ad_host_set_wake_state(ad_host *host, ad_wake_state *state)
{
    host->wake_state = state;
}

ad_swap *ad_host_swap(const ad_host *host)
{
    return host->swap;
}

void ad_host_set_swap(ad_host *host, ad_swap *swap)
{
    host->swap = swap;
}

ad_claim_report *ad_host_claim_report(const ad_host *host)
{
    return host->claim_report;
}

void ad_host_set_claim_report(ad_host *host, ad_claim_report *report)
{
    host->claim_report = report;
}

/* ---- idle parking -------------------------------------------------------- */

sd_event_source **ad_host_idle_timer(ad_host *host)
{
    return &host->idle_timer;
}

uint64_t ad_host_last_active(const ad_host *host)
{
    return host->last_active_usec;
}

void ad_host_set_last_active(ad_host *host, uint64_t usec)
{
    host->last_active_usec = usec;
}

/* ---- claim, previous daemon ---------------------------------------------- */

bool ad_host_claim_ours(const ad_host *host)
{
    return host->claim_ours;
}

void ad_host_set_claim_ours(ad_host *host, bool ours)
{
    host->claim_ours = ours;
}

bool ad_host_releasing(const ad_host *host)
{
    return host->releasing;
}

void ad_host_set_releasing(ad_host *host, bool releasing)
{
    host->releasing = releasing;
}

bool ad_host_unproven_at_start(const ad_host *host)
{
    return host->unproven_at_start;
}

void ad_host_set_unproven_at_start(ad_host *host)
{
    host->unproven_at_start = true;
}

/* ---- status -------------------------------------------------------------- */

const char *ad_host_last_reason(const ad_host *host)
{
    return host->last_reason;
}

const char *ad_host_last_message(const ad_host *host)
{
    return host->last_message;
}

void ad_host_set_last_failure(ad_host *host, const char *reason, const char *message)
{
    snprintf(host->last_reason, sizeof(host->last_reason), "%s", reason ? reason : "");
    snprintf(host->last_message, sizeof(host->last_message), "%s", message ? message : "");
}

uint64_t ad_host_failed_attempts(const ad_host *host)
{
    return host->failed_attempts;
}

void ad_host_count_failed_attempt(ad_host *host, const char *reason)
{
    host->failed_attempts++;
    snprintf(host->last_reason, sizeof(host->last_reason), "%s", reason);
}

uint64_t ad_host_wake_started(const ad_host *host)
{
    return host->wake_started_usec;
}

void ad_host_set_wake_started(ad_host *host, uint64_t usec)
{
    host->wake_started_usec = usec;
}
