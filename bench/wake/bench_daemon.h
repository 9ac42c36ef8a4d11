/* A small driver of the real activatord for the benchmarks under bench/
 * (wake, swap, hosts). It does what the daemon's end-to-end harness does,
 * without CMocka: every call returns a negative errno with a sentence in an
 * act_error, and the benchmark decides what to print.
 *
 * One bd_daemon is one daemon run in its own world:
 *   - a temp dir <base>/act-bench-<label>-XXXXXX (bd_base_dir) with activatord.conf, hosts/,
 *     state/ (the dir:// claim store and the releases) and run/;
 *   - a throwaway cgroup root (cg_root_create_throwaway), destroyed at the end;
 *   - its own NOTIFY_SOCKET, read by a thread as systemd reads it: READY=1 is
 *     timed, and the FDSTORE=1 sockets it sends are closed at once;
 *   - control requests over NNG REQ and events over NNG SUB.
 *
 * The benchmarks run several of these side by side (bench/hosts runs a
 * 10-host and a 10,000-host daemon at once), so nothing here is global. */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <json-c/json.h>
#include <nng/nng.h>

#include "cgroup/cgroup.h"
#include "common/error.h"

/* The box id every benchmark daemon runs as. */
#define BD_BOX "bench-box"

/* Whether a benchmark can run here: root and a cgroup2 hierarchy. Prints why
 * not on stderr and returns a non-zero exit code, or returns 0. */
int bd_check_can_run(const char *bench);

/* Where the daemons' temp dirs go: $ACT_BENCH_DIR when it is an absolute
 * path of under 24 characters (say /dev/shm, to take the disk's fsync out of
 * the measurement), else /tmp. The state directory, and so the dir:// claim
 * store and every record the daemon fsyncs, lives there. */
const char *bd_base_dir(void);

typedef struct bd_daemon {
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

    pid_t pid; /* 0 when not running */
    int pidfd;
    uint64_t exec_usec; /* CLOCK_MONOTONIC just before the daemon's fork+exec */

    /* The notify socket and its reader thread. */
    int notify_fd;
    int notify_stop[2];
    pthread_t notify_thread;
    bool notify_thread_running;
    pthread_mutex_t notify_lock;
    uint64_t ready_usec; /* CLOCK_MONOTONIC when READY=1 arrived; 0 before */
    bool stopping_seen;
    unsigned stored_fds; /* FDSTORE=1 fds received (and closed) */

    nng_socket sub;
    bool sub_open;
} bd_daemon;

/* Makes the temp dir and the throwaway cgroup root and writes
 * activatord.conf; extra_conf (may be NULL) is appended to [Activator]. */
int bd_setup(bd_daemon *d, const char *label, const char *extra_conf, act_error *err);

/* Stops a daemon still running (SIGTERM, then SIGKILL), closes everything,
 * removes the temp dir and destroys the cgroup root. Returns -EBUSY when the
 * cgroup root was not removed whole. */
int bd_teardown(bd_daemon *d, act_error *err);

/* Writes hosts/<host>.conf. */
int bd_write_host(bd_daemon *d, const char *host, act_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Raises this process's RLIMIT_NOFILE (soft and hard) to want, or when the
 * hard limit cannot be raised, the soft one to the hard one if that is at
 * least need; else -EMFILE. The daemon raises its own soft limit to the hard
 * one it inherits, so this is what lets it hold every host's socket. */
int bd_raise_nofile(rlim_t want, rlim_t need, act_error *err);

/* Starts activatord (fork + exec, its output into the log file), waits up to
 * timeout_ms for READY=1 and connects the event subscriber. */
int bd_start(bd_daemon *d, int timeout_ms, act_error *err);

/* Exec to READY=1 of the last start, in microseconds. */
uint64_t bd_startup_usec(const bd_daemon *d);

/* SIGTERM and waits (bounded) for the exit; returns the exit status (128 +
 * signal when killed by one) or a negative errno. */
int bd_stop(bd_daemon *d, int timeout_ms, act_error *err);

/* VmRSS of the running daemon in KiB, or a negative errno. */
long bd_rss_kib(const bd_daemon *d);

/* Prints the last lines of the daemon's log on stderr. */
void bd_dump_log(const bd_daemon *d);

/* ---- control ---- */

/* Sends one request and waits up to timeout_ms for its reply. Returns 0 with
 * *result (may be NULL) holding the reply's "result" (the caller puts it), or
 * a negative errno: -EPROTO for a refusal, whose code and message are in err. */
int bd_request(bd_daemon *d, int timeout_ms, json_object **result, act_error *err, const char *fmt,
               ...) __attribute__((format(printf, 5, 6)));

/* Stages path as host/version through the control socket (promote: live). */
int bd_stage(bd_daemon *d, const char *host, const char *version, const char *path, bool promote,
             act_error *err);

/* Polls status until host is in state ("parked", "serving"). */
int bd_wait_state(bd_daemon *d, const char *host, const char *state, int timeout_ms,
                  act_error *err);

/* A string member of a JSON object, "" when absent. */
const char *bd_json_str(json_object *obj, const char *key);

/* ---- events ---- */

typedef struct bd_event {
    char name[32]; /* "waking", "exec", "serving" */
    char host[72];
    uint64_t time_usec; /* wall clock, as the daemon stamped it */
    uint64_t generation;
} bd_event;

/* Discards every event received so far. */
void bd_events_drain(bd_daemon *d);

/* Receives events until one of host named name arrives (true, *out filled)
 * or timeout_ms passes (false). Every event received is passed to seen (may
 * be NULL) first. */
bool bd_event_wait(bd_daemon *d, const char *host, const char *name, int timeout_ms,
                   void (*seen)(const bd_event *event, void *userdata), void *userdata,
                   bd_event *out);

/* ---- measuring ---- */

/* A growing list of samples in microseconds. */
typedef struct bd_samples {
    double *values;
    size_t n;
    size_t cap;
} bd_samples;

int bd_samples_add(bd_samples *samples, double value);
/* The q-quantile (0..1, nearest rank) of the samples; sorts them. 0 when empty. */
double bd_samples_quantile(bd_samples *samples, double q);
void bd_samples_free(bd_samples *samples);

/* Connects to a "127.0.0.1:PORT" or unix PATH address (the ListenStream=
 * syntax), sends one byte and waits up to timeout_ms for it to come back.
 * Returns 0, or a negative errno. The connection is closed before returning. */
int bd_echo_once(const char *address, int timeout_ms, act_error *err);

/* A free TCP port on 127.0.0.1 (bound with port 0, then closed). */
int bd_free_port(act_error *err);

void bd_sleep_ms(long ms);
