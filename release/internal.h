/* Shared pieces of release/ that are not part of its public API. Tests may
 * include this header to exercise a part (the O_NOFOLLOW walk, the manifest
 * parser) directly. */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/sha256.h"
#include "release/release.h"

/* Streaming block size for every hash and copy: large enough that the
 * per-call overhead of read() and EVP_DigestUpdate() disappears next to the
 * hashing itself, small enough to stay in L2/L3-friendly territory. */
#define REL_BLOCK_SIZE (1u << 20)

/* Source directories deeper than this are refused: every level holds a
 * directory fd open during the copy and the walks recurse. */
#define REL_MAX_DEPTH 64

#define REL_MANIFEST_NAME "manifest.json"
#define REL_LIVE_NAME "live"
#define REL_STAGING_PREFIX ".staging-"
#define REL_TRASH_PREFIX ".trash-"
#define REL_LIVE_TMP_PREFIX ".live.tmp-"

struct rel_store {
    int dirfd;
    char *path; /* for error messages only; lookups go through dirfd */
};

/* ---- names and paths (names.c) ---- */

/* A version name is a common/names.h name that is also not "live", which
 * would collide with the live link in the same directory. */
int rel_version_check(const char *version, act_error *err);

/* Both names of an operation on one version: the host's, then the
 * version's (its error prefixed with the host). */
int rel_names_check(const char *host, const char *version, act_error *err);

/* True for a path inside a build: relative, components of 1 to 255 bytes
 * separated by single '/', none "." or "..", no control characters, shorter
 * than REL_PATH_SIZE. */
bool rel_build_path_is_valid(const char *path);
int rel_build_path_check(const char *what, const char *path, act_error *err);

/* True for 64 lowercase hex digits. */
bool rel_digest_is_valid(const char *digest);

/* ---- opening inside a build (open_beneath.c) ---- */

/* Opens path (a valid build path) relative to build_dirfd with flags, never
 * following a symlink on any component and never leaving build_dirfd.
 * Returns the fd or a negative errno (-ELOOP for a symlink). Uses openat2
 * when the kernel has it, else rel_open_beneath_walk. */
int rel_open_beneath(int build_dirfd, const char *path, int flags);
/* The fallback: one O_NOFOLLOW openat per component. */
int rel_open_beneath_walk(int build_dirfd, const char *path, int flags);

/* ---- manifests (manifest.c) ---- */

/* The manifest formats this activator reads; it writes the newest. Format
 * 1 listed regular files only; format 2 lists every entry of the build with
 * its type and mode (release.h). */
#define REL_MANIFEST_FORMAT_FILES 1
#define REL_MANIFEST_FORMAT_ENTRIES 2

/* What an entry of a build is. Format 1 manifests hold files only. */
typedef enum rel_entry_type {
    REL_ENTRY_FILE,
    REL_ENTRY_DIR,
    REL_ENTRY_SYMLINK,
} rel_entry_type;

/* The modes a stage gives what it copies, which verify insists on: nothing
 * is writable once staged, and the build's owner (root) is the only one who
 * could change that. */
#define REL_MODE_FILE 0444
#define REL_MODE_EXECUTABLE 0555
#define REL_MODE_DIR 0755
#define REL_MODE_SYMLINK 0777

typedef struct rel_file {
    char *path;
    rel_entry_type type;
    unsigned mode;                /* permission bits (07777); 0 in a format 1 manifest */
    uint64_t size;                /* files only */
    char digest[REL_DIGEST_SIZE]; /* files only */
    char *target;                 /* symlinks only: relative, and resolving inside the build */
} rel_file;

typedef struct rel_manifest {
    unsigned format;
    char host[REL_NAME_SIZE];
    char version[REL_NAME_SIZE];
    char exec_path[REL_PATH_SIZE];
    char build_digest[REL_DIGEST_SIZE];
    uint64_t staged_at;
    /* Where the build came from, for an operator and for other boxes: the
     * absolute path of a directory stage ("" in a format 1 manifest). */
    char source[REL_PATH_SIZE];
    rel_file *files; /* every entry, sorted by path, strcmp order, no duplicates */
    size_t n_files;
} rel_manifest;

