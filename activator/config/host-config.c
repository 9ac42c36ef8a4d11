/* One host file: [Host], [Listen] and [Limits]. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "claims/claims.h"
#include "activator/config/config-internal.h"
#include "activator/config/config.h"
#include "activator/config/parse/account.h"
#include "activator/config/parse/capabilities.h"
#include "activator/config/parse/duration.h"
#include "activator/config/parse/env.h"
#include "activator/config/parse/number.h"
#include "activator/config/parse/path.h"
#include "activator/config/parse/size.h"
#include "claims/claims.h"
#include "common/cleanup.h"
#include "common/names.h"
#include "common/paths.h"
#include "common/split-argv.h"
#include "common/text.h"

/* More sockets than this for one host is a generated file gone wrong. */
#define LISTEN_MAX 64

void cfg_host_free(cfg_host *host)
{
    free(host->name);
    act_strv_free(host->exec_argv);
    act_strv_free(host->environment);
    free(host->user);
    free(host->group);
    act_strv_free(host->exec_restore);
    act_strv_free(host->exec_replicate);
    act_strv_free(host->exec_checkpoint);
    act_strv_free(host->read_write_paths);
    act_strv_free(host->failover_boxes);
    probe_spec_clear(&host->ready);
    if (host->health_check) {
        probe_spec_clear(host->health_check);
        free(host->health_check);
    }
    free(host->listen);
    free(host->listen_lines);
    cfg_syscall_filter_clear(&host->limits.syscall_filter);
    *host = (cfg_host){0};
}

void cfg_hosts_free(cfg_host *hosts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cfg_host_free(&hosts[i]);
    free(hosts);
}

/* What the key table's apply functions are given: the host being read, and
 * where each key was last set (the parser notes the line before it applies
 * a value), for a key that keeps the line of every value it takes. The
 * host comes first, so the functions that need only it take the pointer as
 * a cfg_host. */
typedef struct host_parse {
    cfg_host host;
    const unsigned *key_lines;
} host_parse;

enum {
    KEY_EXEC,
    KEY_ENVIRONMENT,
    KEY_USER,
    KEY_GROUP,
    KEY_AMBIENT_CAPABILITIES,
    KEY_READY,
    KEY_READY_TIMEOUT,
    KEY_PROBE_TIMEOUT,
    KEY_WAKE_TIMEOUT,
    KEY_HEALTH_CHECK,
    KEY_STOP_TIMEOUT,
    KEY_IDLE_TIMEOUT,
    KEY_WATCHDOG,
    KEY_HEALTH_CHECK_INTERVAL,
    KEY_HEALTH_CHECK_FAILURES,
    KEY_MAX_STARTS,
    KEY_EXEC_RESTORE,
    KEY_EXEC_REPLICATE,
    KEY_REPLICATE_RESTART,
    KEY_REPLICATE_RESTART_SEC,
    KEY_REPLICATE_REQUIRED,
    KEY_EXEC_CHECKPOINT,
    KEY_STATE,
    KEY_CHECKPOINT_LIVE,
    KEY_RESTORE_REQUIRES_SAME_BUILD,
    KEY_CHECKPOINT_TIMEOUT,
    KEY_CHECKPOINT_EVERY,
    KEY_FAILOVER,
    KEY_FAILOVER_BOXES,
    KEY_START_RATE_LIMIT,
    KEY_LISTEN_STREAM,
    KEY_BACKLOG,
    KEY_MEMORY_MAX,
    KEY_MEMORY_HIGH,
    KEY_PIDS_MAX,
    KEY_LIMIT_NOFILE,
    KEY_PRIVATE_TMP_SIZE,
    KEY_CPU_QUOTA,
    KEY_CPU_WEIGHT,
    KEY_SYSTEM_CALL_FILTER,
    KEY_RELEASES_KEEP,
    KEY_READ_WRITE_PATHS,
    KEY_FILESYSTEM_VIEW,
    KEY_PRIVATE_IPC,
    KEY_PRIVATE_NETWORK,
    KEY_PARK_MODE,
    KEY_FROZEN_MAX,
    KEY_THAW_CHECK,
    N_KEYS,
};

/* The probe and listen parsers put "WHERE: " in front of their messages; the
 * config error line already names file, line and key. */
static int reword(int r, act_error *err)
{
    if (r < 0 && strncmp(err->message, ": ", 2) == 0)
        memmove(err->message, err->message + 2, strlen(err->message + 2) + 1);
    return r;
}

static int apply_exec(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    _cleanup_(act_strv_freep) char **argv = NULL;
    int r = act_split_argv(value, &argv, err);
    if (r < 0)
        return r;
    r = cfg_parse_build_path(argv[0] ? argv[0] : "", err);
    if (r < 0)
        return r;
    h->exec_argv = TAKE_PTR(argv);
    return 0;
}

/* ExecRestore= and ExecReplicate= run tools of the machine, not of the
 * build: an absolute program path, then arguments. */
static int parse_host_command(const char *value, char ***out, act_error *err)
{
    _cleanup_(act_strv_freep) char **argv = NULL;
    int r = act_split_argv(value, &argv, err);
    if (r < 0)
        return r;
    act_error path_err = {0};
    if (act_path_check_absolute(argv[0] ? argv[0] : "", &path_err) < 0)
        return act_error_set(err, EINVAL, "the program %s", path_err.message);
    *out = TAKE_PTR(argv);
    return 0;
}

static int apply_exec_restore(void *target, const char *value, act_error *err)
{
    return parse_host_command(value, &((cfg_host *)target)->exec_restore, err);
}

