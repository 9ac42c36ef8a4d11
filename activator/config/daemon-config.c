/* [Activator] of activatord.conf. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activator/config/config-internal.h"
#include "activator/config/config.h"
#include "activator/config/parse/account.h"
#include "activator/config/parse/duration.h"
#include "activator/config/parse/number.h"
#include "activator/config/parse/size.h"
#include "activator/config/parse/url.h"
#include "checkpoint/checkpoint.h"
#include "claims/box_lease.h"
#include "claims/claims.h"
#include "common/cleanup.h"
#include "common/names.h"
#include "common/paths.h"
#include "common/split-argv.h"
#include "common/text.h"

void cfg_daemon_free(cfg_daemon *config)
{
    free(config->box);
    free(config->store);
    free(config->state_directory);
    free(config->runtime_directory);
    free(config->hosts_directory);
    free(config->cgroup_root);
    free(config->control);
    free(config->events);
    free(config->control_group);
    free(config->viewer_group);
    free(config->control_listen);
    act_strv_free(config->control_operators);
    act_strv_free(config->control_viewers);
    free(config->tls_certificate);
    free(config->tls_key);
    free(config->tls_client_ca);
    free(config->store_ca);
    free(config->store_certificate);
    free(config->store_key);
    free(config->store_user);
    free(config->store_password_file);
    free(config->metrics_listen);
    free(config->user_database_directory);
    free(config->checkpoints);
    free(config->registry_auth_file);
    act_strv_free(config->registry_insecure);
    *config = (cfg_daemon){0};
}

static int set_string(char **field, const char *value, act_error *err)
{
    char *copy = strdup(value);
    if (!copy)
        return act_error_set(err, ENOMEM, "out of memory");
    free(*field);
    *field = copy;
    return 0;
}

static int apply_box(void *target, const char *value, act_error *err)
{
    cfg_daemon *c = target;
    act_error name_err = {0};
    if (act_name_check("box", value, &name_err) < 0)
        return act_error_set(err, EINVAL, "%s (box names follow the host name rules)",
                             name_err.message);
    return set_string(&c->box, value, err);
}

/* Checked by the parser that opens the store, so what passes here opens. */
static int apply_store(void *target, const char *value, act_error *err)
{
    claims_url url;
    int r = claims_parse_url(value, &url, err);
    return r < 0 ? r : set_string(&((cfg_daemon *)target)->store, value, err);
}

#define PATH_KEY(fn, field)                                                                        \
    static int fn(void *target, const char *value, act_error *err)                                 \
    {                                                                                              \
        int r = act_path_check_absolute(value, err);                                               \
        return r < 0 ? r : set_string(&((cfg_daemon *)target)->field, value, err);                 \
    }
PATH_KEY(apply_state_directory, state_directory)
PATH_KEY(apply_runtime_directory, runtime_directory)
PATH_KEY(apply_hosts_directory, hosts_directory)
PATH_KEY(apply_tls_certificate, tls_certificate)
PATH_KEY(apply_tls_key, tls_key)
PATH_KEY(apply_tls_client_ca, tls_client_ca)
PATH_KEY(apply_store_ca, store_ca)
PATH_KEY(apply_store_certificate, store_certificate)
PATH_KEY(apply_store_key, store_key)
PATH_KEY(apply_store_password_file, store_password_file)
#undef PATH_KEY

/* etcd user names: anything printable without spaces, which is what etcd's
 * own tools accept on a command line. */
static int apply_store_user(void *target, const char *value, act_error *err)
{
    size_t len = strlen(value);
    if (len == 0 || len > 128)
        return act_error_set(err, EINVAL, "is not an etcd user name (write the 1 to 128 "
                                          "character name etcdctl user add was given)");
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        if (*p <= ' ' || *p == 0x7f)
            return act_error_set(err, EINVAL, "is not an etcd user name (it has no spaces or "
                                              "control characters)");
    return set_string(&((cfg_daemon *)target)->store_user, value, err);
}

/* An absolute path, or the word that means none (*field NULL); a bad
 * value's sentence ends with hint. */
static int set_path_or_none(char **field, const char *value, const char *none, const char *hint,
                            act_error *err)
{
    if (strcmp(value, none) == 0) {
        free(*field);
        *field = NULL;
        return 0;
    }
    act_error path_err = {0};
    if (act_path_check_absolute(value, &path_err) < 0)
        return act_error_set(err, EINVAL, "%s; %s", path_err.message, hint);
    return set_string(field, value, err);
}

