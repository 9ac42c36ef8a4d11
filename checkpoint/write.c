/* Writing a checkpoint: the state directory walked with libarchive's disk
 * reader, written as tar through zstd into a hidden temporary file, hashed
 * as the bytes go out (the archive is never read back to hash it), then
 * made durable and renamed into place. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "checkpoint/internal.h"
#include "common/cleanup.h"
#include "common/libarchive.h"
#include "common/clock.h"
#include "common/fileio.h"

/* Where the archive's bytes go: the file, and the hash beside it. */
typedef struct sink {
    int fd;
    EVP_MD_CTX *sha;
    uint64_t size;
} sink;

static la_ssize_t sink_write(struct archive *a, void *data, const void *buf, size_t len)
{
    sink *s = data;
    int r = act_write_all(s->fd, buf, len);
    if (r < 0) {
        archive_set_error(a, -r, "cannot write the archive: %s", strerror(-r));
        return -1;
    }
    if (EVP_DigestUpdate(s->sha, buf, len) != 1) {
        archive_set_error(a, EIO, "SHA-256 update failed in OpenSSL");
        return -1;
    }
    s->size += len;
    return (la_ssize_t)len;
}

static int archive_failed(struct archive *a, const char *what, act_error *err)
{
    int errnum = archive_errno(a) > 0 ? archive_errno(a) : EIO;
    const char *why = archive_error_string(a);
    return act_error_set(err, errnum, "%s: %s", what, why ? why : strerror(errnum));
}

/* Copies one regular file's data. NO_SPARSE makes the blocks contiguous. */
static int copy_data(struct archive *disk, struct archive *out, const char *state_dir,
                     const char *rel, const atomic_bool *cancel, act_error *err)
{
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t offset;
        int r = archive_read_data_block(disk, &buf, &len, &offset);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return archive_failed(disk, state_dir, err);
        if (cancel && atomic_load(cancel))
            return act_error_set(err, ECANCELED, "the checkpoint was cancelled");
        if (archive_write_data(out, buf, len) < 0) {
            char what[8300];
            snprintf(what, sizeof(what), "cannot archive %s/%s", state_dir, rel);
            return archive_failed(out, what, err);
        }
    }
}

/* Walks state_dir into out. Entries are named relative to it ("a/b"); the
 * directory itself is not stored (a restore makes it). Sockets, FIFOs and
 * device nodes are left out: an app's runtime endpoints, not its data, and
 * a restore would refuse them. */
