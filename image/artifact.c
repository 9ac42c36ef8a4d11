/* Artifacts in a registry repository (image/artifact.h). */
#include "image/artifact.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/sha256.h"
#include "image/internal.h"
#include "image/session.h"

/* The config of every artifact: the two bytes "{}". */
#define EMPTY_CONFIG "{}"

typedef struct session_scope {
    img_session s;
    img_answer a;
} session_scope;

static void session_scope_close(session_scope *scope)
{
    img_session_close(&scope->s);
    free(scope->a.body);
}

static int open_scope(session_scope *scope, const char *repository,
                      const img_registry_options *options, act_error *err)
{
    *scope = (session_scope){.a = {.fd = -1, .max = IMG_JSON_MAX}};
    return img_session_open(&scope->s, repository, options, err);
}

static int unexpected(img_session *s, const char *what, long status, const img_answer *a)
{
    return act_error_set(s->err, status == 404 ? ENOENT : EPROTO,
                         "registry %s: repository %s: %s: HTTP %ld%s%.200s", s->ref.registry,
                         s->ref.repository, what, status, a->body && a->len ? ": " : "",
                         a->body && a->len ? a->body : "");
}

/* The upload's next URL: its Location with the digest added for the PUT
 * that ends it. */
static void with_digest(const char *location, const char *digest, char *out, size_t size)
{
    snprintf(out, size, "%s%sdigest=%s", location, strchr(location, '?') ? "&" : "?", digest);
}

/* One blob: nothing when the repository has it; else POST for an upload,
 * then the body in one PUT, or in PATCHes of chunk bytes and a PUT that
 * closes it with the digest. data (len bytes) or fd (size bytes) is the
 * body. */
static int push_blob(img_session *s, img_answer *a, const char *digest, const void *data, int fd,
                     uint64_t size, uint64_t chunk)
{
    char path[300];
    snprintf(path, sizeof(path), "blobs/%s", digest);
    long status = img_session_send(s, &(img_request){.method = "HEAD", .path = path, .fd = -1}, a);
    if (status < 0)
        return (int)status;
    if (status == 200)
        return 0;
    status = img_session_send(
        s, &(img_request){.method = "POST", .path = "blobs/uploads/", .fd = -1}, a);
    if (status < 0)
        return (int)status;
    if (status != 202 || !a->location[0])
        return unexpected(s, "starting an upload", status, a);
    char location[sizeof(a->location)], url[sizeof(a->location) + 100];
    snprintf(location, sizeof(location), "%s", a->location);
    static const char octets[] = "Content-Type: application/octet-stream";
    if (data || size <= chunk) {
        with_digest(location, digest, url, sizeof(url));
        img_request put = {.method = "PUT", .path = url, .content_type = octets, .fd = fd};
        if (data) {
            put.data = data;
            put.data_len = (size_t)size;
        } else {
            put.length = size;
        }
        status = img_session_send(s, &put, a);
        return status < 0      ? (int)status
               : status == 201 ? 0
                               : unexpected(s, "uploading a blob", status, a);
    }
    for (uint64_t at = 0; at < size; at += chunk) {
        uint64_t length = size - at < chunk ? size - at : chunk;
        img_request patch = {.method = "PATCH",
                             .path = location,
                             .content_type = octets,
                             .fd = fd,
                             .offset = (off_t)at,
                             .length = length};
        status = img_session_send(s, &patch, a);
        if (status < 0)
            return (int)status;
        if (status != 202 || !a->location[0])
            return unexpected(s, "uploading a chunk", status, a);
        snprintf(location, sizeof(location), "%s", a->location);
    }
    with_digest(location, digest, url, sizeof(url));
    status = img_session_send(s, &(img_request){.method = "PUT", .path = url, .fd = -1}, a);
    return status < 0      ? (int)status
           : status == 201 ? 0
                           : unexpected(s, "closing an upload", status, a);
}

