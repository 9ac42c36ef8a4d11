/* End-to-end harness for activatord, a CMocka layer over the daemon driver
 * (tests/driver/daemon_driver.h): runs the real daemon binary as a child
 * process against real cgroups, a real claim store (dir:// or a real etcd),
 * real NNG sockets and real apps, and gives the tests what they need to
 * drive and observe it.
 *
 * One dh_daemon per test:
 *   - a temp dir with activatord.conf, hosts/, state/ and run/;
 *   - a throwaway cgroup root (cg_root_create_throwaway) passed as CgroupRoot=
 *     and destroyed at the end, which proves nothing is left in it;
 *   - for etcd, a real etcd on free loopback ports (tests/claims/etcd_harness.h);
 *   - the daemon started with its own NOTIFY_SOCKET, as systemd would, and
 *     waited for until it says READY=1;
 *   - an NNG SUB socket on the daemon's events, synchronised before use, and
 *     NNG REQ requests on its control socket;
 *   - the test's own client of the daemon's claim store.
 *
 * Every host file also gets a "beacon" host that is never woken: writing its
 * claim makes the daemon publish a claim.changed event, which is how the
 * harness knows that its subscriber is connected before a test acts.
 *
 * The helpers fail the running cmocka test (fail_msg) on anything unexpected,
 * after printing the tail of the daemon's log. */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <nng/nng.h>

#include "cgroup/cgroup.h"
#include "claims/claims.h"
#include "release/release.h"
#include "tests/claims/etcd_harness.h"
#include "tests/driver/daemon_driver.h"

/* Exit code meson reads as "skipped". */
#define DH_SKIP 77

/* The box id every test daemon runs as, and one that is not this box. */
#define DH_BOX "box-1"
#define DH_OTHER_BOX "box-2"

/* The host the harness uses to synchronise its event subscriber, and the
 * box its claim names (one no daemon runs as). */
#define DH_BEACON_HOST "beacon"
#define DH_BEACON_BOX "nobody"

typedef enum dh_store_kind {
    DH_STORE_DIR,
    DH_STORE_ETCD,
    DH_STORE_ETCD_TLS, /* etcd over https with client certificates (StoreCA= etc.) */
} dh_store_kind;

/* Makes the TLS tests' certificates in dir (tests/tls/make-certs.sh): ca,
 * server (127.0.0.1), client (CN "activator test client"), viewer (CN
 * viewer-1), stranger (CN stranger-1), and other-ca with its other-client. */
bool dh_make_tls_certs(const char *dir);

/* "dir", "etcd" or "etcd-tls" (a test's argv[1]) as a kind; dir otherwise. */
dh_store_kind dh_store_kind_from(const char *name);

/* One event received from the daemon's PUB socket. */
typedef dd_event dh_event;

/* The driver's daemon (paths, process, notify socket, subscriber) and what
 * only the tests need: the claim store and its etcd, and the events kept in
 * order so that a test can search them. */
typedef struct dh_daemon {
    dd_daemon drv;
    char box[65];
    dh_store_kind store_kind;
    char store_url[PATH_MAX];
    etcd_harness etcd;
    bool etcd_started;
    claim_store *store;

    dh_event *events;
    size_t n_events;
    size_t cap_events;
    uint64_t mark; /* dh_event_wait looks only at events after this seq */
} dh_daemon;

/* Whether the tests can run here: root, a cgroup2 hierarchy, and for etcd the
 * etcd binary. Prints why not and returns DH_SKIP, or returns 0. */
int dh_check_can_run(const char *suite, dh_store_kind kind);

/* Makes the temp dir, the cgroup root, (etcd,) the store client and
 * activatord.conf. extra_conf (may be NULL) is appended to [Activator]. */
void dh_setup(dh_daemon *d, dh_store_kind kind, const char *extra_conf);

/* Another daemon, of box, on the same claim store as first (its etcd, or its
 * dir store), with its own temp dir, cgroup root and sockets; first's
 * teardown stops the etcd, so tear this one down first. */
void dh_setup_beside(dh_daemon *d, const dh_daemon *first, const char *box,
                     const char *extra_conf);

/* One box of a fleet: dh_setup's daemon running as box on a store that
 * someone else started (tests/fleet starts one etcd for all its boxes). */
void dh_setup_box(dh_daemon *d, const char *box, const char *store_url, const char *extra_conf);

/* Stops whatever still runs (SIGTERM, then SIGKILL), removes the temp dir and
 * etcd, and destroys the cgroup root. Returns -1 when the root could not be
 * removed whole (something was left in it), else 0. */
