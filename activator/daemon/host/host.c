/* One configured host: the struct, and what the host holds of its own. */
#include "activator/daemon/host/host.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "activator/daemon/accounts/dynamic_users.h"
#include "activator/records/records.h"
#include "common/cleanup.h"
#include "common/log.h"

struct ad_host_settings {
    cfg_host *config;
    cg_seccomp_program *seccomp; /* a filter of its own, or NULL for the shared default */
    cg_fs_view *fs_view;         /* the generation's filesystem; NULL: FilesystemView=box */
    uid_t uid;                   /* User= and Group=, or the host's dynamic user */
    gid_t gid;
    /* User=root: uid and gid are the host's dynamic user (gid: or Group=),
     * which its uid 0 maps to in a user namespace of its own. */
    bool root_in_user_namespace;
};

static bool uses_plain_default_filter(const cfg_host *config)
{
    const cfg_syscall_filter *filter = &config->limits.syscall_filter;
    return filter->base == CFG_SYSCALLS_DEFAULT && !filter->reset && !filter->allow &&
           !filter->deny;
}

static const char *filter_profile(const cfg_syscall_filter *filter)
{
    if (filter->reset) /* an empty line last: no filter */
        return "none";
    return filter->base == CFG_SYSCALLS_DEFAULT ? "default"
           : filter->base == CFG_SYSCALLS_ALLOW ? "allow"
                                                : "none";
}

/* Most hosts run the default profile: one compiled program serves them all. */
static int compile_filter(ad_daemon *daemon, ad_host_settings *settings, act_error *err)
{
    const cfg_syscall_filter *filter = &settings->config->limits.syscall_filter;
    bool plain_default = uses_plain_default_filter(settings->config);
    if (plain_default && daemon->default_seccomp)
        return 0;
    cg_seccomp_program **out = plain_default ? &daemon->default_seccomp : &settings->seccomp;
    int r = cg_seccomp_compile(filter_profile(filter), (const char *const *)filter->allow,
                               (const char *const *)filter->deny, out, err);
    return r < 0 ? act_error_prefix(err, "host %s: SystemCallFilter=", settings->config->name)
                 : 0;
}

/* PrivateTmpSize= as the view takes it: 0 for infinity (tmpfs's own). */
static uint64_t tmp_size_of(const cfg_host *config)
{
    uint64_t size = config->limits.private_tmp_size;
    if (size == CFG_LIMIT_INFINITY)
        return 0;
    return size ? size : CFG_PRIVATE_TMP_SIZE_DEFAULT;
}

/* User=root, in a user namespace of its own or (a test build's control)
 * not: its view hides more, in case. */
static bool runs_as_root(const ad_host_settings *settings)
{
    return settings->root_in_user_namespace || settings->uid == 0;
}

/* Whether the host's view is the one most hosts share: the daemon's
 * directories hidden, nothing of its own kept but its state directory,
 * which each spawn passes (generations/spawn.c), and the default size of
 * its private /tmp. A host that runs as root has one of its own:
 * cfg_host_view_paths hides /run from it. */
static bool uses_shared_fs_view(const ad_host_settings *settings)
{
    const cfg_host *config = settings->config;
    return !config->filesystem_box && !config->read_write_paths && !runs_as_root(settings) &&
           tmp_size_of(config) == CFG_PRIVATE_TMP_SIZE_DEFAULT;
}

/* The host's filesystem view, made once per configuration (or once for all
 * the hosts that share one): the daemon's directories hidden, its state
 * directory and ReadWritePaths= kept. */
static int make_fs_view(ad_daemon *daemon, ad_host_settings *settings, act_error *err)
{
    const cfg_host *config = settings->config;
    bool shared = uses_shared_fs_view(settings);
    if (config->filesystem_box || (shared && daemon->shared_fs_view))
        return 0;
    _cleanup_(cfg_view_paths_clear) cfg_view_paths paths = {0};
    int r = cfg_host_view_paths(&daemon->config, config, runs_as_root(settings), &paths, err);
    if (r == 0) {
        cg_fs_view_spec spec = {
            .hidden = (const char *const *)paths.hidden,
            .writable = shared ? NULL : (const char *const *)paths.writable,
            .writable_if_present = (const char *const *)paths.writable_if_present,
            .private_tmp = true,
            .tmp_size = tmp_size_of(config),
            .hide_processes = true,
            .private_dev = true,
        };
        r = cg_fs_view_new(&spec, shared ? &daemon->shared_fs_view : &settings->fs_view, err);
    }
    return r < 0 ? act_error_prefix(err, "host %s", config->name) : 0;
}

