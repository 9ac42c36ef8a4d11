/* rel_stage: copy a build into the releases tree, hashing while copying, and
 * make it visible in one rename. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/names.h"
#include "release/internal.h"

uint64_t rel_test_abort_after_bytes;

typedef struct stage_copy {
    const char *host;
    const char *version;
    const char *source_path;
    const char *exec_path; /* the executable, relative to the build root */
    char source_recorded[REL_PATH_SIZE]; /* what the manifest records as the source */
    rel_file *files;
    size_t n_files, cap_files;
    uint64_t copied;
    unsigned char *buf;
    act_error *err;
} stage_copy;

/* Records an entry of the build: a file's size and digest, a symlink's
 * target (NULL otherwise). */
static int add_entry(stage_copy *copy, const char *path, rel_entry_type type, unsigned mode,
                     uint64_t size, const char *digest, const char *target)
{
    if (copy->n_files == copy->cap_files) {
        size_t cap = copy->cap_files ? copy->cap_files * 2 : 16;
        rel_file *grown = realloc(copy->files, cap * sizeof(rel_file));
        if (!grown)
            return -ENOMEM;
        copy->files = grown;
        copy->cap_files = cap;
    }
    rel_file *file = &copy->files[copy->n_files];
    *file = (rel_file){.type = type, .mode = mode, .size = size};
    file->path = strdup(path);
    file->target = target ? strdup(target) : NULL;
    if (!file->path || (target && !file->target)) {
        rel_file_clear(file);
        return -ENOMEM;
    }
    if (digest)
        memcpy(file->digest, digest, REL_DIGEST_SIZE);
    copy->n_files++;
    return 0;
}

/* What a staged copy writes between two fdatasyncs of its own. A durable
 * write elsewhere on the box (a wake's claim, a record) waits for what the
 * box wrote before it: a journaling filesystem's commit (ext4's ordered
 * mode) writes out the data of the files it commits first, and the flush
 * of the disk's write cache that ends every fdatasync writes out whatever
 * is not yet on the medium (on a virtio disk, all the guest wrote since the
 * last flush: the host caches it). Measured with a plain copy of 512 MiB
 * beside a claim's pwrite and fdatasync every 5 ms: left to the writeback,
 * the claim's write took up to 163 ms; with the writeback started every
 * 2 MiB (sync_file_range, as before) still 12 ms at p99; with the copy's own
 * fdatasync every 2 MiB 3.4 ms at most, the copy taking 0.54-0.56 s against
 * 0.35-0.75 s (every 1 MiB: 2.0 ms p99, 0.63-0.68 s). */
#define SYNC_CHUNK_BYTES (2u << 20)

/* Once SYNC_CHUNK_BYTES more are written: makes them durable, so no flush
 * on the box ever finds more than that of this copy to write. */
static int sync_behind(int fd, uint64_t *synced, uint64_t written)
{
    if (written - *synced < SYNC_CHUNK_BYTES)
        return 0;
    *synced = written;
    return fdatasync(fd) < 0 ? -errno : 0;
}

/* Copies one open regular file to dst_dirfd/name, hashing the bytes on
 * their way through, and records it under rel_path. */