int dh_teardown(dh_daemon *d);

/* CMocka setup and teardown of one dh_daemon per test: the state is a
 * zeroed dh_daemon, and teardown is dh_teardown (its -1 fails the test). */
int dh_fixture_setup(void **state);
int dh_fixture_teardown(void **state);
#define DH_TEST(f) cmocka_unit_test_setup_teardown(f, dh_fixture_setup, dh_fixture_teardown)

/* Two daemons on one store (the second set up with dh_setup_beside): the
 * state is a zeroed dh_two_boxes; teardown stops the second first, as the
 * first one's teardown removes the store (or the etcd) they share. */
typedef struct dh_two_boxes {
    dh_daemon first, second;
} dh_two_boxes;
int dh_two_boxes_setup(void **state);
int dh_two_boxes_teardown(void **state);
#define DH_TEST_TWO_BOXES(f)                                                                       \
    cmocka_unit_test_setup_teardown(f, dh_two_boxes_setup, dh_two_boxes_teardown)

/* A TCP port on 127.0.0.1 reserved for the daemon (dd_free_port). */
int dh_free_port(void);

/* A TCP listener on 127.0.0.1 at a port the kernel picks, which nobody
 * accepts on: its fd, its port in *port. */
int dh_listen_loopback(dh_daemon *d, int *port);

