/* Restoring a checkpoint: verify, extract beside, sync, exchange, remove.
 *
 * Nothing touches the state directory until the archive's digest matched
 * and every entry was extracted: the new tree is built in a hidden sibling
 * and exchanged with the old one by a single renameat2(RENAME_EXCHANGE), so
 * a crash at any instant leaves the old state or the new one in place,
 * never a mix. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "checkpoint/internal.h"
#include "common/cleanup.h"
#include "common/libarchive.h"
#include "common/fileio.h"
#include "common/paths.h"
#include "common/text.h"

#define RESTORE_MARK ".restore-"

/* Why an entry's name is refused, or NULL. Checked by us before libarchive
 * sees it, because the entry is then placed under an absolute prefix (the
 * workers share one working directory, so extraction never chdirs), where
 * ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS cannot tell ours from the
 * archive's. */
static const char *bad_name(const char *rel)
{
    if (!rel || !rel[0])
        return "has no name";
    if (rel[0] == '/')
        return "is an absolute path";
    if (act_path_has_dot_component(rel)) {
        /* "." alone, or "./x" as some tars write, is harmless; ".." is not. */
        for (const char *p = rel; *p;) {
            size_t len = strcspn(p, "/");
            if (len == 2 && p[0] == '.' && p[1] == '.')
                return "has a \"..\" component";
            p += len;
            p += strspn(p, "/");
        }
    }
    return NULL;
}

static int entry_refused(const char *id, const char *rel, const char *why, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(rel ? rel : "", shown, sizeof(shown));
    return act_error_set(err, EINVAL,
                         "checkpoint %s: archive entry \"%s\" %s; refused, the state directory "
                         "is unchanged (the archive was not written by activatord: write a "
                         "new checkpoint)",
                         id, shown, why);
}

static int archive_failed(struct archive *a, const char *id, act_error *err)
{
    int errnum = archive_errno(a) > 0 ? archive_errno(a) : EIO;
    const char *why = archive_error_string(a);
    return act_error_set(err, errnum,
                         "checkpoint %s: cannot extract: %s; the state directory "
                         "is unchanged",
                         id, why ? why : strerror(errnum));
}

/* Where extraction reads the archive from: the verified fd, hashed again
 * as it is read, so the bytes extracted are the bytes whose digest was
 * checked even if the file changed in between (a shared directory other
 * boxes write). No skip callback, so every byte passes through here. */
static la_ssize_t source_read(struct archive *a, void *data, const void **out)
{
    ssize_t n = act_sha256_reader_next(data, out);
    if (n < 0)
        archive_set_error(a, (int)-n, "cannot read the archive: %s", strerror((int)-n));
    return n < 0 ? -1 : n;
}

/* The rest of the file after the archive's end (padding), hashed too, and
 * the digest of everything read compared with sha256. */
static int check_read_digest(act_sha256_reader *src, const char *id, const char *sha256,
                             act_error *err)
{
    char actual[CKPT_DIGEST_SIZE];
    int r = act_sha256_reader_finish(src, "the archive", actual, err);
    if (r < 0)
        return act_error_prefix(err, "checkpoint %s", id);
    if (strcmp(actual, sha256) != 0)
        return act_error_set(err, EBADMSG,
                             "checkpoint %s: the archive changed while it was restored (SHA-256 "
                             "%s, the claim names %s); nothing was restored",
                             id, actual, sha256);
    return 0;
}

/* Extracts every entry of the archive open on fd under prefix (an absolute
 * path with no symlink in it, so libarchive's symlink check walks only what
 * the archive made). */
