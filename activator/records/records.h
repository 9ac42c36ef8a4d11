/* The daemon's on-disk records, written for the next daemon to read.
 *
 * The daemon may die at any instant and its generations keep running, so
 * everything a successor needs to resume supervising them (or retire them
 * with proof) is on disk before the exec that creates them:
 *
 *   <state>/hosts/<host>/generations/<N>.json   one per live generation
 *   <state>/hosts/<host>/build-state.json        which build runs against the state,
 *                                                and the generation that started it
 *   <state>/hosts/<host>/checkpoint.json         the restored checkpoint
 *   <state>/hosts/<host>/probe.json              a move's probe here: its op and deadline
 *
 * Every write is temp + rename: a reader sees the old or the new record,
 * never a torn one. All but the generation records are made durable too
 * (fsync of the file and the directory): a generation does not outlive a
 * power loss, and after a daemon's crash the page cache still has its
 * record. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "common/error.h"
#include "common/names.h"

#define REC_DIGEST_HEX 65 /* SHA-256 as hex plus the NUL */

typedef struct rec_build_ref {
    char version[ACT_NAME_MAX + 1];
    char digest[REC_DIGEST_HEX];       /* the executable's SHA-256 */
    char build_digest[REC_DIGEST_HEX]; /* the whole build's digest; pins name it */
} rec_build_ref;

typedef enum rec_generation_phase {
    REC_GEN_STARTING,
    REC_GEN_SERVING,
    REC_GEN_RETIRING,
    /* Serving, frozen (ParkMode=freeze): the next daemon resumes it frozen
     * and thaws it on the next connection. */
    REC_GEN_FROZEN,
} rec_generation_phase;

typedef struct rec_generation_record {
    char host[ACT_NAME_MAX + 1];
    uint64_t generation;
    uint64_t session;
    uint64_t admission_revision; /* the claim revision the admission got: its fencing token */
    char incarnation[ACT_NAME_MAX + 1];
    rec_build_ref build;
    rec_generation_phase phase;
    int32_t pid; /* main process; 0 before the exec */
    uint64_t started_usec; /* wall clock */
    /* ExecReplicate='s replica running beside it when the record was
     * written (rewritten at each restart of it), so that the next daemon
     * watches it on; 0: none. */
    int32_t replica_pid;
} rec_generation_record;

/* The build that runs against a host's state. generation and session are
 * the ones that first ran this build against it: a state migration cares
 * about the change of build, not about every wake of the same one. */
typedef struct rec_build_state {
    rec_build_ref build;
    uint64_t generation;
    uint64_t session;
    uint64_t written_usec;
} rec_build_state;

/* Opens (creating when missing) <state_dir>/hosts/<host>/ and returns its fd.
 * The host name is checked first; nothing is created for a bad one. */
int rec_open_host(int state_dirfd, const char *host, act_error *err);

int rec_write_generation(int host_dirfd, const rec_generation_record *record, act_error *err);
int rec_read_generation(int host_dirfd, const char *host, uint64_t generation,
                        rec_generation_record *out, act_error *err);
/* Removes a generation's record once it is proven stopped. Absent is fine. */
int rec_remove_generation(int host_dirfd, uint64_t generation, act_error *err);
/* The generation numbers with a record, ascending; *out is malloc'd. */
int rec_list_generations(int host_dirfd, uint64_t **out, size_t *count, act_error *err);

bool rec_build_ref_equal(const rec_build_ref *a, const rec_build_ref *b);

int rec_write_build_state(int host_dirfd, const rec_build_state *state, act_error *err);
/* What the gate calls before an exec: writes state unless build-state.json
 * already names the very same build, in which case the file stays as it is
 * (the same build makes the record idempotent) and no durable write is
 * paid; an unreadable file is rewritten. Returns 1 when it wrote, 0 when
 * the file already said so. */
int rec_note_build_state(int host_dirfd, const char *host, const rec_build_state *state,
                         act_error *err);
/* -ENOENT when no build ever ran against this state. */
int rec_read_build_state(int host_dirfd, const char *host, rec_build_state *out, act_error *err);

/* The checkpoint the state directory was last restored to; "" when none. */
int rec_read_checkpoint(int host_dirfd, const char *host, char *out, size_t out_size,
                        act_error *err);
int rec_write_checkpoint(int host_dirfd, const char *checkpoint, act_error *err);

/* A move's probe on this box: the op it runs under and the wall clock by
 * which it must serve, written at its first exec, so a daemon restarted in
 * the middle keeps the same deadline rather than starting a new window. */
typedef struct rec_probe {
    char op_id[65];
    uint64_t deadline_usec;
} rec_probe;

/* Returns 1 with *out, 0 when there is none. */
int rec_read_probe(int host_dirfd, const char *host, rec_probe *out, act_error *err);
int rec_write_probe(int host_dirfd, const rec_probe *probe, act_error *err);
/* Removes it; one already gone is not an error. */
int rec_remove_probe(int host_dirfd, act_error *err);

const char *rec_generation_phase_name(rec_generation_phase phase);
