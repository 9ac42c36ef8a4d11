/* Scope-bound ownership of libarchive's readers and writers.
 *
 * Apart from common/cleanup.h because common/ itself does not link
 * libarchive: only the layers that already depend on it (checkpoint/ and
 * image/) include this header. */
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "common/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_read_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_write_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive_entry *, archive_entry_free)
