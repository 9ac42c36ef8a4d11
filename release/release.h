/* Staged builds a host can run, the live link, SHA-256 verification, pins and
 * the verified executable fd the process layer execs.
 *
 * Layout under the releases directory:
 *
 *   <releases>/<host>/<version>/           one build: its files + manifest.json
 *   <releases>/<host>/<version>/manifest.json
 *   <releases>/<host>/live -> <version>    the version an unpinned wake runs
 *   <releases>/<host>/.staging-*           a stage in progress (or a crashed one)
 *   <releases>/<host>/.trash-*             a version being removed by gc
 *
 * Nothing runs unless this layer verified it: rel_resolve hashes the very fd
 * it hands back, so what the caller execs is what was checked, whatever
 * happens to the live link or to the path on disk afterwards.
 *
 * Errors: every function that can fail returns a negative errno and fills
 * err with a sentence naming the host, the version and the file involved.
 * The errnos a caller may want to tell apart:
 *   -EINVAL       a bad host, version or path argument; nothing was touched
 *   -ENOENT       the host, version or live link does not exist
 *   -EEXIST       rel_stage: the version exists with different content
 *   -EBADMSG      a file's size or SHA-256 differs from the manifest
 *   -EKEYREJECTED the pin's digest differs from the build's digest
 *   -EUCLEAN      a manifest is malformed (the message names file and field)
 *   -EFBIG        a manifest is larger than REL_MANIFEST_MAX
 *   -ELOOP        a symlink where the build must hold a real file or dir
 *   -EPERM        the executable is not a regular executable file, or is
 *                 writable by group or other
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "common/error.h"

/* Host and version names follow common/names.h: 1 to 64 characters of
 * [A-Za-z0-9._-], not starting with '.'. The +1 is the NUL. */
#define REL_NAME_SIZE 65

/* A lowercase hex SHA-256 and its NUL. */
#define REL_DIGEST_SIZE 65

/* Longest path of a file inside a build, with its NUL. Each component is 1 to
 * 255 bytes, is not "." or "..", and has no control characters, so a path
 * read from a manifest can never climb out of its build. */
#define REL_PATH_SIZE 1024

/* A manifest larger than this is refused rather than parsed: it comes from
 * disk and a corrupted or hostile one must not make the daemon allocate
 * without bound. 8 MiB holds roughly 50,000 file entries. */
#define REL_MANIFEST_MAX (8u * 1024u * 1024u)

/* The releases directory, held open as a dirfd so every later lookup is
 * relative to the directory that was opened, not to a path that may have
 * been replaced since. */
typedef struct rel_store rel_store;

/* What a staged build is, as recorded in its manifest.
 *
 * build_digest binds every entry of the build to one value that a pin can
 * name. A build holds regular files, directories and symlinks whose
 * targets stay inside it; a stage copies hard links as separate files and
 * refuses devices, fifos, sockets and set-user-ID or set-group-ID files.
 * The digest is the lowercase hex SHA-256 of this byte string (manifest
 * format 2):
 *
 *   for each entry of the build, sorted by path in strcmp (byte) order:
 *       path bytes, one NUL byte (0x00),
 *       the type ('f' file, 'd' directory, 'l' symlink) and the mode as
 *       four octal digits ("f0555"), one NUL byte,
 *       for a file its 64-character lowercase hex SHA-256, for a symlink
 *       its target's bytes, for a directory nothing; one '\n' (0x0a)
 *
 * Neither a path nor a target holds NUL or a control character, so the
 * encoding is unambiguous. The modes are the ones a stage gives (files
 * 0444, or 0555 when executable in the source; directories 0755), so a
 * build's digest does not depend on the umask or the source's owner.
 * Format 1 manifests, written before, listed regular files only and
 * digested "path NUL sha256 \n" for each; they are still read. */