static int copy_file(stage_copy *copy, int src_fd, int dst_dirfd, const char *name,
                     const char *rel_path, mode_t src_mode)
{
    act_error *err = copy->err;
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = act_sha256_new();
    if (!ctx)
        return act_error_set(err, ENOMEM, "out of memory setting up SHA-256");
    _cleanup_close_ int dst_fd =
        openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (dst_fd < 0)
        return act_error_set(err, errno, "cannot create the staged copy of %s: %s", rel_path,
                             strerror(errno));
    (void)posix_fadvise(src_fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    uint64_t size = 0, synced = 0;
    for (;;) {
        size_t want = REL_BLOCK_SIZE;
        /* Under the crash test, stop the read exactly at the abort point so
         * the process dies with a file really cut in the middle. */
        if (rel_test_abort_after_bytes && rel_test_abort_after_bytes > copy->copied &&
            rel_test_abort_after_bytes - copy->copied < want)
            want = (size_t)(rel_test_abort_after_bytes - copy->copied);
        ssize_t n = act_read_full(src_fd, copy->buf, want);
        if (n < 0)
            return act_error_set(err, (int)-n, "cannot read %s from %s: %s", rel_path,
                                 copy->source_path, strerror((int)-n));
        if (n == 0)
            break;
        if (EVP_DigestUpdate(ctx, copy->buf, (size_t)n) != 1)
            return act_error_set(err, EIO, "SHA-256 update failed in OpenSSL");
        int r = act_write_all(dst_fd, copy->buf, (size_t)n);
        size += (uint64_t)n;
        copy->copied += (uint64_t)n;
        if (r == 0)
            r = sync_behind(dst_fd, &synced, size);
        if (r < 0)
            return act_error_set(err, -r, "cannot write the staged copy of %s: %s", rel_path,
                                 strerror(-r));
        /* The crash test: die the way a power cut or SIGKILL would, with no
         * cleanup handler running, halfway through a file. */
        if (rel_test_abort_after_bytes && copy->copied >= rel_test_abort_after_bytes)
            kill(getpid(), SIGKILL);
    }

    /* Staged files are read-only; the executable and anything that was
     * executable in the source keep the execute bits. Nothing is writable by
     * group or other, which resolve insists on. */
    bool executable = strcmp(rel_path, copy->exec_path) == 0 || (src_mode & 0111);
    unsigned mode = executable ? REL_MODE_EXECUTABLE : REL_MODE_FILE;
    if (fchmod(dst_fd, mode) < 0)
        return act_error_set(err, errno, "cannot set the mode of the staged %s: %s", rel_path,
                             strerror(errno));
    if (fsync(dst_fd) < 0)
        return act_error_set(err, errno, "cannot fsync the staged %s: %s", rel_path,
                             strerror(errno));
    char digest[REL_DIGEST_SIZE];
    if (act_sha256_final_hex(ctx, digest) < 0)
        return act_error_set(err, EIO, "SHA-256 finalisation failed in OpenSSL");
    if (add_entry(copy, rel_path, REL_ENTRY_FILE, mode, size, digest, NULL) < 0)
        return act_error_set(err, ENOMEM, "out of memory recording %s", rel_path);
    return 0;
}

/* Copies the symlink src_dirfd/name as it is. Its target must be relative;
 * where it leads is checked once the whole build is staged. */
static int copy_symlink(stage_copy *copy, int src_dirfd, int dst_dirfd, const char *name,
                        const char *rel_path)
{
    act_error *err = copy->err;
    char target[REL_PATH_SIZE + 1];
    ssize_t n = readlinkat(src_dirfd, name, target, sizeof(target));
    if (n < 0)
        return act_error_set(err, errno, "source %s: cannot read symlink %s: %s", copy->source_path,
                             rel_path, strerror(errno));
    if ((size_t)n >= sizeof(target) - 1)
        return act_error_set(err, ENAMETOOLONG,
                             "source %s: symlink %s has a target longer than %d bytes",
                             copy->source_path, rel_path, REL_PATH_SIZE - 1);
    target[n] = '\0';
    if (target[0] == '/')
        return act_error_set(err, EXDEV,
                             "source %s: symlink %s -> %s is absolute; on a box it would lead "
                             "out of the build; make it relative to its directory",
                             copy->source_path, rel_path, target);
    if (!rel_symlink_target_is_valid(target))
        return act_error_set(err, EINVAL,
                             "source %s: symlink %s has a target with control characters; "
                             "rename its target",
                             copy->source_path, rel_path);
    if (symlinkat(target, dst_dirfd, name) < 0)
        return act_error_set(err, errno, "cannot create the staged symlink %s: %s", rel_path,
                             strerror(errno));
    if (add_entry(copy, rel_path, REL_ENTRY_SYMLINK, REL_MODE_SYMLINK, 0, NULL, target) < 0)
        return act_error_set(err, ENOMEM, "out of memory recording %s", rel_path);
    return 0;
}

static int join_path(char *out, const char *prefix, const char *name)
{
    int n = prefix[0] ? snprintf(out, REL_PATH_SIZE, "%s/%s", prefix, name)
                      : snprintf(out, REL_PATH_SIZE, "%s", name);
    return n < 0 || n >= REL_PATH_SIZE ? -ENAMETOOLONG : 0;
}

/* Copies the directory src_dirfd into dst_dirfd (both open), entry by
 * entry: regular files (a hard link's every name as a file of its own),
 * directories and symlinks; devices, fifos, sockets and set-ID files are
 * refused. */
static int copy_dir(stage_copy *copy, int src_dirfd, int dst_dirfd, const char *prefix, int depth)
{
    act_error *err = copy->err;
    if (depth > REL_MAX_DEPTH)
        return act_error_set(err, ELOOP,
                             "source %s: directories nest deeper than %d levels at "
                             "%s",
                             copy->source_path, REL_MAX_DEPTH, prefix);
    _cleanup_(closedirp) DIR *dir = act_opendir_at(src_dirfd, ".");
    if (!dir)
        return act_error_set(err, errno, "cannot read source %s: %s", copy->source_path,
                             strerror(errno));
    struct dirent *de;
    errno = 0;
    while ((de = readdir(dir))) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        char rel_path[REL_PATH_SIZE];
        if (join_path(rel_path, prefix, name) < 0)
            return act_error_set(err, ENAMETOOLONG,
                                 "source %s: path %s/%s is longer than %d "
                                 "bytes",
                                 copy->source_path, prefix, name, REL_PATH_SIZE - 1);
        if (rel_build_path_check("file in source", rel_path, err) < 0)
            return act_error_prefix(err, "source %s", copy->source_path);
        if (depth == 0 && strcmp(name, REL_MANIFEST_NAME) == 0)
            return act_error_set(err, EINVAL,
                                 "source %s: a top-level %s is reserved for the "
                                 "staged build's manifest; move or rename it",
                                 copy->source_path, REL_MANIFEST_NAME);

        struct stat st;
        if (fstatat(src_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return act_error_set(err, errno, "source %s: cannot stat %s: %s", copy->source_path,
                                 rel_path, strerror(errno));
        if (S_ISLNK(st.st_mode)) {
            int r = copy_symlink(copy, src_dirfd, dst_dirfd, name, rel_path);
            if (r < 0)
                return r;
            errno = 0;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (mkdirat(dst_dirfd, name, 0700) < 0)
                return act_error_set(err, errno, "cannot create staged directory %s: %s", rel_path,
                                     strerror(errno));
            _cleanup_close_ int src_child =
                openat(src_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            _cleanup_close_ int dst_child =
                openat(dst_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (src_child < 0 || dst_child < 0)
                return act_error_set(err, errno, "source %s: cannot open directory %s: %s",
                                     copy->source_path, rel_path, strerror(errno));
            /* The mode the manifest records, whatever the umask. */
            if (fchmod(dst_child, REL_MODE_DIR) < 0)
                return act_error_set(err, errno, "cannot set the mode of staged directory %s: %s",
                                     rel_path, strerror(errno));
            if (add_entry(copy, rel_path, REL_ENTRY_DIR, REL_MODE_DIR, 0, NULL, NULL) < 0)
                return act_error_set(err, ENOMEM, "out of memory recording %s", rel_path);
            int r = copy_dir(copy, src_child, dst_child, rel_path, depth + 1);
            if (r < 0)
                return r;
            continue;
        }
        if (!S_ISREG(st.st_mode))
            return act_error_set(err, EPERM,
                                 "source %s: %s is not a regular file, directory or symlink "
                                 "(a device, fifo or socket); leave it out of the build",
                                 copy->source_path, rel_path);
        if (st.st_mode & (S_ISUID | S_ISGID))
            return act_error_set(err, EPERM,
                                 "source %s: %s is set-user-ID or set-group-ID, which a build "
                                 "may not hold; clear the bit (chmod u-s,g-s) or leave the file "
                                 "out",
                                 copy->source_path, rel_path);
        /* Non-blocking, and checked again once open: what was a file when
         * listed may be a fifo by now, whose open would wait for a writer
         * that never comes, holding the release worker. */
        _cleanup_close_ int src_fd =
            openat(src_dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (src_fd < 0)
            return act_error_set(err, errno, "source %s: cannot open %s: %s", copy->source_path,
                                 rel_path, strerror(errno));
        struct stat opened;
        if (fstat(src_fd, &opened) < 0 || !S_ISREG(opened.st_mode))
            return act_error_set(err, EPERM,
                                 "source %s: %s changed into something other than a regular "
                                 "file while it was staged; stage it again once it holds still",
                                 copy->source_path, rel_path);
        int r = copy_file(copy, src_fd, dst_dirfd, name, rel_path, st.st_mode);
        if (r < 0)
            return r;
        errno = 0;
    }
    if (errno != 0)
        return act_error_set(err, errno, "cannot read source %s: %s", copy->source_path,
                             strerror(errno));
    if (fsync(dst_dirfd) < 0)
        return act_error_set(err, errno, "cannot fsync staged directory %s: %s",
                             prefix[0] ? prefix : ".", strerror(errno));
    return 0;
}

static int file_cmp(const void *a, const void *b)
{
    return strcmp(((const rel_file *)a)->path, ((const rel_file *)b)->path);
}

/* Fills the staging directory from the source and writes its manifest. */
static int fill_staging(stage_copy *copy, int src_fd, const struct stat *src_st, int staging_fd,
                        rel_manifest *m)
{
    act_error *err = copy->err;
    copy->buf = malloc(REL_BLOCK_SIZE);
    if (!copy->buf)
        return act_error_set(err, ENOMEM, "out of memory allocating the copy buffer");
    int r;
    if (S_ISDIR(src_st->st_mode))
        r = copy_dir(copy, src_fd, staging_fd, "", 0);
    else
        r = copy_file(copy, src_fd, staging_fd, copy->exec_path, copy->exec_path, src_st->st_mode);
    if (r < 0)
        return r;
    if (fsync(staging_fd) < 0)
        return act_error_set(err, errno, "cannot fsync the staging directory: %s", strerror(errno));

    qsort(copy->files, copy->n_files, sizeof(rel_file), file_cmp);
    m->format = REL_MANIFEST_FORMAT_ENTRIES;
    m->files = copy->files;
    m->n_files = copy->n_files;
    const rel_file *exec = rel_manifest_find(m, copy->exec_path);
    if (!exec || exec->type != REL_ENTRY_FILE)
        return act_error_set(err, ENOENT,
                             "source %s has no regular file %s%s; exec_path must name "
                             "the executable inside the build",
                             copy->source_path, copy->exec_path,
                             exec ? " (it is a symlink or a directory; name the file itself)" : "");
    char label[PATH_MAX + 16];
    snprintf(label, sizeof(label), "source %s", copy->source_path);
    r = rel_symlinks_stay_inside(m, label, err);
    if (r < 0)
        return r;
    snprintf(m->source, sizeof(m->source), "%s", copy->source_recorded);
    snprintf(m->host, sizeof(m->host), "%s", copy->host);
    snprintf(m->version, sizeof(m->version), "%s", copy->version);
    snprintf(m->exec_path, sizeof(m->exec_path), "%s", copy->exec_path);
    m->staged_at = act_wallclock_usec();
    if (rel_build_digest(m->format, m->files, m->n_files, m->build_digest) < 0)
        return act_error_set(err, EIO, "cannot compute the build digest");
    r = rel_manifest_write(staging_fd, m, err);
    if (r < 0)
        return r;
    /* Made traversable only now: a half-filled staging dir stays 0700. */
    if (fchmod(staging_fd, 0755) < 0 || fsync(staging_fd) < 0)
        return act_error_set(err, errno, "cannot finish the staging directory: %s",
                             strerror(errno));
    return 0;
}

/* The version already exists: same content is a no-op, anything else is
 * refused. Either way the caller drops its staging copy. */
static int compare_existing(rel_store *store, int host_dirfd, const rel_manifest *staged,
                            rel_identity *out, act_error *err)
{
    const char *host = staged->host, *version = staged->version;
    _cleanup_close_ int version_fd = rel_version_open(store, host_dirfd, host, version, err);
    if (version_fd < 0)
        return version_fd;
    char where[PATH_MAX];
    snprintf(where, sizeof(where), "%s/%s/%s/%s", store->path, host, version, REL_MANIFEST_NAME);
    _cleanup_(rel_manifest_clear) rel_manifest existing = {0};
    int r = rel_manifest_read(version_fd, where, host, version, &existing, err);
    if (r < 0)
        return act_error_prefix(err, "host %s: version %s already exists and cannot be compared",
                                host, version);
    if (strcmp(existing.build_digest, staged->build_digest) != 0 ||
        strcmp(existing.exec_path, staged->exec_path) != 0)
        return act_error_set(err, EEXIST,
                             "host %s: version %s is already staged with different content "
                             "(build digest %s, executable %s); this source has build digest "
                             "%s, executable %s; stage it under a new version",
                             host, version, existing.build_digest, existing.exec_path,
                             staged->build_digest, staged->exec_path);
    /* Same content: make sure what is on disk still is that content before
     * telling the caller all is well. */
    r = rel_verify_open(store, host_dirfd, host, version, err);
    if (r < 0)
        return act_error_prefix(err,
                                "host %s: version %s is staged with this content but is "
                                "damaged on disk; remove it (gc) and stage it again",
                                host, version);
    if (out)
        rel_manifest_identity(&existing, NULL, out);
    return 0;
}

/* Removes the staging directory once the build is not going to be renamed
 * into place: staging failed, or the version already exists. r, the result
 * so far, stands unless the removal fails what was a success. */
static int drop_staging(int host_dirfd, const char *staging_name, const char *host,
                        const char *version, int r, act_error *err)
{
    int removed = rel_remove_tree(host_dirfd, staging_name);
    if (removed < 0 && r == 0)
        return act_error_set(err, -removed,
                             "host %s: version %s: cannot remove staging directory %s: %s", host,
                             version, staging_name, strerror(-removed));
    return r;
}

static const char *base_name(const char *path)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    const char *slash = memrchr(path, '/', len);
    return slash ? slash + 1 : path;
}

/* The names and paths of a stage request, before anything is opened. */
static int check_request(const char *host, const char *version, const char *source_path,
                         const char *exec_path, act_error *err)
{
    int r = act_name_check("host", host, err);
    if (r < 0)
        return r;
    r = rel_version_check(version, err);
    if (r < 0)
        return r;
    if (!source_path || source_path[0] == '\0')
        return act_error_set(err, EINVAL, "host %s: version %s: the source path is empty", host,
                             version);
    if (exec_path && (r = rel_build_path_check("exec_path", exec_path, err)) < 0)
        return act_error_prefix(err, "host %s: version %s", host, version);
    return 0;
}

/* Opens the source and stats it into st: its fd, or a negative errno. */
static int open_source(const char *host, const char *version, const char *source_path,
                       struct stat *st, act_error *err)
{
    /* The top-level source may be reached through a symlink (an operator's
     * "current" link); inside a directory nothing is followed. */
    /* Non-blocking: a fifo named as the source would otherwise hold the
     * release worker until something writes to it. */
    _cleanup_close_ int src_fd = open(source_path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (src_fd < 0)
        return act_error_set(err, errno, "host %s: version %s: cannot open source %s: %s", host,
                             version, source_path, strerror(errno));
    if (fstat(src_fd, st) < 0)
        return act_error_set(err, errno, "host %s: version %s: cannot stat source %s: %s", host,
                             version, source_path, strerror(errno));
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
        return act_error_set(err, EPERM,
                             "host %s: version %s: source %s is neither a regular file nor a "
                             "directory (a device, fifo or socket); name the build's file or "
                             "directory",
                             host, version, source_path);
    return TAKE_FD(src_fd);
}

/* The executable inside the build: *exec_path for a directory, which must
 * name it; the file's own name (into single_name) for a single file. */
static int choose_exec_path(const char *host, const char *version, const char *source_path,
                            const struct stat *src_st, const char **exec_path,
                            char single_name[REL_PATH_SIZE], act_error *err)
{
    if (S_ISREG(src_st->st_mode)) {
        if (*exec_path)
            return act_error_set(err, EINVAL,
                                 "host %s: version %s: source %s is a single file, "
                                 "so exec_path must be empty (the file is the executable)",
                                 host, version, source_path);
        /* A single-file build keeps its file name, so the process sees the
         * argv[0]-like name it was built with. */
        snprintf(single_name, REL_PATH_SIZE, "%s", base_name(source_path));
        if (!rel_build_path_is_valid(single_name) || strchr(single_name, '/') ||
            strcmp(single_name, REL_MANIFEST_NAME) == 0)
            return act_error_set(err, EINVAL,
                                 "host %s: version %s: source file name \"%s\" "
                                 "cannot be a file name inside a build; rename the file",
                                 host, version, single_name);
        *exec_path = single_name;
        return 0;
    }
    if (S_ISDIR(src_st->st_mode)) {
        if (!*exec_path)
            return act_error_set(err, EINVAL,
                                 "host %s: version %s: source %s is a directory; "
                                 "name the executable inside it (exec_path)",
                                 host, version, source_path);
        return 0;
    }
    return act_error_set(err, EINVAL,
                         "host %s: version %s: source %s is neither a regular "
                         "file nor a directory",
                         host, version, source_path);
}

/* Makes and locks a staging directory of its own under the host (its name
 * into staging_name): its fd, or a negative errno with nothing left. */
static int open_staging(rel_store *store, int host_dirfd, const char *host, const char *version,
                        char staging_name[NAME_MAX + 1], act_error *err)
{
    /* Under the host lock, the sweep cannot mistake a staging directory
     * that another stage has just made, and not yet locked, for a crashed
     * one. The copy itself runs without the host lock. */
    int r = rel_lock_host(store, host_dirfd, host, err);
    if (r < 0)
        return r;
    rel_sweep_stale(host_dirfd);

    char suffix[9];
    rel_random_suffix(suffix);
    snprintf(staging_name, NAME_MAX + 1, "%s%s-%s", REL_STAGING_PREFIX, version, suffix);
    if (mkdirat(host_dirfd, staging_name, 0700) < 0)
        return act_error_set(err, errno,
                             "host %s: version %s: cannot create staging directory "
                             "%s/%s/%s: %s",
                             host, version, store->path, host, staging_name, strerror(errno));
    _cleanup_close_ int staging_fd =
        openat(host_dirfd, staging_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* The lock marks the staging directory as in use; a sweep by another
     * stage or gc leaves it alone until this process exits. */
    if (staging_fd < 0 || rel_lock(staging_fd, false) < 0) {
        r = act_error_set(err, errno,
                          "host %s: version %s: cannot open and lock staging "
                          "directory %s: %s",
                          host, version, staging_name, strerror(errno));
        return drop_staging(host_dirfd, staging_name, host, version, r, err);
    }
    rel_unlock(host_dirfd);
    return TAKE_FD(staging_fd);
}

/* Renames the filled staging directory to the version, in one step; when
 * the version exists, the same content is a success and other content is
 * refused, and the staging copy goes either way. */
static int publish(rel_store *store, int host_dirfd, const char *staging_name,
                   const rel_manifest *m, rel_identity *out, act_error *err)
{
    const char *host = m->host, *version = m->version;
    int r;
    if (renameat2(host_dirfd, staging_name, host_dirfd, version, RENAME_NOREPLACE) == 0) {
        r = act_fsync_dir(host_dirfd, err);
        if (r < 0) {
            act_error_prefix(err, "host %s: version %s", host, version);
        } else if (out) {
            rel_manifest_identity(m, NULL, out);
        }
        return r;
    }
    if (errno == EEXIST || errno == ENOTEMPTY)
        r = compare_existing(store, host_dirfd, m, out, err);
    else
        r = act_error_set(err, errno,
                          "host %s: version %s: cannot rename the staged build into "
                          "place: %s",
                          host, version, strerror(errno));
    return drop_staging(host_dirfd, staging_name, host, version, r, err);
}

int rel_stage(rel_store *store, const char *host, const char *version, const char *source_path,
              const char *exec_path, rel_identity *out, act_error *err)
{
    return rel_stage_as(store, host, version, source_path, exec_path, NULL, out, err);
}

int rel_stage_as(rel_store *store, const char *host, const char *version, const char *source_path,
                 const char *exec_path, const char *source_label, rel_identity *out, act_error *err)
{
    return rel_stage_expecting(store, host, version, source_path, exec_path, source_label, NULL,
                               out, err);
}

int rel_stage_expecting(rel_store *store, const char *host, const char *version,
                        const char *source_path, const char *exec_path, const char *source_label,
                        const char *expected_digest, rel_identity *out, act_error *err)
{
    assert(store);
    int r = check_request(host, version, source_path, exec_path, err);
    if (r < 0)
        return r;
    struct stat src_st;
    _cleanup_close_ int src_fd = open_source(host, version, source_path, &src_st, err);
    if (src_fd < 0)
        return src_fd;
    char single_name[REL_PATH_SIZE];
    r = choose_exec_path(host, version, source_path, &src_st, &exec_path, single_name, err);
    if (r < 0)
        return r;

    _cleanup_close_ int host_dirfd = rel_host_open(store, host, true, err);
    if (host_dirfd < 0)
        return host_dirfd;
    char staging_name[NAME_MAX + 1];
    _cleanup_close_ int staging_fd =
        open_staging(store, host_dirfd, host, version, staging_name, err);
    if (staging_fd < 0)
        return staging_fd;

    stage_copy copy = {
        .host = host,
        .version = version,
        .source_path = source_path,
        .exec_path = exec_path,
        .err = err,
    };
    /* Recorded for the operator; a path too long for the manifest is not
     * recorded rather than recorded cut. */
    char *real = source_label ? NULL : realpath(source_path, NULL);
    const char *source = source_label ? source_label : real;
    if (source && strlen(source) < sizeof(((rel_manifest *)0)->source))
        snprintf(copy.source_recorded, sizeof(copy.source_recorded), "%s", source);
    free(real);
    _cleanup_(rel_manifest_clear) rel_manifest m = {0};
    r = fill_staging(&copy, src_fd, &src_st, staging_fd, &m);
    free(copy.buf);
    /* From here m owns the file list. */
    m.files = copy.files;
    m.n_files = copy.n_files;
    if (r < 0) {
        act_error_prefix(err, "host %s: version %s: staging failed, nothing was changed", host,
                         version);
        return drop_staging(host_dirfd, staging_name, host, version, r, err);
    }
    /* Checked before the rename: a build of another digest never appears
     * under the version, not even for a moment. */
    if (expected_digest && strcmp(m.build_digest, expected_digest) != 0) {
        r = act_error_set(err, EKEYREJECTED,
                          "host %s: version %s: %s makes a build of digest %s, not %s as "
                          "expected; nothing was staged",
                          host, version,
                          copy.source_recorded[0] ? copy.source_recorded : source_path,
                          m.build_digest, expected_digest);
        return drop_staging(host_dirfd, staging_name, host, version, r, err);
    }
    return publish(store, host_dirfd, staging_name, &m, out, err);
}
