/* Checkpoints: one archive of a host's state directory, with its SHA-256,
 * in a directory every box of the fleet mounts (Checkpoints=dir:///PATH):
 *
 *   <dir>/<host>/<id>.tar.zst   the archive (tar, zstd), mode 0600
 *   <dir>/<host>/<id>.json      what it is: id, sha256, size, generation, box, time
 *
 * or in a registry (Checkpoints=docker://REGISTRY/NAMESPACE): each host's
 * checkpoints are artifacts of the repository NAMESPACE/HOST, one per
 * checkpoint, tagged with its id, the archive as the single layer (its
 * digest is the archive's SHA-256) and what the sidecar says as
 * annotations (checkpoint/registry.c). A ckpt_place names either; the
 * ckpt_place_* functions work on both.
 *
 * Every function blocks on the filesystem (an archive of a large state
 * directory takes seconds): the daemon runs them on its offload workers,
 * never on its loop. They know nothing of the daemon, claims or cgroups;
 * they share no state, so two may run at once on different hosts. Host
 * names and checkpoint ids are checked before any path is built of them. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/names.h"

#define CKPT_ID_SIZE (ACT_NAME_MAX + 1)
#define CKPT_DIGEST_SIZE 65 /* SHA-256 as lowercase hex and its NUL */
#define CKPT_DEFAULT_KEEP 3

typedef struct ckpt_info {
    char id[CKPT_ID_SIZE];
    char sha256[CKPT_DIGEST_SIZE]; /* "" when its sidecar is missing */
    uint64_t size;                 /* of the archive, in bytes */
    uint64_t generation;           /* the generation whose state it holds; 0: not known */
    char box[ACT_NAME_MAX + 1];    /* the box that wrote it; "" when not known */
    uint64_t stamp_usec;           /* wall clock when it was written */
} ckpt_info;

/* "dir:///ABSOLUTE/PATH" into *dir (malloc'd); -EPROTONOSUPPORT (with
 * nothing set) for a docker:// URL, which ckpt_place_parse takes. */
int ckpt_parse_url(const char *url, char **dir, act_error *err);

/* Where Checkpoints= keeps them, and what a registry needs. */
typedef struct ckpt_place {
    char *dir;       /* dir://: the directory; NULL for a registry */
    char *namespace; /* docker://REGISTRY/NAMESPACE as written; NULL for a directory */
    /* For a registry: a directory of this box where an archive is written
     * before its push and read back before its restore (it holds one per
     * host at a time, and nothing once done), and how the registry is
     * reached (RegistryAuthFile=, RegistryInsecure=). */
    char *spool;
    char *auth_file;
    char **insecure;
    uint64_t chunk_bytes; /* uploads above this go in chunks of it; 0: the default */
} ckpt_place;

/* Parses url (dir:///PATH or docker://REGISTRY/NAMESPACE) into *out. */
int ckpt_place_parse(const char *url, ckpt_place *out, act_error *err);
/* The registry's side of out: spool, auth_file and insecure copied. */
int ckpt_place_set_registry(ckpt_place *out, const char *spool, const char *auth_file,
                            char *const *insecure, act_error *err);
void ckpt_place_clear(ckpt_place *place);

/* ckpt_write, ckpt_list, ckpt_prune and ckpt_restore at place. In a
 * registry, a pruning the registry refuses (deletion not allowed) is
 * -EOPNOTSUPP, saying so; restore fetches the archive by its digest, and
 * nothing changes unless its bytes give it. */
int ckpt_place_write(const ckpt_place *place, const char *host, const char *state_dir,
                     uint64_t generation, const char *box, const atomic_bool *cancel,
                     ckpt_info *out, act_error *err);
int ckpt_place_list(const ckpt_place *place, const char *host, ckpt_info **out, size_t *n,
                    act_error *err);
int ckpt_place_prune(const ckpt_place *place, const char *host, unsigned keep,
                     const char *const *protected, size_t n_protected, act_error *err);
int ckpt_place_restore(const ckpt_place *place, const char *host, const char *id,
                       const char *sha256, const char *state_dir, uid_t uid, gid_t gid,
                       act_error *err);

/* A checkpoint id is a name (common/names.h): it becomes a file name. */
int ckpt_check_id(const char *id, act_error *err);

/* Archives state_dir (its contents; regular files, directories and
 * symlinks, which are stored as links and never followed) into
 * <dir>/<host>/<id>: written under a hidden temporary name while hashed,
 * fsync'd, renamed into place, its sidecar likewise, the directory fsync'd.
 * *out describes it. When *cancel becomes true the write stops, the
 * temporary file is removed, and -ECANCELED is returned. The caller sees to
 * it that nothing writes state_dir meanwhile. */
int ckpt_write(const char *dir, const char *host, const char *state_dir, uint64_t generation,
               const char *box, const atomic_bool *cancel, ckpt_info *out, act_error *err);

/* host's checkpoints, newest first (*out malloc'd, *n of them; none: NULL,
 * 0). A host with no directory yet has none. */
int ckpt_list(const char *dir, const char *host, ckpt_info **out, size_t *n, act_error *err);

/* Removes all but the newest keep checkpoints of host, never one of the
 * n_protected ids in protected (the one the claim names, the one this box
 * restored). Returns how many it removed. */
int ckpt_prune(const char *dir, const char *host, unsigned keep, const char *const *protected,
               size_t n_protected, act_error *err);

/* Replaces state_dir by the contents of checkpoint id of host, only if the
 * archive's SHA-256 is sha256: hashed whole before anything changes (a
 * missing archive: -ENOENT; another digest: -EBADMSG), extracted into a
 * hidden sibling of state_dir refusing absolute paths, "..", links that
 * lead out, hard links and anything but files, directories and symlinks
 * (-EINVAL, naming the entry), owned by uid:gid, synced, then exchanged with
 * state_dir in one rename (RENAME_EXCHANGE) and the old tree removed. On
 * any error state_dir is as it was. state_dir's parent must exist. */
int ckpt_restore(const char *dir, const char *host, const char *id, const char *sha256,
                 const char *state_dir, uid_t uid, gid_t gid, act_error *err);
