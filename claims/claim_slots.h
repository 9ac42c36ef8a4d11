/* A claim file of the dir store: two slots of one fixed size, written
 * alternately in place, so a durable compare-and-swap costs one small write
 * and one fdatasync instead of a temporary file, two fsyncs and a rename.
 *
 *   offset 0          slot 0: a 64-byte header, then the payload
 *   offset slot_size  slot 1: the same
 *
 * The header, little-endian:
 *   0   8  magic "actclm1\n"
 *   8   8  revision
 *   16  4  payload length
 *   20  4  flags (CLAIM_SLOT_DELETED: a tombstone, no payload)
 *   24  4  slot size, as the file was made
 *   28  4  zero
 *   32 32  SHA-256 of bytes 0..31 and the payload
 *
 * The valid slot with the higher revision is the claim. A write goes to the
 * other slot, so the slot that holds the claim now is never touched until a
 * newer one is durable beside it: a write torn by a power cut, or read half
 * done by a reader racing it, fails its checksum and the older slot stands.
 * The file is made whole (every byte written, not fallocated) by an atomic
 * create, so a write in place allocates nothing and its fdatasync carries no
 * metadata. docs/claim-protocol.md argues it against each crash. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define CLAIM_SLOT_MAGIC "actclm1\n"
#define CLAIM_SLOT_HEADER 64
#define CLAIM_SLOT_DELETED 1u
/* Slots are whole pages: a slot's write never shares a page with the other
 * slot, and a claim of a typical size (well under 1 KiB) fits a 4 KiB one. */
#define CLAIM_SLOT_ALIGN 4096
/* Large enough for a payload of CLAIM_JSON_MAX; a file that says more is
 * not one of ours. */
#define CLAIM_SLOT_SIZE_MAX (80 * 1024)

/* The two calls a write in place makes, apart so that a test can record
 * them and replay what a power cut could leave (tests/claims/test_dir_crash.c). */
typedef struct claim_slots_io {
    ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t len, off_t offset);
    int (*fdatasync)(void *ctx, int fd);
    void *ctx;
} claim_slots_io;

/* The real system calls. */
extern const claim_slots_io claim_slots_system_io;

/* What a file holds: the slot with the newest valid record. */
typedef struct claim_slot_pick {
    int slot; /* 0 or 1; -1 when neither slot is valid */
    uint64_t revision;
    bool deleted;
    const char *payload; /* into the image handed to claim_slots_pick */
    size_t len;
    size_t slot_size;
} claim_slot_pick;

/* The slot size a file made for a payload of len bytes gets: room for it
 * to grow by half before the file must be made again. */
size_t claim_slots_size_for(size_t len);

/* Decodes a whole file image. 0 with *out (out->slot -1 when both slots fail
 * their checksums: torn by a racing write, or damaged), or -EINVAL when the
 * image is no claim file at all (its size is not two slots); *why says so. */
int claim_slots_pick(const void *image, size_t size, claim_slot_pick *out, const char **why);

/* Encodes a record into slot slot of image (two slots of slot_size). */
void claim_slots_encode(void *image, size_t slot_size, int slot, uint64_t revision, bool deleted,
                        const char *payload, size_t len);

/* Writes a record into slot slot of the open file fd in place, then
 * fdatasyncs it. The payload must fit (len <= slot_size - header). 0, or a
 * negative errno with *err set. */
int claim_slots_write(int fd, size_t slot_size, int slot, uint64_t revision, bool deleted,
                      const char *payload, size_t len, const claim_slots_io *io, act_error *err);
