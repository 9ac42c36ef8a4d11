/* SHA-256 through OpenSSL EVP, streamed in large blocks. This is the one
 * hashing path: resolve, verify and the benchmark all go through it. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "common/cleanup.h"
#include "release/internal.h"

/* A digest field holds SHA-256 as lowercase hex and its NUL. */
static_assert(REL_DIGEST_SIZE == 2 * SHA256_DIGEST_LENGTH + 1,
              "REL_DIGEST_SIZE is not SHA-256 in hex");

EVP_MD_CTX *rel_sha256_new(void)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int rel_sha256_final_hex(EVP_MD_CTX *ctx, char out[REL_DIGEST_SIZE])
{
    assert(ctx);
    assert(out);
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len != SHA256_DIGEST_LENGTH)
        return -EIO;
    for (unsigned int i = 0; i < md_len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0xf];
    }
    out[2 * SHA256_DIGEST_LENGTH] = '\0';
    return 0;
}

int rel_digest_fd(int fd, char out[REL_DIGEST_SIZE], uint64_t *size, act_error *err)
{
    assert(out);
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = rel_sha256_new();
    if (!ctx)
        return act_error_set(err, ENOMEM, "cannot set up SHA-256: out of memory");
    _cleanup_free_ unsigned char *buf = malloc(REL_BLOCK_SIZE);
    if (!buf)
        return act_error_set(err, ENOMEM, "cannot allocate the hashing buffer: out of memory");

    /* Tell the kernel we read front to back once, so it reads ahead
     * aggressively on a cold cache. Only a hint: failure changes nothing. */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    /* pread from 0 so the hash covers the whole file whatever the fd's
     * position, and leaves the position alone for the caller's exec. */
    uint64_t offset = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, REL_BLOCK_SIZE, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return act_error_set(err, errno, "cannot read the file to hash it: %s",
                                 strerror(errno));
        }
        if (n == 0)
            break;
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1)
            return act_error_set(err, EIO, "SHA-256 update failed in OpenSSL");
        offset += (uint64_t)n;
    }
    if (rel_sha256_final_hex(ctx, out) < 0)
        return act_error_set(err, EIO, "SHA-256 finalisation failed in OpenSSL");
    if (size)
        *size = offset;
    return 0;
}

int rel_build_digest(const rel_file *files, size_t n_files, char out[REL_DIGEST_SIZE])
{
    assert(files || n_files == 0);
    assert(out);
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = rel_sha256_new();
    if (!ctx)
        return -ENOMEM;
    static const char nul = '\0', newline = '\n';
    for (size_t i = 0; i < n_files; i++) {
        if (EVP_DigestUpdate(ctx, files[i].path, strlen(files[i].path)) != 1 ||
            EVP_DigestUpdate(ctx, &nul, 1) != 1 ||
            EVP_DigestUpdate(ctx, files[i].digest, REL_DIGEST_SIZE - 1) != 1 ||
            EVP_DigestUpdate(ctx, &newline, 1) != 1)
            return -EIO;
    }
    return rel_sha256_final_hex(ctx, out);
}
