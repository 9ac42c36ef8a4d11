/* Shared helpers for the release tests: temporary directories, files, an
 * independent SHA-256, and exec'ing a resolved fd in a child. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "release/release.h"

/* The two test app builds, from the test's command line. */
extern const char *rt_app_v1;
extern const char *rt_app_v2;

/* Reads argv[1] and argv[2] into rt_app_v1/rt_app_v2; exits 1 with a
 * message when they are missing. */
void rt_parse_args(int argc, char **argv);

typedef struct rt_fixture {
    char *tmp;      /* a fresh mkdtemp directory, removed at teardown */
    char *releases; /* <tmp>/releases */
    rel_store *store;
} rt_fixture;

/* CMocka setup/teardown for an rt_fixture. */
int rt_setup(void **state);
int rt_teardown(void **state);

/* Builds "<a>/<b>" into a malloc'd string (aborts on OOM). */
char *rt_join(const char *a, const char *b);

void rt_write_file(const char *path, const void *data, size_t len, mode_t mode);
void rt_copy_file(const char *from, const char *to, mode_t mode);

/* SHA-256 of a file by OpenSSL's one-shot EVP_Digest over the whole file
 * read into memory: a different path than the library's streaming one, so
 * the tests do not check the library against itself. */
void rt_sha256_file(const char *path, char out[65]);

/* Runs execveat(fd, "", {"rel-test-app", NULL}, environ, AT_EMPTY_PATH) in a
 * forked child, reads its stdout through a pipe into out and returns its
 * wait status. */
int rt_exec_fd(int fd, char *out, size_t out_size);

/* Number of entries in dir whose name starts with prefix. */
int rt_count_prefix(const char *dir, const char *prefix);

/* True when path exists (lstat). */
int rt_exists(const char *path);

/* Flips one byte of a file in place (making it writable first). */
void rt_flip_byte(const char *path, off_t offset);

/* Promotes host's version, resolves the live build and runs it: fails the
 * test unless it exits 0 having printed expected. */
void rt_promote_and_expect_output(rt_fixture *fx, const char *host, const char *version,
                                  const char *expected);
