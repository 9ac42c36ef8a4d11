/* One configured host as the daemon keeps it. The struct is host/host.c's alone:
 * every other part reads and changes a host through the functions here, and
 * each field says which part of the daemon owns it. 10,000 parked hosts
 * each cost one of these, so a wake's working state is not kept here but
 * behind the wake state pointer, and only while a wake runs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "activator/daemon/host/context.h"
#include "activator/records/records.h"

typedef struct ad_generation ad_generation;
typedef struct ad_wake_state ad_wake_state;
typedef struct ad_swap ad_swap;
typedef struct ad_freeze ad_freeze;
typedef struct ad_checkpoint ad_checkpoint;
typedef struct ad_checkpoint_request ad_checkpoint_request;
typedef struct ad_claim_report ad_claim_report;
typedef struct ad_move ad_move;
typedef struct ad_host_settings ad_host_settings;

/* ---- configuration ----------------------------------------------------------
 *
 * A host owns its configuration: the host file as loaded (a cfg_host of its
 * own) and what was made of it on this box (the account its generations
 * run as, its compiled SystemCallFilter=), together its settings. The
 * settings in force are what the wake in flight, its probes and its
 * generations read, so they change only when nothing of theirs is in use: a
 * reload that changes how a host starts leaves them pending, and they are
 * put in force at the start of the host's next wake from parked (never a
 * swap: N+1 starts as N did), or at once when the host is at rest. Two parts
 * of a loaded file apply at once instead, because nothing holds on to them:
 * [Listen] (the host's sockets are its own, below) and the [Limits] values
 * (numbers, read when a leaf is made). */

/* Makes settings of config, which it takes (on failure too): the account
 * User= and Group= name looked up (or the host's dynamic user given out),
 * SystemCallFilter= compiled (the plain
 * default is compiled once and shared). On failure *failed_key names the
 * key at fault ("User", "Group", "SystemCallFilter"). */
int ad_host_settings_new(ad_daemon *daemon, cfg_host *config, ad_host_settings **out,
                         const char **failed_key, act_error *err);
void ad_host_settings_free(ad_host_settings *settings);
const cfg_host *ad_host_settings_config(const ad_host_settings *settings);

/* Sets up a host with settings (taken, on failure too) and one socket slot
 * per ListenStream= of its config, unbound. */
int ad_host_new(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err);
/* Frees what host/host.c holds (settings, sockets, directory fd). The parts that
 * own the generations, the wake state, the swap and the pipeline free those
 * first. */
void ad_host_free(ad_host *host);

ad_daemon *ad_host_daemon(const ad_host *host);
/* The configuration in force. */
const cfg_host *ad_host_config(const ad_host *host);
/* The host's name: the same for the host's whole life, whatever its config. */
const char *ad_host_name(const ad_host *host);
/* The host's wake pipeline; hosts/hosts.c creates and frees it. */
pl_host *ad_host_pipeline(const ad_host *host);
void ad_host_set_pipeline(ad_host *host, pl_host *pipeline);

/* Settings for the next start (taken; NULL drops those pending), and
 * whether there are any. */
void ad_host_set_pending(ad_host *host, ad_host_settings *settings);
bool ad_host_has_pending(const ad_host *host);
/* Puts the pending settings in force and frees the old ones: only when
 * nothing refers to them (no wake, no generation). Returns whether there
 * were any. */
bool ad_host_apply_pending(ad_host *host);
/* The [Limits] values of limits (not SystemCallFilter=) into the settings
 * in force and those pending, for every leaf made from here on. */
void ad_host_set_limits(ad_host *host, const cfg_limits *limits);

/* A host taken out of the configuration by a reload (hosts/hosts.c): no trigger
 * reaches it any more, and its sockets are gone. */
bool ad_host_removed(const ad_host *host);
void ad_host_set_removed(ad_host *host);

/* ---- sockets (hosts/hosts.c binds them, generations get them as LISTEN_FDS) ---- */

/* The host's listening sockets: one slot per address of its [Listen], as
 * last applied (at set-up, or by a reload). */
unsigned ad_host_n_listen(const ad_host *host);
const lsn_address *ad_host_listen_addresses(const ad_host *host);
/* -1 where nothing is bound. */
const int *ad_host_listen_fds(const ad_host *host);
/* "<host>/<index>" for each slot, NULL-terminated: the FD store and
 * LISTEN_FDNAMES names. */
