/* Reading an OCI image layout (image.h): the reference, index.json, the
 * manifest a tag names, and the blobs, each verified against its digest. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/paths.h"
#include "common/sha256.h"
#include "image/internal.h"

#define REF_NAME_ANNOTATION "org.opencontainers.image.ref.name"
/* The platform this activator runs builds for. */
#define PLATFORM_OS "linux"
#define PLATFORM_ARCH "amd64"

bool img_media_type_is_index(const char *type)
{
    return strcmp(type, IMG_MEDIA_OCI_INDEX) == 0 || strcmp(type, IMG_MEDIA_DOCKER_LIST) == 0;
}

bool img_media_type_is_manifest(const char *type)
{
    return strcmp(type, IMG_MEDIA_OCI_MANIFEST) == 0 ||
           strcmp(type, IMG_MEDIA_DOCKER_MANIFEST) == 0;
}

bool img_is_reference(const char *source)
{
    return source && strncmp(source, "oci:", 4) == 0;
}

void img_source(const img_image *image, char *out, size_t size)
{
    snprintf(out, size, "oci:%s@%s", image->layout, image->manifest_digest);
}

void img_image_clear(img_image *image)
{
    if (!image)
        return;
    free(image->layers);
    memset(image, 0, sizeof(*image));
}

bool img_digest_is_valid(const char *digest)
{
    if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 7 + 64)
        return false;
    for (const char *p = digest + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* A tag as the distribution spec allows it. */
static bool tag_is_valid(const char *tag)
{
    size_t len = strlen(tag);
    if (len == 0 || len > 128)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = tag[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || (i > 0 && (c == '.' || c == '-'));
        if (!ok)
            return false;
    }
    return true;
}

int img_parse_reference_tag(const char *reference, const char *tag, char *out, size_t size,
                            act_error *err)
{
    if (!tag_is_valid(tag) || (size_t)snprintf(out, size, "%s", tag) >= size)
        return act_error_set(err, EINVAL,
                             "image %s: \"%s\" is not a tag (1 to 128 of [A-Za-z0-9_.-], "
                             "not starting with '.' or '-')",
                             reference, tag);
    return 0;
}

int img_parse_reference(const char *reference, char *path, size_t path_size, char *tag,
                        size_t tag_size, act_error *err)
{
    if (!img_is_reference(reference))
        return act_error_set(err, EINVAL,
                             "image %s: not an image reference; give oci:PATH or oci:PATH:TAG",
                             reference ? reference : "");
    const char *rest = reference + 4;
    size_t path_len = act_image_layout_path_len(rest);
    tag[0] = '\0';
    if (rest[path_len] == ':') {
        int r = img_parse_reference_tag(reference, rest + path_len + 1, tag, tag_size, err);
        if (r < 0)
            return r;
    }
    if (path_len == 0 || path_len >= path_size)
        return act_error_set(err, EINVAL, "image %s: the layout's path is %s", reference,
                             path_len ? "too long" : "empty");
    memcpy(path, rest, path_len);
    path[path_len] = '\0';
    return 0;
}

int img_blob_open(const char *layout, const char *digest, act_error *err)
{
    if (!img_digest_is_valid(digest))
        return act_error_set(err, EPROTO,
                             "image %s: \"%s\" is not a sha256 digest (sha256: and 64 lowercase "
                             "hex digits)",
                             layout, digest);
    char path[4200];
    snprintf(path, sizeof(path), "%s/blobs/sha256/%s", layout, digest + 7);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno == ENOENT ? ENOENT : errno,
                             "image %s: blob %s: cannot open %s: %s; the layout is incomplete, "
                             "copy the image again",
                             layout, digest, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return act_error_set(err, EPROTO, "image %s: blob %s is not a regular file", layout,
                             digest);
    }
    return fd;
}

/* A JSON blob (manifest, index, config) read whole, bounded, and checked
 * against its digest (empty for index.json, which no digest names). */
