/* Pulling an image from a registry (image.h): the OCI distribution API
 * through a session (image/session.h), into an image layout that img_open
 * and img_flatten then read.
 *
 * The manifest is asked for by tag or digest, with every manifest type this
 * activator reads in Accept; an index is followed to linux/amd64. The
 * manifest's own digest is computed here (a registry's Docker-Content-Digest
 * header is not trusted), and a reference by digest must match it. The
 * config and the layers are fetched by digest, hashed as they stream to
 * disk, and kept only when the bytes give the digest. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "image/internal.h"
#include "image/session.h"

#define ACCEPT_MANIFESTS                                                                           \
    "Accept: " IMG_MEDIA_OCI_INDEX ", " IMG_MEDIA_OCI_MANIFEST ", " IMG_MEDIA_DOCKER_LIST          \
    ", " IMG_MEDIA_DOCKER_MANIFEST

bool img_is_registry_reference(const char *source)
{
    return source && strncmp(source, "docker://", 9) == 0;
}

/* ---- the reference ---------------------------------------------------------------- */

/* A repository path component: [a-z0-9]+ joined by single '.', '_', '-'
 * (or "__"), as the distribution spec's grammar has it, near enough. */
static bool repository_is_valid(const char *repo)
{
    if (!repo[0] || strlen(repo) > 255)
        return false;
    bool after_separator = true;
    for (const char *p = repo; *p; p++) {
        bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
        if (alnum) {
            after_separator = false;
            continue;
        }
        if (after_separator || !strchr("._-/", *p))
            return false;
        after_separator = true;
    }
    return !after_separator;
}

int img_parse_registry_reference(const char *reference, img_registry_ref *out, act_error *err)
{
    memset(out, 0, sizeof(*out));
    if (!img_is_registry_reference(reference))
        return act_error_set(err, EINVAL,
                             "image %s: not a registry reference; give "
                             "docker://REGISTRY/REPOSITORY:TAG or @sha256:DIGEST",
                             reference ? reference : "");
    const char *rest = reference + 9, *slash = strchr(rest, '/');
    size_t host_len = slash ? (size_t)(slash - rest) : 0;
    if (!slash || host_len == 0 || host_len >= sizeof(out->registry))
        return act_error_set(err, EINVAL,
                             "image %s: name the registry and the repository "
                             "(docker://REGISTRY/REPOSITORY:TAG)",
                             reference);
    memcpy(out->registry, rest, host_len);
    /* A first component without '.' or ':' would be a repository on a
     * default registry; there is none here, the registry is always named. */
    if (!strchr(out->registry, '.') && !strchr(out->registry, ':') &&
        strcmp(out->registry, "localhost") != 0)
        return act_error_set(err, EINVAL,
                             "image %s: \"%s\" is not a registry host (name it with its domain "
                             "or port: docker://registry.example.com/%s)",
                             reference, out->registry, slash + 1);
    const char *name = slash + 1, *at = strchr(name, '@');
    const char *last_slash = strrchr(name, '/');
    const char *colon = strchr(last_slash ? last_slash : name, ':');
    size_t repo_len = at ? (size_t)(at - name) : colon ? (size_t)(colon - name) : strlen(name);
    if (at && colon && colon < at)
        repo_len = (size_t)(colon - name); /* REPO:TAG@DIGEST: the digest decides */
    if (repo_len == 0 || repo_len >= sizeof(out->repository))
        return act_error_set(err, EINVAL, "image %s: no repository", reference);
    memcpy(out->repository, name, repo_len);
    if (!repository_is_valid(out->repository))
        return act_error_set(err, EINVAL,
                             "image %s: \"%s\" is not a repository name (lowercase letters, "
                             "digits and . _ - between them, / between components)",
                             reference, out->repository);
    if (at) {
        snprintf(out->reference, sizeof(out->reference), "%s", at + 1);
        if (!img_digest_is_valid(out->reference))
            return act_error_set(err, EINVAL, "image %s: \"%s\" is not a sha256 digest", reference,
                                 at + 1);
        out->by_digest = true;
        return 0;
    }
    char tag[160];
    int r = img_parse_reference_tag(reference, colon ? colon + 1 : "latest", tag, sizeof(tag), err);
    if (r < 0)
        return r;
    snprintf(out->reference, sizeof(out->reference), "%s", tag);
    return 0;
}

/* ---- the layout ------------------------------------------------------------------------ */

static int write_file_at(const char *dir, const char *name, const void *data, size_t len,
                         act_error *err)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || act_write_all(fd, data, len) < 0)
        return act_error_set(err, errno ? errno : EIO, "cannot write %s: %s", path,
                             strerror(errno));
    return 0;
}

static int blob_path(const char *layout, const char *digest, char *out, size_t size)
{
    return snprintf(out, size, "%s/blobs/sha256/%s", layout, digest + 7) >= (int)size
               ? -ENAMETOOLONG
               : 0;
}