static int apply_cgroup_root(void *target, const char *value, act_error *err)
{
    return set_path_or_none(&((cfg_daemon *)target)->cgroup_root, value, "auto",
                            "write auto for the cgroup systemd delegated to the service, or an "
                            "absolute cgroup path",
                            err);
}

static int apply_claim_unclaimed(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_daemon *)target)->claim_unclaimed, err);
}

static int apply_control(void *target, const char *value, act_error *err)
{
    if (strncmp(value, "tcp://", 6) == 0 || strncmp(value, "tls+tcp://", 10) == 0)
        return act_error_set(err, EINVAL,
                             "Control= is the local socket, checked by peer credentials (use "
                             "ipc:///PATH here and ControlListen=tls+tcp://ADDR:PORT for remote "
                             "control)");
    int r = cfg_parse_nng_url(value, CFG_URL_IPC, err);
    return r < 0 ? r : set_string(&((cfg_daemon *)target)->control, value, err);
}

static int apply_events(void *target, const char *value, act_error *err)
{
    int r = cfg_parse_nng_url(value, CFG_URL_IPC | CFG_URL_TCP, err);
    return r < 0 ? r : set_string(&((cfg_daemon *)target)->events, value, err);
}

#define GROUP_KEY(fn, field)                                                                       \
    static int fn(void *target, const char *value, act_error *err)                                 \
    {                                                                                              \
        int r = cfg_parse_account_name("group", value, err);                                      \
        return r < 0 ? r : set_string(&((cfg_daemon *)target)->field, value, err);                \
    }
GROUP_KEY(apply_control_group, control_group)
GROUP_KEY(apply_viewer_group, viewer_group)
#undef GROUP_KEY

/* Words split as Exec= words are (so one with spaces is written in
 * quotes), each checked by check, added to *list; an empty value clears
 * it. A line with one bad word adds none of its words. */
static int append_words(char ***list, const char *value,
                        int (*check)(const char *word, act_error *err), act_error *err)
{
    if (value[0] == '\0') {
        act_strv_free(*list);
        *list = NULL;
        return 0;
    }
    _cleanup_(act_strv_freep) char **words = NULL;
    int r = act_split_argv(value, &words, err);
    if (r < 0)
        return r;
    size_t n_words = act_strv_length(words), n = act_strv_length(*list);
    for (size_t i = 0; i < n_words; i++)
        if ((r = check(words[i], err)) < 0)
            return r;
    char **grown = realloc(*list, (n + n_words + 1) * sizeof(char *));
    if (!grown)
        return act_error_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n_words; i++)
        grown[n + i] = TAKE_PTR(words[i]);
    grown[n + n_words] = NULL;
    *list = grown;
    return 0;
}

/* ControlOperators=, ControlViewers=: certificate CNs. */
static int check_cn(const char *word, act_error *err)
{
    if (act_cn_is_valid(word, strlen(word)))
        return 0;
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(word, shown, sizeof(shown));
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a certificate CN (write each CN as its certificate's "
                         "subject has it: 1 to %d printable ASCII characters, in quotes when "
                         "it has spaces)",
                         shown, ACT_CN_MAX);
}

static int append_cns(char ***list, const char *value, act_error *err)
{
    return append_words(list, value, check_cn, err);
}

static int apply_control_operators(void *target, const char *value, act_error *err)
{
    return append_cns(&((cfg_daemon *)target)->control_operators, value, err);
}

static int apply_control_viewers(void *target, const char *value, act_error *err)
{
    return append_cns(&((cfg_daemon *)target)->control_viewers, value, err);
}

static int apply_store_insecure(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_daemon *)target)->store_insecure, err);
}

static int apply_control_listen(void *target, const char *value, act_error *err)
{
    int r = cfg_parse_nng_url(value, CFG_URL_TLS_TCP, err);
    return r < 0 ? r : set_string(&((cfg_daemon *)target)->control_listen, value, err);
}

static int apply_user_database_directory(void *target, const char *value, act_error *err)
{
    return set_path_or_none(&((cfg_daemon *)target)->user_database_directory, value, "no",
                            "write a directory, such as /run/systemd/userdb, or no to publish no "
                            "users",
                            err);
}

static int apply_metrics_listen(void *target, const char *value, act_error *err)
{
    cfg_daemon *c = target;
    if (strcmp(value, "no") == 0) {
        free(c->metrics_listen);
        c->metrics_listen = NULL;
        return 0;
    }
    lsn_address address;
    act_error listen_err = {0};
    if (value[0] == '/' || lsn_parse(value, "MetricsListen", &address, &listen_err) < 0)
        return act_error_set(err, EINVAL,
                             "\"%s\" is not ADDR:PORT (write 127.0.0.1:9464 or [::1]:9464, or no "
                             "to serve no metrics)",
                             value);
    return set_string(&c->metrics_listen, value, err);
}