void ad_host_settings_free(ad_host_settings *settings)
{
    if (!settings)
        return;
    if (settings->config) {
        cfg_host_free(settings->config);
        free(settings->config);
    }
    cg_seccomp_program_free(settings->seccomp);
    cg_fs_view_free(settings->fs_view);
    free(settings);
}

/* An account that User= or Group= names must not be another host's
 * dynamic user: it would own that host's files. */
static int check_not_dynamic(ad_daemon *daemon, const cfg_host *config,
                             const ad_host_settings *settings, const char **failed_key,
                             act_error *err)
{
    const struct {
        const char *what;
        uint32_t id;
        const char *key;
        const char *value;
    } ids[] = {
        {"uid", settings->uid, "User", config->user},
        {"gid", settings->gid, config->group ? "Group" : "User",
         config->group ? config->group : config->user},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
        const char *owner = ad_dynamic_users_owner(daemon->dynamic_users, ids[i].id);
        if (!owner || strcmp(owner, config->name) == 0)
            continue;
        *failed_key = ids[i].key;
        return act_error_set(err, EEXIST,
                             "host %s: %s=%s: %s %u is the dynamic user of host %s, whose files "
                             "it owns; name another account (or remove the record of uid %u "
                             "from <state>/dynamic-users/ once host %s and its files are gone)",
                             config->name, ids[i].key, ids[i].value, ids[i].what,
                             (unsigned)ids[i].id, owner, (unsigned)ids[i].id, owner);
    }
    return 0;
}

/* Whether this build runs User=root as the box's root (a test switch: the
 * control of the tests that show what the user namespace keeps out). */
static bool root_without_user_namespace(void)
{
#ifdef ACTIVATOR_TEST_HOOKS
    const char *value = getenv("ACTIVATOR_TEST_ROOT_WITHOUT_USER_NAMESPACE");
    return value && strcmp(value, "1") == 0;
#else
    return false;
#endif
}

/* User=root runs as root only in a user namespace of its own, whose uid 0
 * is the host's dynamic user on the box (and gid 0 its group, unless
 * Group= names another): the kernel then checks its signals, files and
 * kernel settings against that uid, which owns nothing of the box's.
 * Capabilities there would reach nothing of the box, so none is kept. */
static int map_root_to_dynamic_user(ad_daemon *daemon, ad_host_settings *settings,
                                    const char **failed_key, act_error *err)
{
    const cfg_host *config = settings->config;
    if (root_without_user_namespace()) {
        act_log(LOG_WARNING,
                "host %s: User=%s runs as the box's root "
                "(ACTIVATOR_TEST_ROOT_WITHOUT_USER_NAMESPACE=1)",
                config->name, config->user);
        return 0;
    }
    if (config->ambient_capabilities) {
        *failed_key = "AmbientCapabilities";
        return act_error_set(
            err, EINVAL,
            "host %s: AmbientCapabilities= with User=%s: " CFG_ROOT_CAPABILITIES_REFUSED,
            config->name, config->user);
    }
    uid_t uid = 0;
    int r = ad_dynamic_user_get(daemon->dynamic_users, config->name, &uid, err);
    if (r < 0) {
        *failed_key = "User";
        return r;
    }
    settings->uid = uid;
    if (settings->gid == 0)
        settings->gid = (gid_t)uid;
    settings->root_in_user_namespace = true;
    return 0;
}