/* A manifest (or an index) by tag or digest: its body, media type and the
 * digest of its bytes. */
static int fetch_manifest(img_session *f, const char *reference, img_answer *a, char *digest,
                          act_error *err)
{
    char path[300];
    snprintf(path, sizeof(path), "manifests/%s", reference);
    long status = img_session_get(f, path, ACCEPT_MANIFESTS, a);
    if (status < 0)
        return (int)status;
    if (status == 404)
        return act_error_set(err, ENOENT,
                             "image docker://%s/%s: the registry has no %s %s in the repository",
                             f->ref.registry, f->ref.repository,
                             img_digest_is_valid(reference) ? "manifest" : "tag", reference);
    if (status != 200)
        return act_error_set(err, EPROTO, "image docker://%s/%s: manifest %s: HTTP %ld",
                             f->ref.registry, f->ref.repository, reference, status);
    if (img_sha256_digest(a->body, a->len, digest) < 0)
        return act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    if (img_digest_is_valid(reference) && strcmp(reference, digest) != 0)
        return act_error_set(err, EBADMSG,
                             "image docker://%s/%s: the manifest asked for as %s has digest %s; "
                             "the registry's copy was changed or damaged",
                             f->ref.registry, f->ref.repository, reference, digest);
    return 0;
}

/* The blob named digest into the layout, hashed as it streams; kept only
 * when its bytes give the digest. */
static int fetch_blob(img_session *f, const char *layout, const char *digest, uint64_t size,
                      img_progress *progress, act_error *err)
{
    char final[4200], partial[4300];
    if (!img_digest_is_valid(digest) || blob_path(layout, digest, final, sizeof(final)) < 0)
        return act_error_set(err, EPROTO, "image docker://%s/%s: a blob named \"%s\"",
                             f->ref.registry, f->ref.repository, digest);
    if (access(final, F_OK) == 0)
        return 0;
    snprintf(partial, sizeof(partial), "%s.partial", final);
    _cleanup_close_ int fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = act_sha256_new();
    if (fd < 0 || !sha)
        return act_error_set(err, errno ? errno : ENOMEM, "cannot write %s: %s", partial,
                             strerror(errno));
    img_answer a = {.fd = fd, .sha = sha, .max = size, .progress = progress};
    char path[300];
    snprintf(path, sizeof(path), "blobs/%s", digest);
    long status = img_session_get(f, path, NULL, &a);
    int r = 0;
    char hex[ACT_SHA256_HEX_SIZE];
    if (status < 0)
        r = (int)status;
    else if (status != 200)
        r = act_error_set(err, status == 404 ? ENOENT : EPROTO,
                          "image docker://%s/%s: blob %s: HTTP %ld", f->ref.registry,
                          f->ref.repository, digest, status);
    else if (act_sha256_final_hex(sha, hex) < 0)
        r = act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    else if (strcmp(hex, digest + 7) != 0)
        r = act_error_set(err, EBADMSG,
                          "image docker://%s/%s: blob %s arrived with digest sha256:%s; the "
                          "registry's copy was changed or damaged, nothing was staged",
                          f->ref.registry, f->ref.repository, digest, hex);
    else if (fsync(fd) < 0 || rename(partial, final) < 0)
        r = act_error_set(err, errno, "cannot keep %s: %s", final, strerror(errno));
    if (r < 0)
        unlink(partial);
    return r;
}

static uint64_t descriptor_size(json_object *d)
{
    json_object *size;
    return json_object_object_get_ex(d, "size", &size) && json_object_is_type(size, json_type_int)
               ? (uint64_t)json_object_get_int64(size)
               : 0;
}

/* The manifest's config and layers into the layout. */
static int fetch_manifest_blobs(img_session *f, const char *layout, json_object *manifest,
                                act_error *err)
{
    json_object *config, *layers, *digest;
    if (!json_object_object_get_ex(manifest, "config", &config) ||
        !json_object_object_get_ex(config, "digest", &digest) ||
        !json_object_object_get_ex(manifest, "layers", &layers) ||
        !json_object_is_type(layers, json_type_array))
        return act_error_set(err, EPROTO,
                             "image docker://%s/%s: the manifest names no config or no layers",
                             f->ref.registry, f->ref.repository);
    img_progress *progress = f->options ? f->options->progress : NULL;
    if (progress) {
        uint64_t total = 0;
        for (size_t i = 0; i < json_object_array_length(layers); i++)
            total += descriptor_size(json_object_array_get_idx(layers, i));
        atomic_store(&progress->total, total);
        atomic_store(&progress->layers, (unsigned)json_object_array_length(layers));
    }
    /* The config is not counted: the manifest's total is the layers'. */
    int r = fetch_blob(f, layout, json_object_get_string(digest), descriptor_size(config), NULL,
                       err);
    for (size_t i = 0; r == 0 && i < json_object_array_length(layers); i++) {
        if (progress)
            atomic_store(&progress->layer, (unsigned)i + 1);
        json_object *layer = json_object_array_get_idx(layers, i);
        if (!json_object_object_get_ex(layer, "digest", &digest))
            return act_error_set(err, EPROTO, "image docker://%s/%s: layer %zu has no digest",
                                 f->ref.registry, f->ref.repository, i + 1);
        uint64_t size = descriptor_size(layer);
        if (size == 0)
            return act_error_set(err, EPROTO, "image docker://%s/%s: layer %zu has no size",
                                 f->ref.registry, f->ref.repository, i + 1);
        r = fetch_blob(f, layout, json_object_get_string(digest), size, progress, err);
    }
    return r;
}

