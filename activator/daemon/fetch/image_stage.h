/* An image staged as a build: pulled when it is a registry's, its layers
 * applied into a work directory beside the releases, the tree staged with
 * the image (resolved to its manifest's digest) as its source, and the
 * work directory removed whatever happened. Blocking: a worker's. */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "image/image.h"
#include "release/release.h"

typedef struct ad_image_stage {
    const char *host;
    const char *version;
    const char *reference;  /* oci:PATH[:TAG], docker://REGISTRY/REPO:TAG or @sha256:DIGEST */
    const char *executable; /* Exec='s path inside the image */
    const char *work_dir;   /* StateDirectory=: the work directories go there */
    const char *registry_auth_file;       /* RegistryAuthFile=; "" or NULL: none */
    const char *const *registry_insecure; /* RegistryInsecure= */
    const char *expected_digest;          /* the build must hash to this; NULL: any */
    img_progress *progress;               /* where a pull counts; NULL: nowhere */
} ad_image_stage;

/* True for a source that is an image rather than a directory or a file. */
bool ad_image_is_source(const char *source);

/* Stages in->reference as in->version of in->host into releases; out gets
 * the build's identity. Nothing is left half-staged on failure, and the
 * error names the host, the version and what to do. */
int ad_image_stage_run(rel_store *releases, const ad_image_stage *in, rel_identity *out,
                       act_error *err);

/* The source a claim names for a build staged from identity: its registry
 * image by digest, or "" for a build that came from a directory, a file or
 * a local layout (no other box can reach those). */
void ad_image_claim_source(const rel_identity *identity, char *out, size_t size);