static int apply_exec_replicate(void *target, const char *value, act_error *err)
{
    return parse_host_command(value, &((cfg_host *)target)->exec_replicate, err);
}

static int apply_replicate_restart(void *target, const char *value, act_error *err)
{
    static const struct {
        const char *word;
        cfg_replicate_restart policy;
    } policies[] = {
        {"on-failure", CFG_REPLICATE_RESTART_ON_FAILURE},
        {"always", CFG_REPLICATE_RESTART_ALWAYS},
        {"no", CFG_REPLICATE_RESTART_NO},
    };
    for (size_t i = 0; i < ARRAY_SIZE(policies); i++)
        if (strcmp(value, policies[i].word) == 0) {
            ((cfg_host *)target)->replicate_restart = (uint8_t)policies[i].policy;
            return 0;
        }
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a restart policy (use on-failure, the default: the "
                         "replica is started again after it fails; always: after any exit; or "
                         "no: never)",
                         act_text_show(value, shown, sizeof(shown)));
}

static int apply_replicate_restart_sec(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_REPLICATE_RESTART_USEC_MIN,
                                    CFG_REPLICATE_RESTART_USEC_MAX,
                                    &((cfg_host *)target)->replicate_restart_usec, err);
}

static int apply_replicate_required(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_host *)target)->replicate_required, err);
}

static int apply_exec_checkpoint(void *target, const char *value, act_error *err)
{
    return parse_host_command(value, &((cfg_host *)target)->exec_checkpoint, err);
}

/* What a move carries: the state directory (dir), or nothing (none, a
 * host whose state lives elsewhere, such as in a database). */
static int apply_state(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    if (strcmp(value, "dir") == 0 || strcmp(value, "none") == 0) {
        h->stateless = strcmp(value, "none") == 0;
        return 0;
    }
    return act_error_set(err, EINVAL,
                         "is not dir or none (dir: the state directory is checkpointed and "
                         "restored; none: the host has no state to carry)");
}

static int apply_checkpoint_live(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_host *)target)->checkpoint_live, err);
}

static int apply_restore_requires_same_build(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_host *)target)->restore_requires_same_build, err);
}

static int apply_checkpoint_timeout(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_host *)target)->checkpoint_timeout_usec, err);
}

static int apply_failover(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_host *)target)->failover, err);
}

/* Box names, added to those of earlier lines (each once); an empty value
 * clears them. */
static int apply_failover_boxes(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    _cleanup_(act_strv_freep) char **words = NULL;
    int r = act_split_argv(value, &words, err);
    if (r < 0)
        return r;
    size_t n_words = act_strv_length(words);
    if (n_words == 0) {
        act_strv_free(h->failover_boxes);
        h->failover_boxes = NULL;
        return 0;
    }
    for (size_t i = 0; i < n_words; i++) {
        act_error why = {0};
        if (act_name_check("box", words[i], &why) < 0)
            return act_error_set(err, EINVAL, "%s", why.message);
    }
    size_t n = act_strv_length(h->failover_boxes);
    char **grown = realloc(h->failover_boxes, (n + n_words + 1) * sizeof(char *));
    if (!grown)
        return act_error_set(err, ENOMEM, "out of memory");
    h->failover_boxes = grown;
    grown[n] = NULL;
    for (size_t i = 0; i < n_words; i++) {
        bool listed = false;
        for (size_t j = 0; j < n && !listed; j++)
            listed = strcmp(grown[j], words[i]) == 0;
        if (listed)
            continue;
        if (n == CLAIM_FAILOVER_BOXES_MAX)
            return act_error_set(err, E2BIG, "names more than %d boxes, the most a claim holds",
                                 CLAIM_FAILOVER_BOXES_MAX);
        if (!(grown[n] = strdup(words[i])))
            return act_error_set(err, ENOMEM, "out of memory");
        grown[++n] = NULL;
    }
    return 0;
}

/* 0 (the default) takes none; else 1 s to a day. */
static int apply_checkpoint_every(void *target, const char *value, act_error *err)
{
    uint64_t *every = &((cfg_host *)target)->checkpoint_every_usec;
    if (strcmp(value, "0") == 0) {
        *every = 0;
        return 0;
    }
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 86400 * CFG_USEC_PER_SEC, every, err);
}

static int apply_park_mode(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    if (strcmp(value, "stop") == 0 || strcmp(value, "freeze") == 0) {
        h->park_freeze = strcmp(value, "freeze") == 0;
        return 0;
    }
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a park mode (use stop, the default: an idle generation "
                         "is retired; or freeze: it is frozen and the next connection thaws it)",
                         act_text_show(value, shown, sizeof(shown)));
}

static int apply_frozen_max(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 30 * 86400 * CFG_USEC_PER_SEC,
                                    &((cfg_host *)target)->frozen_max_usec, err);
}

static int apply_thaw_check(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    if (strcmp(value, "claim") == 0 || strcmp(value, "cached") == 0) {
        h->thaw_check_cached = strcmp(value, "cached") == 0;
        return 0;
    }
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a thaw check (use claim, the default: the claim is read "
                         "from the store before a thaw; or cached: the claim watch is trusted)",
                         act_text_show(value, shown, sizeof(shown)));
}