static int archive_tree(const char *state_dir, struct archive *out, const atomic_bool *cancel,
                        act_error *err)
{
    _cleanup_(archive_read_freep) struct archive *disk = archive_read_disk_new();
    _cleanup_(archive_entry_freep) struct archive_entry *entry = archive_entry_new();
    if (!disk || !entry)
        return act_error_set(err, ENOMEM, "out of memory");
    archive_read_disk_set_symlink_physical(disk);
    archive_read_disk_set_behavior(
        disk, ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS |
                  ARCHIVE_READDISK_NO_SPARSE | ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
    if (archive_read_disk_open(disk, state_dir) != ARCHIVE_OK)
        return archive_failed(disk, state_dir, err);
    size_t prefix = strlen(state_dir);
    for (;;) {
        if (cancel && atomic_load(cancel))
            return act_error_set(err, ECANCELED, "the checkpoint was cancelled");
        archive_entry_clear(entry);
        int r = archive_read_next_header2(disk, entry);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return archive_failed(disk, state_dir, err);
        archive_read_disk_descend(disk);
        const char *path = archive_entry_pathname(entry);
        if (!path || strncmp(path, state_dir, prefix) != 0 ||
            (path[prefix] != '\0' && path[prefix] != '/'))
            return act_error_set(err, EIO, "the walk of %s left it at %s", state_dir,
                                 path ? path : "(no name)");
        if (path[prefix] == '\0')
            continue; /* the state directory itself */
        mode_t type = archive_entry_filetype(entry);
        if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
            continue;
        char rel[4096];
        snprintf(rel, sizeof(rel), "%s", path + prefix + 1);
        archive_entry_set_pathname(entry, rel);
        /* Owners are the restoring box's business (the host's uid there). */
        archive_entry_set_uname(entry, NULL);
        archive_entry_set_gname(entry, NULL);
        if (archive_write_header(out, entry) < ARCHIVE_WARN) {
            char what[4200];
            snprintf(what, sizeof(what), "cannot archive %s", path);
            return archive_failed(out, what, err);
        }
        if (type == AE_IFREG && archive_entry_size(entry) > 0) {
            int c = copy_data(disk, out, state_dir, rel, cancel, err);
            if (c < 0)
                return c;
        }
    }
}

/* The archive into fd; *sha and *size describe the bytes written. */
static int write_archive(int fd, const char *state_dir, const atomic_bool *cancel,
                         char sha256[CKPT_DIGEST_SIZE], uint64_t *size, act_error *err)
{
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = act_sha256_new();
    if (!ctx)
        return act_error_set(err, ENOMEM, "cannot set up SHA-256: out of memory");
    _cleanup_(archive_write_freep) struct archive *out = archive_write_new();
    if (!out)
        return act_error_set(err, ENOMEM, "out of memory");
    sink s = {.fd = fd, .sha = ctx};
    /* pax keeps long names and exact times; zstd is fast enough that a
     * 50 MiB state costs well under a second to compress. */
    if (archive_write_set_format_pax_restricted(out) != ARCHIVE_OK ||
        archive_write_add_filter_zstd(out) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(out, 1) != ARCHIVE_OK ||
        archive_write_open2(out, &s, NULL, sink_write, NULL, NULL) != ARCHIVE_OK)
        return archive_failed(out, "cannot set up the archive writer", err);
    int r = archive_tree(state_dir, out, cancel, err);
    if (r < 0)
        return r;
    if (archive_write_close(out) != ARCHIVE_OK)
        return archive_failed(out, "cannot finish the archive", err);
    if (act_sha256_final_hex(ctx, sha256) < 0)
        return act_error_set(err, EIO, "SHA-256 finalisation failed in OpenSSL");
    *size = s.size;
    return 0;
}

int ckpt_write(const char *dir, const char *host, const char *state_dir, uint64_t generation,
               const char *box, const atomic_bool *cancel, ckpt_info *out, act_error *err)
{
    if (state_dir[0] != '/')
        return act_error_set(err, EINVAL, "the state directory %s is not absolute", state_dir);
    _cleanup_close_ int host_dirfd = ckpt_open_host_dir(dir, host, true, err);
    if (host_dirfd < 0)
        return host_dirfd;
    ckpt_info info = {.generation = generation, .stamp_usec = act_wallclock_usec()};
    snprintf(info.box, sizeof(info.box), "%s", box && act_name_is_valid(box) ? box : "");
    int r = ckpt_mint_id(info.stamp_usec, info.id, err);
    if (r < 0)
        return r;
    char final_name[CKPT_ID_SIZE + sizeof(CKPT_ARCHIVE_SUFFIX)];
    char temp_name[sizeof(final_name) + 8];
    snprintf(final_name, sizeof(final_name), "%s%s", info.id, CKPT_ARCHIVE_SUFFIX);
    /* Hidden: a listing never shows a half-written archive. */
    snprintf(temp_name, sizeof(temp_name), ".%s.tmp", final_name);
    _cleanup_close_ int fd =
        openat(host_dirfd, temp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return act_error_set(err, errno, "cannot create %s/%s/%s: %s", dir, host, temp_name,
                             strerror(errno));
    r = write_archive(fd, state_dir, cancel, info.sha256, &info.size, err);
    if (r == 0 && fsync(fd) < 0)
        r = act_error_set(err, errno, "cannot fsync %s/%s/%s: %s", dir, host, temp_name,
                          strerror(errno));
    if (r == 0 && renameat(host_dirfd, temp_name, host_dirfd, final_name) < 0)
        r = act_error_set(err, errno, "cannot rename %s into place in %s/%s: %s", temp_name, dir,
                          host, strerror(errno));
    if (r < 0) {
        (void)unlinkat(host_dirfd, temp_name, 0);
        return r;
    }
    /* The sidecar after the archive: an archive without one still lists
     * (without its digest); a sidecar without its archive never exists. */
    if ((r = ckpt_write_sidecar(host_dirfd, &info, err)) < 0 ||
        (r = act_fsync_dir(host_dirfd, err)) < 0)
        return r;
    *out = info;
    return 0;
}
