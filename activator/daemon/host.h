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

typedef struct act_generation act_generation;
typedef struct act_wake_state act_wake_state;
typedef struct act_swap act_swap;

/* Sets up what a host holds of its own: its socket slots (unbound), the
 * account it runs as (User=, Group=) and its compiled SystemCallFilter=. */
int act_daemon_host_new(act_daemon *daemon, const act_host_config *config,
                        act_daemon_host **out, act_error *err);
/* Frees what host.c holds (sockets, filter, directory fd). The parts that
 * own the generations, the wake state, the swap and the pipeline free those
 * first. */
void act_daemon_host_free(act_daemon_host *host);

act_daemon *act_daemon_host_daemon(const act_daemon_host *host);
const act_host_config *act_daemon_host_config(const act_daemon_host *host);
const char *act_daemon_host_name(const act_daemon_host *host);
/* The host's wake pipeline; hosts.c creates and frees it. */
act_host *act_daemon_host_pipeline(const act_daemon_host *host);
void act_daemon_host_set_pipeline(act_daemon_host *host, act_host *pipeline);

/* ---- sockets (hosts.c binds them, generations get them as LISTEN_FDS) ---- */

/* config->n_listen slots; -1 where nothing is bound. */
const int *act_daemon_host_listen_fds(const act_daemon_host *host);
/* "<host>/<index>" for each slot, NULL-terminated: the FD store and
 * LISTEN_FDNAMES names. */
char *const *act_daemon_host_listen_names(const act_daemon_host *host);
/* Takes fd into slot index. */
void act_daemon_host_set_listen_fd(act_daemon_host *host, unsigned index, int fd);
/* The slot of the event source watching socket index for demand. */
sd_event_source **act_daemon_host_demand_source(act_daemon_host *host, unsigned index);

/* ---- what a generation runs as ------------------------------------------ */

/* User= and Group= as looked up on this box: false without User=. */
bool act_daemon_host_credentials(const act_daemon_host *host, uid_t *uid, gid_t *gid);
/* The compiled SystemCallFilter= (shared for the plain default). */
const cg_seccomp_program *act_daemon_host_seccomp(const act_daemon_host *host);

/* ---- directories ------------------------------------------------------------ */

/* <state>/hosts/<host>, opened (and created) when first needed and kept
 * open only while the host is active: 10,000 parked hosts hold no dir fd. */
int act_daemon_host_dir(act_daemon_host *host, act_error *err);
void act_daemon_host_dir_close(act_daemon_host *host);
/* <state>/hosts/<host>/state, the app's STATE_DIRECTORY, owned by User=:
 * made before the first program (ExecRestore= or the build) runs in it. */
int act_daemon_host_state_directory(act_daemon_host *host, act_error *err);
/* What a published generation serves on, for routers reading the claim: its
 * listening addresses, or "<box>/g-<N>" for a host without sockets. */
void act_daemon_host_format_handle(const act_daemon_host *host, uint64_t generation, char *out,
                                   size_t size);

/* ---- generations (wake_ops.c moves them; everyone reads them) ------------- */

/* The published generation, if any. */
act_generation *act_daemon_host_serving(const act_daemon_host *host);
void act_daemon_host_set_serving(act_daemon_host *host, act_generation *gen);
/* The generation the wake in flight starts. */
act_generation *act_daemon_host_starting(const act_daemon_host *host);
void act_daemon_host_set_starting(act_daemon_host *host, act_generation *gen);
/* A swap's N, from N+1's publication to N's retirement. */
act_generation *act_daemon_host_replaced(const act_daemon_host *host);
void act_daemon_host_set_replaced(act_daemon_host *host, act_generation *gen);
/* The generation a transition is about: the one starting, else the one
 * serving (or being retired). */
const act_generation *act_daemon_host_current_generation(const act_daemon_host *host);

/* What the wake in flight knows (wake_ops.c); NULL between wakes. */
act_wake_state *act_daemon_host_wake_state(const act_daemon_host *host);
void act_daemon_host_set_wake_state(act_daemon_host *host, act_wake_state *state);
/* The swap in flight (swap.c); NULL when none. */
act_swap *act_daemon_host_swap(const act_daemon_host *host);
void act_daemon_host_set_swap(act_daemon_host *host, act_swap *swap);

/* ---- idle parking (idle.c) -------------------------------------------------- */

sd_event_source **act_daemon_host_idle_timer(act_daemon_host *host);
uint64_t act_daemon_host_last_active(const act_daemon_host *host);
void act_daemon_host_set_last_active(act_daemon_host *host, uint64_t usec);

/* ---- what the claim and the previous daemon said --------------------------- */

/* The last claim seen names this box as executor (wake_ops.c, claim_watch.c). */
bool act_daemon_host_claim_ours(const act_daemon_host *host);
void act_daemon_host_set_claim_ours(act_daemon_host *host, bool ours);
/* Recovery could not prove an old generation stopped (recovery.c). */
bool act_daemon_host_unproven_at_start(const act_daemon_host *host);
void act_daemon_host_set_unproven_at_start(act_daemon_host *host);

/* ---- what status shows ---------------------------------------------------- */

/* Why the last wake did not serve; "" once one served (hosts.c). */
const char *act_daemon_host_last_reason(const act_daemon_host *host);
const char *act_daemon_host_last_message(const act_daemon_host *host);
/* message may be NULL. */
void act_daemon_host_set_last_failure(act_daemon_host *host, const char *reason,
                                      const char *message);
/* Attempts recorded against a build (wake_ops.c). */
uint64_t act_daemon_host_failed_attempts(const act_daemon_host *host);
void act_daemon_host_count_failed_attempt(act_daemon_host *host, const char *reason);
/* When the wake in flight began, for the wake-duration histogram (announce.c). */
uint64_t act_daemon_host_wake_started(const act_daemon_host *host);
void act_daemon_host_set_wake_started(act_daemon_host *host, uint64_t usec);