static int apply_environment(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    if (value[0] == '\0') {
        act_strv_free(h->environment);
        h->environment = NULL;
        return 0;
    }
    char **words = NULL;
    int r = act_split_argv(value, &words, err);
    if (r < 0)
        return r;
    size_t n_words = act_strv_length(words);
    for (size_t i = 0; i < n_words && r >= 0; i++)
        r = cfg_parse_env_assignment(words[i], err);
    /* Only when every word is valid are they merged, a later KEY replacing
     * an earlier one; a bad line changes nothing. */
    for (size_t i = 0; i < n_words && r >= 0; i++) {
        size_t n = act_strv_length(h->environment), j;
        for (j = 0; j < n && !cfg_env_same_key(h->environment[j], words[i]); j++)
            ;
        if (j < n) {
            free(h->environment[j]);
            h->environment[j] = TAKE_PTR(words[i]);
            continue;
        }
        char **grown = realloc(h->environment, (n + 2) * sizeof(char *));
        if (!grown) {
            r = act_error_set(err, ENOMEM, "out of memory");
            break;
        }
        grown[n] = TAKE_PTR(words[i]);
        grown[n + 1] = NULL;
        h->environment = grown;
    }
    for (size_t i = 0; i < n_words; i++)
        free(words[i]);
    free(words);
    return r < 0 ? r : 0;
}

static int apply_user(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    int r = cfg_parse_account_name("user", value, err);
    if (r < 0)
        return r;
    return (h->user = strdup(value)) ? 0 : act_error_set(err, ENOMEM, "out of memory");
}

static int apply_group(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    int r = cfg_parse_account_name("group", value, err);
    if (r < 0)
        return r;
    return (h->group = strdup(value)) ? 0 : act_error_set(err, ENOMEM, "out of memory");
}

static int apply_ambient_capabilities(void *target, const char *value, act_error *err)
{
    return cfg_parse_capabilities(value, &((cfg_host *)target)->ambient_capabilities, err);
}

static int apply_ready(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    probe_spec spec = {0};
    int r = reword(probe_parse(value, "", &spec, err), err);
    if (r < 0)
        return r;
    probe_spec_clear(&h->ready);
    h->ready = spec;
    return 0;
}

static int apply_health_check(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    if (strcmp(value, "notify") == 0)
        return act_error_set(err, EINVAL,
                             "notify says when an app is ready, it cannot check its health (use "
                             "tcp:ADDR:PORT, unix:PATH or exec:PATH ARGS, or remove the line)");
    probe_spec *spec = calloc(1, sizeof(*spec));
    if (!spec)
        return act_error_set(err, ENOMEM, "out of memory");
    int r = reword(probe_parse(value, "", spec, err), err);
    if (r < 0) {
        free(spec);
        return r;
    }
    h->health_check = spec;
    return 0;
}

static int apply_ready_timeout(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 30 * CFG_USEC_PER_SEC,
                                    &((cfg_host *)target)->ready_timeout_usec, err);
}

/* A move's probe includes a restore and the attempts' ready windows, so it
 * may be longer than one ready window; a move waits this long at most with
 * the host serving nowhere, hence the cap. */
static int apply_probe_timeout(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, CFG_USEC_PER_SEC, 600 * CFG_USEC_PER_SEC,
                                    &((cfg_host *)target)->probe_timeout_usec, err);
}

static int apply_stop_timeout(void *target, const char *value, act_error *err)
{
    return cfg_parse_duration_range(value, 0, 3600 * CFG_USEC_PER_SEC,
                                    &((cfg_host *)target)->stop_timeout_usec, err);
}

/* A span from min_usec to max_usec, or infinity, which is stored as 0 (as
 * systemd spells "no timeout"). */
static int parse_span_or_infinity(const char *value, uint64_t min_usec, uint64_t max_usec,
                                  uint64_t *usec, act_error *err)
{
    uint64_t parsed;
    if (cfg_parse_duration(value, &parsed, NULL) == 0 && parsed == CFG_USEC_INFINITY) {
        *usec = 0;
        return 0;
    }
    return cfg_parse_duration_range(value, min_usec, max_usec, usec, err);
}

/* 0 and infinity both mean "never park when idle". */
static int apply_idle_timeout(void *target, const char *value, act_error *err)
{
    return parse_span_or_infinity(value, 0, 365 * 86400 * CFG_USEC_PER_SEC,
                                  &((cfg_host *)target)->idle_timeout_usec, err);
}

/* infinity: no bound, as before the key (MaxStarts= ready windows and
 * their backoffs bound a wake then). */
static int apply_wake_timeout(void *target, const char *value, act_error *err)
{
    return parse_span_or_infinity(value, CFG_USEC_PER_SEC, 3600 * CFG_USEC_PER_SEC,
                                  &((cfg_host *)target)->wake_timeout_usec, err);
}

/* A span where 0 and infinity both mean "none": no watchdog, no repeated
 * check. Anything else is at least 100 ms, because a deadline within the
 * loop's own scheduling noise would retire healthy apps. */
static int parse_optional_span(const char *value, uint64_t *usec, act_error *err)
{
    const uint64_t min_usec = CFG_USEC_PER_SEC / 10, max_usec = 365 * 86400 * CFG_USEC_PER_SEC;
    uint64_t parsed;
    int r = cfg_parse_duration(value, &parsed, err);
    if (r < 0)
        return r;
    if (parsed == 0 || parsed == CFG_USEC_INFINITY) {
        *usec = 0;
        return 0;
    }
    if (parsed < min_usec || parsed > max_usec) {
        char shown[ACT_TEXT_SHOW_MAX], lo[64], hi[64];
        cfg_format_duration(min_usec, lo, sizeof(lo));
        cfg_format_duration(max_usec, hi, sizeof(hi));
        return act_error_set(err, ERANGE,
                             "%s is out of range (use %s to %s, or 0 or infinity for none)",
                             act_text_show(value, shown, sizeof(shown)), lo, hi);
    }
    *usec = parsed;
    return 0;
}