/* Writes hosts/<host>.conf with the formatted text. */
void dh_write_host(dh_daemon *d, const char *host, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the usual host file for act-e2e-app listening on 127.0.0.1:port:
 * Exec=act-e2e-app <app_args>, the marker in Environment=, StopTimeoutSec=1
 * and ReadyTimeoutSec=5 unless extra_host_lines sets them, and
 * extra_host_lines (may be NULL) in [Host]. */
void dh_write_app_host(dh_daemon *d, const char *host, int port, const char *app_args,
                       const char *extra_host_lines);
/* The same, listening on address:port (a fleet's boxes each have their own
 * loopback address: 127.0.0.2, 127.0.0.3, ...). */
void dh_write_app_host_at(dh_daemon *d, const char *host, const char *address, int port,
                          const char *app_args, const char *extra_host_lines);

/* A host of act-e2e-app on a free loopback port: its file as
 * dh_write_app_host writes it (app_args, extra_host_lines may be NULL) and
 * act-e2e-app staged as its v1, live. Returns the port. */
int dh_add_app_host(dh_daemon *d, const char *host, const char *app_args,
                    const char *extra_host_lines);

/* The start most tests share: dh_setup on kind without extra configuration,
 * one host as dh_add_app_host makes it, and the daemon started. Returns the
 * host's port. */
int dh_start_with_host(dh_daemon *d, dh_store_kind kind, const char *host, const char *app_args,
                       const char *extra_host_lines);

/* Stages act-e2e-app as host/version straight into <state>/releases and, with
 * promote, makes it live. identity (may be NULL) receives what was staged. */
void dh_stage(dh_daemon *d, const char *host, const char *version, bool promote,
              rel_identity *identity);

/* <dir>/helpers, made writable to every user: where a test puts the
 * scripts of ExecRestore=, ExecCheckpoint= and ExecReplicate= and what they
 * write. They run in the host's filesystem view, where the test's
 * directory (in /tmp) is not, so the host that runs them names this one
 * in ReadWritePaths= (dh_helper_dir_line). */
const char *dh_helper_dir(dh_daemon *d);
/* "ReadWritePaths=<dh_helper_dir>\n", for a host file. */
const char *dh_helper_dir_line(dh_daemon *d);

/* The uid process pid runs as (the owner of /proc/<pid>). */
uid_t dh_uid_of(dh_daemon *d, pid_t pid);
/* What a process running as uid (its gid the same number, no other groups,
 * no capability: a host's dynamic user) gets opening path with flags: 0 or
 * the errno; -1 when the child could not be made. */
int dh_open_as(uid_t uid, const char *path, int flags);

/* The same with another build: the file at source. */
void dh_stage_file(dh_daemon *d, const char *host, const char *version, const char *source,
                   bool promote, rel_identity *identity);

/* The path of the staged executable of host/version. */
/* An image layout at <dir>/img made by umoci, tagged v1: the e2e app at
 * the image's root (Exec=act-e2e-app, as dh_write_app_host writes it), and
 * bin/app an absolute symlink to it. */
void dh_make_image_layout(dh_daemon *d);

void dh_staged_exec_path(dh_daemon *d, const char *host, const char *version, char *out,
                         size_t size);

/* Starts activatord (extra_env: NULL-terminated "KEY=VALUE" list, may be
 * NULL), waits for READY=1 and connects and synchronises the subscriber. */
void dh_start(dh_daemon *d, const char *const *extra_env);

/* The path of a hold file: <dir>/name. */
void dh_hold_path(dh_daemon *d, const char *name, char *hold, size_t size);
/* dh_start with the pipeline's step (or hold point) step held until the
 * file hold exists (ACTIVATOR_TEST_HOLD=step:PATH). */
void dh_start_holding(dh_daemon *d, const char *step, const char *hold);

/* Starts activatord expecting its start to fail: fails the test if it
 * sends READY=1; returns its exit status. */
int dh_start_failing(dh_daemon *d);

/* SIGTERM, then waits (bounded) for the daemon to exit. Returns its exit
 * status (128 + signal when killed by one). */
int dh_stop(dh_daemon *d);

/* Whether pid is gone, waiting up to 5 s: an app whose parent died is
 * re-parented and reaped by init, and its zombie may linger for an instant. */
bool dh_pid_gone(pid_t pid);

/* SIGKILL to pid, returning once it exited (up to 10 s): a kill() returns
 * before the process is torn down, and an app under the sanitizers takes
 * its time to die, so a step released right after kill() can run before
 * the daemon could know of the death. False when it could not be killed or
 * did not exit. */
bool dh_kill_and_wait_exit(pid_t pid);

/* SIGKILL, as a crash or the OOM killer would: the generations keep running.
 * Forgets the events received, because the next daemon numbers its own from
 * 1. Returns the exit status (128 + 9). */
int dh_kill(dh_daemon *d);

/* The handover signal (systemctl restart); fails the test unless the daemon
 * exits 0. Its generations keep running for the next dh_start. */
void dh_hand_over(dh_daemon *d);

/* Stops the daemon and checks the clean exit: status 0, STOPPING=1 seen, no
 * process left in the cgroup subtree, no generation leaf, and every pid any
 * app attempt ever had is gone. */
void dh_stop_and_check_clean(dh_daemon *d);

/* Waits up to timeout_ms for text to appear in the daemon's log. */
bool dh_log_wait(dh_daemon *d, const char *text, int timeout_ms);
/* How many times text is in the daemon's log so far. */
size_t dh_log_count(dh_daemon *d, const char *text);
/* Until text is in box d's log at least n times (or timeout_ms passed):
 * the nth pause at a hold, say. Whether it got there. */
bool dh_log_wait_count(dh_daemon *d, const char *text, size_t n, int timeout_ms);

/* Polls status until host is in state (e.g. "parked"); false on timeout. */
bool dh_wait_state(dh_daemon *d, const char *host, const char *state, int timeout_ms);

/* Waits up to timeout_ms for the daemon's last STATUS= to contain text;
 * returns false with the last STATUS= in last (may be NULL) otherwise. */
bool dh_notify_status_wait(dh_daemon *d, const char *text, int timeout_ms, char *last, size_t size);

/* The FDNAME= names and the number of fds the daemon stored with FDSTORE=1. */
unsigned dh_notify_stored_fds(dh_daemon *d, char *names, size_t size);

/* Prints the last lines of the daemon's log (stderr of the daemon). */
void dh_dump_log(dh_daemon *d);

/* ---- the watchdog ---- */

/* A test whose waits are all bounded can still hang in a call no timeout
 * reaches. Armed, the watchdog lets the running test run budget_ms; past
 * that it prints the step and the wait the test is in (below), the test
 * thread's stack and every daemon's log, and aborts: a failure that says
 * why, well before meson's timeout would kill the test with its output cut.
 * Arm it in the test's setup; disarm it in its teardown. */
void dh_watchdog_arm(int budget_ms);
void dh_watchdog_disarm(void);
/* Whose log the watchdog prints (dh_setup and the like watch every daemon
 * they set up, dh_teardown stops). */
void dh_watchdog_watch(const dh_daemon *d, bool watch);
/* What the test does now, in its own words ("kill box-1 at drained"), and
 * what it waits for ("web to serve on box-2 alone"); the harness names its
 * own waits. */
void dh_step(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dh_waiting_for(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define DH_CHECK(d, cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            dh_dump_log(d);                                                                        \
            fail_msg(__VA_ARGS__);                                                                 \
        }                                                                                          \
    } while (0)

/* ---- control ---- */

/* One request on a fresh REQ socket to url. Returns 0 with *reply malloc'd
 * (NUL-terminated), or the NNG error. */
int dh_request_raw(const char *url, const void *body, size_t len, int timeout_ms, char **reply);

/* A request to the daemon's control socket, its reply parsed (the caller
 * puts it). Fails the test when there is no reply or it is not JSON. */
json_object *dh_request(dh_daemon *d, int timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A wake request whose reply is awaited on another thread. */
typedef struct dh_async dh_async;
dh_async *dh_request_start(dh_daemon *d, int timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
json_object *dh_request_finish(dh_daemon *d, dh_async *async);
/* The same as dh_request_finish, for a request that is not to be answered:
 * the NNG error it ended with (NNG_ETIMEDOUT when no reply came), or 0. */
int dh_request_finish_nng(dh_async *async);

/* How many claim.wait requests the daemon holds open (its stats). */
uint64_t dh_open_claim_waits(dh_daemon *d);

/* A wake of host (the request every test sends to wake one) and its reply,
 * whatever it says (the caller puts it). */
json_object *dh_wake_reply(dh_daemon *d, const char *host, int timeout_ms);

/* What the reply of a wake that served names. */
typedef struct dh_served {
    uint64_t generation;
    pid_t pid;
} dh_served;

/* Wakes host, waiting until it serves; fails the test unless it does. */
dh_served dh_wake(dh_daemon *d, const char *host);

/* The same wake, its reply awaited on another thread (dh_request_finish). */
dh_async *dh_wake_start(dh_daemon *d, const char *host, int timeout_ms);

/* Wakes host with no_wait: fails the test unless the wake started. */
void dh_wake_started(dh_daemon *d, const char *host);

/* Parks host; fails the test unless the daemon says it did. */
void dh_park(dh_daemon *d, const char *host);

/* {"ok":true} or not; the error code ("ok" for a success); the result. */
bool dh_reply_ok(json_object *reply);

/* Swaps host to version (a build that fails) and checks the swap did not
 * serve, and that the claim's pin then names version as failed with
 * fallback as the build a cold wake runs instead. */
void dh_swap_fails_to(dh_daemon *d, const char *host, const char *version,
                      const char *fallback);
const char *dh_reply_code(json_object *reply);
json_object *dh_reply_result(json_object *reply);

/* status of one host: the result object (the caller puts it). */
json_object *dh_status(dh_daemon *d, const char *host);

/* Checks that status says host is parked, why its last wake did not serve
 * (reason; "" for none) and the failure-park streak that paces its next
 * wake. */
void dh_expect_parked_for(dh_daemon *d, const char *host, const char *reason, uint64_t streak);

/* Small readers of a JSON object: "" or 0 when the key is absent. */
const char *dh_json_str(json_object *obj, const char *key);
uint64_t dh_json_u64(json_object *obj, const char *key);

/* ---- events ---- */

/* Receives what arrived, waiting up to wait_ms for the first message. */
void dh_events_pump(dh_daemon *d, int wait_ms);

/* Forgets nothing, but makes dh_event_wait look only at later events. */
void dh_events_mark(dh_daemon *d);

/* Waits up to timeout_ms for an event of host named name after the mark.
 * Returns true with *out filled (out may be NULL). */
bool dh_event_wait(dh_daemon *d, const char *host, const char *name, int timeout_ms, dh_event *out);

/* How many events of host named name arrived after the mark. */
size_t dh_events_count(dh_daemon *d, const char *host, const char *name);

/* ---- metrics ---- */

/* dh_setup on the dir store with MetricsListen= on a free port: the port. */
int dh_setup_with_metrics(dh_daemon *d);

/* One scrape of the daemon's metrics (GET /metrics on its port); large, so
 * tests allocate it. */
typedef struct dh_metrics {
    char text[256 * 1024];
    size_t len;
} dh_metrics;
void dh_metrics_scrape(dh_daemon *d, int port, dh_metrics *out);

/* The value of one sample of a scrape (a full name with its labels:
 * activator_wakes_total{outcome="serving",reason="none"}), or 0 when the
 * family has no such series yet; fails the test when the text does not
 * parse. */
double dh_metrics_sample(dh_daemon *d, const dh_metrics *scraped, const char *want);

/* ---- claims ---- */

/* Reads host's claim; false when there is none. */
bool dh_claim_get(dh_daemon *d, const char *host, claim *out);

/* Waits up to timeout_ms for host's claim to be in phase (the daemon writes
 * some phases back after the transition that made them true). Returns true
 * with the claim in out, or false with the last one read (zeroed if none). */
bool dh_claim_wait_phase(dh_daemon *d, const char *host, const char *phase, int timeout_ms,
                         claim *out);

/* Waits up to timeout_ms for host's claim to satisfy done (say, a pin's
 * failure written back): true with it in out, else false with the last one
 * read (zeroed if none). */
bool dh_claim_wait(dh_daemon *d, const char *host, bool (*done)(const claim *c), int timeout_ms,
                   claim *out);

/* Writes c as host's claim whatever is there now (read, CAS, retry). Returns
 * the new revision. */
uint64_t dh_claim_put(dh_daemon *d, const claim *c);

/* A fresh claim for host: a serving op "assigned" on box, no holder. */
void dh_claim_assigned(const char *host, const char *box, claim *out);
/* The beacon's claim: assigned to box (not d's), released by d's box, which
 * ran it last. A box sees only the claims that name it, so the beacon
 * names d's box; it never wakes there. */
void dh_claim_beacon(const dh_daemon *d, const char *box, claim *out);

/* from as DH_OTHER_BOX writes it when it admits itself: its holder (another
 * incarnation, the next session and generation), its op.exec, phase
 * starting, no handle. */
void dh_claim_taken_by_other_box(const claim *from, claim *out);
/* Hands host's current claim to box the way that box's admission would (a
 * new holder, session and generation, op.exec = box, phase starting, no
 * handle). Returns the new revision. */
uint64_t dh_claim_take_for(dh_daemon *d, const char *host, const char *box);

/* ---- observation ---- */

/* GET / from 127.0.0.1:port; returns the body's length with the body in buf,
 * or a negative errno. */
int dh_http_get(int port, char *buf, size_t size);
/* The same over the unix socket at path. */
int dh_http_get_unix(const char *path, char *buf, size_t size);

/* The pid that answers GET / on 127.0.0.1:port (act-testapp's "pid=P"), or
 * -1 when nothing does. */
int64_t dh_answer_pid(int port);
/* Checks that GET / on 127.0.0.1:port is answered as version (act-testapp's
 * "version=V"). */
void dh_expect_version(dh_daemon *d, int port, const char *version);
/* Checks that a connection on port, to host parked with its pin failed, is
 * served by version (the fallback) and that the wake said so (its
 * pin.fallback event). */
void dh_cold_wake_runs_fallback(dh_daemon *d, const char *host, int port, const char *version);

/* A client making requests back to back on a thread of its own, on a TCP
 * port and, with a unix_path, on that socket too (every other request),
 * counting the answers and the failures until it is stopped. */
typedef struct dh_busy_client {
    int port;
    const char *unix_path; /* may be NULL */
    pthread_t thread;
    atomic_bool stop;
    unsigned answered;
    unsigned failed;
    char first_failure[1024];
} dh_busy_client;
void dh_busy_client_start(dh_daemon *d, dh_busy_client *client, int port, const char *unix_path);
void dh_busy_client_stop(dh_busy_client *client);

/* The pids recorded in host's marker, one per attempt that ran; returns how
 * many (0 when the app never ran). */
size_t dh_marker_pids(dh_daemon *d, const char *host, pid_t *pids, size_t max);

/* Waits up to timeout_ms until host's marker lists at least count runs (an
 * exec event comes when the exec happened, the marker a moment later). */
bool dh_marker_wait(dh_daemon *d, const char *host, size_t count, int timeout_ms);

/* Whether <cgroup root>/hosts/<host>/<leaf> exists, and how many leaves the
 * host has. */
bool dh_leaf_exists(dh_daemon *d, const char *host, const char *leaf);
size_t dh_leaf_count(dh_daemon *d, const char *host);

/* How many generation records <state>/hosts/<host>/generations/ holds. */
size_t dh_generation_records(dh_daemon *d, const char *host);
/* How many fds the daemon holds on <state>/hosts/<host> (dd_host_dir_fds). */
size_t dh_host_dir_fds(dh_daemon *d, const char *host);

/* Reads a whole small file into a malloc'd string; NULL when absent. */
char *dh_read_text(const char *path);

/* Runs argv with stdout and stderr captured into out (NUL-terminated).
 * Returns the exit status, or -1. */
int dh_run(char *const argv[], char *out, size_t out_size);
/* The same as uid/gid, from a copy of argv[0] that uid can reach (dd_run_as). */
int dh_run_as(char *const argv[], uid_t uid, gid_t gid, char *out, size_t out_size);
