/* One configured host as the daemon keeps it.
 *
 * The struct is open: each room reads the fields it needs and writes only
 * those it owns, and every field says which room that is. The functions
 * below are what a field alone cannot say: the settings in force and
 * those pending (changed only while nothing uses them), the socket slots
 * (an fd is closed when replaced), the host's directory (opened on demand
 * and kept only while the host is active), the leaves not proven stopped,
 * and the strings copied in. 10,000 parked hosts each cost one of these, so
 * a wake's working state is not kept here but behind wake_state, and only
 * while a wake runs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "activator/daemon/host/context.h"
#include "activator/records/records.h"
#include "checkpoint/checkpoint.h"
#include "common/names.h"

typedef struct ad_generation ad_generation;
typedef struct ad_wake_state ad_wake_state;
typedef struct ad_swap ad_swap;
typedef struct ad_freeze ad_freeze;
typedef struct ad_checkpoint ad_checkpoint;
typedef struct ad_checkpoint_request ad_checkpoint_request;
typedef struct ad_checkpoint_every ad_checkpoint_every;
typedef struct ad_claim_report ad_claim_report;
typedef struct ad_move ad_move;
typedef struct ad_host_settings ad_host_settings;

/* A generation's leaf whose retirement could not prove it empty, with what
 * the sweep needs to prove it later: the handle, and the record to remove. */
typedef struct ad_unproven_leaf {
    cg_leaf *leaf;
    uint64_t generation;
} ad_unproven_leaf;

/* What happens to a serving host that stayed idle (parking/idle.c calls it). */
typedef void (*ad_host_idle_fn)(ad_host *host);

/* Wakes refused by a claim write that kept our admission, in a row, after
 * which their clients are closed as for any refusal (ad_host.wake_again). */
#define AD_WAKES_AGAIN_MAX 3

struct ad_host {
    ad_daemon *daemon;
    char name[ACT_NAME_MAX + 1]; /* the same for the host's whole life, whatever its config */

    /* host/host.c: the configuration in force and the one pending (below). */
    ad_host_settings *settings;
    ad_host_settings *pending; /* for the next start (a reload), or NULL */
    int dirfd;                 /* <state>/hosts/<host>, or -1: ad_host_dir() */

    /* hosts/: the pipeline, and the listening sockets, one slot per address
     * of [Listen] as last applied (host/host.c makes and replaces the slots). */
    pl_host *pipeline;
    unsigned n_listen;
    lsn_address *listen;
    int *listen_fds;                  /* -1 where nothing is bound */
    char **listen_names;              /* "<host>/<index>": FD store and LISTEN_FDNAMES names */
    sd_event_source **demand_sources; /* the sockets watched for demand while parked */
    bool removed;                     /* a reload took the host out of the configuration */

    /* wake/: the generations a wake moves, and what the wake in flight
     * knows (NULL between wakes). Everyone reads them. */
    ad_generation *serving;  /* the published generation */
    ad_generation *starting; /* the one the wake in flight starts */
    ad_generation *replaced; /* a swap's N, from N+1's publication to N's retirement */
    ad_wake_state *wake_state;
    bool claim_ours;           /* the last claim seen names this box (wake/, fleet/) */
    /* The last whole claim of this host the box saw (ad_host_claim_seen),
     * as JSON at its revision, NULL when none is known: a wake admits on it
     * without reading the claim first (wake/admit.c). Text, not a claim: a
     * claim is 5 KiB, its JSON a few hundred bytes. */
    char *claim_seen_json;
    uint64_t claim_seen_revision;
    /* The last claim seen of this box's admission says failover is on
     * (claim.failover): the lease fences the host (hosts/self_fence.c). */
    bool claim_failover;
    bool fenced;               /* hosts/self_fence.c: frozen or refused until the lease is proven */
    bool fence_froze;          /* the fence froze its serving generation itself */
    bool fence_reading;        /* a lift's claim read is out */
    bool fence_read_stale;     /* and a fence came after it was sent */
    uint64_t build_state_mark; /* a hash of the build build-state.json names; 0: unknown */
    uint64_t failed_attempts;  /* attempts recorded against a build */
    rec_build_ref last_served; /* the build published last (version "" before any) */
    char last_reason[32];      /* why the last wake did not serve; "" once one served */
    char last_message[256];    /* (ad_host_set_last_failure) */
    /* wake/gate.c: the wake in flight was refused because a write moved
     * the claim while leaving our admission in place (a pin, a promote's
     * unpin, a hold): the clients waiting for it wait for the next wake,
     * which admits again (hosts/transitions.c keeps them). At most
     * AD_WAKES_AGAIN_MAX in a row, counted until a wake serves. */
    bool wake_again;
    unsigned wakes_again_in_a_row;

    /* generations/announce.c: when the wake in flight began. */
    uint64_t wake_started_usec;

