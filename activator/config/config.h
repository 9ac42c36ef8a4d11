/* activatord's configuration: /etc/activator/activatord.conf and one
 * /etc/activator/hosts/<host>.conf per host, INI files with systemd-style
 * keys read with inih.
 *
 * Every problem in a file is collected, not only the first: each becomes one
 * line "FILE:LINE: KEY: what is wrong (what to do)". A file with any problem
 * yields nothing (a bad host file is skipped, the other hosts still load);
 * nothing half-read ever reaches the daemon. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "activator/config/parse/syscalls.h"
#include "activator/listen/listen.h"
#include "activator/probe/probe.h"
#include "common/error.h"

#define CFG_DAEMON_DEFAULT_PATH "/etc/activator/activatord.conf"

/* One problem found in a configuration file. */
typedef struct cfg_error {
    char *file;    /* the path as given or found */
    unsigned line; /* 1-based; 0 when the problem is the file or a missing key */
    char *key;     /* the key or "[Section]", escaped as text is; NULL for file-level
                      problems */
    char *text;    /* the whole line: "FILE:LINE: KEY: what is wrong (what to do)", every
                      byte outside printable ASCII escaped as \xNN (a newline too) */
} cfg_error;

/* The problems of one or more loads, in the order found. */
typedef struct cfg_errors {
    cfg_error *items;
    size_t n;
    size_t cap;
} cfg_errors;

void cfg_errors_free(cfg_errors *errors);

/* Appends "FILE:LINE: KEY: <fmt...>" (":LINE" left out when line is 0, "KEY: "
 * when key is NULL): for problems found when what a file names is checked
 * on this box (a user, an address to bind), reported like those of the
 * file itself. */
