/* libarchive's readers and writers owned by scope, and the copy of an
 * entry's data that extracting an archive (a checkpoint, an image's layer)
 * does.
 *
 * Apart from common/cleanup.h because common/ itself does not link
 * libarchive: only the layers that already depend on it (checkpoint/ and
 * image/) include this header, so what it defines is inline. */
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "common/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_read_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_write_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive_entry *, archive_entry_free)

/* Copies the data of the entry in has just read to out (a disk writer), block
 * by block; NULL when done, else the archive that failed (its error says
 * why). */
static inline struct archive *act_archive_copy_data(struct archive *in, struct archive *out)
{
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t offset;
        int r = archive_read_data_block(in, &buf, &len, &offset);
        if (r == ARCHIVE_EOF)
            return NULL;
        if (r < ARCHIVE_WARN)
            return in;
        if (archive_write_data_block(out, buf, len, offset) < ARCHIVE_WARN)
            return out;
    }
}
