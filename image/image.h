/* Container images as builds: an OCI image read from an image layout
 * directory (`oci:PATH[:TAG]`, as containers-transports(5) names it) and
 * its layers applied in order into one directory tree, which the release
 * store then stages like any directory build.
 *
 * What is read: the layout's index.json, the manifest its tag names (an
 * OCI image manifest or a Docker v2 schema 2 manifest; an index is
 * descended into for linux/amd64), the config it names, and the layers
 * (tar, tar+gzip, tar+zstd). Every blob is hashed while it is read and must
 * match the digest that names it; a blob is read only through its digest.
 *
 * The layers are applied as the OCI image spec says: an entry ".wh.NAME"
 * removes NAME of the layers below, ".wh..wh..opq" empties its directory of
 * what the layers below put there. Entries must be files, directories,
 * symlinks or hard links to an earlier entry; devices, fifos, set-user-ID
 * and set-group-ID files are refused (a build may not hold them). An
 * absolute symlink target names a path of the image's root, so it is made
 * relative to the link's directory: followed inside the build it leads
 * where it led inside the image. Owners are not kept: the release store
 * owns what it stages. The ENTRYPOINT and CMD of the config are not run;
 * a host's Exec= names a file of the image's filesystem.
 *
 * Errors name the reference, the blob or the entry, and what to do;
 * -EINVAL for a bad reference, -ENOENT for a missing tag or blob,
 * -EBADMSG for a digest mismatch, -EPROTO for a malformed or unsupported
 * manifest, -ENOEXEC for an image of another platform, -EPERM for an entry
 * a build may not hold. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* "sha256:" and 64 hex digits, and the NUL. */
#define IMG_DIGEST_SIZE 72

/* Manifests and configs larger than this are refused unread (the
 * distribution registry's own limit for a manifest is 4 MiB). */
#define IMG_JSON_MAX (4u * 1024u * 1024u)

typedef enum img_compression {
    IMG_LAYER_TAR,
    IMG_LAYER_GZIP,
    IMG_LAYER_ZSTD,
} img_compression;

typedef struct img_layer {
    char digest[IMG_DIGEST_SIZE];
    uint64_t size;
    img_compression compression;
} img_layer;

/* An image chosen from a layout: the manifest's own digest (what a pin of
 * the image's source names), its config's, and its layers, bottom first. */
typedef struct img_image {
    char layout[4096]; /* the layout directory */
    char manifest_digest[IMG_DIGEST_SIZE];
    char config_digest[IMG_DIGEST_SIZE];
    img_layer *layers;
    size_t n_layers;
} img_image;

/* True for a source an image is read from ("oci:..."), as opposed to a
 * directory or file path. */
bool img_is_reference(const char *source);

/* Where a registry's CA is looked for, as containers and Docker lay it
 * out: <dir>/<REGISTRY>/ca.crt (REGISTRY with its port, if any). */
#define IMG_CERTS_DIR_DEFAULT "/etc/activator/certs.d"

/* How far a pull is, for whoever shows it: written by the pulling thread,
 * read from any other. */
typedef struct img_progress {
    _Atomic uint64_t bytes; /* of the layers, received so far */
    _Atomic uint64_t total; /* of every layer, as the manifest gives their sizes */
    _Atomic unsigned layer; /* the layer being received, from 1 */
    _Atomic unsigned layers;
} img_progress;

/* How registries are reached. */
typedef struct img_registry_options {
    /* A containers-auth.json(5) file: {"auths": {"REGISTRY": {"auth":
     * base64 of "user:password"}}}; refused unless mode 0600. NULL or a
     * missing file: no credentials. */
    const char *auth_file;
    /* IMG_CERTS_DIR_DEFAULT when NULL. Without a ca.crt there, the
     * system's CAs. */
    const char *certs_dir;
    /* Registries reached over plain http (RegistryInsecure=). */
    const char *const *insecure;
    size_t n_insecure;
    /* A transfer that moves nothing for this long ends (30 s when 0). */
    long timeout_sec;
    /* Where a pull counts what it received; NULL: nowhere. */
    img_progress *progress;
} img_registry_options;

/* True for a registry reference ("docker://..."). */
bool img_is_registry_reference(const char *source);

/* Pulls docker://REGISTRY/REPOSITORY[:TAG] or [@sha256:DIGEST] (a missing
 * tag is "latest") for linux/amd64 into the image layout directory layout
 * (made if missing), tagged "pulled" there, so that img_open of
 * "oci:LAYOUT:pulled" reads it. resolved receives the reference resolved to
 * the manifest's digest ("docker://REGISTRY/REPOSITORY@sha256:..."). Errors
 * as above, and -EACCES for refused credentials, -EHOSTUNREACH or
 * -ETIMEDOUT for a registry that does not answer. On failure the layout may
 * hold part of the image; the caller removes it. */
int img_pull(const char *reference, const img_registry_options *options, const char *layout,
             char *resolved, size_t resolved_size, act_error *err);

/* The tag img_pull gives the image in its layout. */
#define IMG_PULLED_TAG "pulled"

/* Reads reference ("oci:PATH" or "oci:PATH:TAG") into out: the manifest
 * its tag names (with no tag, the layout's only one), for linux/amd64. */
int img_open(const char *reference, img_image *out, act_error *err);

/* Applies out's layers in order into the empty directory dst_path, every
 * blob verified against its digest as it streams. On failure dst_path may
 * hold part of the image; the caller removes it. */
int img_flatten(const img_image *image, const char *dst_path, act_error *err);

/* The image as a source another box can fetch the same bytes from: the
 * reference resolved to the manifest's digest ("oci:PATH@sha256:..."), as
 * a tag can move. */
void img_source(const img_image *image, char *out, size_t size);

/* Removes path and all under it, never following a symlink; 0 when it is
 * gone (or was not there). */
int img_remove_tree(const char *path);

void img_image_clear(img_image *image);