static char *manifest_text(const img_artifact *artifact, const char *config_digest)
{
    _cleanup_(json_object_putp) json_object *root = json_object_new_object();
    json_object *config = json_object_new_object(), *layer = json_object_new_object();
    json_object *layers = json_object_new_array(), *annotations = json_object_new_object();
    json_object_object_add(root, "schemaVersion", json_object_new_int(2));
    json_object_object_add(root, "mediaType", json_object_new_string(IMG_MEDIA_OCI_MANIFEST));
    json_object_object_add(config, "mediaType", json_object_new_string(artifact->artifact_type));
    json_object_object_add(config, "digest", json_object_new_string(config_digest));
    json_object_object_add(config, "size", json_object_new_int(2));
    json_object_object_add(root, "config", config);
    json_object_object_add(layer, "mediaType", json_object_new_string(artifact->layer_media_type));
    json_object_object_add(layer, "digest", json_object_new_string(artifact->digest));
    json_object_object_add(layer, "size", json_object_new_int64((int64_t)artifact->size));
    json_object_array_add(layers, layer);
    json_object_object_add(root, "layers", layers);
    for (size_t i = 0; i < artifact->n_annotations; i++)
        json_object_object_add(annotations, artifact->annotations[i].key,
                               json_object_new_string(artifact->annotations[i].value));
    json_object_object_add(root, "annotations", annotations);
    const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    return text ? strdup(text) : NULL;
}

int img_artifact_push(const img_artifact *artifact, const img_registry_options *options,
                      uint64_t chunk_bytes, char manifest_digest[IMG_DIGEST_SIZE], act_error *err)
{
    if (!img_digest_is_valid(artifact->digest))
        return act_error_set(err, EINVAL, "artifact %s: \"%s\" is not a sha256 digest",
                             artifact->tag, artifact->digest);
    char tag[160];
    int r = img_parse_reference_tag(artifact->repository, artifact->tag, tag, sizeof(tag), err);
    if (r < 0)
        return r;
    __attribute__((cleanup(session_scope_close))) session_scope scope;
    r = open_scope(&scope, artifact->repository, options, err);
    if (r < 0)
        return r;
    img_session *s = &scope.s;
    char config_digest[IMG_DIGEST_SIZE];
    if (img_sha256_digest(EMPTY_CONFIG, 2, config_digest) < 0)
        return act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    uint64_t chunk = chunk_bytes ? chunk_bytes : IMG_UPLOAD_CHUNK_DEFAULT;
    r = push_blob(s, &scope.a, artifact->digest, NULL, artifact->fd, artifact->size, chunk);
    if (r == 0)
        r = push_blob(s, &scope.a, config_digest, EMPTY_CONFIG, -1, 2, chunk);
    if (r < 0)
        return act_error_prefix(err, "pushing %s:%s", artifact->repository, tag);
    _cleanup_free_ char *text = manifest_text(artifact, config_digest);
    if (!text)
        return act_error_set(err, ENOMEM, "out of memory");
    if (img_sha256_digest(text, strlen(text), manifest_digest) < 0)
        return act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    char path[300];
    snprintf(path, sizeof(path), "manifests/%s", tag);
    long status =
        img_session_send(s,
                         &(img_request){.method = "PUT",
                                        .path = path,
                                        .content_type = "Content-Type: " IMG_MEDIA_OCI_MANIFEST,
                                        .data = text,
                                        .data_len = strlen(text),
                                        .fd = -1},
                         &scope.a);
    if (status < 0)
        return (int)status;
    if (status != 201)
        return unexpected(s, "putting the manifest", status, &scope.a);
    return 0;
}