typedef struct rel_identity {
    char version[REL_NAME_SIZE];
    /* Path of the executable inside the build directory. For a single-file
     * build this is the source file's base name. */
    char exec_path[REL_PATH_SIZE];
    /* SHA-256 of the executable file alone: what rel_resolve compares the
     * opened fd against. */
    char digest[REL_DIGEST_SIZE];
    /* SHA-256 over the whole build, encoded as above: what a pin names. */
    char build_digest[REL_DIGEST_SIZE];
    /* Bytes of all the build's files together, for rel_list and gc. */
    uint64_t size;
    /* Bytes of the executable alone, checked against the opened fd. */
    uint64_t exec_size;
    /* When the build was staged, microseconds since the Unix epoch (UTC).
     * gc's keep_newest orders versions by this. */
    uint64_t staged_at;
    /* Where it was staged from: a directory's absolute path, or an image
     * reference resolved to its manifest's digest ("oci:PATH@sha256:..."); ""
     * when its manifest is of format 1, which did not record it. */
    char source[REL_PATH_SIZE];
} rel_identity;

/* The version a start must run exactly, chosen by a swap. digest is the
 * BUILD digest (rel_identity.build_digest), so a pin covers every file of a
 * directory build, not only the executable. */
typedef struct rel_pin {
    char version[REL_NAME_SIZE];
    char digest[REL_DIGEST_SIZE];
} rel_pin;

/* A verified build ready to exec. exec_fd is O_RDONLY|O_CLOEXEC and has been
 * hashed after it was opened: exec it with execveat(fd, "", argv, envp,
 * AT_EMPTY_PATH). An executable that is a "#!" script runs that way only when
 * the fd is made to survive the exec (the kernel hands the interpreter
 * /dev/fd/N); the daemon does so for scripts (activator/daemon/wake/build_prepare.c). */
typedef struct rel_resolved {
    rel_identity identity;
    int exec_fd;
} rel_resolved;

/* One version of a host as rel_list sees it. A version whose manifest cannot
 * be read is still listed, with manifest_ok false and the reason in problem,
 * so an operator sees the broken build instead of a list that fails whole. */
typedef struct rel_entry {
    rel_identity identity;
    bool is_live;
    bool manifest_ok;
    char problem[256];
} rel_entry;

/* Opens releases_dir, creating it (and missing parents, mode 0755) when it
 * does not exist. The store keeps the path only for error messages. */
int rel_store_open(const char *releases_dir, rel_store **out, act_error *err);

/* Closes the store's dirfd and frees it; NULL is fine. */
void rel_store_free(rel_store *store);
DEFINE_TRIVIAL_CLEANUP_FUNC(rel_store *, rel_store_free)

/* Copies source_path into <host>/<version> and records its manifest.
 *
 * source_path is either one executable file (exec_path must be NULL) or a
 * directory of regular files and directories (exec_path names the
 * executable inside it, relative). Symlinks, devices, fifos and sockets
 * inside a source directory are refused rather than followed, because a
 * build must be self-contained to be verifiable.
 *
 * The copy goes to a hidden staging directory on the same filesystem, is
 * hashed while it is copied, every file and directory is fsynced, then it is
 * renamed into place with RENAME_NOREPLACE. A crash at any point leaves no
 * partial version visible; a crashed stage's directory is not locked any
 * more and is removed by the next stage or gc of the host.
 *
 * Staging the same content (same build digest and exec path) under an
 * existing version is a no-op that returns the existing identity, after
 * re-verifying the existing build. Different content is refused with
 * -EEXIST and changes nothing. out may be NULL. */
int rel_stage(rel_store *store, const char *host, const char *version, const char *source_path,
              const char *exec_path, rel_identity *out, act_error *err);

/* rel_stage of a tree made from something else (an image's layers): the
 * manifest records source_label as where the build came from ("" when it
 * is too long to record), not the tree's path. */
int rel_stage_as(rel_store *store, const char *host, const char *version, const char *source_path,
                 const char *exec_path, const char *source_label, rel_identity *out,
                 act_error *err);

/* rel_stage_as that stages only a build of digest expected_digest (NULL:
 * any): a tree that hashes otherwise is refused with -EKEYREJECTED before
 * anything appears under the version. A box fetching a pinned build uses
 * it, so it never holds a build that differs from the pin under the pin's
 * version. */
int rel_stage_expecting(rel_store *store, const char *host, const char *version,
                        const char *source_path, const char *exec_path, const char *source_label,
                        const char *expected_digest, rel_identity *out, act_error *err);

/* Points <host>/live at version: a new symlink renamed over the old one, so
 * a reader sees either the old or the new target, never none. The version
 * is fully re-verified first (rel_verify); a build that does not verify is
 * never made live. */
