/* The wake pipeline's operations over claims/, release/ and cgroup/: the
 * daemon's implementation of every step of a wake (read the claim, admit,
 * restore, reserve, materialize, prepare, gate, exec, ready, replicate,
 * publish, healthy, failed). Each takes the ad_host as userdata. */
#pragma once

#include "activator/daemon/generations/generation.h"

extern const pl_ops ad_wake_ops;

/* The claim as the wake in flight admitted (and then published) it, with the
 * revision of that write; NULL before its admission. */
const claim *ad_wake_ops_admitted(const ad_host *host);

/* True from the moment a wake of host sends its admission until that wake
 * ends. A claim write (a swap's pin) landing in that time would fence a
 * start already under way: its gate would refuse the build it prepared and
 * drop the clients waiting for it. Before, the wake admits itself on what
 * the write left (an admission that lost to a write that still lets this
 * box serve is made again). */
bool ad_wake_ops_admission_sent(const ad_host *host);

/* The pin's failure in the wake in flight (its version, digest, reason and
 * message), written with the claim's failed phase should the wake give up;
 * NULL when the pin did not fail in it. */
const claim_pin *ad_wake_ops_pin_failure(const ad_host *host);

/* Frees a wake's state (the pipeline calls it when the wake ends; hosts/table.c
 * when the host goes). */
void ad_wake_state_free(void *state);

/* The exit handler of a host's generations (userdata: the host): set at
 * `reserve`, and by recovery for a generation it resumes. */
void ad_wake_ops_on_generation_exit(ad_generation *gen, void *userdata);

/* The host serves: its serving generation is supervised from now on as its
 * host file says (WatchdogSec=, HealthCheckIntervalSec=, STOPPING=1,
 * ReplicateRequired=), and what the supervision notices parks the host.
 * Called again for the same generation, it changes nothing. */
void ad_wake_ops_supervise(ad_host *host);