static int apply_watchdog(void *target, const char *value, act_error *err)
{
    return parse_optional_span(value, &((cfg_host *)target)->watchdog_usec, err);
}

static int apply_health_check_interval(void *target, const char *value, act_error *err)
{
    return parse_optional_span(value, &((cfg_host *)target)->health_check_interval_usec, err);
}

static int apply_health_check_failures(void *target, const char *value, act_error *err)
{
    uint64_t n;
    int r = cfg_parse_uint(value, 1, 100, &n, err);
    if (r < 0)
        return r;
    ((cfg_host *)target)->health_check_failures = (uint8_t)n;
    return 0;
}

static int apply_releases_keep(void *target, const char *value, act_error *err)
{
    uint64_t n;
    int r = cfg_parse_uint(value, 0, CFG_RELEASES_KEEP_MAX, &n, err);
    if (r < 0)
        return r;
    ((cfg_host *)target)->releases_keep = (uint16_t)n;
    return 0;
}

static int apply_max_starts(void *target, const char *value, act_error *err)
{
    uint64_t n;
    int r = cfg_parse_uint(value, 1, 5, &n, err);
    if (r < 0)
        return r;
    ((cfg_host *)target)->max_starts = (uint8_t)n;
    return 0;
}

static int apply_start_rate_limit(void *target, const char *value, act_error *err)
{
    return cfg_parse_rate(value, 1e6, &((cfg_host *)target)->start_rate_limit, err);
}

/* systemd.socket(5)'s stream forms: ADDR:PORT, [V6]:PORT, /PATH, and a bare
 * PORT for every address of the box. An empty value clears the list. */
static int apply_listen_stream(void *target, const char *value, act_error *err)
{
    host_parse *parse = target;
    cfg_host *h = &parse->host;
    if (value[0] == '\0') {
        free(h->listen);
        free(h->listen_lines);
        h->listen = NULL;
        h->listen_lines = NULL;
        h->n_listen = 0;
        return 0;
    }
    lsn_address address;
    int r = reword(lsn_parse_stream(value, "", &address, err), err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < h->n_listen; i++)
        if (lsn_address_equal(&h->listen[i], &address))
            return act_error_set(err, EEXIST, "%s is already listed (remove the repeat)", value);
    if (h->n_listen >= LISTEN_MAX)
        return act_error_set(err, E2BIG, "more than %d sockets for one host (split the host)",
                             LISTEN_MAX);
    lsn_address *grown = realloc(h->listen, (h->n_listen + 1u) * sizeof(*grown));
    if (!grown)
        return act_error_set(err, ENOMEM, "out of memory");
    h->listen = grown;
    unsigned *lines = realloc(h->listen_lines, (h->n_listen + 1u) * sizeof(*lines));
    if (!lines)
        return act_error_set(err, ENOMEM, "out of memory");
    h->listen_lines = lines;
    /* The parser notes the line before it applies the value. */
    h->listen_lines[h->n_listen] = parse->key_lines[KEY_LISTEN_STREAM];
    h->listen[h->n_listen++] = address;
    return 0;
}

static int apply_backlog(void *target, const char *value, act_error *err)
{
    uint64_t n;
    int r = cfg_parse_uint(value, 1, 65535, &n, err);
    if (r < 0)
        return r;
    ((cfg_host *)target)->backlog = (uint32_t)n;
    return 0;
}

static int apply_memory_max(void *target, const char *value, act_error *err)
{
    return cfg_parse_size(value, &((cfg_host *)target)->limits.memory_max, err);
}

static int apply_memory_high(void *target, const char *value, act_error *err)
{
    return cfg_parse_size(value, &((cfg_host *)target)->limits.memory_high, err);
}

static int apply_pids_max(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    if (strcmp(value, "infinity") == 0) {
        h->limits.pids_max = CFG_LIMIT_INFINITY;
        return 0;
    }
    /* The kernel's pid_max tops out at 4194304 (PID_MAX_LIMIT). */
    return cfg_parse_uint(value, 1, 4194304, &h->limits.pids_max, err);
}

/* LimitNOFILE=N, or SOFT:HARD as systemd writes it; the soft limit not
 * above the hard one, both at most fs.nr_open's default. */
static int apply_limit_nofile(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    char soft_text[32];
    const char *colon = strchr(value, ':');
    size_t soft_len = colon ? (size_t)(colon - value) : strlen(value);
    if (soft_len == 0 || soft_len >= sizeof(soft_text))
        return act_error_set(err, EINVAL,
                             "\"%.40s\" is not a number of files, or SOFT:HARD (e.g. 65536 or "
                             "1024:65536)",
                             value);
    memcpy(soft_text, value, soft_len);
    soft_text[soft_len] = '\0';
    uint64_t soft, hard;
    int r = cfg_parse_uint(soft_text, 1, CFG_NOFILE_MAX, &soft, err);
    if (r < 0)
        return r;
    hard = soft;
    if (colon && (r = cfg_parse_uint(colon + 1, 1, CFG_NOFILE_MAX, &hard, err)) < 0)
        return r;
    if (soft > hard)
        return act_error_set(err, EINVAL,
                             "the soft limit %llu is above the hard limit %llu (write SOFT:HARD "
                             "with SOFT no higher)",
                             (unsigned long long)soft, (unsigned long long)hard);
    h->limits.nofile_soft = soft;
    h->limits.nofile_hard = hard;
    return 0;
}