int rel_promote(rel_store *store, const char *host, const char *version, act_error *err);

/* Reads <host>/live once into out. -ENOENT when the host has no live link;
 * -EUCLEAN when the link's target is not a valid version name. */
int rel_live_version(rel_store *store, const char *host, char out[REL_NAME_SIZE], act_error *err);

/* Resolves the build a start must run and opens its executable.
 *
 * With pin NULL the live link is read once; otherwise pin->version is used
 * and the build's digest must equal pin->digest (-EKEYREJECTED if not).
 * exec_override, when not NULL, replaces the manifest's exec_path (it must be
 * a file listed in the manifest), for hosts whose config names another
 * entry point of a directory build.
 *
 * The executable is opened O_RDONLY|O_CLOEXEC|O_NOFOLLOW with no symlink
 * allowed anywhere on its path inside the build (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, or a component-by-component O_NOFOLLOW walk where
 * openat2 is missing), must be a regular file, executable and not writable
 * by group or other, and the opened fd is hashed and compared with the
 * manifest. Only the executable is hashed here; the manifest's own build
 * digest is recomputed from its file list, so the pin still binds the
 * executable. rel_verify re-hashes the other files.
 *
 * On success the caller owns out->exec_fd; release it with
 * rel_resolved_release. On failure out->exec_fd is -1. */
int rel_resolve(rel_store *store, const char *host, const rel_pin *pin, const char *exec_override,
                rel_resolved *out, act_error *err);

/* Closes out->exec_fd (if open) and sets it to -1. Safe to call twice. */
void rel_resolved_release(rel_resolved *resolved);

/* Lists the staged versions of host, oldest staged first (ties by name).
 * A host with no directory has no versions: 0 with *n = 0. The caller frees
 * *entries with free(). */
int rel_list(rel_store *store, const char *host, rel_entry **entries, size_t *n, act_error *err);

/* Re-hashes every file of the build against its manifest and checks that
 * the build holds exactly the listed files (no extra file, no symlink, no
 * special file). 0 when the build is intact. */
int rel_verify(rel_store *store, const char *host, const char *version, act_error *err);

/* Removes versions of host except: the live one, every version named in
 * keep_versions (the caller passes the pinned, held and running ones), and
 * the keep_newest most recently staged ones. A removed version is first
 * renamed to a hidden trash name, so it disappears atomically, then deleted.
 * Stale staging and trash directories of crashed runs are removed too.
 * *removed (may be NULL) receives the number of versions removed. */
int rel_gc(rel_store *store, const char *host, const char *const *keep_versions, size_t n_keep,
           size_t keep_newest, size_t *removed, act_error *err);

/* What rel_gc_versions keeps besides the live version. */
typedef struct rel_gc_options {
    const char *const *keep_versions; /* pinned, held, running: never removed */
    size_t n_keep;
    size_t keep_newest; /* the most recently staged ones kept whatever they are */
    bool dry_run;       /* say what would go, remove nothing */
} rel_gc_options;

/* What rel_gc_versions removed, or with dry_run would remove, newest first.
 * The caller frees versions. */
typedef struct rel_gc_removed {
    char (*versions)[REL_NAME_SIZE];
    size_t n;
} rel_gc_removed;

/* rel_gc with the versions named and an optional dry run (which also leaves
 * the leftovers of crashed runs alone). removed is filled even when a
 * removal failed part-way, with what did go. */
int rel_gc_versions(rel_store *store, const char *host, const rel_gc_options *options,
                    rel_gc_removed *removed, act_error *err);

/* SHA-256 of everything readable from fd, starting at offset 0 (pread, so
 * the fd's file position is untouched), streamed in 1 MiB blocks through
 * OpenSSL EVP. Writes lowercase hex into out and, when size is not NULL,
 * the number of bytes hashed. This is resolve's hashing path. */
int rel_digest_fd(int fd, char out[REL_DIGEST_SIZE], uint64_t *size, act_error *err);

/* Test switch for crash tests: when non-zero, rel_stage kills its own
 * process with SIGKILL once it has copied this many bytes, so a test can
 * prove that a stage that dies midway leaves nothing visible and nothing
 * that blocks a retry. Production code never sets it. */
extern uint64_t rel_test_abort_after_bytes;
