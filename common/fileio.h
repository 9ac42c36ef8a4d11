/* Whole-file reads and crash-safe whole-file writes, relative to a directory
 * fd so callers never build paths from names twice. */
#pragma once

#include <dirent.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

/* Replaces dirfd/name with data: a temporary file in the same directory,
 * fsync, rename over name, fsync the directory. A crash at any point leaves
 * either the old or the new content under name, never a torn one, and at
 * worst a stale ".name.tmp-*" file that the next write does not trip on. */
int act_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                     act_error *err);

/* As act_write_atomic, without the two fsyncs: readers still see the old or
 * the new content, never a torn one, and so does a process that outlives a
 * crash of the writer (the page cache has it); a power loss may lose it.
 * For what a power loss makes moot anyway. */
int act_write_replace(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                      act_error *err);

/* Reads until size bytes are in buf or the end of fd, retrying a read that
 * a signal cut short. The bytes read (fewer than size only at the end), or
 * read's -errno. For blocking fds: on a non-blocking one, -EAGAIN drops what
 * was read before it. */
ssize_t act_read_full(int fd, void *buf, size_t size);

/* Writes all len bytes of data, retrying a write that a signal cut short.
 * 0, or write's -errno. */
int act_write_all(int fd, const void *data, size_t len);

/* Reads fd to its end into a NUL-terminated malloc'd buffer, sized for
 * size_hint bytes first (a file's st_size makes it one read). 0, or -EFBIG
 * past max bytes, -ENOMEM, or read's -errno. */
int act_read_fd(int fd, size_t size_hint, size_t max, char **out, size_t *out_len);

/* Reads dirfd/name whole into a NUL-terminated malloc'd buffer. A file larger
 * than max bytes is refused with -EFBIG, read no further. */
int act_read_file(int dirfd, const char *name, size_t max, char **out, size_t *out_len,
                  act_error *err);

/* Opens dirfd/path (".": dirfd itself) for readdir, never through a symlink.
 * The DIR gets an fd of its own: a dup would share dirfd's file offset, and
 * a directory read once would look empty to the next reader. NULL with errno
 * set on failure. */
DIR *act_opendir_at(int dirfd, const char *path);

/* unlinkat(dirfd, name, 0), but a large regular file (more than two
 * ACT_UNLINK_CHUNK_BYTES on disk, one link) is first cut down a chunk at a
 * time, each cut made durable before the next. A filesystem frees a deleted
 * file's blocks in the commit that follows the unlink, and with online
 * discard (ext4's -o discard) it sends the device a discard of all of them
 * there: every fdatasync on the box waits behind it (57 ms for 512 MiB on a
 * virtio disk, against 3.4 ms at most when cut in 4 MiB steps). For
 * background work (old builds, leftovers) whose deletion may take longer
 * so that the wakes' durable writes do not. A file that cannot be opened
 * for writing (a running executable: ETXTBSY) is unlinked at once. 0, or
 * -1 with errno set as unlinkat sets it. */
#define ACT_UNLINK_CHUNK_BYTES (4u << 20)
int act_unlink_gently(int dirfd, const char *name);

/* fsyncs the directory itself, making a rename or unlink in it durable. */
int act_fsync_dir(int dirfd, act_error *err);

/* mkdir -p of a relative or absolute path, each new component with mode. */
int act_mkdir_p(const char *path, mode_t mode, act_error *err);
