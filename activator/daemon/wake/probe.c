/* The probes a wake runs inside a generation (wake/internal.h): readiness at
 * `ready` (any Ready= but notify), HealthCheck= at `healthy`, and at
 * `publish` a move's health check, which passes before its publication
 * ends the move. One runs at a time, in host->wake_state->probe. */
#include "activator/daemon/wake/internal.h"

static void on_probe_done(probe_run *probe, bool ok, const char *why, void *userdata)
{
    ad_host *host = userdata;
    ad_wake_passed_fn *passed = host->wake_state->passed;
    pl_wake *wake = take_wake(host);
    pl_step step = pl_wake_step(wake);
    bool health = step == PL_STEP_HEALTHY || step == PL_STEP_PUBLISH;
    if (ok && passed) {
        /* The step goes on (a move's probe, healthy: now it may publish). */
        host->wake_state->waiting_wake = wake;
        passed(host);
    } else if (ok) {
        pl_wake_ok(wake);
    } else {
        pl_wake_complete(wake, health ? PL_REASON_UNHEALTHY : PL_REASON_READY_TIMEOUT,
                         "host %s: %s probe failed: %s", host->name,
                         health ? "health" : "readiness", why);
    }
    /* Last: why is the probe's own text. */
    probe_free(TAKE_PTR(host->wake_state->probe));
}

/* gen is the generation probed, from inside it: the one starting (ready),
 * or the one just published (healthy). */
void ad_wake_start_probe(pl_wake *wake, ad_host *host, ad_generation *gen, const probe_spec *spec,
                         uint64_t timeout_usec, ad_wake_passed_fn *passed)
{
    act_error err = {0};
    host->wake_state->waiting_wake = wake;
    host->wake_state->passed = passed;
    probe_runner runner = ad_generation_probe_runner(gen);
    if (probe_start(host->daemon->loop, spec, &runner, timeout_usec, 20 * 1000, on_probe_done, host,
                    &host->wake_state->probe, &err) < 0) {
        host->wake_state->waiting_wake = NULL;
        pl_wake_complete(wake, PL_REASON_SETUP_FAILED, "host %s: %s", host->name, err.message);
    }
}