int img_artifact_tags(const char *repository, const img_registry_options *options, char ***tags,
                      act_error *err)
{
    *tags = NULL;
    __attribute__((cleanup(session_scope_close))) session_scope scope;
    int r = open_scope(&scope, repository, options, err);
    if (r < 0)
        return r;
    long status = img_session_get(&scope.s, "tags/list?n=10000", NULL, &scope.a);
    if (status < 0)
        return (int)status;
    size_t n = 0;
    json_object *list = NULL;
    _cleanup_(json_object_putp) json_object *root = NULL;
    if (status == 200) {
        r = img_parse_json(repository, "the tag list", scope.a.body ? scope.a.body : "",
                           scope.a.len, &root, err);
        if (r < 0)
            return r;
        if (json_object_object_get_ex(root, "tags", &list) &&
            json_object_is_type(list, json_type_array))
            n = json_object_array_length(list);
    } else if (status != 404) { /* a repository never pushed to: no tags */
        return unexpected(&scope.s, "listing its tags", status, &scope.a);
    }
    char **out = calloc(n + 1, sizeof(*out));
    if (!out)
        return act_error_set(err, ENOMEM, "out of memory");
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *tag = json_object_array_get_idx(list, i);
        if (!json_object_is_type(tag, json_type_string))
            continue;
        out[kept] = strdup(json_object_get_string(tag));
        if (!out[kept]) {
            for (size_t j = 0; j < kept; j++)
                free(out[j]);
            free(out);
            return act_error_set(err, ENOMEM, "out of memory");
        }
        kept++;
    }
    *tags = out;
    return 0;
}

int img_artifact_manifest(const char *repository, const char *tag,
                          const img_registry_options *options, json_object **manifest,
                          char digest[IMG_DIGEST_SIZE], act_error *err)
{
    *manifest = NULL;
    __attribute__((cleanup(session_scope_close))) session_scope scope;
    int r = open_scope(&scope, repository, options, err);
    if (r < 0)
        return r;
    char path[300];
    snprintf(path, sizeof(path), "manifests/%s", tag);
    long status = img_session_get(&scope.s, path, "Accept: " IMG_MEDIA_OCI_MANIFEST, &scope.a);
    if (status < 0)
        return (int)status;
    if (status != 200)
        return unexpected(&scope.s, tag, status, &scope.a);
    if (img_sha256_digest(scope.a.body, scope.a.len, digest) < 0)
        return act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    return img_parse_json(repository, "the manifest", scope.a.body, scope.a.len, manifest, err);
}

int img_artifact_delete(const char *repository, const char *digest,
                        const img_registry_options *options, act_error *err)
{
    __attribute__((cleanup(session_scope_close))) session_scope scope;
    int r = open_scope(&scope, repository, options, err);
    if (r < 0)
        return r;
    char path[300];
    snprintf(path, sizeof(path), "manifests/%s", digest);
    long status = img_session_send(
        &scope.s, &(img_request){.method = "DELETE", .path = path, .fd = -1}, &scope.a);
    if (status < 0)
        return (int)status;
    if (status == 405)
        return act_error_set(err, EOPNOTSUPP,
                             "registry %s does not allow deletion (HTTP 405): %s stays; its "
                             "operator can allow it (distribution: storage delete enabled), or "
                             "remove old tags by hand",
                             scope.s.ref.registry, digest);
    if (status != 202 && status != 404)
        return unexpected(&scope.s, "deleting a manifest", status, &scope.a);
    return 0;
}

int img_blob_download(const char *repository, const char *digest, uint64_t max,
                      const img_registry_options *options, int fd, act_error *err)
{
    if (!img_digest_is_valid(digest))
        return act_error_set(err, EINVAL, "\"%s\" is not a sha256 digest", digest);
    __attribute__((cleanup(session_scope_close))) session_scope scope;
    int r = open_scope(&scope, repository, options, err);
    if (r < 0)
        return r;
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = act_sha256_new();
    if (!sha)
        return act_error_set(err, ENOMEM, "out of memory");
    img_answer into = {.fd = fd, .sha = sha, .max = max};
    char path[300];
    snprintf(path, sizeof(path), "blobs/%s", digest);
    long status = img_session_get(&scope.s, path, NULL, &into);
    if (status < 0)
        return (int)status;
    if (status != 200)
        return unexpected(&scope.s, digest, status, &into);
    char hex[ACT_SHA256_HEX_SIZE];
    if (act_sha256_final_hex(sha, hex) < 0)
        return act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    if (strcmp(hex, digest + 7) != 0)
        return act_error_set(err, EBADMSG,
                             "registry %s: repository %s: blob %s arrived with digest sha256:%s; "
                             "the registry's copy was changed or damaged",
                             scope.s.ref.registry, scope.s.ref.repository, digest, hex);
    return 0;
}
