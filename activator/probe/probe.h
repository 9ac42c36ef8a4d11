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

typedef enum act_probe_kind {
    ACT_PROBE_NOTIFY, /* READY=1 on the notify socket; not run by this module */
    ACT_PROBE_CONNECT,
    ACT_PROBE_EXEC,
} act_probe_kind;

typedef struct act_probe_spec {
    act_probe_kind kind;
    act_listen_address address; /* ACT_PROBE_CONNECT */
    char **argv;                /* ACT_PROBE_EXEC, NULL-terminated, malloc'd */
} act_probe_spec;

/* Parses "notify", "tcp:127.0.0.1:8080", "unix:/run/x.sock" or
 * "exec:/usr/bin/check --fast". `where` prefixes errors ("web1.conf:9: Ready"). */
int act_probe_parse(const char *text, const char *where, act_probe_spec *out, act_error *err);
void act_probe_spec_clear(act_probe_spec *spec);

typedef struct act_probe act_probe;

/* Called once: ok, or not with the last failure's sentence. */
typedef void (*act_probe_done)(act_probe *probe, bool ok, const char *why, void *userdata);

/* Starts probing now and every interval_usec until success or timeout_usec.
 * The spec must outlive the probe. */
int act_probe_start(sd_event *loop, const act_probe_spec *spec, uint64_t timeout_usec,
                    uint64_t interval_usec, act_probe_done done, void *userdata, act_probe **out,
                    act_error *err);

/* Stops a probe (its callback is not called). NULL is fine. */
void act_probe_free(act_probe *probe);
DEFINE_TRIVIAL_CLEANUP_FUNC(act_probe *, act_probe_free)