int ad_host_settings_new(ad_daemon *daemon, cfg_host *config, ad_host_settings **out,
                         const char **failed_key, act_error *err)
{
    assert(daemon && config && out && failed_key);
    *failed_key = NULL;
    ad_host_settings *settings = calloc(1, sizeof(*settings));
    if (!settings) {
        cfg_host_free(config);
        free(config);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    settings->config = config;
    /* Without User=, a uid of the host's own; with it, what it names (root
     * only when it says so, which --check-config warns about). */
    bool named = false;
    int r = cfg_host_credentials(config, &settings->uid, &settings->gid, &named, err);
    if (r < 0) /* the sentence names the key whose lookup failed */
        *failed_key = config->group && strstr(err->message, "Group=") ? "Group" : "User";
    if (r == 0 && !named) {
        uid_t uid = 0;
        if ((r = ad_dynamic_user_get(daemon->dynamic_users, config->name, &uid, err)) < 0)
            *failed_key = "User";
        settings->uid = uid;
        settings->gid = (gid_t)uid;
    }
    /* A dynamic user's files are its host's alone. */
    if (r == 0 && named)
        r = check_not_dynamic(daemon, config, settings, failed_key, err);
    if (r == 0 && named && settings->uid == 0)
        r = map_root_to_dynamic_user(daemon, settings, failed_key, err);
    if (r == 0 && (r = compile_filter(daemon, settings, err)) < 0)
        *failed_key = "SystemCallFilter";
    if (r == 0 && (r = make_fs_view(daemon, settings, err)) < 0)
        *failed_key = "ReadWritePaths";
    if (r < 0) {
        ad_host_settings_free(settings);
        return r;
    }
    *out = settings;
    return 0;
}

/* The slots of a socket table of n, with their names; -1 in every fd slot. */
typedef struct socket_table {
    lsn_address *listen;
    int *fds;
    char **names;
    sd_event_source **sources;
} socket_table;

static void socket_table_free(socket_table *table)
{
    for (char **name = table->names; name && *name; name++)
        free(*name);
    free(table->names);
    free(table->listen);
    free(table->fds);
    free(table->sources);
}

static int socket_table_new(const char *host, const lsn_address *addresses, unsigned n,
                            socket_table *out, act_error *err)
{
    socket_table table = {
        .listen = calloc(n ? n : 1, sizeof(*table.listen)),
        .fds = calloc(n ? n : 1, sizeof(*table.fds)),
        .names = calloc(n + 1, sizeof(*table.names)),
        .sources = calloc(n ? n : 1, sizeof(*table.sources)),
    };
    bool failed = !table.listen || !table.fds || !table.names || !table.sources;
    for (unsigned i = 0; !failed && i < n; i++) {
        table.listen[i] = addresses[i];
        table.fds[i] = -1;
        if (asprintf(&table.names[i], "%s/%u", host, i) < 0) {
            table.names[i] = NULL;
            failed = true;
        }
    }
    if (failed) {
        socket_table_free(&table);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    *out = table;
    return 0;
}

/* Ends the watches of the host's sockets and closes those still there. */
static void close_sockets(ad_host *host)
{
    for (unsigned i = 0; i < host->n_listen; i++) {
        if (host->demand_sources)
            host->demand_sources[i] = sd_event_source_disable_unref(host->demand_sources[i]);
        if (host->listen_fds && host->listen_fds[i] >= 0)
            close(host->listen_fds[i]);
    }
    socket_table_free(&(socket_table){host->listen, host->listen_fds, host->listen_names,
                                      host->demand_sources});
    host->listen = NULL;
    host->listen_fds = NULL;
    host->listen_names = NULL;
    host->demand_sources = NULL;
    host->n_listen = 0;
}

static void take_table(ad_host *host, socket_table *table, unsigned n)
{
    host->listen = table->listen;
    host->listen_fds = table->fds;
    host->listen_names = table->names;
    host->demand_sources = table->sources;
    host->n_listen = n;
}

int ad_host_new(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err)
{
    assert(daemon && settings && out);
    const cfg_host *config = settings->config;
    ad_host *host = calloc(1, sizeof(*host));
    socket_table table;
    int r = host ? socket_table_new(config->name, config->listen, config->n_listen, &table, err)
                 : act_error_set(err, ENOMEM, "out of memory");
    if (r < 0) {
        free(host);
        ad_host_settings_free(settings);
        return r;
    }
    *host = (ad_host){.daemon = daemon, .settings = settings, .dirfd = -1};
    snprintf(host->name, sizeof(host->name), "%s", config->name);
    take_table(host, &table, config->n_listen);
    *out = host;
    return 0;
}

void ad_host_free(ad_host *host)
{
    if (!host)
        return;
    assert(!host->serving && !host->starting && !host->replaced && !host->wake_state &&
           !host->swap && !host->claim_report && !host->pipeline && !host->move);
    free(host->probe_op);
    free(host->claim_seen_json);
    close_sockets(host);
    ad_host_settings_free(host->settings);
    ad_host_settings_free(host->pending);
    sd_event_source_disable_unref(host->idle_timer);
    for (size_t i = 0; i < host->n_unproven; i++)
        cg_leaf_free(host->unproven[i].leaf);
    free(host->unproven);
    ad_host_dir_close(host);
    free(host);
}

void ad_host_claim_seen(ad_host *host, const claim *c, uint64_t revision)
{
    if (revision < host->claim_seen_revision ||
        (revision == host->claim_seen_revision && host->claim_seen_json))
        return;
    free(host->claim_seen_json);
    /* Out of memory forgets it: the next wake reads the claim. */
    host->claim_seen_json = c ? claim_to_json(c) : NULL;
    host->claim_seen_revision = revision;
}

bool ad_host_claim_last_seen(const ad_host *host, claim *out)
{
    if (!host->claim_seen_json || claim_from_json(host->name, host->claim_seen_json,
                                                  strlen(host->claim_seen_json), out, NULL) < 0)
        return false;
    out->revision = host->claim_seen_revision;
    return true;
}

const cfg_host *ad_host_config(const ad_host *host)
{
    return host->settings->config;
}

void ad_host_set_pending(ad_host *host, ad_host_settings *settings)
{
    ad_host_settings_free(host->pending);
    host->pending = settings;
}

bool ad_host_apply_pending(ad_host *host)
{
    if (!host->pending)
        return false;
    assert(!host->serving && !host->starting && !host->replaced && !host->wake_state &&
           !host->swap);
    ad_host_settings_free(host->settings);
    host->settings = TAKE_PTR(host->pending);
    return true;
}

static void copy_limit_values(cfg_limits *to, const cfg_limits *from)
{
    to->memory_max = from->memory_max;
    to->memory_max_is_default = from->memory_max_is_default;
    to->memory_high = from->memory_high;
    to->pids_max = from->pids_max;
    to->pids_max_is_default = from->pids_max_is_default;
    to->cpu_quota_percent = from->cpu_quota_percent;
    to->cpu_weight = from->cpu_weight;
}

void ad_host_set_limits(ad_host *host, const cfg_limits *limits)
{
    copy_limit_values(&host->settings->config->limits, limits);
    if (host->pending)
        copy_limit_values(&host->pending->config->limits, limits);
}

/* ---- sockets ------------------------------------------------------------- */

void ad_host_set_listen_fd(ad_host *host, unsigned index, int fd)
{
    assert(index < host->n_listen);
    if (host->listen_fds[index] >= 0)
        close(host->listen_fds[index]);
    host->listen_fds[index] = fd;
}

int ad_host_take_listen_fd(ad_host *host, unsigned index)
{
    assert(index < host->n_listen);
    host->demand_sources[index] = sd_event_source_disable_unref(host->demand_sources[index]);
    int fd = host->listen_fds[index];
    host->listen_fds[index] = -1;
    return fd;
}

/* A copy of n items of size bytes; NULL for none (or out of memory). */
static void *copy_array(const void *items, size_t n, size_t size)
{
    void *copy = n ? malloc(n * size) : NULL;
    if (copy)
        memcpy(copy, items, n * size);
    return copy;
}

int ad_host_replace_sockets(ad_host *host, const cfg_host *loaded, int *fds, act_error *err)
{
    assert(host && loaded && (fds || !loaded->n_listen));
    unsigned n = loaded->n_listen;
    socket_table table;
    int r = socket_table_new(host->name, loaded->listen, n, &table, err);
    if (r < 0)
        return r;
    lsn_address *listen = copy_array(loaded->listen, n, sizeof(*listen));
    unsigned *lines = copy_array(loaded->listen_lines, n, sizeof(*lines));
    if (n && (!listen || !lines)) {
        free(listen);
        free(lines);
        socket_table_free(&table);
        return act_error_set(err, ENOMEM, "out of memory");
    }
    close_sockets(host);
    for (unsigned i = 0; i < n; i++)
        table.fds[i] = fds[i];
    take_table(host, &table, n);
    cfg_host *config = host->settings->config;
    free(config->listen);
    free(config->listen_lines);
    config->listen = listen;
    config->listen_lines = lines;
    config->n_listen = loaded->n_listen;
    config->backlog = loaded->backlog;
    return 0;
}

/* ---- what a generation runs as ------------------------------------------- */

void ad_host_run_as(const ad_host *host, uid_t *uid, gid_t *gid)
{
    *uid = host->settings->uid;
    *gid = host->settings->gid;
}

bool ad_host_root_in_user_namespace(const ad_host *host)
{
    return host->settings->root_in_user_namespace;
}

const cg_seccomp_program *ad_host_seccomp(const ad_host *host)
{
    return uses_plain_default_filter(host->settings->config) ? host->daemon->default_seccomp
                                                             : host->settings->seccomp;
}

const cg_fs_view *ad_host_fs_view(const ad_host *host)
{
    return uses_shared_fs_view(host->settings) ? host->daemon->shared_fs_view
                                               : host->settings->fs_view;
}

/* ---- directories --------------------------------------------------------- */

int ad_host_dir(ad_host *host, act_error *err)
{
    if (host->dirfd >= 0)
        return host->dirfd;
    int fd = rec_open_host(host->daemon->state_dirfd, host->name, err);
    if (fd >= 0)
        host->dirfd = fd;
    return fd;
}

void ad_host_dir_close(ad_host *host)
{
    act_closep(&host->dirfd);
    host->dirfd = -1;
}

void ad_host_dir_close_unless_used(ad_host *host)
{
    if (!host->serving && !host->starting && !host->wake_state)
        ad_host_dir_close(host);
}

/* Deeper than this is no state directory but an attack on our stack. */
#define STATE_TREE_DEPTH_MAX 128

/* Hands every entry below dir_fd to uid:gid, symlinks themselves rather
 * than what they name, without leaving the directory's file system. */
static int chown_tree(int dir_fd, uid_t uid, gid_t gid, unsigned depth, act_error *err)
{
    if (depth > STATE_TREE_DEPTH_MAX)
        return act_error_set(err, ELOOP, "deeper than %d directories", STATE_TREE_DEPTH_MAX);
    int listing = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = listing >= 0 ? fdopendir(listing) : NULL;
    if (!dir) {
        int saved = errno;
        if (listing >= 0)
            close(listing);
        return act_error_set(err, saved, "cannot list it: %s", strerror(saved));
    }
    struct stat top;
    int r = fstat(dir_fd, &top) < 0 ? -errno : 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            fchownat(dir_fd, de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
            r = act_error_set(err, errno, "%s: %s", de->d_name, strerror(errno));
            break;
        }
        if (!S_ISDIR(st.st_mode) || st.st_dev != top.st_dev)
            continue;
        int sub = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            r = act_error_set(err, errno, "%s: %s", de->d_name, strerror(errno));
            break;
        }
        r = chown_tree(sub, uid, gid, depth + 1, err);
        close(sub);
    }
    closedir(dir);
    return r < 0 ? r : 0;
}