/* PrivateTmpSize=: a size from 1M, or infinity. */
static int apply_private_tmp_size(void *target, const char *value, act_error *err)
{
    uint64_t *size = &((cfg_host *)target)->limits.private_tmp_size;
    int r = cfg_parse_size(value, size, err);
    if (r == 0 && *size != CFG_LIMIT_INFINITY && *size < 1024 * 1024)
        return act_error_set(err, EINVAL,
                             "\"%.40s\" is below 1M: a private /tmp that small breaks programs "
                             "(write a size like 256M, or infinity)",
                             value);
    return r;
}

static int apply_cpu_quota(void *target, const char *value, act_error *err)
{
    return cfg_parse_percent(value, 1, 100000, &((cfg_host *)target)->limits.cpu_quota_percent,
                             err);
}

static int apply_cpu_weight(void *target, const char *value, act_error *err)
{
    uint64_t n;
    int r = cfg_parse_uint(value, 1, 10000, &n, err);
    if (r < 0)
        return r;
    ((cfg_host *)target)->limits.cpu_weight = (uint16_t)n;
    return 0;
}

static int apply_syscall_filter(void *target, const char *value, act_error *err)
{
    return cfg_parse_syscall_filter(value, &((cfg_host *)target)->limits.syscall_filter, err);
}

/* systemd's syntax: paths separated by blanks (quotes for one with a
 * blank), each line adding to the list, an empty one clearing it; a path
 * listed twice counts once. A bad word changes nothing. */
static int apply_read_write_paths(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    char **words = NULL;
    int r = act_split_argv(value, &words, err);
    if (r < 0)
        return r;
    size_t n_words = act_strv_length(words);
    if (n_words == 0) {
        act_strv_free(h->read_write_paths);
        h->read_write_paths = NULL;
    }
    for (size_t i = 0; i < n_words && r >= 0; i++)
        r = cfg_parse_read_write_path(words[i], err);
    size_t n = act_strv_length(h->read_write_paths);
    char **grown = r >= 0 && n_words ? realloc(h->read_write_paths,
                                               (n + n_words + 1) * sizeof(char *))
                                     : NULL;
    if (r >= 0 && n_words && !grown)
        r = act_error_set(err, ENOMEM, "out of memory");
    if (grown) {
        h->read_write_paths = grown;
        for (size_t i = 0; i < n_words; i++) {
            bool listed = false;
            for (size_t j = 0; j < n && !listed; j++)
                listed = strcmp(grown[j], words[i]) == 0;
            if (!listed)
                grown[n++] = TAKE_PTR(words[i]);
        }
        grown[n] = NULL;
    }
    /* Words taken leave NULL holes, so not act_strv_free. */
    for (size_t i = 0; i < n_words; i++)
        free(words[i]);
    free(words);
    return r < 0 ? r : 0;
}

static int apply_filesystem_view(void *target, const char *value, act_error *err)
{
    cfg_host *h = target;
    if (strcmp(value, "private") == 0 || strcmp(value, "box") == 0) {
        h->filesystem_box = strcmp(value, "box") == 0;
        return 0;
    }
    char shown[ACT_TEXT_SHOW_MAX];
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a view (use private, the default: / read-only, the "
                         "state directory and ReadWritePaths= writable, the daemon's files "
                         "hidden; or box, the box's whole filesystem as the daemon sees it)",
                         act_text_show(value, shown, sizeof(shown)));
}

/* MemoryMax= not set: CFG_MEMORY_MAX_DEFAULT of the box's memory, unless
 * MemoryHigh= throttles above that, which the default would then cut off
 * before it ever throttled: the operator's MemoryHigh= is the limit then. */
uint64_t cfg_memory_max_default(void)
{
    uint64_t share = 0;
    act_error unused = {0};
    return cfg_parse_size(CFG_MEMORY_MAX_DEFAULT, &share, &unused) < 0 ? 0 : share;
}

static void default_memory_max(cfg_limits *limits)
{
    uint64_t share = cfg_memory_max_default();
    limits->memory_max_is_default = true;
    limits->memory_max = 0;
    if (!share)
        return; /* a box whose memory size is unknown: no default */
    if (limits->memory_high && limits->memory_high != CFG_LIMIT_INFINITY &&
        limits->memory_high >= share)
        return;
    limits->memory_max = share;
}

static int apply_private_ipc(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_host *)target)->private_ipc, err);
}

static int apply_private_network(void *target, const char *value, act_error *err)
{
    return cfg_parse_bool(value, &((cfg_host *)target)->private_network, err);
}