/* The manifest (or index) answered in a, and its media type: the one its
 * Content-Type names, else its own mediaType field, else an OCI manifest's. */
static int parse_manifest(const char *reference, const img_answer *a, char *media_type, size_t size,
                          json_object **manifest, act_error *err)
{
    int r = img_parse_json(reference, "the manifest", a->body, a->len, manifest, err);
    if (r < 0)
        return r;
    json_object *own;
    if (a->content_type[0] && strncmp(a->content_type, "application/json", 16) != 0)
        snprintf(media_type, size, "%.*s", (int)strcspn(a->content_type, "; "), a->content_type);
    else if (json_object_object_get_ex(*manifest, "mediaType", &own) &&
             json_object_is_type(own, json_type_string))
        snprintf(media_type, size, "%s", json_object_get_string(own));
    else /* an OCI manifest need not name its type */
        snprintf(media_type, size, "%s", IMG_MEDIA_OCI_MANIFEST);
    return 0;
}

/* The layout's index.json naming the pulled manifest under IMG_PULLED_TAG. */
static int write_index(const char *layout, const char *media_type, const char *digest, size_t size,
                       act_error *err)
{
    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\","
                     "\"size\":%zu,\"annotations\":{\"org.opencontainers.image.ref.name\":\"%s\""
                     "}}]}",
                     media_type, digest, size, IMG_PULLED_TAG);
    static const char layout_marker[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
    int r = write_file_at(layout, "oci-layout", layout_marker, sizeof(layout_marker) - 1, err);
    return r < 0 ? r : write_file_at(layout, "index.json", text, (size_t)n, err);
}

int img_pull(const char *reference, const img_registry_options *options, const char *layout,
             char *resolved, size_t resolved_size, act_error *err)
{
    char blobs[4200];
    snprintf(blobs, sizeof(blobs), "%s/blobs/sha256", layout);
    img_session f;
    int r = img_session_open(&f, reference, options, err);
    if (r < 0) {
        img_session_close(&f);
        return r;
    }
    const img_registry_ref *ref = &f.ref;
    if (act_mkdir_p(blobs, 0755, err) < 0) {
        img_session_close(&f);
        return -err->errnum;
    }
    img_answer a = {.fd = -1, .max = IMG_JSON_MAX};
    char digest[IMG_DIGEST_SIZE];
    json_object *manifest = NULL;
    r = fetch_manifest(&f, ref->reference, &a, digest, err);
    char media_type[160] = "";
    if (r == 0)
        r = parse_manifest(reference, &a, media_type, sizeof(media_type), &manifest, err);
    /* An index: the linux/amd64 manifest it names, by digest. */
    if (r == 0 && img_media_type_is_index(media_type)) {
        char chosen[IMG_DIGEST_SIZE], chosen_type[160];
        r = img_choose_platform(reference, manifest, chosen, chosen_type, sizeof(chosen_type), err);
        json_object_put(manifest);
        manifest = NULL;
        if (r == 0)
            r = fetch_manifest(&f, chosen, &a, digest, err);
        if (r == 0)
            r = parse_manifest(reference, &a, media_type, sizeof(media_type), &manifest, err);
    }
    /* What goes into the layout's index.json is only a type it reads. */
    if (r == 0 && !img_media_type_is_manifest(media_type))
        r = act_error_set(err, EPROTO,
                          "image %s: the registry answered with a %s, which this activator does "
                          "not read (an OCI image manifest or a Docker v2 schema 2 manifest)",
                          reference, media_type);
    char name[100];
    snprintf(name, sizeof(name), "blobs/sha256/%s", digest + 7);
    if (r == 0)
        r = write_file_at(layout, name, a.body, a.len, err);
    if (r == 0)
        r = fetch_manifest_blobs(&f, layout, manifest, err);
    if (r == 0)
        r = write_index(layout, media_type, digest, a.len, err);
    if (r == 0)
        snprintf(resolved, resolved_size, "docker://%s/%s@%s", ref->registry, ref->repository,
                 digest);
    json_object_put(manifest);
    free(a.body);
    img_session_close(&f);
    return r;
}