static int apply_max_concurrent_starts(void *target, const char *value, act_error *err)
{
    uint64_t n;
    int r = cfg_parse_uint(value, 1, 4096, &n, err);
    if (r < 0)
        return r;
    ((cfg_daemon *)target)->max_concurrent_starts = (uint32_t)n;
    return 0;
}

static int apply_failure_backoff_max(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, 25 * 1000, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_daemon *)target)->failure_backoff_max_usec, err);
}

/* How long a wake may wait for a start budget (StartRateLimit=, the
 * MaxConcurrentStarts= cap) before it is refused with reason budget. */
static int apply_start_budget_wait(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, 1000, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_daemon *)target)->start_budget_wait_usec, err);
}

/* Long enough for etcd to answer a count under load; short enough that a
 * dead stream is noticed before an operator would. */
static int apply_store_watch_timeout(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_daemon *)target)->store_watch_timeout_usec, err);
}

static int apply_failure_reset(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 86400 * CFG_USEC_PER_SEC,
                                    &((cfg_daemon *)target)->failure_reset_usec, err);
}

/* The box record's lease (claims.h: box records): a box silent this long is
 * dead to the fleet. etcd grants at least about two seconds. */
static int apply_box_lease(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, 2 * CFG_USEC_PER_SEC, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_daemon *)target)->box_lease_usec, err);
}

static int apply_failover_grace(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, 0, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_daemon *)target)->failover_grace_usec, err);
}

/* DynamicUserRange=MIN-MAX. uid 0 is root's; 4294967295 is (uid_t)-1, "no
 * change" to setresuid. */
static int apply_dynamic_user_range(void *target, const char *value, act_error *err)
{
    cfg_daemon *c = target;
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(value, shown, sizeof(shown));
    const char *dash = strchr(value, '-');
    uint64_t min = 0, max = 0;
    char first[16];
    act_error number_err = {0};
    size_t first_len = dash ? (size_t)(dash - value) : 0;
    if (!dash || first_len == 0 || first_len >= sizeof(first))
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a range (write MIN-MAX, e.g. %u-%u, the "
                             "default)",
                             shown, CFG_DYNAMIC_UID_MIN, CFG_DYNAMIC_UID_MAX);
    memcpy(first, value, first_len);
    first[first_len] = '\0';
    if (cfg_parse_uint(first, 1, 4294967294u, &min, &number_err) < 0 ||
        cfg_parse_uint(dash + 1, 1, 4294967294u, &max, &number_err) < 0)
        return act_error_set(err, EINVAL,
                             "\"%s\": each end is a uid from 1 to 4294967294 (uid 0 is root, "
                             "which no dynamic user may be; e.g. %u-%u)",
                             shown, CFG_DYNAMIC_UID_MIN, CFG_DYNAMIC_UID_MAX);
    if (min > max)
        return act_error_set(err, EINVAL, "\"%s\" ends below its start (write the lower uid first)",
                             shown);
    c->dynamic_uid_min = (uint32_t)min;
    c->dynamic_uid_max = (uint32_t)max;
    return 0;
}

/* Small enough that a chatty host cannot fill the state file system with
 * two files of it; large enough to hold the lines of one bad start. */
static int apply_host_log_max(void *target, const char *value, act_error *err)
{
    uint64_t bytes;
    int r = cfg_parse_size(value, &bytes, err);
    if (r < 0)
        return r;
    if (bytes == CFG_SIZE_INFINITY || bytes < 64 * 1024)
        return act_error_set(err, EINVAL,
                             "\"%s\" is not a log file size from 64K up (e.g. 8M; each host "
                             "keeps this much twice)",
                             value);
    ((cfg_daemon *)target)->host_log_max_bytes = bytes;
    return 0;
}

/* Checked by the parser the daemon uses, so what passes here opens. */
static int apply_checkpoints(void *target, const char *value, act_error *err)
{
    ckpt_place place;
    int r = ckpt_place_parse(value, &place, err);
    ckpt_place_clear(&place);
    return r < 0 ? r : set_string(&((cfg_daemon *)target)->checkpoints, value, err);
}

static int apply_registry_auth_file(void *target, const char *value, act_error *err)
{
    int r = act_path_check_absolute(value, err);
    return r < 0 ? r : set_string(&((cfg_daemon *)target)->registry_auth_file, value, err);
}