char *const *ad_host_listen_names(const ad_host *host);
/* Takes fd into slot index. */
void ad_host_set_listen_fd(ad_host *host, unsigned index, int fd);
/* Takes the fd out of slot index, its demand watch ended; -1 when empty. */
int ad_host_take_listen_fd(ad_host *host, unsigned index);
/* The slot of the event source watching socket index for demand. */
sd_event_source **ad_host_demand_source(ad_host *host, unsigned index);
/* Replaces the sockets with one slot per ListenStream= of loaded (a load
 * of the host's file since) holding fds (loaded->n_listen, taken on
 * success), and makes loaded's [Listen] the one of the configuration in
 * force. The old slots' demand watches end and the sockets still in them
 * are closed: take out first what the new slots keep. */
int ad_host_replace_sockets(ad_host *host, const cfg_host *loaded, int *fds, act_error *err);

/* ---- what a generation runs as ------------------------------------------ */

/* What the host's generations (and everything else that runs as the host:
 * its helpers, its state directory's owner) run as: User= and Group= as
 * looked up on this box, or without User= the host's dynamic user (uid ==
 * gid, accounts/dynamic_users.h). Always known: settings are not made without it. */
void ad_host_run_as(const ad_host *host, uid_t *uid, gid_t *gid);
/* The compiled SystemCallFilter= (shared for the plain default). */
const cg_seccomp_program *ad_host_seccomp(const ad_host *host);
/* The filesystem its generations see; NULL with FilesystemView=box. */
const cg_fs_view *ad_host_fs_view(const ad_host *host);

/* ---- directories ------------------------------------------------------------ */

/* <state>/hosts/<host>, opened (and created) when first needed and kept
 * open only while the host is active: 10,000 parked hosts hold no dir fd. */
int ad_host_dir(ad_host *host, act_error *err);
void ad_host_dir_close(ad_host *host);
/* Closes it unless something of the host needs it: a generation serving or
 * starting, or a wake in flight. For the work that opens it while the host
 * is parked (a move's records, a checkpoint's), once that work is done. */
void ad_host_dir_close_unless_used(ad_host *host);
/* <state>/hosts/<host>/state, the app's STATE_DIRECTORY, owned by User=:
 * made before the first program (ExecRestore= or the build) runs in it. */
int ad_host_state_directory(ad_host *host, act_error *err);
/* What a published generation serves on, for routers reading the claim: its
 * listening addresses, or "<box>/g-<N>" for a host without sockets. */
void ad_host_format_handle(const ad_host *host, uint64_t generation, char *out, size_t size);

/* ---- generations (wake/ops.c moves them; everyone reads them) ------------- */

/* The published generation, if any. */
ad_generation *ad_host_serving(const ad_host *host);
void ad_host_set_serving(ad_host *host, ad_generation *gen);
/* The generation the wake in flight starts. */
ad_generation *ad_host_starting(const ad_host *host);
void ad_host_set_starting(ad_host *host, ad_generation *gen);
/* A swap's N, from N+1's publication to N's retirement. */
ad_generation *ad_host_replaced(const ad_host *host);
void ad_host_set_replaced(ad_host *host, ad_generation *gen);
/* Parked, with no generation, no wake in flight and nothing unproven: nothing
 * of the host runs here. */
bool ad_host_at_rest(const ad_host *host);
/* The generation a transition is about: the one starting, else the one
 * serving (or being retired). */
const ad_generation *ad_host_current_generation(const ad_host *host);

/* What the wake in flight knows (wake/ops.c); NULL between wakes. */
ad_wake_state *ad_host_wake_state(const ad_host *host);
void ad_host_set_wake_state(ad_host *host, ad_wake_state *state);
/* The swap in flight (builds/swap.c); NULL when none. */
ad_swap *ad_host_swap(const ad_host *host);
void ad_host_set_swap(ad_host *host, ad_swap *swap);
/* The serving generation's freeze (parking/freeze.c), from the idle freeze to its
 * thaw or retirement; NULL while it runs. */