static int read_json(const char *layout, const char *what, int fd, const char *digest,
                     json_object **out, act_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return act_error_set(err, errno, "image %s: cannot stat %s: %s", layout, what,
                             strerror(errno));
    if (st.st_size > (off_t)IMG_JSON_MAX)
        return act_error_set(err, EPROTO, "image %s: %s is %lld bytes, over the %u byte limit",
                             layout, what, (long long)st.st_size, IMG_JSON_MAX);
    _cleanup_free_ char *text = malloc((size_t)st.st_size + 2);
    if (!text)
        return act_error_set(err, ENOMEM, "out of memory");
    ssize_t n = act_read_full(fd, text, (size_t)st.st_size + 1);
    if (n < 0 || (size_t)n > IMG_JSON_MAX)
        return act_error_set(err, n < 0 ? (int)-n : EPROTO, "image %s: cannot read %s", layout,
                             what);
    text[n] = '\0';
    if (digest && digest[0]) {
        char actual[IMG_DIGEST_SIZE];
        if (img_sha256_digest(text, (size_t)n, actual) < 0)
            return act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
        if (strcmp(actual, digest) != 0)
            return act_error_set(err, EBADMSG,
                                 "image %s: %s has digest %s, not %s, the digest that names it; "
                                 "the layout is damaged, copy the image again",
                                 layout, what, actual, digest);
    }
    return img_parse_json(layout, what, text, (size_t)n, out, err);
}

int img_sha256_digest(const void *data, size_t len, char out[IMG_DIGEST_SIZE])
{
    char hex[ACT_SHA256_HEX_SIZE];
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = act_sha256_new();
    if (!sha || EVP_DigestUpdate(sha, data, len) != 1 || act_sha256_final_hex(sha, hex) < 0)
        return -EIO;
    snprintf(out, IMG_DIGEST_SIZE, "sha256:%s", hex);
    return 0;
}

