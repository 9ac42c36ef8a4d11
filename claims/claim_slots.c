/* The two-slot claim file: encoding, choosing the slot that holds the claim,
 * and the write in place. Layout and argument in claim_slots.h. */
#include "claims/claim_slots.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#define DIGEST_OFFSET 32
#define DIGEST_SIZE 32

static ssize_t system_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t offset)
{
    (void)ctx;
    return pwrite(fd, buf, len, offset);
}

static int system_fdatasync(void *ctx, int fd)
{
    (void)ctx;
    return fdatasync(fd);
}

const claim_slots_io claim_slots_system_io = {
    .pwrite = system_pwrite,
    .fdatasync = system_fdatasync,
};

size_t claim_slots_size_for(size_t len)
{
    size_t want = CLAIM_SLOT_HEADER + len + len / 2;
    size_t size = (want + CLAIM_SLOT_ALIGN - 1) / CLAIM_SLOT_ALIGN * CLAIM_SLOT_ALIGN;
    return size < CLAIM_SLOT_SIZE_MAX ? size : CLAIM_SLOT_SIZE_MAX;
}

/* The digest of the header's first 32 bytes and the payload. */
static void slot_digest(const uint8_t *header, const char *payload, size_t len,
                        uint8_t out[DIGEST_SIZE])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n = 0;
    /* Out of memory leaves a digest of zeros, which no valid slot has: the
     * slot reads as torn, and a write fails its own check below. */
    memset(out, 0, DIGEST_SIZE);
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
        EVP_DigestUpdate(ctx, header, DIGEST_OFFSET) && EVP_DigestUpdate(ctx, payload, len))
        EVP_DigestFinal_ex(ctx, out, &n);
    EVP_MD_CTX_free(ctx);
}

static void put32(uint8_t *at, uint32_t value)
{
    value = htole32(value);
    memcpy(at, &value, sizeof(value));
}

static void put64(uint8_t *at, uint64_t value)
{
    value = htole64(value);
    memcpy(at, &value, sizeof(value));
}

static uint32_t get32(const uint8_t *at)
{
    uint32_t value;
    memcpy(&value, at, sizeof(value));
    return le32toh(value);
}

static uint64_t get64(const uint8_t *at)
{
    uint64_t value;
    memcpy(&value, at, sizeof(value));
    return le64toh(value);
}

/* Fills header (CLAIM_SLOT_HEADER bytes) for payload. */
static void slot_header(uint8_t *header, size_t slot_size, uint64_t revision, bool deleted,
                        const char *payload, size_t len)
{
    memset(header, 0, CLAIM_SLOT_HEADER);
    memcpy(header, CLAIM_SLOT_MAGIC, 8);
    put64(header + 8, revision);
    put32(header + 16, (uint32_t)len);
    put32(header + 20, deleted ? CLAIM_SLOT_DELETED : 0);
    put32(header + 24, (uint32_t)slot_size);
    slot_digest(header, payload, len, header + DIGEST_OFFSET);
}

void claim_slots_encode(void *image, size_t slot_size, int slot, uint64_t revision, bool deleted,
                        const char *payload, size_t len)
{
    assert(slot == 0 || slot == 1);
    assert(len + CLAIM_SLOT_HEADER <= slot_size);
    uint8_t *at = (uint8_t *)image + (size_t)slot * slot_size;
    slot_header(at, slot_size, revision, deleted, payload, len);
    memcpy(at + CLAIM_SLOT_HEADER, payload, len);
}

/* Whether the slot at at holds a whole record of this file's geometry. */
static bool slot_valid(const uint8_t *at, size_t slot_size)
{
    if (memcmp(at, CLAIM_SLOT_MAGIC, 8) != 0 || get32(at + 24) != slot_size || get64(at + 8) == 0)
        return false;
    uint32_t len = get32(at + 16), flags = get32(at + 20);
    if ((size_t)len > slot_size - CLAIM_SLOT_HEADER || (flags & ~CLAIM_SLOT_DELETED) != 0)
        return false;
    uint8_t digest[DIGEST_SIZE];
    slot_digest(at, (const char *)at + CLAIM_SLOT_HEADER, len, digest);
    return memcmp(digest, at + DIGEST_OFFSET, DIGEST_SIZE) == 0;
}

int claim_slots_pick(const void *image, size_t size, claim_slot_pick *out, const char **why)
{
    assert(image);
    assert(out);
    *out = (claim_slot_pick){.slot = -1};
    size_t slot_size = size / 2;
    if (size % (2 * CLAIM_SLOT_ALIGN) != 0 || slot_size == 0 || slot_size > CLAIM_SLOT_SIZE_MAX) {
        if (why)
            *why = "its size is not two whole slots";
        return -EINVAL;
    }
    out->slot_size = slot_size;
    const uint8_t *slots[2] = {image, (const uint8_t *)image + slot_size};
    for (int i = 0; i < 2; i++) {
        if (!slot_valid(slots[i], slot_size))
            continue;
        uint64_t revision = get64(slots[i] + 8);
        if (out->slot >= 0 && revision <= out->revision)
            continue;
        out->slot = i;
        out->revision = revision;
        out->deleted = (get32(slots[i] + 20) & CLAIM_SLOT_DELETED) != 0;
        out->payload = (const char *)slots[i] + CLAIM_SLOT_HEADER;
        out->len = get32(slots[i] + 16);
    }
    return 0;
}

int claim_slots_write(int fd, size_t slot_size, int slot, uint64_t revision, bool deleted,
                      const char *payload, size_t len, const claim_slots_io *io, act_error *err)
{
    assert(io);
    if (len + CLAIM_SLOT_HEADER > slot_size)
        return act_error_set(err, EFBIG, "record of %zu bytes does not fit a slot of %zu", len,
                             slot_size);
    /* Header and payload in one write: one request to the disk, and a torn
     * one fails the digest whichever of its sectors made it. */
    size_t total = CLAIM_SLOT_HEADER + len;
    uint8_t stack[4096];
    uint8_t *buf = total <= sizeof(stack) ? stack : malloc(total);
    if (!buf)
        return act_error_set(err, ENOMEM, "out of memory");
    slot_header(buf, slot_size, revision, deleted, payload, len);
    memcpy(buf + CLAIM_SLOT_HEADER, payload, len);
    ssize_t n = io->pwrite(io->ctx, fd, buf, total, (off_t)((size_t)slot * slot_size));
    int e = n < 0 ? errno : EIO;
    if (buf != stack)
        free(buf);
    if (n != (ssize_t)total)
        return act_error_set(err, e, "cannot write slot %d: %s", slot, strerror(e));
    if (io->fdatasync(io->ctx, fd) < 0)
        return act_error_set(err, errno, "cannot fdatasync: %m");
    return 0;
}
