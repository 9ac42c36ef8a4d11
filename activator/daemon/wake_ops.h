/* The wake pipeline's operations over claims/, release/ and cgroup/: the
 * daemon's implementation of every step of a wake (read the claim, admit,
 * restore, reserve, materialize, prepare, gate, exec, ready, replicate,
 * publish, healthy, failed). Each takes the ad_host as userdata. */
#pragma once

#include "activator/daemon/generation.h"

extern const pl_ops ad_wake_ops;

/* The claim as the wake in flight admitted (and then published) it, with the
 * revision of that write; NULL before its admission. */
const claim *ad_wake_ops_admitted(const ad_host *host);

/* Frees a wake's state (the pipeline calls it when the wake ends; hosts.c
 * when the host goes). */
void ad_wake_state_free(void *state);

/* The exit handler of a host's generations (userdata: the host): set at
 * `reserve`, and by recovery for a generation it resumes. */
void ad_wake_ops_on_generation_exit(ad_generation *gen, void *userdata);