static int extract(int fd, const char *id, const char *sha256, const char *prefix, uid_t uid,
                   gid_t gid, act_error *err)
{
    __attribute__((cleanup(act_sha256_reader_clear))) act_sha256_reader src = {0};
    _cleanup_(archive_read_freep) struct archive *in = archive_read_new();
    _cleanup_(archive_write_freep) struct archive *out = archive_write_disk_new();
    if (act_sha256_reader_init(&src, fd) < 0 || !in || !out)
        return act_error_set(err, ENOMEM, "cannot set up the restore: out of memory");
    archive_read_support_format_tar(in);
    archive_read_support_filter_zstd(in);
    int flags = ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME;
    /* Only root can give files away; as anyone else they stay ours. */
    if (geteuid() == 0)
        flags |= ARCHIVE_EXTRACT_OWNER;
    archive_write_disk_set_options(out, flags);
    if (lseek(fd, 0, SEEK_SET) < 0 ||
        archive_read_open(in, &src, NULL, source_read, NULL) != ARCHIVE_OK)
        return archive_failed(in, id, err);
    for (;;) {
        struct archive_entry *entry;
        int r = archive_read_next_header(in, &entry);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return archive_failed(in, id, err);
        const char *rel = archive_entry_pathname(entry);
        const char *why = bad_name(rel);
        if (why)
            return entry_refused(id, rel, why, err);
        mode_t type = archive_entry_filetype(entry);
        if (archive_entry_hardlink(entry))
            return entry_refused(id, rel, "is a hard link", err);
        if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
            return entry_refused(id, rel, "is not a file, directory or symlink", err);
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", prefix, rel) >= sizeof(path))
            return entry_refused(id, rel, "is too long a path", err);
        archive_entry_set_pathname(entry, path);
        archive_entry_set_uid(entry, uid);
        archive_entry_set_gid(entry, gid);
        archive_entry_set_uname(entry, NULL);
        archive_entry_set_gname(entry, NULL);
        /* No set-id bits: a file of the host's must not become a way into
         * its uid for whoever else runs it. */
        archive_entry_set_perm(entry, archive_entry_perm(entry) & 01777);
        if (archive_write_header(out, entry) < ARCHIVE_WARN)
            return archive_failed(out, id, err);
        struct archive *failed = type == AE_IFREG && archive_entry_size(entry) > 0
                                     ? act_archive_copy_data(in, out)
                                     : NULL;
        if (failed)
            return archive_failed(failed, id, err);
        if (archive_write_finish_entry(out) < ARCHIVE_WARN)
            return archive_failed(out, id, err);
    }
    /* Directories get their final modes and times here. */
    if (archive_write_close(out) != ARCHIVE_OK)
        return archive_failed(out, id, err);
    return check_read_digest(&src, id, sha256, err);
}

/* Removes what an earlier restore of base left (a crash between extract
 * and cleanup): hidden ".<base>.restore-*" siblings. */
static void remove_leftovers(int parentfd, const char *base)
{
    DIR *d = act_opendir_at(parentfd, ".");
    if (!d)
        return;
    char mark[NAME_MAX + 1];
    snprintf(mark, sizeof(mark), ".%s" RESTORE_MARK, base);
    struct dirent *entry;
    while ((entry = readdir(d)))
        if (strncmp(entry->d_name, mark, strlen(mark)) == 0)
            (void)ckpt_remove_tree(parentfd, entry->d_name);
    closedir(d);
}

/* Opens and verifies the archive; its fd, or -errno with err saying why. */
static int open_verified(const char *dir, const char *host, const char *id, const char *sha256,
                         act_error *err)
{
    _cleanup_close_ int host_dirfd = ckpt_open_host_dir(dir, host, false, err);
    if (host_dirfd == -ENOENT)
        return act_error_set(err, ENOENT,
                             "checkpoint %s of host %s is missing: %s/%s does not exist "
                             "(nothing was restored)",
                             id, host, dir, host);
    if (host_dirfd < 0)
        return host_dirfd;
    char name[CKPT_ID_SIZE + sizeof(CKPT_ARCHIVE_SUFFIX)];
    snprintf(name, sizeof(name), "%s%s", id, CKPT_ARCHIVE_SUFFIX);
    _cleanup_close_ int fd = openat(host_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno,
                             "checkpoint %s of host %s is missing: cannot open %s/%s/%s: %s "
                             "(nothing was restored)",
                             id, host, dir, host, name, strerror(errno));
    char actual[CKPT_DIGEST_SIZE];
    int r = act_sha256_fd(fd, "the archive", actual, NULL, err);
    if (r < 0)
        return r;
    if (strcmp(actual, sha256) != 0)
        return act_error_set(err, EBADMSG,
                             "checkpoint %s of host %s: the archive %s/%s/%s has SHA-256 %s, "
                             "the claim names %s: it was changed or damaged, nothing was "
                             "restored",
                             id, host, dir, host, name, actual, sha256);
    return TAKE_FD(fd);
}

