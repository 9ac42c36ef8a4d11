/* Shared pieces of image/ that are not its API; tests may include this. */
#pragma once

#include <stddef.h>

#include "image/image.h"

/* Splits "oci:PATH[:TAG]" into PATH and TAG ("" when none). */
int img_parse_reference(const char *reference, char *path, size_t path_size, char *tag,
                        size_t tag_size, act_error *err);

/* True for "sha256:" and 64 lowercase hex digits. */
bool img_digest_is_valid(const char *digest);

/* Opens the blob of layout named digest, read-only; its fd or -errno. */
int img_blob_open(const char *layout, const char *digest, act_error *err);
