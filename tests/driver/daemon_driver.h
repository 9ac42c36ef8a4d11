/* A driver of the real activatord, shared by the daemon's end-to-end tests
 * (tests/activator/daemon/harness.h wraps it in CMocka) and the benchmarks
 * under bench/ (wake, swap, hosts). It knows nothing of CMocka: every call
 * that can fail returns a negative errno with a sentence in an act_error, and
 * the caller decides whether that fails a test or ends a benchmark.
 *
 * One dd_daemon is one daemon run in its own world:
 *   - a temp dir <prefix>-XXXXXX with activatord.conf, hosts/, state/ and run/;
 *   - a throwaway cgroup root (cg_root_create_throwaway) passed as CgroupRoot=
 *     and destroyed at the end, which proves nothing was left in it;
 *   - the daemon started with its own NOTIFY_SOCKET, read by a thread as
 *     systemd reads it: READY=1 is timed, STOPPING=1 and STATUS= are kept,
 *     and the fds of FDSTORE=1 messages are counted and closed at once;
 *   - control requests over NNG REQ and events over NNG SUB.
 *
 * Several may run side by side (bench/hosts runs two daemons at once), so
 * nothing here is global. */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>
#include <nng/nng.h>

#include "cgroup/cgroup.h"
#include "common/error.h"

/* What a daemon run is made of; the strings are copied by dd_setup. */
typedef struct dd_options {
    const char *dir_prefix;  /* the temp dir is <dir_prefix>-XXXXXX; under 50 characters */
    const char *cgroup_name; /* the throwaway cgroup root's name prefix */
    const char *box;         /* Box= */
    const char *store_url;   /* Store=; NULL for dir://<state>/claims */
    const char *extra_conf;  /* appended to [Activator]; may be NULL */
} dd_options;

typedef struct dd_daemon {
    bool set_up;
    char dir[64];
    char config_path[128];
    char state_dir[128];
    char runtime_dir[128];
    char hosts_dir[128];
    char log_path[128];
    char notify_path[128];
    char control_url[160];
    char events_url[160];
    cg_root *cgroups;
    char cgroup_path[PATH_MAX];
    bool keep_dir; /* teardown leaves the temp dir for a person to look at */
    bool verbose;  /* start the daemon with --verbose */
    /* Start the daemon in a session of its own, as systemd starts a service.
     * With the kernel's autogroup scheduling (sched_autogroup_enabled) a
     * session is one CPU group: in the caller's session the daemon's work
     * takes the caller's own threads' share, which a benchmark's client
     * then measures as a stall of the daemon's. It still stops when its
     * caller dies (PR_SET_PDEATHSIG). */
    bool own_session;
    /* The caller keeps a subscriber of its own to the daemon's events for
     * as long as it likes (the soak keeps one per box for the whole run):
     * dd_start connects none, and nothing here closes the caller's. */
    bool events_by_caller;

    pid_t pid; /* 0 when not running */
    int pidfd;
    int exit_status; /* of the last run that ended (128 + signal when killed by one) */
    uint64_t exec_usec; /* CLOCK_MONOTONIC just before the daemon's fork+exec */

    /* The notify socket and its reader thread; what the thread writes is
     * under notify_lock. */
    int notify_fd;
    int notify_stop[2];
    pthread_t notify_thread;
    bool notify_thread_running;
    pthread_mutex_t notify_lock;
    uint64_t ready_usec; /* CLOCK_MONOTONIC when READY=1 arrived; 0 before */
    bool stopping_seen;  /* STOPPING=1 */
    unsigned stored_fds; /* fds of FDSTORE=1 messages, received and closed */
    char fd_names[512];  /* their FDNAME= values, space-separated */
    char fd_removed_names[512]; /* the FDNAME= values of FDSTOREREMOVE=1 messages */
    unsigned reloads_seen; /* RELOADING=1 */
    unsigned readies_seen; /* READY=1, the first and those after a reload */
    char last_status[256];

    nng_socket sub;
    bool sub_open;
} dd_daemon;

/* ---- process (driver_process.c) ---- */

/* Whether a throwaway cgroup can be created and removed here: 0, -ENOENT
 * when there is no cgroup2 hierarchy, or another negative errno. */
int dd_cgroups_usable(const char *cgroup_name, act_error *err);

/* Makes the temp dir, hosts/ and the throwaway cgroup root and writes
 * activatord.conf (MetricsListen=no unless extra_conf sets MetricsListen=). */
int dd_setup(dd_daemon *d, const dd_options *options, act_error *err);

/* Stops a daemon still running (SIGTERM, then SIGKILL), closes everything,
 * removes the temp dir (unless keep_dir) and destroys the cgroup root.
 * Returns -EBUSY when the cgroup root was not removed whole. Does nothing to
 * a dd_daemon that dd_setup never saw (a zeroed one). */
int dd_teardown(dd_daemon *d, act_error *err);