int ckpt_check_restore(const char *host, const char *id, const char *sha256, act_error *err)
{
    int r = act_name_check("host", host, err);
    if (r < 0 || (r = ckpt_check_id(id, err)) < 0)
        return r;
    if (!sha256 || strlen(sha256) != CKPT_DIGEST_SIZE - 1)
        return act_error_set(err, EINVAL,
                             "checkpoint %s of host %s: the claim names no SHA-256 for it, so "
                             "it cannot be fetched or verified; nothing was restored",
                             id, host);
    return 0;
}

int ckpt_restore(const char *dir, const char *host, const char *id, const char *sha256,
                 const char *state_dir, uid_t uid, gid_t gid, act_error *err)
{
    int r = ckpt_check_restore(host, id, sha256, err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open_verified(dir, host, id, sha256, err);
    if (fd < 0)
        return fd;
    return ckpt_restore_verified(fd, id, sha256, state_dir, uid, gid, err);
}

int ckpt_restore_verified(int fd, const char *id, const char *sha256, const char *state_dir,
                          uid_t uid, gid_t gid, act_error *err)
{
    int r = 0;
    /* The parent, by its real path: the prefix the entries go under then
     * has no symlink for libarchive's check to trip on. */
    _cleanup_free_ char *state_copy = strdup(state_dir);
    if (!state_copy)
        return act_error_set(err, ENOMEM, "out of memory");
    char *slash = strrchr(state_copy, '/');
    if (!slash || !slash[1] || slash == state_copy)
        return act_error_set(err, EINVAL, "the state directory %s is not DIR/NAME", state_dir);
    *slash = '\0';
    const char *base = slash + 1;
    _cleanup_free_ char *parent = realpath(state_copy, NULL);
    if (!parent)
        return act_error_set(err, errno, "cannot resolve %s: %s", state_copy, strerror(errno));
    _cleanup_close_ int parentfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parentfd < 0)
        return act_error_set(err, errno, "cannot open %s: %s", parent, strerror(errno));
    remove_leftovers(parentfd, base);

    uint32_t nonce = 0;
    (void)getrandom(&nonce, sizeof(nonce), 0);
    char temp_name[NAME_MAX + 1];
    snprintf(temp_name, sizeof(temp_name), ".%s" RESTORE_MARK "%08x", base, (unsigned)nonce);
    struct stat old;
    mode_t mode = fstatat(parentfd, base, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(old.st_mode)
                      ? (old.st_mode & 07777)
                      : 0750;
    if (mkdirat(parentfd, temp_name, 0700) < 0)
        return act_error_set(err, errno, "cannot create %s/%s: %s", parent, temp_name,
                             strerror(errno));
    _cleanup_close_ int tempfd =
        openat(parentfd, temp_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof(prefix), "%s/%s", parent, temp_name);
    if (tempfd < 0)
        r = act_error_set(err, errno, "cannot open %s: %s", prefix, strerror(errno));
    else if (geteuid() == 0 && fchown(tempfd, uid, gid) < 0)
        r = act_error_set(err, errno, "cannot hand %s to uid %u: %s", prefix, (unsigned)uid,
                          strerror(errno));
    if (r == 0)
        r = extract(fd, id, sha256, prefix, uid, gid, err);
    /* One syncfs covers every file of the tree: cheaper than an fsync per
     * file for a tree of thousands, and the exchange must not reach the
     * disk before the data it points at. */
    if (r == 0 && (fchmod(tempfd, mode) < 0 || syncfs(tempfd) < 0 || fsync(tempfd) < 0))
        r = act_error_set(err, errno, "cannot sync %s: %s", prefix, strerror(errno));
    if (r == 0 && renameat2(parentfd, temp_name, parentfd, base, RENAME_EXCHANGE) < 0) {
        if (errno == ENOENT &&
            renameat2(parentfd, temp_name, parentfd, base, RENAME_NOREPLACE) == 0)
            temp_name[0] = '\0'; /* there was no state directory: nothing old to remove */
        else
            r = act_error_set(err, errno, "cannot put the restored tree in place of %s: %s",
                              state_dir, strerror(errno));
    }
    if (r < 0) {
        (void)ckpt_remove_tree(parentfd, temp_name);
        return r;
    }
    if ((r = act_fsync_dir(parentfd, err)) < 0)
        return r;
    /* The old tree, under the temporary name now. Left behind by a crash,
     * the next restore removes it. */
    if (temp_name[0])
        (void)ckpt_remove_tree(parentfd, temp_name);
    return 0;
}