int ad_checkpoint_place(const ad_daemon *daemon, ckpt_place *out, act_error *err)
{
    *out = (ckpt_place){0};
    if (!daemon->config.checkpoints)
        return act_error_set(err, ENOENT, "no Checkpoints= is set");
    int r = ckpt_place_parse(daemon->config.checkpoints, out, err);
    if (r < 0 || !out->namespace)
        return r;
    char spool[4200];
    snprintf(spool, sizeof(spool), "%s/checkpoint-spool", daemon->config.state_directory);
    r = ckpt_place_set_registry(out, spool, daemon->config.registry_auth_file,
                                daemon->config.registry_insecure, err);
    if (r < 0)
        ckpt_place_clear(out);
    return r;
}

int ad_host_state_directory(ad_host *host, act_error *err)
{
    int dirfd = ad_host_dir(host, err);
    if (dirfd < 0)
        return dirfd;
    bool made = mkdirat(dirfd, "state", 0750) == 0;
    if (!made && errno != EEXIST)
        return act_error_set(err, errno, "cannot create the state directory: %s",
                             strerror(errno));
    uid_t uid;
    gid_t gid;
    ad_host_run_as(host, &uid, &gid);
    _cleanup_close_ int state =
        openat(dirfd, "state", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (state < 0 || fstat(state, &st) < 0)
        return act_error_set(err, errno, "cannot open the state directory: %s", strerror(errno));
    if (st.st_uid == uid && st.st_gid == gid)
        return 0;
    /* Another owner: the host ran as someone else before (no User= used to
     * mean root, or User= changed, or its dynamic uid had to change).
     * Everything in it becomes the new owner's, as systemd does for a
     * StateDirectory= of a DynamicUser=; the top last, so that a walk cut
     * short is done again at the next start. */
    int r = chown_tree(state, uid, gid, 0, err);
    if (r < 0)
        return act_error_prefix(err, "cannot hand the state directory to uid %u", (unsigned)uid);
    if (fchown(state, uid, gid) < 0)
        return act_error_set(err, errno, "cannot hand the state directory to uid %u: %s",
                             (unsigned)uid, strerror(errno));
    if (!made)
        act_log(LOG_INFO, "host %s: state directory handed from uid %u to uid %u", host->name,
                (unsigned)st.st_uid, (unsigned)uid);
    return 0;
}

void ad_host_format_handle(const ad_host *host, uint64_t generation, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < host->n_listen && used + 2 < size; i++) {
        char address[160];
        lsn_format(&host->listen[i], address, sizeof(address));
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? "," : "", address);
    }
    if (!out[0])
        snprintf(out, size, "%s/g-%" PRIu64, host->daemon->config.box, generation);
}

