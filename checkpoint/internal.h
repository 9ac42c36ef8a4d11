/* Shared by the files of checkpoint/; not for other layers. */
#pragma once

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/checkpoint.h"
#include "common/cleanup.h"
#include "common/sha256.h"

#define CKPT_ARCHIVE_SUFFIX ".tar.zst"
#define CKPT_SIDECAR_SUFFIX ".json"

/* Checks host and opens <dir>/<host> (created, mode 0700, when create). */
int ckpt_open_host_dir(const char *dir, const char *host, bool create, act_error *err);

/* A fresh id: the UTC time to the microsecond, then 8 random hex digits, so
 * ids sort by age and two boxes writing at once never collide. */
int ckpt_mint_id(uint64_t stamp_usec, char out[CKPT_ID_SIZE], act_error *err);

/* The sidecar <id>.json in host_dirfd, written temp + fsync + rename; the
 * caller fsyncs the directory. */
int ckpt_write_sidecar(int host_dirfd, const ckpt_info *info, act_error *err);
/* Fills what the sidecar of id says; -ENOENT when it has none. */
int ckpt_read_sidecar(int host_dirfd, const char *id, ckpt_info *info, act_error *err);

/* A restore's host, id and SHA-256 checked before anything is opened. */
int ckpt_check_restore(const char *host, const char *id, const char *sha256, act_error *err);

/* ckpt_restore's work once the archive (fd, at any offset) is known to
 * hash to sha256: extracted beside state_dir and exchanged with it. */
int ckpt_restore_verified(int fd, const char *id, const char *sha256, const char *state_dir,
                          uid_t uid, gid_t gid, act_error *err);

/* For qsort of ckpt_info: newest first, by the time written, then by id
 * (ids begin with the time, so one without a sidecar still sorts by age). */
int ckpt_newest_first(const void *a, const void *b);

/* True when id is one of the n_protected ids (NULL entries skipped). */
bool ckpt_is_protected(const char *id, const char *const *protected, size_t n_protected);

/* The registry's side of the ckpt_place_* calls (checkpoint/registry.c);
 * digests (may be NULL) gets each listed checkpoint's manifest digest. */
int ckpt_registry_write(const ckpt_place *place, const char *host, const char *state_dir,
                        uint64_t generation, const char *box, const atomic_bool *cancel,
                        ckpt_info *out, act_error *err);
int ckpt_registry_list(const ckpt_place *place, const char *host, ckpt_info **out, size_t *n,
                       char (**digests)[80], act_error *err);
int ckpt_registry_prune(const ckpt_place *place, const char *host, unsigned keep,
                        const char *const *protected, size_t n_protected, act_error *err);
int ckpt_registry_restore(const ckpt_place *place, const char *host, const char *id,
                          const char *sha256, const char *state_dir, uid_t uid, gid_t gid,
                          act_error *err);

/* Removes name in dirfd and, for a directory, everything below it, never
 * following a symlink. Absent is fine. */
int ckpt_remove_tree(int dirfd, const char *name);

static_assert(CKPT_DIGEST_SIZE == ACT_SHA256_HEX_SIZE, "CKPT_DIGEST_SIZE is not SHA-256 in hex");
