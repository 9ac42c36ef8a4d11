/* The dir store's on-disk layout, shared by its CAS side and its watch side.
 *
 *   <dir>/<host>.claim  the claim and its revision in two slots written
 *                       alternately in place (claim_slots.h), or a tombstone
 *                       left by a delete so the host's revision keeps growing
 *   <dir>/.revision     the ceiling of the store-wide revision (decimal): no
 *                       revision above it was ever handed out
 *   <dir>/.revision-last  "<last revision handed out> <boot id>", fixed width
 *   <dir>/.lock         flock'd around every CAS and delete
 *   <dir>/.boxes/<box>.json  a box record (claims.h: box records) with the time
 *                       its lease runs out, rewritten under the lock; not a
 *                       claim, never in the journal
 *   <dir>/.journal      a header {"compacted":C} (every revision up to C is
 *                       only in the claim files), then one line per change,
 *                       appended under the lock:
 *                       {"revision":N,"host":"h","boxes":[...],"claim":{...}} or
 *                       {"revision":N,"host":"h","boxes":[...],"deleted":true},
 *                       boxes being every box the claim named before or
 *                       after the write: a box's watch reads only its lines
 *   <dir>/.by-box/<box>/<host>  an empty file: host's claim names box, or did
 *                       (claims.h: a box's own claims). Made under the lock
 *                       before the claim file that names box is written,
 *                       fsync'd, and never removed by a write: the index is
 *                       a superset, and a box's listing reads each claim
 *                       file it names, so the claim files stay the only
 *                       truth and no crash can hide a claim from its box
 *   <dir>/.layout       {"layout":3}, written by the first check
 *
 * Hidden names cannot collide with hosts: host names never start with '.'.
 * The claim files and the ceiling are the truth. A claim file is made (a
 * host's first claim, or one outgrowing its slots) temp + fsync + rename +
 * fsync dir, and then written in place: one write, one fdatasync. The
 * ceiling is written temp + fsync + rename + fsync dir and moves in steps
 * of DIR_REVISION_STEP, so most writes pay for the claim's write alone.
 * .revision-last is written in place without fsync: the page cache keeps
 * it exact for every process of this boot, and after a reboot (another
 * boot id) it is not trusted and the next revision starts above the
 * ceiling, so a power loss can skip revisions but never repeat one. The journal only feeds watches,
 * so it is appended without fsync: a crash can lose its tail, never a claim, and a line is applied
 * only once its newline is there. */
#pragma once

#include <pthread.h>

#include "claims/claim_slots.h"
#include "claims/store_internal.h"

#define DIR_REVISION_FILE ".revision"
#define DIR_REVISION_LAST_FILE ".revision-last"
#define DIR_REVISION_STEP 1000
#define DIR_LOCK_FILE ".lock"
#define DIR_BOXES_DIR ".boxes"
#define DIR_DRAIN_DIR ".drain"
#define DIR_JOURNAL_FILE ".journal"
#define DIR_INDEX_DIR ".by-box"
#define DIR_LAYOUT_FILE ".layout"
#define DIR_CLAIM_SUFFIX ".claim"
/* The layout this store writes: claims in two-slot files (claim_slots.h).
 * Layout 2 kept one JSON file per claim, "<host>.json"; a store of it is
 * moved to this one by the first layout check. The etcd store's layout
 * (CLAIMS_LAYOUT) is its own. */
#define DIR_LAYOUT 3
#define DIR_LAYOUT_JSON_FILES 2
/* Past this size the journal is restarted (under the lock) with only its
 * header, so it never grows without bound; a watcher that had not read what
 * was dropped gets a clear "compacted" error like etcd's, and lists again. */
#define DIR_JOURNAL_MAX (1024 * 1024)

typedef struct dir_store {
    claim_store base;
    char *path;
    int dirfd;
    int lockfd;
    /* flock excludes other processes but not our own threads (they share the
     * lock file's description), and asynchronous calls run on workers. */
    pthread_mutex_t thread_lock;
    int last_fd;      /* .revision-last, read and written in place */
    /* The calls a claim's write in place makes: the system's, or in a crash
     * test a recorder's (claims_dir_use_io). */
    const claim_slots_io *io;
    char boot_id[40]; /* this boot's id, or "" when the kernel does not say */
} dir_store;

/* The last revision handed out (0 for an empty store). The caller holds the
 * lock (dir_lock: the thread lock, then flock); *ceiling is set to the
 * durable ceiling. */
int dir_last_revision(dir_store *ds, uint64_t *last, uint64_t *ceiling, act_error *err);
int dir_lock(dir_store *ds, act_error *err);
void dir_unlock(dir_store *ds);

/* Whether name is "<host><suffix>" of a valid host name, which it copies
 * into host (host_size bytes). */
bool dir_host_file_name(const char *name, const char *suffix, char *host, size_t host_size);
/* Makes host's claim file anew, whole, holding one record (a tombstone when
 * payload is NULL), atomically: temp file, fsync, rename, fsync dir. */
int dir_create_claim_file(dir_store *ds, const char *host, uint64_t revision, const char *payload,
                          size_t len, act_error *err);
/* Moves every "<host>.json" claim of layout 2 into its claim file, keeping
 * its revision (store_dir_migrate.c). The caller holds the lock. */
int dir_migrate_json_claims_locked(dir_store *ds, act_error *err);
/* Routes the writes in place of store (a dir store) through io, for a test
 * that records them. */
void claims_dir_use_io(claim_store *store, const claim_slots_io *io);

/* Box records (store_dir_boxes.c). */
int dir_box_call(claim_store *store, claims_box_call call, const claims_box *record,
                 claims_box *out, act_error *err);
/* Every listing is the same one: a record carries its expiry in its file. */
int dir_box_list(claim_store *store, claims_box_listing what, claims_box **out, size_t *n_out,
                 act_error *err);

int dir_watch_start(claim_store *store, sd_event *event, const claims_watch_scope *scope,
                    uint64_t from_revision, claims_watch_fn fn, void *userdata, claims_watch **out,
                    act_error *err);
/* Parses one journal line into a change; returns 0, or 1 for a header
 * (revision set to the compacted revision: nothing up to it is in this
 * journal), or 2 for a change that does not concern box (revision set;
 * box NULL: every change concerns), or negative for a line that is not a
 * change. */
int dir_journal_parse_line(const char *line, size_t len, const char *box, claim_change *change,
                           act_error *err);

/* Whether box has a live record, for a takeover's write; the caller holds
 * the store's lock (store_dir_boxes.c). */
int dir_box_live_locked(dir_store *ds, const char *box, bool *live, act_error *err);