ad_freeze *ad_host_freeze(const ad_host *host);
void ad_host_set_freeze(ad_host *host, ad_freeze *freeze);
/* The checkpoint in flight (moves/checkpoint.c); NULL when none. */
ad_checkpoint *ad_host_checkpoint(const ad_host *host);
void ad_host_set_checkpoint(ad_host *host, ad_checkpoint *checkpoint);
/* An operator's checkpoint in flight, from the request to the claim's
 * write (moves/checkpoint_request.c); NULL when none. */
ad_checkpoint_request *ad_host_checkpoint_request(const ad_host *host);
void ad_host_set_checkpoint_request(ad_host *host, ad_checkpoint_request *request);
/* What the claim should say of the host and the write-back of it in flight
 * (claim/write_backs.c); NULL while there is nothing to say. */
ad_claim_report *ad_host_claim_report(const ad_host *host);
void ad_host_set_claim_report(ad_host *host, ad_claim_report *report);

/* ---- idle parking (parking/idle.c) -------------------------------------------------- */

sd_event_source **ad_host_idle_timer(ad_host *host);
uint64_t ad_host_last_active(const ad_host *host);
void ad_host_set_last_active(ad_host *host, uint64_t usec);

/* ---- what the claim said --------------------------------------------------- */

/* The last claim seen names this box as executor (wake/ops.c, fleet/claim_watch.c). */
bool ad_host_claim_ours(const ad_host *host);
void ad_host_set_claim_ours(ad_host *host, bool ours);
/* A hash of the build that build-state.json was last seen to name, 0 when
 * unknown (wake/ops.c: the gate's fast path). */
uint64_t ad_host_build_state_mark(const ad_host *host);
void ad_host_set_build_state_mark(ad_host *host, uint64_t mark);

/* ---- moves (moves/move.c) ------------------------------------------------------ */

/* The move this box takes part in, as its source or its target; NULL when
 * none (10,000 hosts that never move carry two pointers). */
ad_move *ad_host_move(const ad_host *host);
void ad_host_set_move(ad_host *host, ad_move *move);
/* The op id of the move whose probe this box may make (moves/move.c sets it,
 * wake/ops.c reads it): while it is set, every wake of the host is that
 * probe, admitted only under that op. NULL when none. Setting copies it;
 * false when out of memory (nothing changed). */
const char *ad_host_probe_op(const ad_host *host);
bool ad_host_set_probe_op(ad_host *host, const char *op_id);

/* ---- leaves not proven stopped (wake/ops.c keeps them, generations/sweep.c takes them) -- */

/* A generation's leaf whose retirement could not prove it empty, with what
 * the sweep needs to prove it later: the handle, and the record to remove. */
typedef struct ad_unproven_leaf {
    cg_leaf *leaf;
    uint64_t generation;
} ad_unproven_leaf;

/* Keeps leaf (taken) until the sweep takes it; false when out of memory,
 * with the leaf's handle freed: then only the next daemon retires it. */
bool ad_host_keep_unproven(ad_host *host, cg_leaf *leaf, uint64_t generation);
/* Takes the oldest leaf kept; false when none is. */
bool ad_host_take_unproven(ad_host *host, ad_unproven_leaf *out);

/* A release of the claim is in flight (claim/release.c). */
bool ad_host_releasing(const ad_host *host);
void ad_host_set_releasing(ad_host *host, bool releasing);

/* ---- what status shows ---------------------------------------------------- */

/* Why the last wake did not serve; "" once one served (hosts/hosts.c). */
const char *ad_host_last_reason(const ad_host *host);
const char *ad_host_last_message(const ad_host *host);
/* message may be NULL. */
void ad_host_set_last_failure(ad_host *host, const char *reason, const char *message);
/* Attempts recorded against a build (wake/ops.c). */
uint64_t ad_host_failed_attempts(const ad_host *host);
void ad_host_count_failed_attempt(ad_host *host, const char *reason);
/* The build of the generation published last, by this daemon or one it
 * resumed; NULL before any (wake/ops.c sets it, builds/swap.c reads it). */
const rec_build_ref *ad_host_last_served(const ad_host *host);
void ad_host_set_last_served(ad_host *host, const rec_build_ref *build);
/* When the wake in flight began, for the wake-duration histogram (generations/announce.c). */
uint64_t ad_host_wake_started(const ad_host *host);
void ad_host_set_wake_started(ad_host *host, uint64_t usec);
