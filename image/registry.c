/* Pulling an image from a registry (image.h): the OCI distribution API over
 * libcurl, into an image layout that img_open and img_flatten then read.
 *
 * The manifest is asked for by tag or digest, with every manifest type this
 * activator reads in Accept; an index is followed to linux/amd64. The
 * manifest's own digest is computed here (a registry's Docker-Content-Digest
 * header is not trusted), and a reference by digest must match it. The
 * config and the layers are fetched by digest, hashed as they stream to
 * disk, and kept only when the bytes give the digest. A 401 is answered as
 * its WWW-Authenticate challenge asks: Basic with the registry's
 * credentials from the auth file, or Bearer with a token from the realm it
 * names (asked with those credentials when there are any). */
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

#define ACCEPT_MANIFESTS                                                                           \
    "Accept: " IMG_MEDIA_OCI_INDEX ", " IMG_MEDIA_OCI_MANIFEST ", " IMG_MEDIA_DOCKER_LIST          \
    ", " IMG_MEDIA_DOCKER_MANIFEST
/* A containers-auth.json is a few lines; one larger is not read. */
#define AUTH_FILE_MAX (1u << 20)

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

/* ---- HTTP ------------------------------------------------------------------------------ */

/* The registry's credentials from a containers-auth.json(5) file: its
 * "auths" entry for the registry, "auth" being base64 of "user:password".
 * No file, or no entry, is no credentials. */
static int read_credentials(const img_registry_options *options, const char *registry,
                            char *userpwd, size_t size, act_error *err)
{
    userpwd[0] = '\0';
    if (!options || !options->auth_file || !options->auth_file[0])
        return 0;
    _cleanup_close_ int fd = open(options->auth_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0
                               : act_error_set(err, errno, "registry auth file %s: %s",
                                               options->auth_file, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) ||
        st.st_size > (off_t)AUTH_FILE_MAX)
        return act_error_set(err, EPERM,
                             "registry auth file %s must be a regular file of mode 0600 (it "
                             "holds passwords); chmod 600 it",
                             options->auth_file);
    _cleanup_free_ char *text = malloc((size_t)st.st_size + 1);
    ssize_t n = text ? act_read_full(fd, text, (size_t)st.st_size) : -ENOMEM;
    if (n < 0)
        return act_error_set(err, (int)-n, "registry auth file %s: cannot read it",
                             options->auth_file);
    _cleanup_(json_object_putp) json_object *root = NULL;
    int r =
        img_parse_json(options->auth_file, "the registry auth file", text, (size_t)n, &root, err);
    if (r < 0)
        return r;
    json_object *auths, *entry, *auth;
    if (!json_object_object_get_ex(root, "auths", &auths) ||
        !json_object_object_get_ex(auths, registry, &entry) ||
        !json_object_object_get_ex(entry, "auth", &auth) ||
        !json_object_is_type(auth, json_type_string))
        return 0;
    const char *b64 = json_object_get_string(auth);
    size_t b64_len = strlen(b64);
    unsigned char decoded[1024];
    if (b64_len == 0 || b64_len > 4 * (sizeof(decoded) / 3))
        return act_error_set(err, EINVAL, "registry auth file %s: the auth of %s is not base64",
                             options->auth_file, registry);
    int len = EVP_DecodeBlock(decoded, (const unsigned char *)b64, (int)b64_len);
    while (len > 0 && b64_len > 0 && b64[--b64_len] == '=')
        len--;
    if (len <= 0 || !memchr(decoded, ':', (size_t)len) || (size_t)len >= size)
        return act_error_set(err, EINVAL,
                             "registry auth file %s: the auth of %s is not base64 of "
                             "user:password",
                             options->auth_file, registry);
    memcpy(userpwd, decoded, (size_t)len);
    userpwd[len] = '\0';
    return 0;
}