/* Computes the build digest (encoding in release.h) of files, which must
 * already be sorted, as manifest format says. */
int rel_build_digest(unsigned format, const rel_file *files, size_t n_files,
                     char out[REL_DIGEST_SIZE]);

/* The type's name in a manifest ("file", "dir", "symlink"). */
const char *rel_entry_type_name(rel_entry_type type);

/* Frees what an entry owns. */
void rel_file_clear(rel_file *file);

/* True for a symlink target a build may hold: relative, shorter than
 * REL_PATH_SIZE, no control characters, not empty. Where it leads is
 * checked on the staged tree (rel_symlinks_stay_inside). */
bool rel_symlink_target_is_valid(const char *target);

/* Every symlink of m, followed as the kernel would through the entries m
 * lists (symlinks within symlinks included), stays inside the build; a
 * path that ends at an entry the build lacks is allowed, since the build
 * never changes and it stays missing. label names the build in errors.
 * -EXDEV when one leads out, -ELOOP for a loop (symlinks.c). */
int rel_symlinks_stay_inside(const rel_manifest *m, const char *label, act_error *err);

/* Reads and validates <version_dirfd>/manifest.json. where is the file's
 * path for messages. host and version are what the directory says the build
 * is; a manifest naming anything else is refused. */
int rel_manifest_read(int version_dirfd, const char *where, const char *host, const char *version,
                      rel_manifest *out, act_error *err);

/* Writes m as <dirfd>/manifest.json (mode 0444) with act_write_atomic. */
int rel_manifest_write(int dirfd, const rel_manifest *m, act_error *err);

/* The file entry for path, or NULL. */
const rel_file *rel_manifest_find(const rel_manifest *m, const char *path);

/* Fills id from m; exec_path selects the executable (m->exec_path when
 * NULL). The path must be listed. */
void rel_manifest_identity(const rel_manifest *m, const rel_file *exec, rel_identity *id);

void rel_manifest_clear(rel_manifest *m);

/* ---- host directories (store.c) ---- */

/* Opens <releases>/<host> as a directory fd, never through a symlink.
 * With create, makes it first (mode 0755). */
int rel_host_open(rel_store *store, const char *host, bool create, act_error *err);
/* The same for readers, to whom a host with nothing staged is simply empty:
 * -ENOENT then leaves err alone. */
int rel_host_open_if_staged(rel_store *store, const char *host, act_error *err);

/* Opens <host>/<version> as a directory fd, never through a symlink; errors
 * say that the version is not staged. */
int rel_version_open(rel_store *store, int host_dirfd, const char *host, const char *version,
                     act_error *err);

/* Reads the live link of an open host directory into out, once. */
int rel_live_read(rel_store *store, int host_dirfd, const char *host, char out[REL_NAME_SIZE],
                  act_error *err);

/* Takes an exclusive flock on fd, waiting; promote and gc hold the host's so
 * gc never removes a version that a concurrent promote is making live. */
int rel_lock(int fd, bool wait);
/* rel_lock of a host's directory, waiting, with the error said for it. */
int rel_lock_host(rel_store *store, int host_dirfd, const char *host, act_error *err);
void rel_unlock(int fd);

/* Removes dirfd/name and everything below it. */
int rel_remove_tree(int dirfd, const char *name);

/* Removes staging and trash directories that nobody holds a lock on any
 * more, and temporary live links: leftovers of a stage, gc or promote that
 * crashed. Best effort. Call it with the host lock held: stage creates and
 * locks its staging directory under that lock, and promote creates and
 * renames its temporary link under it, so nothing in progress looks
 * abandoned to the sweep. */
void rel_sweep_stale(int host_dirfd);

/* A random 8-hex-digit suffix for temporary names. */
void rel_random_suffix(char out[9]);

/* Lists the versions in an open host directory (rel_list's body). */
int rel_list_open(rel_store *store, int host_dirfd, const char *host, rel_entry **entries,
                  size_t *n, act_error *err);

/* Verifies the version directory (rel_verify's body). */
int rel_verify_open(rel_store *store, int host_dirfd, const char *host, const char *version,
                    act_error *err);
