/* SHA-256 through OpenSSL EVP, streamed in large blocks. */
#include "common/sha256.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "common/fileio.h"

static_assert(ACT_SHA256_HEX_SIZE == 2 * SHA256_DIGEST_LENGTH + 1,
              "ACT_SHA256_HEX_SIZE is not SHA-256 in hex");

EVP_MD_CTX *act_sha256_new(void)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int act_sha256_final_hex(EVP_MD_CTX *ctx, char out[ACT_SHA256_HEX_SIZE])
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

int act_sha256_fd(int fd, const char *what, char out[ACT_SHA256_HEX_SIZE], uint64_t *size,
                  act_error *err)
{
    assert(what);
    assert(out);
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = act_sha256_new();
    if (!ctx)
        return act_error_set(err, ENOMEM, "cannot set up SHA-256: out of memory");
    _cleanup_free_ unsigned char *buf = malloc(ACT_SHA256_BLOCK_SIZE);
    if (!buf)
        return act_error_set(err, ENOMEM, "cannot allocate the hashing buffer: out of memory");

    /* Tell the kernel we read front to back once, so it reads ahead
     * aggressively on a cold cache. Only a hint: failure changes nothing. */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    /* pread from 0 so the hash covers the whole file whatever the fd's
     * position, and leaves the position alone for the caller (an exec of a
     * verified build). */
    uint64_t offset = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, ACT_SHA256_BLOCK_SIZE, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return act_error_set(err, errno, "cannot read %s to hash it: %s", what,
                                 strerror(errno));
        }
        if (n == 0)
            break;
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1)
            return act_error_set(err, EIO, "SHA-256 update failed in OpenSSL");
        offset += (uint64_t)n;
    }
    if (act_sha256_final_hex(ctx, out) < 0)
        return act_error_set(err, EIO, "SHA-256 finalisation failed in OpenSSL");
    if (size)
        *size = offset;
    return 0;
}

int act_sha256_reader_init(act_sha256_reader *r, int fd)
{
    *r = (act_sha256_reader){
        .fd = fd, .sha = act_sha256_new(), .buf = malloc(ACT_SHA256_BLOCK_SIZE)};
    if (!r->sha || !r->buf) {
        act_sha256_reader_clear(r);
        return -ENOMEM;
    }
    return 0;
}

void act_sha256_reader_clear(act_sha256_reader *r)
{
    EVP_MD_CTX_free(r->sha);
    free(r->buf);
    r->sha = NULL;
    r->buf = NULL;
}

ssize_t act_sha256_reader_next(act_sha256_reader *r, const void **out)
{
    ssize_t n = act_read_full(r->fd, r->buf, ACT_SHA256_BLOCK_SIZE);
    if (n > 0 && EVP_DigestUpdate(r->sha, r->buf, (size_t)n) != 1)
        return -EIO;
    *out = r->buf;
    return n;
}

int act_sha256_reader_finish(act_sha256_reader *r, const char *what, char out[ACT_SHA256_HEX_SIZE],
                             act_error *err)
{
    for (;;) {
        const void *block;
        ssize_t n = act_sha256_reader_next(r, &block);
        if (n < 0)
            return act_error_set(err, (int)-n, "cannot read %s: %s", what, strerror((int)-n));
        if (n == 0)
            break;
    }
    if (act_sha256_final_hex(r->sha, out) < 0)
        return act_error_set(err, EIO, "SHA-256 finalisation failed in OpenSSL");
    return 0;
}
