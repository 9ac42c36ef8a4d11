/* Readiness and health probes that run on the daemon's loop.
 *
 * Ready= and HealthCheck= take the same forms: tcp:ADDR:PORT and unix:PATH
 * (a connect that succeeds), exec:PATH ARGS (a command that exits 0). A
 * probe tries until it succeeds or its deadline passes, never blocking the
 * loop: connects are non-blocking, commands are watched through a pidfd. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "activator/listen/listen.h"
#include "common/cleanup.h"
#include "common/error.h"

typedef enum probe_kind {
    PROBE_NOTIFY, /* READY=1 on the notify socket; not run by this module */
    PROBE_CONNECT,
    PROBE_EXEC,
} probe_kind;

typedef struct probe_spec {
    probe_kind kind;
    lsn_address address; /* PROBE_CONNECT */
    char **argv;         /* PROBE_EXEC, NULL-terminated, malloc'd */
} probe_spec;

/* Parses "notify", "tcp:127.0.0.1:8080", "unix:/run/x.sock" or
 * "exec:/usr/bin/check --fast". `where` prefixes errors ("web1.conf:9: Ready"). */
int probe_parse(const char *text, const char *where, probe_spec *out, act_error *err);
void probe_spec_clear(probe_spec *spec);

typedef struct probe_run probe_run;

/* Starts an exec: probe's command where its owner wants it to run (the
 * daemon: in the generation's cgroup leaf, as the host's user, with its
 * environment and mount namespace) and returns a pidfd of the child, a
 * child of this process: the probe watches it, kills it at its deadline
 * and reaps it. A negative errno with err set when it could not start. */
typedef int (*probe_spawn_fn)(char *const *argv, void *userdata, act_error *err);

typedef struct probe_runner {
    probe_spawn_fn spawn;
    void *userdata;
} probe_runner;

/* Called once: ok, or not with the last failure's sentence. */
typedef void (*probe_done)(probe_run *probe, bool ok, const char *why, void *userdata);

/* Starts probing now and every interval_usec until success or timeout_usec.
 * An interval_usec of at least timeout_usec makes it one try, bounded by
 * timeout_usec, which fails as soon as it fails (a check repeated by its
 * caller, each counted). The spec must outlive the probe. runner (copied)
 * starts exec: commands; NULL runs them here, as this process, with its
 * environment: for tests and tools, never for a host's probe. */
int probe_start(sd_event *loop, const probe_spec *spec, const probe_runner *runner,
                uint64_t timeout_usec,
                uint64_t interval_usec, probe_done done, void *userdata, probe_run **out,
                act_error *err);

/* Stops a probe (its callback is not called). NULL is fine. */
void probe_free(probe_run *probe);
DEFINE_TRIVIAL_CLEANUP_FUNC(probe_run *, probe_free)