static const cfg_ini_key host_keys[N_KEYS] = {
    [KEY_EXEC] = {"Host", "Exec", apply_exec, false},
    [KEY_ENVIRONMENT] = {"Host", "Environment", apply_environment, true},
    [KEY_USER] = {"Host", "User", apply_user, false},
    [KEY_GROUP] = {"Host", "Group", apply_group, false},
    [KEY_AMBIENT_CAPABILITIES] = {"Host", "AmbientCapabilities", apply_ambient_capabilities, true},
    [KEY_READY] = {"Host", "Ready", apply_ready, false},
    [KEY_READY_TIMEOUT] = {"Host", "ReadyTimeoutSec", apply_ready_timeout, false},
    [KEY_PROBE_TIMEOUT] = {"Host", "ProbeTimeoutSec", apply_probe_timeout, false},
    [KEY_WAKE_TIMEOUT] = {"Host", "WakeTimeoutSec", apply_wake_timeout, false},
    [KEY_HEALTH_CHECK] = {"Host", "HealthCheck", apply_health_check, false},
    [KEY_STOP_TIMEOUT] = {"Host", "StopTimeoutSec", apply_stop_timeout, false},
    [KEY_IDLE_TIMEOUT] = {"Host", "IdleTimeoutSec", apply_idle_timeout, false},
    [KEY_WATCHDOG] = {"Host", "WatchdogSec", apply_watchdog, false},
    [KEY_HEALTH_CHECK_INTERVAL] = {"Host", "HealthCheckIntervalSec", apply_health_check_interval,
                                   false},
    [KEY_HEALTH_CHECK_FAILURES] = {"Host", "HealthCheckFailures", apply_health_check_failures,
                                   false},
    [KEY_MAX_STARTS] = {"Host", "MaxStarts", apply_max_starts, false},
    [KEY_EXEC_RESTORE] = {"Host", "ExecRestore", apply_exec_restore, false},
    [KEY_EXEC_REPLICATE] = {"Host", "ExecReplicate", apply_exec_replicate, false},
    [KEY_REPLICATE_RESTART] = {"Host", "ReplicateRestart", apply_replicate_restart, false},
    [KEY_REPLICATE_RESTART_SEC] = {"Host", "ReplicateRestartSec", apply_replicate_restart_sec,
                                   false},
    [KEY_REPLICATE_REQUIRED] = {"Host", "ReplicateRequired", apply_replicate_required, false},
    [KEY_EXEC_CHECKPOINT] = {"Host", "ExecCheckpoint", apply_exec_checkpoint, false},
    [KEY_STATE] = {"Host", "State", apply_state, false},
    [KEY_CHECKPOINT_LIVE] = {"Host", "CheckpointLive", apply_checkpoint_live, false},
    [KEY_RESTORE_REQUIRES_SAME_BUILD] = {"Host", "RestoreRequiresSameBuild",
                                         apply_restore_requires_same_build, false},
    [KEY_CHECKPOINT_TIMEOUT] = {"Host", "CheckpointTimeoutSec", apply_checkpoint_timeout, false},
    [KEY_CHECKPOINT_EVERY] = {"Host", "CheckpointEverySec", apply_checkpoint_every, false},
    [KEY_FAILOVER] = {"Host", "Failover", apply_failover, false},
    [KEY_FAILOVER_BOXES] = {"Host", "FailoverBoxes", apply_failover_boxes, true},
    [KEY_START_RATE_LIMIT] = {"Host", "StartRateLimit", apply_start_rate_limit, false},
    [KEY_LISTEN_STREAM] = {"Listen", "ListenStream", apply_listen_stream, true},
    [KEY_BACKLOG] = {"Listen", "Backlog", apply_backlog, false},
    [KEY_MEMORY_MAX] = {"Limits", "MemoryMax", apply_memory_max, false},
    [KEY_MEMORY_HIGH] = {"Limits", "MemoryHigh", apply_memory_high, false},
    [KEY_PIDS_MAX] = {"Limits", "PidsMax", apply_pids_max, false},
    [KEY_LIMIT_NOFILE] = {"Limits", "LimitNOFILE", apply_limit_nofile, false},
    [KEY_PRIVATE_TMP_SIZE] = {"Limits", "PrivateTmpSize", apply_private_tmp_size, false},
    [KEY_CPU_QUOTA] = {"Limits", "CPUQuota", apply_cpu_quota, false},
    [KEY_CPU_WEIGHT] = {"Limits", "CPUWeight", apply_cpu_weight, false},
    [KEY_SYSTEM_CALL_FILTER] = {"Limits", "SystemCallFilter", apply_syscall_filter, true},
    [KEY_RELEASES_KEEP] = {"Host", "ReleasesKeep", apply_releases_keep, false},
    [KEY_READ_WRITE_PATHS] = {"Host", "ReadWritePaths", apply_read_write_paths, true},
    [KEY_FILESYSTEM_VIEW] = {"Host", "FilesystemView", apply_filesystem_view, false},
    [KEY_PRIVATE_IPC] = {"Host", "PrivateIPC", apply_private_ipc, false},
    [KEY_PRIVATE_NETWORK] = {"Host", "PrivateNetwork", apply_private_network, false},
    [KEY_PARK_MODE] = {"Host", "ParkMode", apply_park_mode, false},
    [KEY_FROZEN_MAX] = {"Host", "FrozenMaxSec", apply_frozen_max, false},
    [KEY_THAW_CHECK] = {"Host", "ThawCheck", apply_thaw_check, false},
};

/* The keys that shape the replica mean nothing without ExecReplicate=, and
 * a restart's wait nothing when nothing restarts: each such line is
 * reported, so the operator learns the file does not do what it says. */
static int check_replicate_keys(const cfg_host *h, const char *path, const unsigned *key_lines,
                                cfg_errors *errors)
{
    static const int shaping[] = {KEY_REPLICATE_RESTART, KEY_REPLICATE_RESTART_SEC,
                                  KEY_REPLICATE_REQUIRED};
    int problems = 0;
    if (!key_lines[KEY_EXEC_REPLICATE]) {
        for (size_t i = 0; i < ARRAY_SIZE(shaping); i++) {
            int key = shaping[i];
            if (!key_lines[key])
                continue;
            cfg_errors_add(errors, path, key_lines[key], host_keys[key].name,
                           "set without ExecReplicate=, so there is no replica it could apply "
                           "to (set ExecReplicate= too, or remove %s=)",
                           host_keys[key].name);
            problems++;
        }
        return problems;
    }
    if (key_lines[KEY_REPLICATE_RESTART_SEC] && h->replicate_restart == CFG_REPLICATE_RESTART_NO) {
        cfg_errors_add(errors, path, key_lines[KEY_REPLICATE_RESTART_SEC], "ReplicateRestartSec",
                       "set with ReplicateRestart=no, which never restarts the replica (remove "
                       "it, or set ReplicateRestart=on-failure or always)");
        problems++;
    }
    return problems;
}