/* A registry as a reference names it: a host name or address, and a port. */
static bool registry_host_is_valid(const char *host)
{
    size_t len = strlen(host), name = strcspn(host, ":");
    if (len == 0 || len > 255 || name == 0)
        return false;
    for (size_t i = 0; i < name; i++)
        if (!isalnum((unsigned char)host[i]) && host[i] != '.' && host[i] != '-')
            return false;
    if (name == len)
        return true;
    char *end;
    unsigned long port = strtoul(host + name + 1, &end, 10);
    return host[name + 1] >= '0' && host[name + 1] <= '9' && *end == '\0' && port >= 1 &&
           port <= 65535;
}

static int check_registry(const char *word, act_error *err)
{
    if (registry_host_is_valid(word))
        return 0;
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(word, shown, sizeof(shown));
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a registry (a host name or address, and :PORT if not "
                         "the default, as a docker:// reference names it)",
                         shown);
}

/* BuildFetchTimeoutSec=: long enough for a large image over a slow link;
 * the fetch itself goes on past it, for the next wake. */
static int apply_build_fetch_timeout(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_daemon *)target)->build_fetch_timeout_usec, err);
}

/* RegistryInsecure=: registries, added to the list. */
static int apply_registry_insecure(void *target, const char *value, act_error *err)
{
    return append_words(&((cfg_daemon *)target)->registry_insecure, value, check_registry, err);
}

static int apply_checkpoints_keep(void *target, const char *value, act_error *err)
{
    uint64_t n;
    int r = cfg_parse_uint(value, 1, 1000, &n, err);
    if (r < 0)
        return r;
    ((cfg_daemon *)target)->checkpoints_keep = (uint32_t)n;
    return 0;
}

/* "no" turns the watch off; otherwise a stall within PSI's 2 s window,
 * which must be shorter than the window. */
static int apply_freeze_memory_pressure(void *target, const char *value, act_error *err)
{
    cfg_daemon *c = target;
    if (strcmp(value, "no") == 0) {
        c->freeze_memory_pressure_usec = 0;
        return 0;
    }
    return cfg_parse_duration_range(value, 1000, 1999 * 1000, &c->freeze_memory_pressure_usec, err);
}

enum {
    KEY_BOX,
    KEY_STORE,
    KEY_STATE_DIRECTORY,
    KEY_RUNTIME_DIRECTORY,
    KEY_HOSTS_DIRECTORY,
    KEY_CGROUP_ROOT,
    KEY_CLAIM_UNCLAIMED,
    KEY_CONTROL,
    KEY_EVENTS,
    KEY_CONTROL_GROUP,
    KEY_VIEWER_GROUP,
    KEY_CONTROL_LISTEN,
    KEY_CONTROL_OPERATORS,
    KEY_CONTROL_VIEWERS,
    KEY_TLS_CERTIFICATE,
    KEY_TLS_KEY,
    KEY_TLS_CLIENT_CA,
    KEY_STORE_CA,
    KEY_STORE_CERTIFICATE,
    KEY_STORE_KEY,
    KEY_STORE_USER,
    KEY_STORE_PASSWORD_FILE,
    KEY_STORE_INSECURE,
    KEY_METRICS_LISTEN,
    KEY_MAX_CONCURRENT_STARTS,
    KEY_FAILURE_BACKOFF_MAX,
    KEY_FAILURE_RESET,
    KEY_START_BUDGET_WAIT,
    KEY_BOX_LEASE,
    KEY_FAILOVER_GRACE,
    KEY_STORE_WATCH_TIMEOUT,
    KEY_DYNAMIC_USER_RANGE,
    KEY_HOST_LOG_MAX,
    KEY_CHECKPOINTS,
    KEY_CHECKPOINTS_KEEP,
    KEY_FREEZE_MEMORY_PRESSURE,
    KEY_REGISTRY_AUTH_FILE,
    KEY_REGISTRY_INSECURE,
    KEY_BUILD_FETCH_TIMEOUT,
    KEY_USER_DATABASE_DIRECTORY,
    N_KEYS,
};

static_assert(N_KEYS == CFG_DAEMON_N_KEYS, "CFG_DAEMON_N_KEYS counts the keys of [Activator]");