/* ---- generations, wake, swap --------------------------------------------- */

bool ad_host_at_rest(const ad_host *host)
{
    const pl_host *pipeline = host->pipeline;
    return pl_host_get_state(pipeline) == PL_HOST_PARKED && !pl_host_is_unproven(pipeline) &&
           !host->serving && !host->starting && !host->replaced && !host->wake_state;
}

const ad_generation *ad_host_current_generation(const ad_host *host)
{
    return host->starting ? host->starting : host->serving;
}

/* ---- idle parking -------------------------------------------------------- */

/* ---- claim, previous daemon ---------------------------------------------- */

bool ad_host_set_probe_op(ad_host *host, const char *op_id)
{
    char *copy = NULL;
    if (op_id && !(copy = strdup(op_id)))
        return false;
    free(host->probe_op);
    host->probe_op = copy;
    return true;
}

/* ---- leaves not proven stopped -------------------------------------------- */

bool ad_host_keep_unproven(ad_host *host, cg_leaf *leaf, uint64_t generation)
{
    assert(leaf);
    ad_unproven_leaf *grown = realloc(host->unproven, (host->n_unproven + 1) * sizeof(*grown));
    if (!grown) {
        cg_leaf_free(leaf);
        return false;
    }
    host->unproven = grown;
    host->unproven[host->n_unproven++] = (ad_unproven_leaf){.leaf = leaf, .generation = generation};
    return true;
}

bool ad_host_take_unproven(ad_host *host, ad_unproven_leaf *out)
{
    if (!host->n_unproven)
        return false;
    *out = host->unproven[0];
    memmove(host->unproven, host->unproven + 1, --host->n_unproven * sizeof(*host->unproven));
    return true;
}

/* ---- status -------------------------------------------------------------- */

void ad_host_set_last_failure(ad_host *host, const char *reason, const char *message)
{
    snprintf(host->last_reason, sizeof(host->last_reason), "%s", reason ? reason : "");
    snprintf(host->last_message, sizeof(host->last_message), "%s", message ? message : "");
}

void ad_host_count_failed_attempt(ad_host *host, const char *reason)
{
    host->failed_attempts++;
    snprintf(host->last_reason, sizeof(host->last_reason), "%s", reason);
}

bool ad_host_fenced(const ad_host *host)
{
    return host->fenced || (host->daemon->fenced && host->claim_failover);
}