    /* Each room's own state of the host, NULL while it has none. */
    ad_swap *swap;                             /* builds/swap.c: the swap in flight */
    ad_freeze *freeze;                         /* parking/freeze.c: frozen or freezing */
    ad_checkpoint *checkpoint;                 /* moves/checkpoints.c: one being written */
    ad_checkpoint_request *checkpoint_request; /* moves/checkpoint_request.c */
    ad_checkpoint_every *checkpoint_every;     /* moves/checkpoint_every.c: CheckpointEverySec= */
    ad_move *move;                             /* moves/move.c: as source or target */
    char *probe_op; /* moves/move.c: the op whose probe alone may wake it (wake/ reads) */
    ad_claim_report *claim_report; /* claim/write_backs.c: what the claim should say */
    struct ad_release *release;    /* claim/release.c: the release in flight, or NULL */

    /* parking/idle.c: the idle watch of a serving host. */
    sd_event_source *idle_timer;
    uint64_t last_active_usec;
    ad_host_idle_fn on_idle;

    /* wake/ keeps them (ad_host_keep_unproven), generations/sweep.c takes them. */
    ad_unproven_leaf *unproven;
    size_t n_unproven;
};

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

/* Sets up a host with settings (taken, on failure too) and one socket slot
 * per ListenStream= of its config, unbound. */
int ad_host_new(ad_daemon *daemon, ad_host_settings *settings, ad_host **out, act_error *err);
/* Frees what host/host.c holds (settings, sockets, directory fd). The rooms
 * that own the generations, the wake state, the swap and the pipeline free
 * those first. */
void ad_host_free(ad_host *host);

/* Whether host starts nowhere here now: fenced itself, or a failover host
 * (its claim's copy) while the box cannot prove its lease
 * (hosts/self_fence.c). */
bool ad_host_fenced(const ad_host *host);

/* The configuration in force. */
const cfg_host *ad_host_config(const ad_host *host);

/* Settings for the next start (taken; NULL drops those pending). */
void ad_host_set_pending(ad_host *host, ad_host_settings *settings);
/* Puts the pending settings in force and frees the old ones: only when
 * nothing refers to them (no wake, no generation). Returns whether there
 * were any. */
bool ad_host_apply_pending(ad_host *host);
/* The [Limits] values of limits (not SystemCallFilter=) into the settings
 * in force and those pending, for every leaf made from here on. */
void ad_host_set_limits(ad_host *host, const cfg_limits *limits);

/* ---- sockets (hosts/ binds them, generations get them as LISTEN_FDS) ------- */

/* Takes fd into slot index (a socket already there is closed). */
void ad_host_set_listen_fd(ad_host *host, unsigned index, int fd);
/* Takes the fd out of slot index, its demand watch ended; -1 when empty. */
int ad_host_take_listen_fd(ad_host *host, unsigned index);
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
/* Whether the host is User=root, run as uid 0 of a user namespace of its
 * own that maps it to ad_host_run_as's uid and gid. */
bool ad_host_root_in_user_namespace(const ad_host *host);
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

/* Where Checkpoints= keeps checkpoints, with what a registry needs (the
 * spool <StateDirectory>/checkpoint-spool, RegistryAuthFile= and
 * RegistryInsecure=), copied so that a worker may use it while a reload
 * changes the daemon's; ckpt_place_clear it. -ENOENT when Checkpoints= is
 * not set. */
int ad_checkpoint_place(const ad_daemon *daemon, ckpt_place *out, act_error *err);
/* What a published generation serves on, for routers reading the claim: its
 * listening addresses, or "<box>/g-<N>" for a host without sockets. */
void ad_host_format_handle(const ad_host *host, uint64_t generation, char *out, size_t size);

/* ---- what runs ------------------------------------------------------------ */

/* Parked, with no generation, no wake in flight and nothing unproven: nothing
 * of the host runs here. */
bool ad_host_at_rest(const ad_host *host);
/* The generation a transition is about: the one starting, else the one
 * serving (or being retired). */
const ad_generation *ad_host_current_generation(const ad_host *host);

/* Keeps leaf (taken) until the sweep takes it; false when out of memory,
 * with the leaf's handle freed: then only the next daemon retires it. */
bool ad_host_keep_unproven(ad_host *host, cg_leaf *leaf, uint64_t generation);
/* Takes the oldest leaf kept; false when none is. */
bool ad_host_take_unproven(ad_host *host, ad_unproven_leaf *out);

/* ---- strings copied in ------------------------------------------------------ */

/* The op id of the move whose probe this box may make (moves/move.c sets it,
 * wake/ reads probe_op): while it is set, every wake of the host is that
 * probe, admitted only under that op. NULL clears it. False when out of
 * memory (nothing changed). */
bool ad_host_set_probe_op(ad_host *host, const char *op_id);
/* The claim the store holds for host at revision, as this box learned it
 * (its watch, or a write of its own that the store took); c NULL: the claim
 * was deleted at revision. Older than what is known already, it is left. */
void ad_host_claim_seen(ad_host *host, const claim *c, uint64_t revision);
/* The last claim ad_host_claim_seen kept, with its revision, into *out;
 * false when none is known (or it no longer parses). */
bool ad_host_claim_last_seen(const ad_host *host, claim *out);
/* Why the last wake did not serve, for status (hosts/: a served wake clears
 * it with NULL). message may be NULL. */
void ad_host_set_last_failure(ad_host *host, const char *reason, const char *message);
/* An attempt recorded against a build (wake/). */
void ad_host_count_failed_attempt(ad_host *host, const char *reason);
