/* One configured host as the daemon keeps it. The struct is host.c's alone:
 * every other part reads and changes a host through the functions here, and
 * each field says which part of the daemon owns it. 10,000 parked hosts
 * each cost one of these, so a wake's working state is not kept here but
 * behind the wake state pointer, and only while a wake runs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "activator/daemon/context.h"

typedef struct ad_generation ad_generation;
typedef struct ad_wake_state ad_wake_state;
typedef struct ad_swap ad_swap;
typedef struct ad_claim_report ad_claim_report;

/* Sets up what a host holds of its own: its socket slots (unbound), the
 * account it runs as (User=, Group=) and its compiled SystemCallFilter=. */
int ad_host_new(ad_daemon *daemon, const cfg_host *config, ad_host **out, act_error *err);
/* Frees what host.c holds (sockets, filter, directory fd). The parts that
 * own the generations, the wake state, the swap and the pipeline free those
 * first. */
void ad_host_free(ad_host *host);

ad_daemon *ad_host_daemon(const ad_host *host);
const cfg_host *ad_host_config(const ad_host *host);
const char *ad_host_name(const ad_host *host);
/* The host's wake pipeline; hosts.c creates and frees it. */
pl_host *ad_host_pipeline(const ad_host *host);
void ad_host_set_pipeline(ad_host *host, pl_host *pipeline);

/* ---- sockets (hosts.c binds them, generations get them as LISTEN_FDS) ---- */

/* config->n_listen slots; -1 where nothing is bound. */
const int *ad_host_listen_fds(const ad_host *host);
/* "<host>/<index>" for each slot, NULL-terminated: the FD store and
 * LISTEN_FDNAMES names. */
char *const *ad_host_listen_names(const ad_host *host);
/* Takes fd into slot index. */
void ad_host_set_listen_fd(ad_host *host, unsigned index, int fd);
/* The slot of the event source watching socket index for demand. */
sd_event_source **ad_host_demand_source(ad_host *host, unsigned index);

/* ---- what a generation runs as ------------------------------------------ */

/* User= and Group= as looked up on this box: false without User=. */
bool ad_host_credentials(const ad_host *host, uid_t *uid, gid_t *gid);
/* The compiled SystemCallFilter= (shared for the plain default). */
const cg_seccomp_program *ad_host_seccomp(const ad_host *host);

/* ---- directories ------------------------------------------------------------ */

/* <state>/hosts/<host>, opened (and created) when first needed and kept
 * open only while the host is active: 10,000 parked hosts hold no dir fd. */
int ad_host_dir(ad_host *host, act_error *err);
void ad_host_dir_close(ad_host *host);
/* <state>/hosts/<host>/state, the app's STATE_DIRECTORY, owned by User=:
 * made before the first program (ExecRestore= or the build) runs in it. */
int ad_host_state_directory(ad_host *host, act_error *err);
/* What a published generation serves on, for routers reading the claim: its
 * listening addresses, or "<box>/g-<N>" for a host without sockets. */
void ad_host_format_handle(const ad_host *host, uint64_t generation, char *out, size_t size);

/* ---- generations (wake_ops.c moves them; everyone reads them) ------------- */

/* The published generation, if any. */
ad_generation *ad_host_serving(const ad_host *host);
void ad_host_set_serving(ad_host *host, ad_generation *gen);
/* The generation the wake in flight starts. */
ad_generation *ad_host_starting(const ad_host *host);
void ad_host_set_starting(ad_host *host, ad_generation *gen);
/* A swap's N, from N+1's publication to N's retirement. */
ad_generation *ad_host_replaced(const ad_host *host);
void ad_host_set_replaced(ad_host *host, ad_generation *gen);
/* The generation a transition is about: the one starting, else the one
 * serving (or being retired). */
const ad_generation *ad_host_current_generation(const ad_host *host);

/* What the wake in flight knows (wake_ops.c); NULL between wakes. */
ad_wake_state *ad_host_wake_state(const ad_host *host);
void ad_host_set_wake_state(ad_host *host, ad_wake_state *state);
/* The swap in flight (swap.c); NULL when none. */
ad_swap *ad_host_swap(const ad_host *host);
void ad_host_set_swap(ad_host *host, ad_swap *swap);
/* What the claim should say of the host and the write-back of it in flight
 * (claim_report.c); NULL while there is nothing to say. */
ad_claim_report *ad_host_claim_report(const ad_host *host);
void ad_host_set_claim_report(ad_host *host, ad_claim_report *report);

/* ---- idle parking (idle.c) -------------------------------------------------- */

sd_event_source **ad_host_idle_timer(ad_host *host);
uint64_t ad_host_last_active(const ad_host *host);
void ad_host_set_last_active(ad_host *host, uint64_t usec);

/* ---- what the claim and the previous daemon said --------------------------- */

/* The last claim seen names this box as executor (wake_ops.c, claim_watch.c). */
bool ad_host_claim_ours(const ad_host *host);
void ad_host_set_claim_ours(ad_host *host, bool ours);
/* A release of the claim is in flight (claim_release.c). */
bool ad_host_releasing(const ad_host *host);
void ad_host_set_releasing(ad_host *host, bool releasing);
/* Recovery could not prove an old generation stopped (recovery.c). */
bool ad_host_unproven_at_start(const ad_host *host);
void ad_host_set_unproven_at_start(ad_host *host);

/* ---- what status shows ---------------------------------------------------- */

/* Why the last wake did not serve; "" once one served (hosts.c). */
const char *ad_host_last_reason(const ad_host *host);
const char *ad_host_last_message(const ad_host *host);
/* message may be NULL. */
void ad_host_set_last_failure(ad_host *host, const char *reason, const char *message);
/* Attempts recorded against a build (wake_ops.c). */
uint64_t ad_host_failed_attempts(const ad_host *host);
void ad_host_count_failed_attempt(ad_host *host, const char *reason);
/* When the wake in flight began, for the wake-duration histogram (announce.c). */
uint64_t ad_host_wake_started(const ad_host *host);
void ad_host_set_wake_started(ad_host *host, uint64_t usec);
