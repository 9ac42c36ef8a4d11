/* SHA-256 through OpenSSL EVP, as lowercase hex: the one hashing path of
 * release/ (builds) and checkpoint/ (archives). A library of its own beside
 * common/ (sha256_dep), so only the layers that hash link libcrypto. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <openssl/evp.h>

#include "common/cleanup.h"
#include "common/error.h"

/* SHA-256 as lowercase hex and its NUL. */
#define ACT_SHA256_HEX_SIZE 65

/* Streaming block size: large enough that the per-call overhead of read()
 * and EVP_DigestUpdate() disappears next to the hashing itself, small
 * enough to stay in L2/L3-friendly territory. */
#define ACT_SHA256_BLOCK_SIZE (1u << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)

/* A new EVP context initialised for SHA-256, or NULL when out of memory. */
EVP_MD_CTX *act_sha256_new(void);

/* Finishes ctx into lowercase hex; -EIO when OpenSSL fails. */
int act_sha256_final_hex(EVP_MD_CTX *ctx, char out[ACT_SHA256_HEX_SIZE]);

/* SHA-256 of the whole file fd (from offset 0, leaving its position alone)
 * as hex, and its size when size is not NULL. what names the file in the
 * error ("the file", "the archive"). */
int act_sha256_fd(int fd, const char *what, char out[ACT_SHA256_HEX_SIZE], uint64_t *size,
                  act_error *err);

/* A file read front to back through SHA-256, for a reader that must apply
 * exactly the bytes whose digest it checks (a libarchive read callback
 * extracting a checkpoint or an image's layer): each block is hashed on its
 * way to the reader, and at the end the rest of the file (what the reader
 * left unread, a tar's padding) is hashed too, for the caller to compare
 * the digest with the one it expects. */
typedef struct act_sha256_reader {
    int fd;
    EVP_MD_CTX *sha;
    unsigned char *buf; /* ACT_SHA256_BLOCK_SIZE bytes */
} act_sha256_reader;

/* Sets r up to read fd from its position; -ENOMEM when out of memory. */
int act_sha256_reader_init(act_sha256_reader *r, int fd);
void act_sha256_reader_clear(act_sha256_reader *r);

/* The next block (its length, 0 at the end, or -errno) into *out. */
ssize_t act_sha256_reader_next(act_sha256_reader *r, const void **out);

/* Reads and hashes the rest and writes the digest of everything read as
 * hex; -errno when the rest cannot be read (err names what). */
int act_sha256_reader_finish(act_sha256_reader *r, const char *what, char out[ACT_SHA256_HEX_SIZE],
                             act_error *err);