typedef struct fetch {
    CURL *easy;
    const img_registry_ref *ref;
    const img_registry_options *options;
    char base[600];           /* https://REGISTRY or http://REGISTRY */
    char userpwd[1024];       /* from the auth file, "" for none */
    char authorization[4200]; /* the header that answered the last challenge */
    act_error *err;
} fetch;

/* What one request brought back: the body in memory (manifests, tokens) or
 * into a file hashed on the way (blobs), and the headers used. */
typedef struct answer {
    char *body;
    size_t len, cap, max;
    int fd;          /* >= 0: the body goes here */
    EVP_MD_CTX *sha; /* with fd */
    uint64_t written;
    bool too_big;
    char content_type[160];
    char challenge[1024];
} answer;

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    answer *a = userdata;
    size_t len = size * n;
    if (a->fd >= 0) {
        if (a->max && a->written + len > a->max) {
            a->too_big = true;
            return 0;
        }
        if (act_write_all(a->fd, data, len) < 0 || EVP_DigestUpdate(a->sha, data, len) != 1)
            return 0;
        a->written += len;
        return len;
    }
    if (a->len + len > a->max) {
        a->too_big = true;
        return 0;
    }
    if (a->len + len + 1 > a->cap) {
        size_t cap = (a->len + len + 1) * 2;
        char *grown = realloc(a->body, cap);
        if (!grown)
            return 0;
        a->body = grown;
        a->cap = cap;
    }
    memcpy(a->body + a->len, data, len);
    a->len += len;
    a->body[a->len] = '\0';
    return len;
}

/* Keeps the headers the pull reads: the media type and a challenge. */
static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
    answer *a = userdata;
    size_t len = size * n;
    struct {
        const char *name;
        char *into;
        size_t size;
    } kept[] = {{"content-type:", a->content_type, sizeof(a->content_type)},
                {"www-authenticate:", a->challenge, sizeof(a->challenge)}};
    for (size_t i = 0; i < 2; i++) {
        size_t name_len = strlen(kept[i].name);
        if (len <= name_len || strncasecmp(data, kept[i].name, name_len) != 0)
            continue;
        const char *value = data + name_len;
        size_t value_len = len - name_len;
        while (value_len && (*value == ' ' || *value == '\t'))
            value++, value_len--;
        while (value_len && (value[value_len - 1] == '\r' || value[value_len - 1] == '\n'))
            value_len--;
        if (value_len >= kept[i].size)
            value_len = kept[i].size - 1;
        memcpy(kept[i].into, value, value_len);
        kept[i].into[value_len] = '\0';
    }
    return len;
}

static void answer_reset(answer *a)
{
    a->len = 0;
    a->written = 0;
    a->too_big = false;
    a->content_type[0] = a->challenge[0] = '\0';
    if (a->body)
        a->body[0] = '\0';
}

/* One GET of url; the HTTP status, or -errno with err set. */
static long get_once(fetch *f, const char *url, const char *accept, answer *a)
{
    answer_reset(a);
    CURL *easy = f->easy;
    curl_easy_reset(easy);
    struct curl_slist *headers = NULL;
    if (accept)
        headers = curl_slist_append(headers, accept);
    if (f->authorization[0])
        headers = curl_slist_append(headers, f->authorization);
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L); /* blobs redirect to storage */
    curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, 10L);
    /* A stalled transfer ends; a slow large one does not. */
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                     f->options && f->options->timeout_sec ? f->options->timeout_sec : 30L);
    char ca[1024];
    const char *certs =
        f->options && f->options->certs_dir ? f->options->certs_dir : IMG_CERTS_DIR_DEFAULT;
    snprintf(ca, sizeof(ca), "%s/%s/ca.crt", certs, f->ref->registry);
    if (access(ca, R_OK) == 0)
        curl_easy_setopt(easy, CURLOPT_CAINFO, ca);
    CURLcode code = curl_easy_perform(easy);
    curl_slist_free_all(headers);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && a->too_big))
        return act_error_set(f->err, code == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : EHOSTUNREACH,
                             "registry %s: %s: %s; is the registry up, and reachable from this "
                             "box?",
                             f->ref->registry, url, errbuf[0] ? errbuf : curl_easy_strerror(code));
    if (a->too_big)
        return act_error_set(f->err, EPROTO, "registry %s: %s: the answer is larger than %s",
                             f->ref->registry, url,
                             a->fd >= 0 ? "the manifest says the blob is" : "a manifest may be");
    return status;
}