/* Checks what spans keys. A key whose value was refused has been reported
 * on its line: it counts as set (so it is not "not set" as well), and the
 * checks that need its value skip it. */
static int finish(cfg_host *h, const char *path, const unsigned *key_lines, cfg_errors *errors)
{
    int problems = 0;
    if (!key_lines[KEY_EXEC]) {
        cfg_errors_add(errors, path, 0, "Exec",
                       "not set (add Exec=PATH ARGS under [Host], PATH inside the staged "
                       "build, like Exec=bin/server --port 8080)");
        problems++;
    }
    if (h->group && !key_lines[KEY_USER]) {
        cfg_errors_add(errors, path, key_lines[KEY_GROUP], "Group",
                       "set without User= (set User= too, or remove Group=)");
        problems++;
    }
    /* A refused HealthCheck= was reported on its line: it counts as set. */
    if (h->health_check_interval_usec && !key_lines[KEY_HEALTH_CHECK]) {
        cfg_errors_add(errors, path, key_lines[KEY_HEALTH_CHECK_INTERVAL], "HealthCheckIntervalSec",
                       "set without HealthCheck= (add HealthCheck=tcp:ADDR:PORT, unix:PATH or "
                       "exec:PATH ARGS, or remove HealthCheckIntervalSec=)");
        problems++;
    }
    /* Only an accepted count is above 0 here (the default is filled in
     * after these rules). */
    if (h->health_check_failures && !key_lines[KEY_HEALTH_CHECK_INTERVAL]) {
        cfg_errors_add(errors, path, key_lines[KEY_HEALTH_CHECK_FAILURES], "HealthCheckFailures",
                       "set without HealthCheckIntervalSec= (it counts repeated checks; set "
                       "HealthCheckIntervalSec= too, or remove HealthCheckFailures=)");
        problems++;
    }
    if (!h->health_check_failures)
        h->health_check_failures = 3;
    if (h->failover_boxes && !h->failover) {
        cfg_errors_add(errors, path, key_lines[KEY_FAILOVER_BOXES], "FailoverBoxes",
                       "set without Failover=yes (it names the boxes that may take the host "
                       "over; set Failover=yes too, or remove FailoverBoxes=)");
        problems++;
    }
    if (h->checkpoint_every_usec && h->stateless) {
        cfg_errors_add(errors, path, key_lines[KEY_CHECKPOINT_EVERY], "CheckpointEverySec",
                       "set with State=none, which has no state to checkpoint (remove "
                       "CheckpointEverySec=, or set State=dir)");
        problems++;
    }
    if (h->checkpoint_live && !key_lines[KEY_EXEC_CHECKPOINT]) {
        cfg_errors_add(errors, path, key_lines[KEY_CHECKPOINT_LIVE], "CheckpointLive",
                       "set without ExecCheckpoint= (the built-in checkpoint parks the host "
                       "first; set ExecCheckpoint= to a program that can snapshot a live host, "
                       "or remove CheckpointLive=)");
        problems++;
    }
    /* A checkpoint of another transport is fetched by that transport's own
     * restore: the built-in one would look for it in Checkpoints= and fail
     * the wake. */
    if (key_lines[KEY_EXEC_CHECKPOINT] && !key_lines[KEY_EXEC_RESTORE] && !h->stateless) {
        cfg_errors_add(errors, path, key_lines[KEY_EXEC_CHECKPOINT], "ExecCheckpoint",
                       "set without ExecRestore=, so what it writes could never be restored "
                       "(set ExecRestore= to the program that fetches a checkpoint by its id, "
                       "or remove ExecCheckpoint= to use the built-in Checkpoints=)");
        problems++;
    }
    problems += check_replicate_keys(h, path, key_lines, errors);
    if (h->stateless && (key_lines[KEY_EXEC_CHECKPOINT] || key_lines[KEY_EXEC_RESTORE])) {
        int key = key_lines[KEY_EXEC_CHECKPOINT] ? KEY_EXEC_CHECKPOINT : KEY_EXEC_RESTORE;
        cfg_errors_add(errors, path, key_lines[key], host_keys[key].name,
                       "set with State=none, which has no state to checkpoint or restore "
                       "(remove it, or set State=dir)");
        problems++;
    }
    uint64_t high = h->limits.memory_high, max = h->limits.memory_max;
    if (high && max && high != CFG_LIMIT_INFINITY && max != CFG_LIMIT_INFINITY && high > max) {
        cfg_errors_add(errors, path, key_lines[KEY_MEMORY_HIGH], "MemoryHigh",
                       "is above MemoryMax=, so it would never throttle (make it lower "
                       "than MemoryMax= or remove it)");
        problems++;
    }
    h->limits.pids_max_is_default = !key_lines[KEY_PIDS_MAX];
    if (!key_lines[KEY_MEMORY_MAX])
        default_memory_max(&h->limits);
    h->lines = (cfg_host_lines){
        .user = key_lines[KEY_USER],
        .group = key_lines[KEY_GROUP],
        .ambient_capabilities = key_lines[KEY_AMBIENT_CAPABILITIES],
        .memory_max = key_lines[KEY_MEMORY_MAX],
        .memory_high = key_lines[KEY_MEMORY_HIGH],
        .pids_max = key_lines[KEY_PIDS_MAX],
        .cpu_quota = key_lines[KEY_CPU_QUOTA],
        .cpu_weight = key_lines[KEY_CPU_WEIGHT],
        .system_call_filter = key_lines[KEY_SYSTEM_CALL_FILTER],
        .read_write_paths = key_lines[KEY_READ_WRITE_PATHS],
    };
    return problems;
}