static const cfg_ini_key daemon_keys[N_KEYS] = {
    [KEY_BOX] = {"Activator", "Box", apply_box, false},
    [KEY_STORE] = {"Activator", "Store", apply_store, false},
    [KEY_STATE_DIRECTORY] = {"Activator", "StateDirectory", apply_state_directory, false},
    [KEY_RUNTIME_DIRECTORY] = {"Activator", "RuntimeDirectory", apply_runtime_directory, false},
    [KEY_HOSTS_DIRECTORY] = {"Activator", "HostsDirectory", apply_hosts_directory, false},
    [KEY_CGROUP_ROOT] = {"Activator", "CgroupRoot", apply_cgroup_root, false},
    [KEY_CLAIM_UNCLAIMED] = {"Activator", "ClaimUnclaimed", apply_claim_unclaimed, false},
    [KEY_CONTROL] = {"Activator", "Control", apply_control, false},
    [KEY_EVENTS] = {"Activator", "Events", apply_events, false},
    [KEY_CONTROL_GROUP] = {"Activator", "ControlGroup", apply_control_group, false},
    [KEY_VIEWER_GROUP] = {"Activator", "ViewerGroup", apply_viewer_group, false},
    [KEY_CONTROL_LISTEN] = {"Activator", "ControlListen", apply_control_listen, false},
    [KEY_CONTROL_OPERATORS] = {"Activator", "ControlOperators", apply_control_operators, true},
    [KEY_CONTROL_VIEWERS] = {"Activator", "ControlViewers", apply_control_viewers, true},
    [KEY_TLS_CERTIFICATE] = {"Activator", "TLSCertificate", apply_tls_certificate, false},
    [KEY_TLS_KEY] = {"Activator", "TLSKey", apply_tls_key, false},
    [KEY_TLS_CLIENT_CA] = {"Activator", "TLSClientCA", apply_tls_client_ca, false},
    [KEY_STORE_CA] = {"Activator", "StoreCA", apply_store_ca, false},
    [KEY_STORE_CERTIFICATE] = {"Activator", "StoreCertificate", apply_store_certificate, false},
    [KEY_STORE_KEY] = {"Activator", "StoreKey", apply_store_key, false},
    [KEY_STORE_USER] = {"Activator", "StoreUser", apply_store_user, false},
    [KEY_STORE_PASSWORD_FILE] = {"Activator", "StorePasswordFile", apply_store_password_file,
                                 false},
    [KEY_STORE_INSECURE] = {"Activator", "StoreInsecure", apply_store_insecure, false},
    [KEY_METRICS_LISTEN] = {"Activator", "MetricsListen", apply_metrics_listen, false},
    [KEY_MAX_CONCURRENT_STARTS] = {"Activator", "MaxConcurrentStarts", apply_max_concurrent_starts,
                                   false},
    [KEY_FAILURE_BACKOFF_MAX] = {"Activator", "FailureBackoffMaxSec", apply_failure_backoff_max,
                                 false},
    [KEY_FAILURE_RESET] = {"Activator", "FailureResetSec", apply_failure_reset, false},
    [KEY_START_BUDGET_WAIT] = {"Activator", "StartBudgetWaitSec", apply_start_budget_wait, false},
    [KEY_BOX_LEASE] = {"Activator", "BoxLeaseSec", apply_box_lease, false},
    [KEY_FAILOVER_GRACE] = {"Activator", "FailoverGraceSec", apply_failover_grace, false},
    [KEY_STORE_WATCH_TIMEOUT] = {"Activator", "StoreWatchTimeoutSec", apply_store_watch_timeout,
                                 false},
    [KEY_DYNAMIC_USER_RANGE] = {"Activator", "DynamicUserRange", apply_dynamic_user_range, false},
    [KEY_HOST_LOG_MAX] = {"Activator", "HostLogMaxSize", apply_host_log_max, false},
    [KEY_CHECKPOINTS] = {"Activator", "Checkpoints", apply_checkpoints, false},
    [KEY_CHECKPOINTS_KEEP] = {"Activator", "CheckpointsKeep", apply_checkpoints_keep, false},
    [KEY_FREEZE_MEMORY_PRESSURE] = {"Activator", "FreezeMemoryPressure",
                                    apply_freeze_memory_pressure, false},
    [KEY_REGISTRY_AUTH_FILE] = {"Activator", "RegistryAuthFile", apply_registry_auth_file, false},
    [KEY_REGISTRY_INSECURE] = {"Activator", "RegistryInsecure", apply_registry_insecure, true},
    [KEY_BUILD_FETCH_TIMEOUT] = {"Activator", "BuildFetchTimeoutSec", apply_build_fetch_timeout,
                                 false},
    [KEY_USER_DATABASE_DIRECTORY] = {"Activator", "UserDatabaseDirectory",
                                     apply_user_database_directory, false},
};