/* The value of param in a challenge ("Bearer realm=\"...\",service=\"...\""). */
static bool challenge_param(const char *challenge, const char *param, char *out, size_t size)
{
    size_t len = strlen(param);
    for (const char *p = challenge; (p = strstr(p, param)); p += len) {
        if ((p != challenge && p[-1] != ' ' && p[-1] != ',') || p[len] != '=')
            continue;
        const char *v = p + len + 1;
        bool quoted = *v == '"';
        v += quoted;
        size_t n = quoted ? strcspn(v, "\"") : strcspn(v, ", ");
        if (n >= size)
            return false;
        memcpy(out, v, n);
        out[n] = '\0';
        return true;
    }
    return false;
}

/* Answers a 401's challenge: Basic with the credentials, or Bearer with a
 * token from the realm. */
static int answer_challenge(fetch *f, const answer *denied, const char *url)
{
    const char *challenge = denied->challenge;
    if (strncasecmp(challenge, "Basic", 5) == 0) {
        if (!f->userpwd[0])
            return act_error_set(f->err, EACCES,
                                 "registry %s: %s needs a username and password; add the "
                                 "registry to the auth file (%s)",
                                 f->ref->registry, url,
                                 f->options && f->options->auth_file ? f->options->auth_file
                                                                     : "RegistryAuthFile=");
        unsigned char encoded[1500];
        EVP_EncodeBlock(encoded, (const unsigned char *)f->userpwd, (int)strlen(f->userpwd));
        snprintf(f->authorization, sizeof(f->authorization), "Authorization: Basic %s", encoded);
        return 0;
    }
    char realm[1024], service[256] = "", scope[512] = "";
    if (strncasecmp(challenge, "Bearer", 6) != 0 ||
        !challenge_param(challenge, "realm", realm, sizeof(realm)))
        return act_error_set(f->err, EACCES,
                             "registry %s: %s refused (HTTP 401) with a challenge this activator "
                             "does not answer (\"%s\")",
                             f->ref->registry, url, challenge[0] ? challenge : "none");
    challenge_param(challenge, "service", service, sizeof(service));
    if (!challenge_param(challenge, "scope", scope, sizeof(scope)))
        snprintf(scope, sizeof(scope), "repository:%s:pull", f->ref->repository);
    _cleanup_free_ char *service_q = curl_easy_escape(f->easy, service, 0);
    _cleanup_free_ char *scope_q = curl_easy_escape(f->easy, scope, 0);
    char token_url[2048];
    snprintf(token_url, sizeof(token_url), "%s%sservice=%s&scope=%s", realm,
             strchr(realm, '?') ? "&" : "?", service_q ? service_q : "", scope_q ? scope_q : "");
    answer token = {.fd = -1, .max = 1u << 20};
    f->authorization[0] = '\0';
    if (f->userpwd[0]) {
        unsigned char encoded[1500];
        EVP_EncodeBlock(encoded, (const unsigned char *)f->userpwd, (int)strlen(f->userpwd));
        snprintf(f->authorization, sizeof(f->authorization), "Authorization: Basic %s", encoded);
    }
    long status = get_once(f, token_url, NULL, &token);
    f->authorization[0] = '\0';
    if (status < 0) {
        free(token.body);
        return (int)status;
    }
    json_object *root = NULL, *value;
    if (status != 200 ||
        img_parse_json(f->ref->registry, "the token", token.body ? token.body : "", token.len,
                       &root, f->err) < 0 ||
        !((json_object_object_get_ex(root, "token", &value) ||
           json_object_object_get_ex(root, "access_token", &value)) &&
          json_object_is_type(value, json_type_string))) {
        json_object_put(root);
        free(token.body);
        return act_error_set(f->err, EACCES,
                             "registry %s: its token service %s gave no token (HTTP %ld)%s",
                             f->ref->registry, realm, status,
                             f->userpwd[0] ? "; check the credentials in the auth file"
                                           : "; add the registry to the auth file");
    }
    snprintf(f->authorization, sizeof(f->authorization), "Authorization: Bearer %s",
             json_object_get_string(value));
    json_object_put(root);
    free(token.body);
    return 0;
}