/* Writes hosts/<host>.conf. */
int dd_write_host(dd_daemon *d, const char *host, act_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Starts activatord (fork + exec, its output into the log file; extra_env a
 * NULL-terminated "KEY=VALUE" list, may be NULL), waits up to timeout_ms for
 * READY=1 and connects the event subscriber (unless events_by_caller). */
int dd_start(dd_daemon *d, int timeout_ms, const char *const *extra_env, act_error *err);

/* SIGTERM and waits up to timeout_ms for the exit; returns the exit status
 * (128 + signal when killed by one). On a timeout the daemon is killed and
 * -ETIMEDOUT returned. The event subscriber stays open. */
int dd_stop(dd_daemon *d, int timeout_ms, act_error *err);

/* The handover signal (systemctl restart): waits up to timeout_ms for the
 * exit and returns its status; the generations keep running. Closes the
 * subscriber, since the next daemon numbers its events from 1. */
int dd_hand_over(dd_daemon *d, int timeout_ms, act_error *err);

/* SIGKILL, as a crash or the OOM killer would; closes the subscriber, since
 * the next daemon numbers its events from 1. Returns the exit status. */
int dd_kill(dd_daemon *d, int timeout_ms, act_error *err);

/* Exec to READY=1 of the last start, in microseconds. */
uint64_t dd_startup_usec(const dd_daemon *d);

/* VmRSS of the running daemon in KiB, or a negative errno. */
long dd_rss_kib(const dd_daemon *d);

/* Prints the tail of the daemon's log (its stdout and stderr) on stderr. */
void dd_dump_log(const dd_daemon *d);

/* Waits up to timeout_ms for text to appear in the daemon's log. */
bool dd_log_wait(const dd_daemon *d, const char *text, int timeout_ms);

/* Reads a whole small file into a malloc'd string; NULL when absent. */
char *dd_read_text(const char *path);

/* A TCP port on 127.0.0.1 that stays reserved for this process: only a
 * socket with SO_REUSEADDR (the daemon's listeners) can bind it, and only
 * the first such one to listen may listen on it. */
int dd_free_port(act_error *err);

void dd_sleep_ms(long ms);
uint64_t dd_now_ms(void);

/* ---- notify socket (driver_notify.c; dd_start and dd_stop use them) ---- */

int dd_notify_open(dd_daemon *d, act_error *err);
void dd_notify_close(dd_daemon *d);
uint64_t dd_notify_ready_usec(dd_daemon *d);

/* Waits up to timeout_ms for the daemon's last STATUS= to contain text;
 * false with the last STATUS= in last (may be NULL) otherwise. */
bool dd_notify_status_wait(dd_daemon *d, const char *text, int timeout_ms, char *last, size_t size);

/* The FDNAME= names and the number of fds the daemon stored with FDSTORE=1. */
unsigned dd_notify_stored_fds(dd_daemon *d, char *names, size_t size);

/* The FDNAME= names the daemon took out of the FD store (FDSTOREREMOVE=1),
 * and how many. */
unsigned dd_notify_removed_fds(dd_daemon *d, char *names, size_t size);

/* How many RELOADING=1 and READY=1 the daemon sent. */
void dd_notify_reloads(dd_daemon *d, unsigned *reloading, unsigned *ready);

/* ---- control (driver_control.c) ---- */

/* One request on a fresh REQ socket to url. Returns 0 with *reply malloc'd
 * (NUL-terminated), or the NNG error, for callers that name it as NNG does. */
int dd_request_nng(const char *url, const void *body, size_t len, int timeout_ms, char **reply);

/* NNG 1.5.2's nng_close can wait for good for a pipe that is still being
 * set up or torn down (nanomsg/nng#1499, fixed after 1.5.2): a daemon that
 * a test kills or restarts leaves such pipes behind. Closes socket on a
 * thread of its own and waits DD_NNG_CLOSE_TIMEOUT_MS at most; a close that
 * has not returned by then is left behind with its socket (a leak the test
 * survives, not a hang it does not), and false is returned. */
#define DD_NNG_CLOSE_TIMEOUT_MS 5000
bool dd_nng_close_bounded(nng_socket socket);

/* A request to the daemon's control socket; *reply is the whole reply, a
 * JSON object (the caller puts it), whether it says ok or not. */
int dd_request_json(dd_daemon *d, int timeout_ms, json_object **reply, act_error *err,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Sends one request and waits up to timeout_ms for its reply. Returns 0 with
 * *result (may be NULL) holding the reply's "result" (the caller puts it), or
 * a negative errno: -EPROTO for a refusal, whose code and message are in err. */
int dd_request(dd_daemon *d, int timeout_ms, json_object **result, act_error *err, const char *fmt,
               ...) __attribute__((format(printf, 5, 6)));

/* Stages path as host/version through the control socket (promote: live). */
int dd_stage(dd_daemon *d, const char *host, const char *version, const char *path, bool promote,
             act_error *err);

/* Asks for host's status every poll_ms until it is in state ("parked",
 * "serving"): 0, -ETIME when timeout_ms passed first, or the request's error. */
int dd_wait_state(dd_daemon *d, const char *host, const char *state, int timeout_ms, int poll_ms,
                  act_error *err);

/* {"ok":true} or not; the error code ("ok" for a success); the result. */
bool dd_reply_ok(json_object *reply);
const char *dd_reply_code(json_object *reply);
json_object *dd_reply_result(json_object *reply);

/* Small readers of a JSON object: "" or 0 when the key is absent. */
const char *dd_json_str(json_object *obj, const char *key);
uint64_t dd_json_u64(json_object *obj, const char *key);

/* ---- events (driver_events.c) ---- */

/* One event of the daemon's PUB socket. */
typedef struct dd_event {
    uint64_t seq;
    uint64_t time_usec; /* wall clock, as the daemon stamped it */
    uint64_t generation;
    int64_t pid;
    char name[32]; /* "exec", "claim.changed" */
    char host[65];
    char box[65];
    char version[65];
    char reason[160];
} dd_event;

/* Connects the subscriber (closing an earlier one). PUB learns of it
 * asynchronously: the first events may be missed until it is synchronised. */
int dd_events_connect(dd_daemon *d, act_error *err);
void dd_events_close(dd_daemon *d);

/* Parses one event message, "host.<host>.<event> <json>", into *out: 0, or
 * -EBADMSG when it does not parse or its topic does not match its body. */
int dd_event_parse(const char *data, size_t len, dd_event *out, act_error *err);

/* Receives one event, waiting up to timeout_ms (0: only what is there).
 * Returns 1 with *out filled, 0 when none came, -EBADMSG for an event that
 * does not parse or whose topic is not host.<host>.<event>, or -EIO. */
int dd_event_recv(dd_daemon *d, int timeout_ms, dd_event *out, act_error *err);

/* Discards every event received so far. */
void dd_events_drain(dd_daemon *d);

/* Receives events until one of host named name arrives (true, *out filled)
 * or timeout_ms passes (false). Every event received is passed to seen (may
 * be NULL) first; events that do not parse are skipped. */
bool dd_event_wait(dd_daemon *d, const char *host, const char *name, int timeout_ms,
                   void (*seen)(const dd_event *event, void *userdata), void *userdata,
                   dd_event *out);

/* ---- observation (driver_observe.c) ---- */

/* GET / from 127.0.0.1:port; returns the body's length with the body in buf,
 * or a negative errno. */
int dd_http_get(int port, char *buf, size_t size);
/* The same at an IPv4 address of this machine (a fleet box's 127.0.0.N). */
int dd_http_get_at(const char *address, int port, char *buf, size_t size);
/* The same over the unix socket at path. */
int dd_http_get_unix(const char *path, char *buf, size_t size);

/* Runs argv with stdout and stderr captured into out (NUL-terminated).
 * Returns the exit status, or -1. A program still running after
 * DD_RUN_TIMEOUT_MS is killed (SIGKILL): DD_RUN_TIMED_OUT, with a line
 * saying so at the end of out. The programs the tests run bound their own
 * waits well below it (activatorctl --timeout 30 at most). */
int dd_run(char *const argv[], char *out, size_t out_size);

#define DD_RUN_TIMEOUT_MS 60000

/* Exit statuses of a run that never got to the program, or never ended. */
#define DD_RUN_SETUP_FAILED 120 /* switching to the uid and gid failed */
#define DD_RUN_TIMED_OUT 124    /* killed after DD_RUN_TIMEOUT_MS, as timeout(1) says */
#define DD_RUN_EXEC_FAILED 127  /* exec failed */

/* The same as uid/gid (with gid as the only group) when uid != (uid_t)-1.
 * Then argv[0], and the LeakSanitizer suppressions file LSAN_OPTIONS names,
 * run from copies in a temp dir every user can enter, removed afterwards:
 * the build tree may be in a directory that user cannot enter. */
int dd_run_as(char *const argv[], uid_t uid, gid_t gid, char *out, size_t out_size);

/* The same with the n_groups groups as the process's supplementary groups
 * (gid among them or not), as a login gives a user those it is a member of. */
int dd_run_as_groups(char *const argv[], uid_t uid, gid_t gid, const gid_t *groups,
                     size_t n_groups, char *out, size_t out_size);

/* Copies the file from to to, which gets mode. */
int dd_copy_file(const char *from, const char *to, mode_t mode, act_error *err);

/* Whether <cgroup root>/hosts/<host>/<leaf> exists, and how many leaves the
 * host has. */
bool dd_leaf_exists(const dd_daemon *d, const char *host, const char *leaf);
size_t dd_leaf_count(const dd_daemon *d, const char *host);

/* How many generation records <state>/hosts/<host>/generations/ holds. */
size_t dd_generation_records(const dd_daemon *d, const char *host);

/* How many fds the daemon holds on host's directory of records
 * (<state>/hosts/<host>): none while nothing of the host runs or is in
 * flight there, so that a box's parked hosts hold no fd each. */
size_t dd_host_dir_fds(const dd_daemon *d, const char *host);