/* Sets *field to prefix+arg+suffix unless the file set it. */
static int default_string(char **field, const char *prefix, const char *arg, const char *suffix)
{
    if (*field)
        return 0;
    return asprintf(field, "%s%s%s", prefix, arg, suffix) < 0 ? -ENOMEM : 0;
}

/* StoreCA= and its siblings: only for an etcd Store=, in their pairs, and
 * the files there to read (so --check-config finds a missing one). When
 * Store= itself was refused, which kind it is stays unknown. */
static int check_store_access(const cfg_daemon *c, bool store_refused, const char *path,
                              const unsigned *key_lines, cfg_errors *errors)
{
    static const int keys[] = {KEY_STORE_CA, KEY_STORE_CERTIFICATE, KEY_STORE_KEY, KEY_STORE_USER,
                               KEY_STORE_PASSWORD_FILE};
    const char *values[] = {c->store_ca, c->store_certificate, c->store_key, c->store_user,
                            c->store_password_file};
    int problems = 0;
    claims_url url;
    bool etcd = claims_parse_url(c->store, &url, NULL) == 0 && url.kind == CLAIMS_URL_ETCD;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (!values[i])
            continue;
        const char *name = daemon_keys[keys[i]].name;
        if (!etcd && !store_refused) {
            cfg_errors_add(errors, path, key_lines[keys[i]], name,
                           "applies to an etcd:// Store= only, and Store= is %s (remove "
                           "%s= or point Store= at etcd)",
                           c->store, name);
            problems++;
        } else if (keys[i] != KEY_STORE_USER && access(values[i], R_OK) < 0) {
            cfg_errors_add(errors, path, key_lines[keys[i]], name,
                           "cannot read %s: %s (the daemon reads it as root when it "
                           "starts)",
                           values[i], strerror(errno));
            problems++;
        }
    }
    /* Indexes into keys[]: StoreCertificate= with StoreKey=, StoreUser= with
     * StorePasswordFile=. A refused value was reported on its line already. */
    static const size_t pairs[][2] = {{1, 2}, {3, 4}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        size_t first = pairs[i][0], second = pairs[i][1];
        if (!key_lines[keys[first]] == !key_lines[keys[second]])
            continue;
        size_t set = key_lines[keys[first]] ? first : second;
        size_t unset = set == first ? second : first;
        if (!values[set])
            continue;
        cfg_errors_add(errors, path, key_lines[keys[set]], daemon_keys[keys[set]].name,
                       "needs %s= as well (they come together)", daemon_keys[keys[unset]].name);
        problems++;
    }
    /* The password goes with every request: over plain http anyone on the
     * way reads it. StoreCA= or StoreCertificate= (even one refused on its
     * line) means https. */
    bool https = key_lines[KEY_STORE_CA] || key_lines[KEY_STORE_CERTIFICATE];
    if (etcd && c->store_user && !https && !c->store_insecure) {
        cfg_errors_add(errors, path, key_lines[KEY_STORE_USER], "StoreUser",
                       "would send the etcd password in clear: without StoreCA= the store is "
                       "plain http (set StoreCA= to the CA of etcd's certificate, or "
                       "StoreInsecure=yes if the network to %s is trusted)",
                       c->store);
        problems++;
    }
    return problems;
}

/* A box takes a dead box's failover hosts no sooner than the margin after
 * its lease expired: by then that box retired its own copies, if it runs
 * at all. Unset, the grace is the margin. */
static int check_failover_grace(cfg_daemon *c, const char *path, const unsigned *key_lines,
                                cfg_errors *errors)
{
    uint64_t margin = claims_box_lease_margin(c->box_lease_usec);
    /* Unset, or refused on its line already. */
    if (c->failover_grace_usec == UINT64_MAX) {
        c->failover_grace_usec = margin;
        return 0;
    }
    if (c->failover_grace_usec >= margin)
        return 0;
    char grace[32], shown[32];
    cfg_format_duration(margin, grace, sizeof(grace));
    cfg_format_duration(c->failover_grace_usec, shown, sizeof(shown));
    cfg_errors_add(errors, path, key_lines[KEY_FAILOVER_GRACE], "FailoverGraceSec",
                   "%s is below the self-fencing margin of BoxLeaseSec= (%s): a dead box may "
                   "still be retiring its copies then (set it to %s or more)",
                   shown, grace, grace);
    return 1;
}

/* Who may control the box: the two groups differ, and the CN lists come
 * with ControlListen= (and it with them), each CN in one list only. */
