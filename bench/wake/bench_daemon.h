/* What the benchmarks under bench/ (wake, swap, hosts) add to the daemon
 * driver (tests/driver/daemon_driver.h), which runs the real activatord:
 * where their daemons live, the one-host daemon that wake and swap measure,
 * their main(), and measuring (samples, a one-byte echo, fd limits).
 *
 * Every call that can fail returns a negative errno with a sentence in an
 * act_error, and the benchmark decides what to print. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>

#include "common/error.h"
#include "tests/driver/daemon_driver.h"

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

/* dd_setup in <base>/act-bench-<label>-XXXXXX as box BD_BOX. The daemon runs
 * --verbose when $ACT_BENCH_VERBOSE is set (every pipeline step in its log,
 * to see where a wake waits); $ACT_BENCH_KEEP keeps the temp dir. */
int bd_setup(dd_daemon *d, const char *label, const char *extra_conf, act_error *err);
/* The Store= of every later bd_setup; NULL (the default): the daemon's own
 * dir:// store in its state directory. The string must outlive them. */
void bd_use_store(const char *store_url);

/* A daemon with one host that runs exec on a free 127.0.0.1 port (written
 * to address), IdleTimeoutSec=0 (the benchmark parks it itself), started. */
int bd_start_one_host(dd_daemon *d, const char *label, const char *host, const char *exec,
                      int stop_timeout_sec, char *address, size_t size, act_error *err);

/* The same daemon set up but not started, for a benchmark that changes how
 * it starts (dd_daemon's options) before dd_start. */
int bd_set_up_one_host(dd_daemon *d, const char *label, const char *host, const char *exec,
                       int stop_timeout_sec, char *address, size_t size, act_error *err);

/* The main() of a benchmark that measures one daemon: checks it can run,
 * runs run() on a fresh dd_daemon, prints its error and the daemon's log on
 * failure and tears the daemon down. Returns the process's exit code. */
int bd_main(const char *bench, int (*run)(dd_daemon *d, act_error *err));

/* Raises this process's RLIMIT_NOFILE (soft and hard) to want, or when the
 * hard limit cannot be raised, the soft one to the hard one if that is at
 * least need; else -EMFILE. The daemon raises its own soft limit to the hard
 * one it inherits, so this is what lets it hold every host's socket. */
int bd_raise_nofile(rlim_t want, rlim_t need, act_error *err);

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
