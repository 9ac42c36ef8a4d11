/* Removing a tree and hashing a file: the blocking helpers the archive
 * code shares. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "checkpoint/internal.h"
#include "common/cleanup.h"
#include "common/fileio.h"

static int remove_children(int dirfd)
{
    DIR *dir = act_opendir_at(dirfd, ".");
    if (!dir)
        return -errno;
    int result = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        int r = ckpt_remove_tree(dirfd, entry->d_name);
        if (r < 0 && result == 0)
            result = r;
    }
    closedir(dir);
    return result;
}

int ckpt_remove_tree(int dirfd, const char *name)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    /* A directory: O_NOFOLLOW, so a symlink swapped in meanwhile is not
     * followed out of the tree. */
    _cleanup_close_ int child =
        openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0)
        return errno == ENOENT ? 0 : -errno;
    /* A tree restored from an archive may hold read-only directories. */
    (void)fchmod(child, 0700);
    int r = remove_children(child);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return r < 0 ? r : -errno;
    return r;
}

EVP_MD_CTX *ckpt_sha256_new(void)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int ckpt_sha256_hex(EVP_MD_CTX *ctx, char out[CKPT_DIGEST_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len * 2 + 1 != CKPT_DIGEST_SIZE)
        return -EIO;
    for (unsigned int i = 0; i < md_len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0xf];
    }
    out[2 * md_len] = '\0';
    return 0;
}

int ckpt_digest_fd(int fd, char out[CKPT_DIGEST_SIZE], uint64_t *size, act_error *err)
{
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = ckpt_sha256_new();
    _cleanup_free_ unsigned char *buf = malloc(CKPT_BLOCK_SIZE);
    if (!ctx || !buf)
        return act_error_set(err, ENOMEM, "cannot set up SHA-256: out of memory");
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint64_t offset = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, CKPT_BLOCK_SIZE, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return act_error_set(err, errno, "cannot read the archive to hash it: %s",
                                 strerror(errno));
        if (n == 0)
            break;
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1)
            return act_error_set(err, EIO, "SHA-256 update failed in OpenSSL");
        offset += (uint64_t)n;
    }
    if (ckpt_sha256_hex(ctx, out) < 0)
        return act_error_set(err, EIO, "SHA-256 finalisation failed in OpenSSL");
    if (size)
        *size = offset;
    return 0;
}