/* GET of path under the repository, answering one challenge; the status. */
static long get(fetch *f, const char *path, const char *accept, answer *a)
{
    char url[1400];
    snprintf(url, sizeof(url), "%s/v2/%s/%s", f->base, f->ref->repository, path);
    long status = get_once(f, url, accept, a);
    if (status != 401)
        return status;
    if (a->fd >= 0 && (lseek(a->fd, 0, SEEK_SET) < 0 || ftruncate(a->fd, 0) < 0))
        return act_error_set(f->err, errno, "cannot rewind a blob's file: %s", strerror(errno));
    if (a->fd >= 0) {
        EVP_MD_CTX_reset(a->sha);
        EVP_DigestInit_ex(a->sha, EVP_sha256(), NULL);
    }
    int r = answer_challenge(f, a, url);
    if (r < 0)
        return r;
    status = get_once(f, url, accept, a);
    if (status == 401 || status == 403)
        return act_error_set(f->err, EACCES,
                             "registry %s: %s refused (HTTP %ld) with the credentials given; "
                             "check the registry's entry in the auth file",
                             f->ref->registry, url, status);
    return status;
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
static int fetch_manifest(fetch *f, const char *reference, answer *a, char *digest, act_error *err)
{
    char path[300];
    snprintf(path, sizeof(path), "manifests/%s", reference);
    long status = get(f, path, ACCEPT_MANIFESTS, a);
    if (status < 0)
        return (int)status;
    if (status == 404)
        return act_error_set(err, ENOENT,
                             "image docker://%s/%s: the registry has no %s %s in the repository",
                             f->ref->registry, f->ref->repository,
                             img_digest_is_valid(reference) ? "manifest" : "tag", reference);
    if (status != 200)
        return act_error_set(err, EPROTO, "image docker://%s/%s: manifest %s: HTTP %ld",
                             f->ref->registry, f->ref->repository, reference, status);
    if (img_sha256_digest(a->body, a->len, digest) < 0)
        return act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    if (img_digest_is_valid(reference) && strcmp(reference, digest) != 0)
        return act_error_set(err, EBADMSG,
                             "image docker://%s/%s: the manifest asked for as %s has digest %s; "
                             "the registry's copy was changed or damaged",
                             f->ref->registry, f->ref->repository, reference, digest);
    return 0;
}

/* The blob named digest into the layout, hashed as it streams; kept only
 * when its bytes give the digest. */
static int fetch_blob(fetch *f, const char *layout, const char *digest, uint64_t size,
                      act_error *err)
{
    char final[4200], partial[4300];
    if (!img_digest_is_valid(digest) || blob_path(layout, digest, final, sizeof(final)) < 0)
        return act_error_set(err, EPROTO, "image docker://%s/%s: a blob named \"%s\"",
                             f->ref->registry, f->ref->repository, digest);
    if (access(final, F_OK) == 0)
        return 0;
    snprintf(partial, sizeof(partial), "%s.partial", final);
    _cleanup_close_ int fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = act_sha256_new();
    if (fd < 0 || !sha)
        return act_error_set(err, errno ? errno : ENOMEM, "cannot write %s: %s", partial,
                             strerror(errno));
    answer a = {.fd = fd, .sha = sha, .max = size};
    char path[300];
    snprintf(path, sizeof(path), "blobs/%s", digest);
    long status = get(f, path, NULL, &a);
    int r = 0;
    char hex[ACT_SHA256_HEX_SIZE];
    if (status < 0)
        r = (int)status;
    else if (status != 200)
        r = act_error_set(err, status == 404 ? ENOENT : EPROTO,
                          "image docker://%s/%s: blob %s: HTTP %ld", f->ref->registry,
                          f->ref->repository, digest, status);
    else if (act_sha256_final_hex(sha, hex) < 0)
        r = act_error_set(err, EIO, "SHA-256 failed in OpenSSL");
    else if (strcmp(hex, digest + 7) != 0)
        r = act_error_set(err, EBADMSG,
                          "image docker://%s/%s: blob %s arrived with digest sha256:%s; the "
                          "registry's copy was changed or damaged, nothing was staged",
                          f->ref->registry, f->ref->repository, digest, hex);
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
static int fetch_manifest_blobs(fetch *f, const char *layout, json_object *manifest, act_error *err)
{
    json_object *config, *layers, *digest;
    if (!json_object_object_get_ex(manifest, "config", &config) ||
        !json_object_object_get_ex(config, "digest", &digest) ||
        !json_object_object_get_ex(manifest, "layers", &layers) ||
        !json_object_is_type(layers, json_type_array))
        return act_error_set(err, EPROTO,
                             "image docker://%s/%s: the manifest names no config or no layers",
                             f->ref->registry, f->ref->repository);
    int r = fetch_blob(f, layout, json_object_get_string(digest), descriptor_size(config), err);
    for (size_t i = 0; r == 0 && i < json_object_array_length(layers); i++) {
        json_object *layer = json_object_array_get_idx(layers, i);
        if (!json_object_object_get_ex(layer, "digest", &digest))
            return act_error_set(err, EPROTO, "image docker://%s/%s: layer %zu has no digest",
                                 f->ref->registry, f->ref->repository, i + 1);
        uint64_t size = descriptor_size(layer);
        if (size == 0)
            return act_error_set(err, EPROTO, "image docker://%s/%s: layer %zu has no size",
                                 f->ref->registry, f->ref->repository, i + 1);
        r = fetch_blob(f, layout, json_object_get_string(digest), size, err);
    }
    return r;
}

/* The manifest (or index) answered in a, and its media type: the one its
 * Content-Type names, else its own mediaType field, else an OCI manifest's. */
static int parse_manifest(const char *reference, const answer *a, char *media_type, size_t size,
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

static bool registry_is_insecure(const img_registry_options *options, const char *registry)
{
    for (size_t i = 0; options && i < options->n_insecure; i++)
        if (strcmp(options->insecure[i], registry) == 0)
            return true;
    return false;
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
    img_registry_ref ref;
    int r = img_parse_registry_reference(reference, &ref, err);
    if (r < 0)
        return r;
    char blobs[4200];
    snprintf(blobs, sizeof(blobs), "%s/blobs/sha256", layout);
    if (act_mkdir_p(blobs, 0755, err) < 0)
        return -err->errnum;
    fetch f = {.easy = curl_easy_init(), .ref = &ref, .options = options, .err = err};
    if (!f.easy)
        return act_error_set(err, ENOMEM, "out of memory");
    snprintf(f.base, sizeof(f.base), "%s://%s",
             registry_is_insecure(options, ref.registry) ? "http" : "https", ref.registry);
    answer a = {.fd = -1, .max = IMG_JSON_MAX};
    char digest[IMG_DIGEST_SIZE];
    json_object *manifest = NULL;
    r = read_credentials(options, ref.registry, f.userpwd, sizeof(f.userpwd), err);
    if (r == 0)
        r = fetch_manifest(&f, ref.reference, &a, digest, err);
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
        snprintf(resolved, resolved_size, "docker://%s/%s@%s", ref.registry, ref.repository,
                 digest);
    json_object_put(manifest);
    free(a.body);
    curl_easy_cleanup(f.easy);
    return r;
}