void cfg_errors_add(cfg_errors *errors, const char *file, unsigned line, const char *key,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Prints one text per line; returns how many. What --check-config shows. */
size_t cfg_errors_print(const cfg_errors *errors, FILE *out);

/* How many of the errors were found in file (the path as reported). */
size_t cfg_errors_count_file(const cfg_errors *errors, const char *file);

/* How many keys [Activator] has. */
#define CFG_DAEMON_N_KEYS 40

/* [Activator] of activatord.conf. Every string is malloc'd and set (defaults
 * filled in) except where NULL is documented. */
typedef struct cfg_daemon {
    char *box;               /* Box=, required: this machine's stable box id */
    char *store;             /* Store=, default dir://<StateDirectory>/claims */
    char *state_directory;   /* StateDirectory=, default /var/lib/activator */
    char *runtime_directory; /* RuntimeDirectory=, default /run/activator */
    char *hosts_directory;   /* HostsDirectory=, default /etc/activator/hosts */
    char *cgroup_root;       /* CgroupRoot=; NULL for auto (the delegated cgroup) */
    bool claim_unclaimed;    /* ClaimUnclaimed=, default yes */
    char *control;           /* Control=, default ipc://<RuntimeDirectory>/control.ipc */
    char *events;            /* Events=, default ipc://<RuntimeDirectory>/events.ipc */
    char *control_group;     /* ControlGroup=: operators besides root; NULL: root only */
    char *viewer_group;      /* ViewerGroup=: viewers (read-only ops); NULL: none */
    char *control_listen;    /* ControlListen= tls+tcp://ADDR:PORT; NULL: none */
    /* ControlOperators=, ControlViewers=: the subject CNs of the client
     * certificates that are operators and viewers over ControlListen=;
     * NULL-terminated, NULL when none. At least one is set with
     * ControlListen=, and no CN is in both. */
    char **control_operators;
    char **control_viewers;
    char *tls_certificate;   /* TLSCertificate=, TLSKey=, TLSClientCA=: required with */
    char *tls_key;           /* ControlListen=, NULL otherwise */
    char *tls_client_ca;
    /* An etcd Store='s TLS and authentication; NULL when not set. StoreCA=
     * (or StoreCertificate=) switches to https; StoreCertificate= and
     * StoreKey= come together, and so do StoreUser= and StorePasswordFile=
     * (the password is read from that file when the daemon starts, so it
     * stays out of this world-readable file). StoreUser= needs https, or
     * StoreInsecure=yes to send the password in clear. */
    char *store_ca;
    char *store_certificate;
    char *store_key;
    char *store_user;
    char *store_password_file;
    bool store_insecure;               /* StoreInsecure=: StoreUser= may go over plain http */
    char *metrics_listen;              /* MetricsListen= ADDR:PORT, default 127.0.0.1:9464;
                                          NULL when set to "no" */
    uint32_t max_concurrent_starts;    /* MaxConcurrentStarts=, default 2 x online CPUs */
    uint64_t failure_backoff_max_usec; /* FailureBackoffMaxSec=, default 30 s */
    uint64_t failure_reset_usec;       /* FailureResetSec=, default 10 s */
    uint64_t start_budget_wait_usec;   /* StartBudgetWaitSec=, default 30 s */
    uint64_t box_lease_usec;           /* BoxLeaseSec=, 2 s..1 h, default 10 s: the lease of
                                          this box's record in the store */
    uint64_t failover_grace_usec;      /* FailoverGraceSec=, default the lease's self-fencing
                                          margin (claims_box_lease_margin), never below it:
                                          how long after a box's lease expired this box may
                                          take its failover hosts */
    uint64_t store_watch_timeout_usec; /* StoreWatchTimeoutSec=, default 30 s: an etcd claim
                                          watch silent this long is checked, and ends
                                          (the claims are listed again) unless the store
                                          says nothing was written */
    /* DynamicUserRange=, default 1879048192-1879113727 (CFG_DYNAMIC_UID_MIN):
     * the uids (each its own gid too) hosts without User= run as, one per
     * host, never 0 and never above 4294967294. */
    uint32_t dynamic_uid_min;
    uint32_t dynamic_uid_max;
    uint64_t host_log_max_bytes;       /* HostLogMaxSize=, default 8M, at least 64K: where no
                                          journald takes a host's output, its log file
                                          (<state>/hosts/<host>/log/output.log) is rotated
                                          to output.log.1 past this size */
    char *checkpoints;                 /* Checkpoints= dir:///PATH: the directory of the
                                          built-in checkpoints, which every box of the fleet
                                          mounts; NULL: none (ExecCheckpoint= only) */
    uint32_t checkpoints_keep;         /* CheckpointsKeep=, 1..1000, default 3: archives kept
                                          per host besides the one the claim names */
    uint64_t freeze_memory_pressure_usec;  /* FreezeMemoryPressure=, 1 ms..1999 ms, default
                                              200 ms: the box's memory stall ("some", PSI)
                                              within a 2 s window that retires frozen
                                              generations, oldest first; 0 ("no"): not
                                              watched */
    /* UserDatabaseDirectory=, default /run/systemd/userdb: where the hosts'
     * dynamic users are published to the box's user database
     * (accounts/userdb.h), when that directory exists; NULL ("no"): not
     * published. */
    char *user_database_directory;
    char *registry_auth_file;              /* RegistryAuthFile=, default
                                              /etc/activator/registry-auth.json: the
                                              credentials of docker:// stages (need not exist) */
    /* RegistryInsecure=: registries (HOST or HOST:PORT) reached over plain
     * http; NULL-terminated, NULL when none. */
    char **registry_insecure;
    uint64_t build_fetch_timeout_usec;     /* BuildFetchTimeoutSec=, 1 s..1 h, default 120 s:
                                              how long a wake waits for a pinned build this
                                              box fetches from its registry source */
    unsigned key_lines[CFG_DAEMON_N_KEYS]; /* where each key was set; see cfg_daemon_key_line */
} cfg_daemon;

/* Reads the daemon's file. Returns 0 with *config filled, or a negative errno
 * (-EINVAL for problems in the file, the open's errno when it cannot be read)
 * with every problem appended to errors and *config zeroed. */
int cfg_load_daemon(const char *path, cfg_daemon *config, cfg_errors *errors);
void cfg_daemon_free(cfg_daemon *config);

/* ControlGroup= and ViewerGroup= resolved on this box (cfg_resolve_group):
 * each gid is set only when its key is. Fails naming the key when a group
 * does not exist, or when both name one group (by name and by number). Not
 * thread-safe. */
int cfg_resolve_control_groups(const cfg_daemon *config, gid_t *control_gid, gid_t *viewer_gid,
                               act_error *err);
/* The line of the daemon's file where key ("Box") was set; 0 when it was
 * not (its default is in force) or there is no such key. */
unsigned cfg_daemon_key_line(const cfg_daemon *config, const char *key);

/* The keys the parsers accept, in the order of their tables, for the checks
 * that their documentation (activatord.conf(5)) and they agree: the name of
 * the i-th key of the daemon's file or of a host file, with its section
 * ("Activator"; "Host", "Listen" or "Limits") in *section; NULL past the
 * last. */
const char *cfg_daemon_key_at(size_t i, const char **section);
const char *cfg_host_key_at(size_t i, const char **section);

/* No limit: the value of a [Limits] size or count set to "infinity". */
#define CFG_LIMIT_INFINITY UINT64_MAX

/* PidsMax= of a host file that does not set it: room for a busy server's
 * threads and workers, but a fork bomb stops here instead of at the box's
 * pid_max. */
#define CFG_PIDS_MAX_DEFAULT 4096

/* MemoryMax= by default, as a share of the box's memory: one host that
 * runs away leaves three quarters of the box to the others (and three at
 * once still a quarter), while an app that needs more says so. */
#define CFG_MEMORY_MAX_DEFAULT "25%"

/* CFG_MEMORY_MAX_DEFAULT of this box's memory in bytes; 0 when the box's
 * memory size is unknown. */
uint64_t cfg_memory_max_default(void);

/* LimitNOFILE= of a host file that does not set it, soft and hard: far
 * more than a server needs, and a tenant cannot raise it to the daemon's
 * own (524288 under systemd) to hold the box's files open. */
#define CFG_NOFILE_DEFAULT 65536
/* The most LimitNOFILE= may name: fs.nr_open's default. */
#define CFG_NOFILE_MAX 1048576

/* PrivateTmpSize= of a host file that does not set it: each of the private
 * /tmp, /var/tmp and /dev/shm holds at most this much, rather than tmpfs's
 * default of half the box's memory. */
#define CFG_PRIVATE_TMP_SIZE_DEFAULT (256ull * 1024 * 1024)

/* DynamicUserRange= by default: 65,536 uids from 0x70000000, a range no
 * allocator of the box hands out. systemd's own DynamicUser= range
 * (61184-65519) is not ours to share: systemd cannot see our uids and would
 * give one to a service of its own. Its container ranges end at
 * 0x6FFFFFFF (524288-1879048191); the foreign range of its mountfsd starts
 * at 0x7FFE0000; the subordinate ids useradd hands out for rootless
 * containers start at 100000 and grow 65,536 a user, reaching this range
 * only past 28,000 users. Below 2^31, so no tool's signed uid_t misreads
 * it. */
#define CFG_DYNAMIC_UID_MIN 1879048192u
#define CFG_DYNAMIC_UID_MAX 1879113727u

/* [Limits] of a host file; 0 means "not set" (the cgroup's default). */
typedef struct cfg_limits {
    uint64_t memory_max;               /* MemoryMax= bytes or CFG_LIMIT_INFINITY; not set:
                                          CFG_MEMORY_MAX_DEFAULT of the box's memory, or 0
                                          (none) when MemoryHigh= is above that */
    bool memory_max_is_default;        /* MemoryMax= not set: applies where the box enforces
                                          it at no cost to a start (limits.c) */
    uint64_t memory_high;              /* MemoryHigh= bytes or CFG_LIMIT_INFINITY */
    uint64_t pids_max;                 /* PidsMax=, default CFG_PIDS_MAX_DEFAULT, or
                                          CFG_LIMIT_INFINITY */
    bool pids_max_is_default;          /* PidsMax= not set: CFG_PIDS_MAX_DEFAULT applies
                                          where the box can enforce it */
    uint64_t nofile_soft;              /* LimitNOFILE= SOFT[:HARD], default
                                          CFG_NOFILE_DEFAULT for both; from the next start */
    uint64_t nofile_hard;
    uint64_t private_tmp_size;         /* PrivateTmpSize= bytes, default
                                          CFG_PRIVATE_TMP_SIZE_DEFAULT, or CFG_LIMIT_INFINITY
                                          (tmpfs's own default); from the next start */
    uint32_t cpu_quota_percent;        /* CPUQuota=, 100 = one CPU */
    uint16_t cpu_weight;               /* CPUWeight= 1..10000 */
    cfg_syscall_filter syscall_filter; /* SystemCallFilter= lines; zeroed: the default
                                          allow-list */
} cfg_limits;

/* Where the keys that are checked on this box rather than in the file were
 * set (0: not set), so that what fails there (a missing user, a filter that
 * does not compile, a limit the box cannot enforce) is reported on its line
 * like a problem of the file itself. */
typedef struct cfg_host_lines {
    unsigned user;
    unsigned group;
    unsigned memory_max;
    unsigned memory_high;
    unsigned pids_max;
    unsigned cpu_quota;
    unsigned cpu_weight;
    unsigned system_call_filter;
    unsigned read_write_paths; /* the last ReadWritePaths= line */
    unsigned ambient_capabilities; /* the last AmbientCapabilities= line */
} cfg_host_lines;

/* ReplicateRestart=: which exits of the replica (the process ExecReplicate=
 * runs beside a generation) start it again while its generation serves.
 * On-failure is 0, so a configuration not read from a file gets the
 * default. */
typedef enum cfg_replicate_restart {
    CFG_REPLICATE_RESTART_ON_FAILURE, /* after a non-zero status or a signal */
    CFG_REPLICATE_RESTART_ALWAYS,     /* after any exit, status 0 too */
    CFG_REPLICATE_RESTART_NO,         /* never */
} cfg_replicate_restart;

/* ReplicateRestartSec='s default and bounds, in microseconds: the wait
 * before the first restart in a row, which each further one doubles. */
#define CFG_REPLICATE_RESTART_USEC_DEFAULT UINT64_C(1000000)
#define CFG_REPLICATE_RESTART_USEC_MIN UINT64_C(10000)
#define CFG_REPLICATE_RESTART_USEC_MAX UINT64_C(30000000)

/* One host file. Kept compact (heap strings, arrays sized to their content)
 * because a box holds 10,000 of them. */
typedef struct cfg_host {
    char *name;                   /* the file name without .conf, a valid host name */
    char **exec_argv;             /* Exec=: [0] is a path inside the staged build */
    char **environment;           /* Environment= "KEY=VALUE" words, a later KEY replacing an
                                     earlier one; NULL-terminated, NULL when none */
    char *user;                   /* User=; NULL: a dynamic user of the host's own
                                     (DynamicUserRange=) */
    char *group;                  /* Group=; NULL: the user's primary group */
    uint64_t ambient_capabilities; /* AmbientCapabilities= (1 << CAP_*); 0: none */
    char **exec_restore;          /* ExecRestore=: absolute path then arguments; NULL: none */
    char **exec_replicate;        /* ExecReplicate=: likewise; NULL: none */
    char **exec_checkpoint;       /* ExecCheckpoint=: likewise; it writes a checkpoint of the
                                     state directory and prints "ID SHA256"; NULL: the
                                     built-in Checkpoints= of the daemon */
    probe_spec ready;             /* Ready=, default notify */
    probe_spec *health_check;     /* HealthCheck=; NULL: none (never notify) */
    lsn_address *listen;          /* ListenStream= in file order */
    unsigned *listen_lines;       /* the line of each, for a bind that fails */
    uint64_t ready_timeout_usec;  /* ReadyTimeoutSec=, 1..30 s, default 30 s */
    uint64_t probe_timeout_usec;  /* ProbeTimeoutSec=, 1 s..10 min, default 30 s: a move's probe
                                     on the box it lands on must serve this long after its
                                     first exec, or the move rolls back */
    uint64_t wake_timeout_usec;   /* WakeTimeoutSec=, 1 s..1 h, default 90 s; 0 (infinity in
                                     the file): no bound. From a wake's read, no attempt starts
                                     and no ready window runs past it */
    uint64_t stop_timeout_usec;   /* StopTimeoutSec=, default 10 s */
    uint64_t idle_timeout_usec;   /* IdleTimeoutSec=, default 300 s; 0 (or infinity in the
                                     file): never park when idle */
    uint64_t watchdog_usec;       /* WatchdogSec=, default 0 (or infinity in the file): no
                                     watchdog; else the app sends WATCHDOG=1 at least this often
                                     once it serves */
    uint64_t health_check_interval_usec; /* HealthCheckIntervalSec=, default 0: HealthCheck= runs
                                            once, before the generation serves; else again this
                                            long after each check while it serves */
    double start_rate_limit;      /* StartRateLimit= starts per second; 0: no limit */
    /* ReadWritePaths=: absolute paths kept writable in the host's
     * filesystem view besides its state directory, in file order, each
     * with the "-" that lets it be missing; NULL-terminated, NULL when
     * none. FilesystemView=box (filesystem_box) turns the view off: the
     * host sees the box's filesystem as the daemon does. */
    char **read_write_paths;
    bool filesystem_box;
    /* PrivateIPC=, default yes: each generation has an IPC namespace of
     * its own, whose SysV and POSIX objects the kernel frees when the
     * generation's last process ends; no: the box's, shared with every
     * other host that says no and with the box itself. */
    bool private_ipc;
    /* PrivateNetwork=, default no: yes gives each generation's main
     * process a network namespace with only loopback; it serves through
     * the sockets the daemon passes it, and reaches nothing else. */
    bool private_network;
    /* RestoreRequiresSameBuild=, default no: yes refuses a wake whose
     * restore would bring a state that another build (by build digest)
     * last ran against; no says so and restores. */
    bool restore_requires_same_build;
    cfg_limits limits;
    cfg_host_lines lines;
    uint32_t backlog; /* Backlog=, default SOMAXCONN */
    uint16_t n_listen;
    uint8_t max_starts; /* MaxStarts=, 1..5, default 5 */
    uint8_t health_check_failures; /* HealthCheckFailures=, 1..100, default 3: repeated checks
                                      failed in a row that retire the generation */
    uint16_t releases_keep; /* ReleasesKeep=, 0..CFG_RELEASES_KEEP_MAX, default 3: staged
                               versions a gc keeps besides those in use */
    bool stateless;                /* State=none: nothing to checkpoint or restore (default
                                      State=dir: the state directory is the host's state) */
    bool checkpoint_live;          /* CheckpointLive=, default no: ExecCheckpoint= can
                                      snapshot a host that serves */
    uint64_t checkpoint_timeout_usec; /* CheckpointTimeoutSec=, 1 s..1 h, default 300 s: bounds
                                         ExecCheckpoint= and the built-in archive */
    /* CheckpointEverySec=, 0 (default: none) or 1 s..1 day: how often a
     * serving host's state is checkpointed and named on its claim
     * (moves/checkpoint_every.c), so a box lost loses at most that much. */
    uint64_t checkpoint_every_usec;
    /* Failover= (default no) and FailoverBoxes= (NULL: every box that
     * configures the host): copied into the claim at each admission
     * (claim.failover), where fencing and takeover read them. */
    bool failover;
    char **failover_boxes;
    /* The replica while its generation serves: ReplicateRestart= (a
     * cfg_replicate_restart, default on-failure) says which of its exits
     * start it again, ReplicateRestartSec= (default 1 s; 0: not set, the
     * default) how long the first restart in a row waits;
     * ReplicateRequired= (default no) makes a replica that stays down a
     * failure of its generation. */
    uint8_t replicate_restart;
    bool replicate_required;
    uint64_t replicate_restart_usec;
    /* ParkMode=freeze (default stop): an idle generation is frozen (the
     * cgroup v2 freezer) instead of retired, and the next connection thaws
     * it; frozen for FrozenMaxSec= (1 s..30 days, default 1 h) it is
     * retired. ThawCheck=claim (the default; thaw_check_cached false) reads
     * the claim from the store before a thaw, cached trusts the watch. */
    bool park_freeze;
    bool thaw_check_cached;
    uint64_t frozen_max_usec;
} cfg_host;

#define CFG_RELEASES_KEEP_MAX 1000

/* Reads dir/file_name as host file_name minus ".conf". file_name must be a
 * plain "<host>.conf" with a valid host name: "../x.conf" or ".hidden.conf"
 * are refused before anything is opened. Returns 0 with *host filled, or a
 * negative errno with the problems appended to errors and *host zeroed. */
int cfg_load_host_file(const char *dir, const char *file_name, cfg_host *host, cfg_errors *errors);

/* Reads every "*.conf" in dir, in name order. Files with problems are
 * skipped (their problems appended to errors), the others returned in
 * *hosts (a malloc'd array, *n of them, sorted by host name). Two files binding the same
 * ListenStream= address: the later file is refused. Returns 0 (even when
 * some files were skipped: check errors->n), or a negative errno when dir
 * cannot be read at all. */
int cfg_load_hosts(const char *dir, cfg_host **hosts, size_t *n, cfg_errors *errors);

void cfg_host_free(cfg_host *host);
void cfg_hosts_free(cfg_host *hosts, size_t n);

/* The host's User= and Group= resolved on this box (see cfg_resolve_user);
 * *have is false without User=. Errors start with "host NAME: ". */
int cfg_host_credentials(const cfg_host *config, uid_t *uid, gid_t *gid, bool *have,
                         act_error *err);

/* The paths of a host's filesystem view, from the daemon's directories and
 * the host's own (cfg_host_view_paths); every array NULL-terminated. */
typedef struct cfg_view_paths {
    char **hidden;             /* the daemon's state, runtime and hosts directories, the
                                  claims directory of a dir:// store, and /run for root */
    char **writable;           /* the host's state directory, ReadWritePaths= without "-" */
    char **writable_if_present; /* ReadWritePaths= with "-"; for root, what a host uses in
                                   /run */
} cfg_view_paths;

void cfg_view_paths_clear(cfg_view_paths *paths);

/* The paths of config's view on the box daemon describes. Fails when a
 * ReadWritePaths= path is one of the hidden directories or inside one
 * (no host may write the daemon's files; its own state directory is
 * writable already), naming it and the directory: "ReadWritePaths=/x/y is
 * inside /x, the daemon's state directory (...), which no host sees".
 * as_root: the host runs as uid 0, whose view hides /run as well (see
 * host-view.c). */
int cfg_host_view_paths(const cfg_daemon *daemon, const cfg_host *config, bool as_root,
                        cfg_view_paths *out, act_error *err);

/* cfg_host_view_paths for every host, each refusal appended to errors on
 * its ReadWritePaths= line; returns how many. What --check-config and a
 * reload check after parsing. */
size_t cfg_check_view_paths(const cfg_daemon *config, const cfg_host *hosts, size_t n,
                            cfg_errors *errors);

/* What the files name that must exist on this box: every host's User= and
 * Group=, and the daemon's ControlGroup=. Each one missing is appended to
 * errors on its line ("hosts/web1.conf:4: User: ..."), hosts found in
 * config->hosts_directory and the daemon's file at config_path. Returns how
 * many. What --check-config and a reload check after parsing. Not
 * thread-safe (the user and group databases). */
size_t cfg_check_accounts(const char *config_path, const cfg_daemon *config,
                          const cfg_host *hosts, size_t n, cfg_errors *errors);

/* Why AmbientCapabilities= cannot go with a User= of uid 0, and what to do:
 * the sentence --check-config (cfg_check_accounts) and the daemon's start
 * give alike. */
#define CFG_ROOT_CAPABILITIES_REFUSED                                                              \
    "a root host runs as root in a user namespace of its own, where a capability reaches "         \
    "nothing of the box; name an unprivileged User= (or remove User= for a dynamic user) to "      \
    "keep capabilities"

/* Hosts that run as root (User=root, User=0, or a name of uid 0): one
 * "FILE:LINE: User: warning: ..." each, appended to warnings. Allowed, but
 * --check-config says so. Returns how many. Not thread-safe either. */
size_t cfg_check_root_hosts(const cfg_daemon *config, const cfg_host *hosts, size_t n,
                            cfg_errors *warnings);

/* What differs between the host file a host runs with and one loaded since,
 * by when it can apply: */
enum {
    CFG_HOST_SAME = 0,
    CFG_HOST_CHANGED_LISTEN = 1 << 0, /* [Listen]: ListenStream= or Backlog= */
    CFG_HOST_CHANGED_LIMITS = 1 << 1, /* [Limits] but SystemCallFilter=: a running leaf's */
    CFG_HOST_CHANGED_START = 1 << 2,  /* anything else: how the next generation starts */
};
/* A set of CFG_HOST_CHANGED_* bits. Where each key was set does not count. */
unsigned cfg_host_changes(const cfg_host *running, const cfg_host *loaded);