/* Checks file_name and derives the host name; 0 or a problem reported. */
int cfg_host_name_from_file(const char *dir, const char *file_name, char **name,
                            cfg_errors *errors)
{
    char shown[160];
    snprintf(shown, sizeof(shown), "%s/%.100s", dir, file_name);
    if (strchr(file_name, '/')) {
        cfg_errors_add(errors, shown, 0, NULL,
                       "a host file must be a plain file name in the hosts directory, "
                       "not a path (move it into %s)",
                       dir);
        return -EINVAL;
    }
    size_t len = strlen(file_name);
    if (len < 6 || strcmp(file_name + len - 5, ".conf") != 0) {
        cfg_errors_add(errors, shown, 0, NULL,
                       "a host file's name must be <host>.conf (rename it)");
        return -EINVAL;
    }
    _cleanup_free_ char *host = strndup(file_name, len - 5);
    if (!host)
        return -ENOMEM;
    act_error err = {0};
    if (act_name_check("host", host, &err) < 0) {
        cfg_errors_add(errors, shown, 0, NULL,
                       "%s (the file name without .conf is the host name; rename the file)",
                       err.message);
        return -EINVAL;
    }
    *name = TAKE_PTR(host);
    return 0;
}

static void host_parse_done(host_parse *parse)
{
    cfg_host_free(&parse->host);
}

static int load_host_at(int dir_fd, const char *dir, const char *file_name, cfg_host *out,
                        cfg_errors *errors)
{
    *out = (cfg_host){0};
    _cleanup_free_ char *name = NULL;
    int r = cfg_host_name_from_file(dir, file_name, &name, errors);
    if (r < 0)
        return r;
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, file_name) < 0)
        return -ENOMEM;
    /* Reading a file just written would update its atime, an inode write
     * per host and start; O_NOATIME is for the owner or root only. */
    int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    _cleanup_close_ int fd = openat(dir_fd, file_name, flags | O_NOATIME);
    if (fd < 0 && errno == EPERM)
        fd = openat(dir_fd, file_name, flags);
    if (fd < 0) {
        int saved = errno;
        cfg_errors_add(errors, path, 0, NULL, "cannot open: %s (check the file)", strerror(saved));
        return -saved;
    }
    unsigned key_lines[N_KEYS] = {0};
    _cleanup_(host_parse_done) host_parse parse = {
        .host =
            {
                .ready = {.kind = PROBE_NOTIFY},
                .ready_timeout_usec = 30 * CFG_USEC_PER_SEC,
                .probe_timeout_usec = 30 * CFG_USEC_PER_SEC,
                .wake_timeout_usec = 90 * CFG_USEC_PER_SEC,
                .stop_timeout_usec = 10 * CFG_USEC_PER_SEC,
                .checkpoint_timeout_usec = 300 * CFG_USEC_PER_SEC,
                .replicate_restart_usec = CFG_REPLICATE_RESTART_USEC_DEFAULT,
                .idle_timeout_usec = 300 * CFG_USEC_PER_SEC,
                .frozen_max_usec = 3600 * CFG_USEC_PER_SEC,
                .max_starts = 5,
                .releases_keep = 3,
                .backlog = SOMAXCONN,
                .private_ipc = true,
                .limits = {.pids_max = CFG_PIDS_MAX_DEFAULT,
                           .nofile_soft = CFG_NOFILE_DEFAULT,
                           .nofile_hard = CFG_NOFILE_DEFAULT,
                           .private_tmp_size = CFG_PRIVATE_TMP_SIZE_DEFAULT},
            },
        .key_lines = key_lines,
    };
    int problems = cfg_ini_parse_fd(fd, path, host_keys, N_KEYS, &parse, key_lines, errors);
    if (problems < 0)
        return problems;
    problems += finish(&parse.host, path, key_lines, errors);
    if (problems > 0)
        return -EINVAL;
    parse.host.name = TAKE_PTR(name);
    *out = TAKE_STRUCT(parse.host);
    return 0;
}

int cfg_host_credentials(const cfg_host *config, uid_t *uid, gid_t *gid, bool *have, act_error *err)
{
    assert(config && uid && gid && have);
    *have = false;
    if (!config->user)
        return 0;
    int r = cfg_resolve_user("User", config->user, uid, gid, err);
    if (r == 0 && config->group)
        r = cfg_resolve_group("Group", config->group, gid, err);
    if (r < 0)
        return act_error_prefix(err, "host %s", config->name);
    *have = true;
    return 0;
}

int cfg_load_host_at(int dir_fd, const char *dir, const char *file_name, cfg_host *host,
                     cfg_errors *errors)
{
    return load_host_at(dir_fd, dir, file_name, host, errors);
}

const char *cfg_host_key_at(size_t i, const char **section)
{
    if (i >= N_KEYS)
        return NULL;
    if (section)
        *section = host_keys[i].section;
    return host_keys[i].name;
}