int img_parse_json(const char *where, const char *what, const char *text, size_t len,
                   json_object **out, act_error *err)
{
    _cleanup_(json_tokener_freep) json_tokener *tok = json_tokener_new_ex(16);
    if (!tok)
        return act_error_set(err, ENOMEM, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    if (!root || json_tokener_get_error(tok) != json_tokener_success ||
        !json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return act_error_set(err, EPROTO, "image %s: %s is not a JSON object", where, what);
    }
    *out = root;
    return 0;
}

static const char *string_field(json_object *obj, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(obj, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* A descriptor's digest and media type, checked. */
static int descriptor(const char *layout, const char *what, json_object *d, const char **digest,
                      const char **media_type, act_error *err)
{
    *digest = json_object_is_type(d, json_type_object) ? string_field(d, "digest") : NULL;
    *media_type = *digest ? string_field(d, "mediaType") : NULL;
    if (!*digest || !img_digest_is_valid(*digest))
        return act_error_set(err, EPROTO,
                             "image %s: %s has no sha256 digest (only sha256 is supported)", layout,
                             what);
    return 0;
}

int img_choose_platform(const char *layout, json_object *index, char *digest, char *media_type,
                        size_t media_size, act_error *err)
{
    json_object *manifests;
    if (!json_object_object_get_ex(index, "manifests", &manifests) ||
        !json_object_is_type(manifests, json_type_array))
        return act_error_set(err, EPROTO, "image %s: an index without manifests", layout);
    char seen[256] = "";
    for (size_t i = 0; i < json_object_array_length(manifests); i++) {
        json_object *m = json_object_array_get_idx(manifests, i), *platform;
        const char *d, *type;
        if (descriptor(layout, "an index entry", m, &d, &type, err) < 0)
            return -err->errnum;
        if (!json_object_object_get_ex(m, "platform", &platform))
            continue;
        const char *os = string_field(platform, "os"),
                   *arch = string_field(platform, "architecture");
        size_t used = strlen(seen);
        snprintf(seen + used, sizeof(seen) - used, "%s%s/%s", used ? ", " : "", os ? os : "?",
                 arch ? arch : "?");
        if (os && arch && strcmp(os, PLATFORM_OS) == 0 && strcmp(arch, PLATFORM_ARCH) == 0) {
            snprintf(digest, IMG_DIGEST_SIZE, "%s", d);
            snprintf(media_type, media_size, "%s", type ? type : IMG_MEDIA_OCI_MANIFEST);
            return 0;
        }
    }
    return act_error_set(err, ENOEXEC,
                         "image %s: no manifest for %s/%s (the index has: %s); build the image "
                         "for %s/%s",
                         layout, PLATFORM_OS, PLATFORM_ARCH, seen[0] ? seen : "no platforms",
                         PLATFORM_OS, PLATFORM_ARCH);
}

/* The entry of index.json that tag names (with no tag, its only one). */
static int choose_tag(const char *reference, const char *layout, json_object *index,
                      const char *tag, char *digest, char *media_type, size_t media_size,
                      act_error *err)
{
    json_object *manifests;
    if (!json_object_object_get_ex(index, "manifests", &manifests) ||
        !json_object_is_type(manifests, json_type_array))
        return act_error_set(err, EPROTO, "image %s: index.json has no manifests", reference);
    size_t n = json_object_array_length(manifests);
    char tags[512] = "";
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(manifests, i), *annotations;
        const char *d, *type, *name = NULL;
        if (descriptor(layout, "an entry of index.json", m, &d, &type, err) < 0)
            return -err->errnum;
        if (json_object_object_get_ex(m, "annotations", &annotations))
            name = string_field(annotations, REF_NAME_ANNOTATION);
        size_t used = strlen(tags);
        if (name)
            snprintf(tags + used, sizeof(tags) - used, "%s%s", used ? ", " : "", name);
        if (tag[0] ? (name && strcmp(name, tag) == 0) : n == 1) {
            snprintf(digest, IMG_DIGEST_SIZE, "%s", d);
            snprintf(media_type, media_size, "%s", type ? type : "");
            return 0;
        }
    }
    if (!tag[0])
        return act_error_set(err, ENOENT,
                             "image %s: the layout holds %zu images; name one with a tag "
                             "(oci:%s:TAG; tags: %s)",
                             reference, n, layout, tags[0] ? tags : "none");
    return act_error_set(err, ENOENT, "image %s: no image tagged %s in the layout (tags: %s)",
                         reference, tag, tags[0] ? tags : "none");
}

static int media_compression(const char *layout, const char *type, img_compression *out,
                             act_error *err)
{
    static const struct {
        const char *type;
        img_compression compression;
    } known[] = {
        {"application/vnd.oci.image.layer.v1.tar", IMG_LAYER_TAR},
        {"application/vnd.oci.image.layer.v1.tar+gzip", IMG_LAYER_GZIP},
        {"application/vnd.oci.image.layer.v1.tar+zstd", IMG_LAYER_ZSTD},
        {"application/vnd.docker.image.rootfs.diff.tar.gzip", IMG_LAYER_GZIP},
    };
    for (size_t i = 0; type && i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(type, known[i].type) == 0) {
            *out = known[i].compression;
            return 0;
        }
    return act_error_set(err, EPROTO,
                         "image %s: a layer of media type %s, which is not a tar layer this "
                         "activator applies (tar, tar+gzip, tar+zstd)",
                         layout, type ? type : "(none)");
}

/* The config says the image is for linux/amd64. */
static int check_config(const char *layout, const char *digest, act_error *err)
{
    _cleanup_close_ int fd = img_blob_open(layout, digest, err);
    if (fd < 0)
        return fd;
    _cleanup_(json_object_putp) json_object *config = NULL;
    int r = read_json(layout, "the config", fd, digest, &config, err);
    if (r < 0)
        return r;
    const char *os = string_field(config, "os"), *arch = string_field(config, "architecture");
    if (!os || !arch || strcmp(os, PLATFORM_OS) != 0 || strcmp(arch, PLATFORM_ARCH) != 0)
        return act_error_set(err, ENOEXEC,
                             "image %s: its config says %s/%s, not %s/%s; build the image for "
                             "%s/%s",
                             layout, os ? os : "?", arch ? arch : "?", PLATFORM_OS, PLATFORM_ARCH,
                             PLATFORM_OS, PLATFORM_ARCH);
    return 0;
}

static int read_manifest(const char *layout, const char *digest, img_image *out, act_error *err)
{
    _cleanup_close_ int fd = img_blob_open(layout, digest, err);
    if (fd < 0)
        return fd;
    _cleanup_(json_object_putp) json_object *manifest = NULL;
    int r = read_json(layout, "the manifest", fd, digest, &manifest, err);
    if (r < 0)
        return r;
    json_object *config, *layers;
    const char *config_digest, *config_type;
    if (!json_object_object_get_ex(manifest, "config", &config) ||
        descriptor(layout, "the manifest's config", config, &config_digest, &config_type, err) < 0)
        return act_error_set(err, EPROTO, "image %s: the manifest %s names no config", layout,
                             digest);
    if (!json_object_object_get_ex(manifest, "layers", &layers) ||
        !json_object_is_type(layers, json_type_array) || json_object_array_length(layers) == 0)
        return act_error_set(err, EPROTO, "image %s: the manifest %s has no layers", layout,
                             digest);
    size_t n = json_object_array_length(layers);
    out->layers = calloc(n, sizeof(img_layer));
    if (!out->layers)
        return act_error_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *l = json_object_array_get_idx(layers, i), *size;
        const char *d, *type;
        char what[32];
        snprintf(what, sizeof(what), "layer %zu", i + 1);
        if (descriptor(layout, what, l, &d, &type, err) < 0)
            return -err->errnum;
        img_layer *layer = &out->layers[i];
        if ((r = media_compression(layout, type, &layer->compression, err)) < 0)
            return r;
        snprintf(layer->digest, sizeof(layer->digest), "%s", d);
        if (json_object_object_get_ex(l, "size", &size) && json_object_is_type(size, json_type_int))
            layer->size = (uint64_t)json_object_get_int64(size);
        out->n_layers = i + 1;
    }
    snprintf(out->manifest_digest, sizeof(out->manifest_digest), "%s", digest);
    snprintf(out->config_digest, sizeof(out->config_digest), "%s", config_digest);
    return check_config(layout, config_digest, err);
}

int img_open(const char *reference, img_image *out, act_error *err)
{
    memset(out, 0, sizeof(*out));
    char tag[160];
    int r = img_parse_reference(reference, out->layout, sizeof(out->layout), tag, sizeof(tag), err);
    if (r < 0)
        return r;
    char path[4200];
    snprintf(path, sizeof(path), "%s/index.json", out->layout);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return act_error_set(err, errno == ENOENT ? ENOENT : errno,
                             "image %s: cannot open %s: %s; is %s an OCI image layout (skopeo "
                             "copy ... oci:%s makes one)?",
                             reference, path, strerror(errno), out->layout, out->layout);
    _cleanup_(json_object_putp) json_object *index = NULL;
    if ((r = read_json(out->layout, "index.json", fd, NULL, &index, err)) < 0)
        return r;
    char digest[IMG_DIGEST_SIZE], media_type[128];
    if ((r = choose_tag(reference, out->layout, index, tag, digest, media_type, sizeof(media_type),
                        err)) < 0)
        return r;
    /* An index (a multi-platform image) is descended into once. */
    if (img_media_type_is_index(media_type)) {
        _cleanup_close_ int index_fd = img_blob_open(out->layout, digest, err);
        if (index_fd < 0)
            return index_fd;
        _cleanup_(json_object_putp) json_object *nested = NULL;
        if ((r = read_json(out->layout, "the image index", index_fd, digest, &nested, err)) < 0 ||
            (r = img_choose_platform(out->layout, nested, digest, media_type, sizeof(media_type),
                                     err)) < 0)
            return r;
    }
    if (media_type[0] && !img_media_type_is_manifest(media_type))
        return act_error_set(err, EPROTO,
                             "image %s: the manifest %s is of media type %s, which this "
                             "activator does not read (an OCI image manifest or a Docker v2 "
                             "schema 2 manifest)",
                             reference, digest, media_type);
    r = read_manifest(out->layout, digest, out, err);
    if (r < 0)
        img_image_clear(out);
    return r;
}
