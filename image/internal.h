/* Shared pieces of image/ that are not its API; tests may include this. */
#pragma once

#include <stddef.h>

#include <json-c/json.h>

#include "image/image.h"

/* Splits "oci:PATH[:TAG]" into PATH and TAG ("" when none). */
int img_parse_reference(const char *reference, char *path, size_t path_size, char *tag,
                        size_t tag_size, act_error *err);

/* True for "sha256:" and 64 lowercase hex digits. */
bool img_digest_is_valid(const char *digest);

/* Opens the blob of layout named digest, read-only; its fd or -errno. */
int img_blob_open(const char *layout, const char *digest, act_error *err);

/* Of an image index's manifests, the one for linux/amd64: its digest and
 * media type. where names the image in errors; -ENOEXEC when the index has
 * none (the message lists what it has). */
int img_choose_platform(const char *where, json_object *index, char *digest, char *media_type,
                        size_t media_size, act_error *err);

/* "sha256:" and the hex SHA-256 of data; -EIO when OpenSSL fails. */
int img_sha256_digest(const void *data, size_t len, char out[IMG_DIGEST_SIZE]);

/* Parses text (len bytes) as one JSON object, strictly; where and what
 * name it in errors (-EPROTO when it is not one). */
int img_parse_json(const char *where, const char *what, const char *text, size_t len,
                   json_object **out, act_error *err);

/* A registry reference's parts. */
typedef struct img_registry_ref {
    char registry[256]; /* host[:port] */
    char repository[256];
    char reference[160]; /* a tag, or sha256:... */
    bool by_digest;
} img_registry_ref;

int img_parse_registry_reference(const char *reference, img_registry_ref *out, act_error *err);

/* Checks tag (of reference, for the message) and copies it to out. */
int img_parse_reference_tag(const char *reference, const char *tag, char *out, size_t size,
                            act_error *err);

/* The manifest types this activator reads: an OCI image manifest or a
 * Docker v2 schema 2 one; and the indexes it follows to one of them. */
#define IMG_MEDIA_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define IMG_MEDIA_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define IMG_MEDIA_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define IMG_MEDIA_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

bool img_media_type_is_index(const char *type);
bool img_media_type_is_manifest(const char *type);
