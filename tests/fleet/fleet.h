/* A fleet on one machine, for tests of what only several boxes can show:
 * one real etcd, and up to FL_BOXES_MAX real activatord daemons on it, each a
 * box of its own (box-1, box-2, ...) with its own temp dir, cgroup root,
 * control and events sockets, and its hosts listening on a loopback address
 * of its own (box-1 on 127.0.0.2, box-2 on 127.0.0.3, ...), so that the same
 * host configured on every box binds the same port on each without a clash.
 *
 * Each box is a dh_daemon (tests/activator/daemon/harness.h): everything the
 * harness offers one daemon works on fl->boxes[i]. The fleet adds what spans
 * boxes: the one store, hosts configured everywhere, and which boxes run a
 * host right now (read from the cgroups, not from what the daemons say). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "proxy.h"
#include "tests/activator/daemon/harness.h"

#define FL_BOXES_MAX 4

/* What one fleet test may take before the watchdog (harness.h) calls it
 * hung: many times what the slowest takes on a loaded box (seconds), and
 * well under the 120 s and more that meson gives each fleet program. */
#define FL_TEST_BUDGET_MS 75000

/* Samples every box's cgroups on a thread of its own: the most boxes ever
 * seen running one host at once. */
typedef struct fl_overlap {
    bool running;
    pthread_t thread;
    atomic_bool stop;
    char host[65];
    struct fl_fleet *fleet;
    atomic_size_t most_running;
    atomic_uint samples;
} fl_overlap;

typedef struct fl_fleet {
    etcd_harness etcd;
    bool etcd_started;
    char store_url[PATH_MAX];
    claim_store *store; /* the test's own client of the fleet's store */
    dh_daemon boxes[FL_BOXES_MAX];
    size_t n_boxes;
    fl_overlap overlap;
    /* fl_setup_cut_off: the one box whose etcd traffic goes through a
     * proxy of its own (-1: none). */
    int proxied;
    fl_proxy proxy;
} fl_fleet;

/* Whether fleet tests can run here (root, cgroup2, etcd); see dh_check_can_run. */
int fl_check_can_run(const char *suite);

/* Starts etcd and sets up n_boxes boxes on it (not started yet); extra_conf
 * (may be NULL) goes into every box's [Activator]. */
void fl_setup(fl_fleet *fl, size_t n_boxes, const char *extra_conf);
/* fl_setup, with box index's etcd traffic through a TCP proxy of its own
 * (fl->proxy), so that box alone can be cut off (fl_proxy_cut). */
void fl_setup_cut_off(fl_fleet *fl, size_t n_boxes, const char *extra_conf, size_t index);
/* Tears every box down (see dh_teardown), then etcd. -1 when a box's cgroup
 * root could not be removed whole. */
int fl_teardown(fl_fleet *fl);
/* CMocka fixture: a zeroed fl_fleet; the test calls fl_setup. The watchdog
 * is armed with FL_TEST_BUDGET_MS for the test and its teardown. */
int fl_fixture_setup(void **state);
int fl_fixture_teardown(void **state);
#define FL_TEST(f) cmocka_unit_test_setup_teardown(f, fl_fixture_setup, fl_fixture_teardown)

/* "box-1" for index 0, and so on. */
const char *fl_box_name(size_t index);
/* "127.0.0.2" for index 0, and so on. */
const char *fl_box_address(size_t index);

/* Configures host on every box (act-e2e-app on the box's own address, one
 * port for all), stages act-e2e-app as its v1, live, on every box. Returns
 * the port. */
int fl_add_host(fl_fleet *fl, const char *host, const char *app_args,
                const char *extra_host_lines);
/* Starts every box's daemon. */
void fl_start(fl_fleet *fl);
/* Writes host's claim as assigned to box (a fresh serving op). */
void fl_assign(fl_fleet *fl, const char *host, const char *box);

/* How many boxes had a process of host running (in a leaf of its that is
 * not frozen: a frozen generation serves nobody) at one same instant of
 * this call; *running_on (may be NULL) gets
 * the index of the last one found, or -1. */
size_t fl_running(fl_fleet *fl, const char *host, int *running_on);
/* Waits until host runs on box index alone; false after timeout_ms. */
bool fl_wait_running_on(fl_fleet *fl, const char *host, size_t index, int timeout_ms);

/* Starts sampling how many boxes run host at once (every half millisecond,
 * until fl_overlap_stop or the teardown). */
void fl_overlap_start(fl_fleet *fl, const char *host);
/* Stops it; returns the most boxes seen running the host at once, and the
 * number of samples taken in *samples (may be NULL). */
size_t fl_overlap_stop(fl_fleet *fl, unsigned *samples);

/* activatorctl through box index's daemon, or with index -1 against the
 * store, with the arguments that follow (NULL-terminated); the exit
 * status, with its output in out. */
int fl_ctl(fl_fleet *fl, int index, char *out, size_t size, ...);
/* The counter host (an act-e2e-app --counter) answers with on port at box
 * index, or -1 when it does not answer. */
long fl_counter_at(fl_fleet *fl, size_t index, int port);
/* host's claim as the store has it (zeroed when there is none). */
claim fl_claim_of(fl_fleet *fl, const char *host);
/* Waits up to timeout_ms until the claim says box index serves host, and
 * host runs there and nowhere else. */
bool fl_serves_on(fl_fleet *fl, const char *host, size_t index, int timeout_ms);

/* A power cut of box index, as far as one machine can show one: its daemon
 * SIGKILLed, then every process of its cgroup root at once (cgroup.kill),
 * waited for until the root is empty. Its record stays until its lease
 * lapses. */
void fl_power_cut(fl_fleet *fl, size_t index);
/* cgroup.kill of box index's whole cgroup root, then until it is empty (at
 * most 10 s); false if it could not be written or is not empty by then. */
bool fl_kill_root(fl_fleet *fl, size_t index);
/* Waits up to timeout_ms until the store lists box index as not live. */
bool fl_wait_dead(fl_fleet *fl, size_t index, int timeout_ms);
