/* Artifacts in a registry repository: one file stored as the single layer
 * of an OCI image manifest, tagged, with annotations (OCI 1.0's artifact
 * convention: the config's media type names the kind of artifact, the
 * config itself is "{}"). Pushed with the distribution API's blob upload,
 * in one request or in chunks; listed by tag; deleted by digest where the
 * registry allows it; and a blob read back by digest, verified as it
 * streams. Blocking, as the rest of image/. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "image/image.h"

typedef struct img_annotation {
    const char *key;
    const char *value;
} img_annotation;

typedef struct img_artifact {
    const char *repository;       /* docker://REGISTRY/REPO */
    const char *tag;              /* what the manifest is tagged */
    const char *artifact_type;    /* the config's media type */
    const char *layer_media_type; /* the file's */
    int fd;                       /* the file, read from offset 0 */
    uint64_t size;
    const char *digest; /* "sha256:<hex>" of the file, which the registry checks too */
    const img_annotation *annotations;
    size_t n_annotations;
} img_artifact;

/* Uploads bigger than this go in PATCH requests of this size; smaller ones
 * in one PUT. */
#define IMG_UPLOAD_CHUNK_DEFAULT (32u * 1024u * 1024u)

/* Pushes the artifact (the blob unless the repository has it, then the
 * manifest under its tag); manifest_digest gets the manifest's digest.
 * chunk_bytes 0: IMG_UPLOAD_CHUNK_DEFAULT. -EACCES for refused
 * credentials, -EHOSTUNREACH or -ETIMEDOUT for a registry that does not
 * answer, -EPROTO for an answer outside the API. */
int img_artifact_push(const img_artifact *artifact, const img_registry_options *options,
                      uint64_t chunk_bytes, char manifest_digest[IMG_DIGEST_SIZE], act_error *err);

/* The repository's tags (*tags malloc'd, each a string, NULL-terminated);
 * a repository the registry does not know has none. */
int img_artifact_tags(const char *repository, const img_registry_options *options, char ***tags,
                      act_error *err);

/* The manifest tagged tag: parsed into *manifest, its digest computed
 * here. -ENOENT when there is none. */
int img_artifact_manifest(const char *repository, const char *tag,
                          const img_registry_options *options, json_object **manifest,
                          char digest[IMG_DIGEST_SIZE], act_error *err);

/* Deletes the manifest of that digest (its tag goes with it).
 * -EOPNOTSUPP when the registry does not allow deletion, the message
 * saying so. */
int img_artifact_delete(const char *repository, const char *digest,
                        const img_registry_options *options, act_error *err);

/* The blob of that digest into fd (at its current offset), at most max
 * bytes, hashed as it streams: -EBADMSG when its bytes give another
 * digest, -ENOENT when the repository has no such blob. */
int img_blob_download(const char *repository, const char *digest, uint64_t max,
                      const img_registry_options *options, int fd, act_error *err);