static int check_control_roles(const cfg_daemon *c, const char *path, const unsigned *key_lines,
                               cfg_errors *errors)
{
    int problems = 0;
    if (c->control_group && c->viewer_group && strcmp(c->control_group, c->viewer_group) == 0) {
        cfg_errors_add(errors, path, key_lines[KEY_VIEWER_GROUP], "ViewerGroup",
                       "names ControlGroup=%s as well, whose members are operators already "
                       "(name the group of read-only users, or remove ViewerGroup=)",
                       c->control_group);
        problems++;
    }
    bool have_lists = key_lines[KEY_CONTROL_OPERATORS] || key_lines[KEY_CONTROL_VIEWERS];
    if (c->control_listen && !have_lists) {
        cfg_errors_add(errors, path, key_lines[KEY_CONTROL_LISTEN], "ControlListen",
                       "no client certificate would have a role (name their subject CNs in "
                       "ControlOperators= for those that change what runs, ControlViewers= for "
                       "those that only read)");
        problems++;
    } else if (!key_lines[KEY_CONTROL_LISTEN] && have_lists) {
        int key = key_lines[KEY_CONTROL_OPERATORS] ? KEY_CONTROL_OPERATORS : KEY_CONTROL_VIEWERS;
        cfg_errors_add(errors, path, key_lines[key], daemon_keys[key].name,
                       "names client certificates but ControlListen= is not set, so no one "
                       "would present one (add ControlListen=tls+tcp://ADDR:PORT or remove "
                       "the line)");
        problems++;
    }
    for (char *const *viewer = c->control_viewers; viewer && *viewer; viewer++)
        for (char *const *op = c->control_operators; op && *op; op++)
            if (strcmp(*viewer, *op) == 0) {
                cfg_errors_add(errors, path, key_lines[KEY_CONTROL_VIEWERS], "ControlViewers",
                               "\"%s\" is in ControlOperators= as well (keep it in one list: "
                               "operators may do everything viewers may)",
                               *viewer);
                problems++;
            }
    return problems;
}

/* Fills what the file left unset, and checks what spans several keys. A key
 * whose value was refused has been reported on its line: it counts as set
 * (so it is not "not set" as well), and the checks that need its value skip
 * it. */
static int finish(cfg_daemon *c, const char *path, const unsigned *key_lines, cfg_errors *errors)
{
    int problems = 0;
    bool store_refused = key_lines[KEY_STORE] && !c->store;
    if (!key_lines[KEY_BOX]) {
        cfg_errors_add(errors, path, 0, "Box",
                       "not set (add Box=NAME under [Activator]: a stable name for this "
                       "machine, such as its host name)");
        problems++;
    }
    if (default_string(&c->state_directory, "", "/var/lib/activator", "") < 0 ||
        default_string(&c->runtime_directory, "", "/run/activator", "") < 0 ||
        default_string(&c->hosts_directory, "", "/etc/activator/hosts", "") < 0 ||
        default_string(&c->store, "dir://", c->state_directory, "/claims") < 0 ||
        default_string(&c->control, "ipc://", c->runtime_directory, "/control.ipc") < 0 ||
        default_string(&c->events, "ipc://", c->runtime_directory, "/events.ipc") < 0 ||
        default_string(&c->registry_auth_file, "", "/etc/activator/registry-auth.json", "") < 0)
        return -ENOMEM;
    if (!key_lines[KEY_METRICS_LISTEN] && !(c->metrics_listen = strdup("127.0.0.1:9464")))
        return -ENOMEM;
    if (!key_lines[KEY_USER_DATABASE_DIRECTORY] &&
        !(c->user_database_directory = strdup("/run/systemd/userdb")))
        return -ENOMEM;

    /* The defaults derived from RuntimeDirectory= must still fit a unix
     * socket address, or the daemon would fail only when it binds. */
    static const int derived[] = {KEY_CONTROL, KEY_EVENTS};
    for (size_t i = 0; i < sizeof(derived) / sizeof(derived[0]); i++) {
        const char *url = derived[i] == KEY_CONTROL ? c->control : c->events;
        act_error err = {0};
        if (!key_lines[derived[i]] && cfg_parse_nng_url(url, CFG_URL_IPC | CFG_URL_TCP, &err) < 0) {
            cfg_errors_add(errors, path, key_lines[KEY_RUNTIME_DIRECTORY], "RuntimeDirectory",
                           "the default %s= %s (choose a shorter RuntimeDirectory= or set "
                           "%s= yourself)",
                           daemon_keys[derived[i]].name, err.message, daemon_keys[derived[i]].name);
            problems++;
        }
    }

    bool tls_any = c->tls_certificate || c->tls_key || c->tls_client_ca;
    if (c->control_listen) {
        static const int needed[] = {KEY_TLS_CERTIFICATE, KEY_TLS_KEY, KEY_TLS_CLIENT_CA};
        for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
            if (key_lines[needed[i]])
                continue;
            cfg_errors_add(errors, path, key_lines[KEY_CONTROL_LISTEN], "ControlListen",
                           "needs %s= as well (remote control requires TLS with client "
                           "certificates: set TLSCertificate=, TLSKey= and TLSClientCA=)",
                           daemon_keys[needed[i]].name);
            problems++;
        }
    } else if (tls_any && !key_lines[KEY_CONTROL_LISTEN]) {
        unsigned line = key_lines[KEY_TLS_CERTIFICATE] ? key_lines[KEY_TLS_CERTIFICATE]
                        : key_lines[KEY_TLS_KEY]       ? key_lines[KEY_TLS_KEY]
                                                       : key_lines[KEY_TLS_CLIENT_CA];
        cfg_errors_add(errors, path, line, "ControlListen",
                       "TLS files are set but ControlListen= is not, so they would be "
                       "unused (add ControlListen=tls+tcp://ADDR:PORT or remove them)");
        problems++;
    }
    problems += check_control_roles(c, path, key_lines, errors);
    problems += check_failover_grace(c, path, key_lines, errors);
    return problems + check_store_access(c, store_refused, path, key_lines, errors);
}

