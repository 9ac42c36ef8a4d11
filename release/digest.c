/* The digests of release/: a build's file (resolve, verify and the
 * benchmark all hash through rel_digest_fd) and a build's whole list. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/sha256.h"
#include "release/internal.h"

/* A digest field holds SHA-256 as lowercase hex and its NUL. */
static_assert(REL_DIGEST_SIZE == ACT_SHA256_HEX_SIZE, "REL_DIGEST_SIZE is not SHA-256 in hex");

int rel_digest_fd(int fd, char out[REL_DIGEST_SIZE], uint64_t *size, act_error *err)
{
    return act_sha256_fd(fd, "the file", out, size, err);
}

/* Format 1: "path NUL sha256 \n" for each file. */
static int digest_files(EVP_MD_CTX *ctx, const rel_file *files, size_t n_files)
{
    static const char nul = '\0', newline = '\n';
    for (size_t i = 0; i < n_files; i++) {
        if (EVP_DigestUpdate(ctx, files[i].path, strlen(files[i].path)) != 1 ||
            EVP_DigestUpdate(ctx, &nul, 1) != 1 ||
            EVP_DigestUpdate(ctx, files[i].digest, REL_DIGEST_SIZE - 1) != 1 ||
            EVP_DigestUpdate(ctx, &newline, 1) != 1)
            return -EIO;
    }
    return 0;
}

/* Format 2: "path NUL type mode NUL payload \n" for each entry. */
static int digest_entries(EVP_MD_CTX *ctx, const rel_file *files, size_t n_files)
{
    static const char nul = '\0', newline = '\n';
    static const char letters[] = {
        [REL_ENTRY_FILE] = 'f', [REL_ENTRY_DIR] = 'd', [REL_ENTRY_SYMLINK] = 'l'};
    for (size_t i = 0; i < n_files; i++) {
        const rel_file *f = &files[i];
        char kind[8];
        snprintf(kind, sizeof(kind), "%c%04o", letters[f->type], f->mode & 07777);
        const char *payload = f->type == REL_ENTRY_FILE      ? f->digest
                              : f->type == REL_ENTRY_SYMLINK ? f->target
                                                             : "";
        if (!payload)
            return -EINVAL;
        if (EVP_DigestUpdate(ctx, f->path, strlen(f->path)) != 1 ||
            EVP_DigestUpdate(ctx, &nul, 1) != 1 || EVP_DigestUpdate(ctx, kind, 5) != 1 ||
            EVP_DigestUpdate(ctx, &nul, 1) != 1 ||
            EVP_DigestUpdate(ctx, payload, strlen(payload)) != 1 ||
            EVP_DigestUpdate(ctx, &newline, 1) != 1)
            return -EIO;
    }
    return 0;
}

int rel_build_digest(unsigned format, const rel_file *files, size_t n_files,
                     char out[REL_DIGEST_SIZE])
{
    assert(files || n_files == 0);
    assert(out);
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = act_sha256_new();
    if (!ctx)
        return -ENOMEM;
    int r = format == REL_MANIFEST_FORMAT_FILES ? digest_files(ctx, files, n_files)
                                                : digest_entries(ctx, files, n_files);
    if (r < 0)
        return r;
    return act_sha256_final_hex(ctx, out);
}