int cfg_resolve_control_groups(const cfg_daemon *config, gid_t *control_gid, gid_t *viewer_gid,
                               act_error *err)
{
    int r = 0;
    if (config->control_group)
        r = cfg_resolve_group("ControlGroup", config->control_group, control_gid, err);
    if (r == 0 && config->viewer_group)
        r = cfg_resolve_group("ViewerGroup", config->viewer_group, viewer_gid, err);
    if (r == 0 && config->control_group && config->viewer_group && *control_gid == *viewer_gid)
        r = act_error_set(err, EINVAL,
                          "ViewerGroup=%s is ControlGroup=%s (gid %u) on this box, whose members "
                          "are operators already; name the group of read-only users",
                          config->viewer_group, config->control_group, (unsigned)*viewer_gid);
    return r;
}

static long online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

int cfg_load_daemon(const char *path, cfg_daemon *config, cfg_errors *errors)
{
    *config = (cfg_daemon){0};
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int saved = errno;
        cfg_errors_add(errors, path, 0, NULL,
                       "cannot open: %s (create it, or name another file with --config)",
                       strerror(saved));
        return -saved;
    }
    _cleanup_(cfg_daemon_free) cfg_daemon c = {
        .claim_unclaimed = true,
        .max_concurrent_starts = (uint32_t)(2 * online_cpus()),
        .failure_backoff_max_usec = 30 * CFG_USEC_PER_SEC,
        .failure_reset_usec = 10 * CFG_USEC_PER_SEC,
        .start_budget_wait_usec = 30 * CFG_USEC_PER_SEC,
        .box_lease_usec = 10 * CFG_USEC_PER_SEC,
        .failover_grace_usec = UINT64_MAX, /* unset: the margin, once the lease is known */
        .store_watch_timeout_usec = 30 * CFG_USEC_PER_SEC,
        .dynamic_uid_min = CFG_DYNAMIC_UID_MIN,
        .dynamic_uid_max = CFG_DYNAMIC_UID_MAX,
        .host_log_max_bytes = 8 * 1024 * 1024,
        .checkpoints_keep = CKPT_DEFAULT_KEEP,
        .freeze_memory_pressure_usec = 200 * 1000,
        .build_fetch_timeout_usec = 120 * CFG_USEC_PER_SEC,
    };
    int problems = cfg_ini_parse_fd(fd, path, daemon_keys, N_KEYS, &c, c.key_lines, errors);
    if (problems < 0)
        return problems;
    int finished = finish(&c, path, c.key_lines, errors);
    if (finished < 0 || problems > 0 || finished > 0)
        return finished < 0 ? finished : -EINVAL;
    *config = TAKE_STRUCT(c);
    return 0;
}

unsigned cfg_daemon_key_line(const cfg_daemon *config, const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(daemon_keys[i].name, key) == 0)
            return config->key_lines[i];
    return 0;
}

const char *cfg_daemon_key_at(size_t i, const char **section)
{
    if (i >= N_KEYS)
        return NULL;
    if (section)
        *section = daemon_keys[i].section;
    return daemon_keys[i].name;
}
