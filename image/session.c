/* A session with one registry repository (image/session.h). */
#include "image/session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"

/* A containers-auth.json is a few lines; one larger is not read. */
#define AUTH_FILE_MAX (1u << 20)

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

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    img_answer *a = userdata;
    size_t len = size * n;
    if (a->fd >= 0) {
        if (a->max && a->written + len > a->max) {
            a->too_big = true;
            return 0;
        }
        if (act_write_all(a->fd, data, len) < 0 || EVP_DigestUpdate(a->sha, data, len) != 1)
            return 0;
        a->written += len;
        if (a->progress)
            atomic_fetch_add(&a->progress->bytes, len);
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

/* Keeps the headers the API reads: the media type, a challenge, where an
 * upload goes on, and the digest the registry gives a manifest. */
static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
    img_answer *a = userdata;
    size_t len = size * n;
    struct {
        const char *name;
        char *into;
        size_t size;
    } kept[] = {{"content-type:", a->content_type, sizeof(a->content_type)},
                {"www-authenticate:", a->challenge, sizeof(a->challenge)},
                {"location:", a->location, sizeof(a->location)},
                {"docker-content-digest:", a->digest, sizeof(a->digest)}};
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
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

static void answer_reset(img_answer *a)
{
    a->len = 0;
    a->written = 0;
    a->too_big = false;
    a->content_type[0] = a->challenge[0] = a->location[0] = a->digest[0] = '\0';
    if (a->body)
        a->body[0] = '\0';
}

/* An upload's body read from its file, length bytes from offset. */
typedef struct upload {
    int fd;
    off_t at;
    uint64_t left;
} upload;

static size_t on_read(char *buffer, size_t size, size_t n, void *userdata)
{
    upload *u = userdata;
    size_t want = size * n;
    if (want > u->left)
        want = (size_t)u->left;
    if (want == 0)
        return 0;
    ssize_t got = pread(u->fd, buffer, want, u->at);
    if (got <= 0)
        return CURL_READFUNC_ABORT;
    u->at += got;
    u->left -= (uint64_t)got;
    return (size_t)got;
}

/* The URL of rq: an upload's Location is absolute or absolute-path. */
static void request_url(const img_session *s, const img_request *rq, char *out, size_t size)
{
    if (strncmp(rq->path, "http://", 7) == 0 || strncmp(rq->path, "https://", 8) == 0)
        snprintf(out, size, "%s", rq->path);
    else if (rq->path[0] == '/')
        snprintf(out, size, "%s%s", s->base, rq->path);
    else
        snprintf(out, size, "%s/v2/%s/%s", s->base, s->ref.repository, rq->path);
}

/* One request to url; the HTTP status, or -errno with the error set. */
static long send_once(img_session *s, const char *url, const img_request *rq, img_answer *a)
{
    answer_reset(a);
    CURL *easy = s->easy;
    curl_easy_reset(easy);
    struct curl_slist *headers = NULL;
    if (rq->accept)
        headers = curl_slist_append(headers, rq->accept);
    if (rq->content_type)
        headers = curl_slist_append(headers, rq->content_type);
    if (s->authorization[0])
        headers = curl_slist_append(headers, s->authorization);
    /* libcurl would wait a second for "100 Continue" before a large body. */
    headers = curl_slist_append(headers, "Expect:");
    char errbuf[CURL_ERROR_SIZE] = "";
    upload from_file = {.fd = rq->fd, .at = rq->offset, .left = rq->length};
    const char *method = rq->method ? rq->method : "GET";
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
        if (rq->fd >= 0) {
            curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(easy, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(easy, CURLOPT_READDATA, &from_file);
            curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->length);
        } else if (strcmp(method, "DELETE") != 0) {
            curl_easy_setopt(easy, CURLOPT_POSTFIELDS, rq->data ? rq->data : "");
            curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->data_len);
        }
    }
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    /* Blobs redirect to storage; an upload is never redirected. */
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, strcmp(method, "GET") == 0 ? 1L : 0L);
    curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, 10L);
    /* A stalled transfer ends; a slow large one does not. */
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                     s->options && s->options->timeout_sec ? s->options->timeout_sec : 30L);
    char ca[1024];
    const char *certs =
        s->options && s->options->certs_dir ? s->options->certs_dir : IMG_CERTS_DIR_DEFAULT;
    snprintf(ca, sizeof(ca), "%s/%s/ca.crt", certs, s->ref.registry);
    if (access(ca, R_OK) == 0)
        curl_easy_setopt(easy, CURLOPT_CAINFO, ca);
    CURLcode code = curl_easy_perform(easy);
    curl_slist_free_all(headers);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && a->too_big))
        return act_error_set(s->err, code == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : EHOSTUNREACH,
                             "registry %s: %s: %s; is the registry up, and reachable from this "
                             "box?",
                             s->ref.registry, url, errbuf[0] ? errbuf : curl_easy_strerror(code));
    if (a->too_big)
        return act_error_set(s->err, EPROTO, "registry %s: %s: the answer is larger than %s",
                             s->ref.registry, url,
                             a->fd >= 0 ? "the manifest says the blob is" : "a manifest may be");
    return status;
}

static long get_once(img_session *s, const char *url, const char *accept, img_answer *a)
{
    img_request rq = {.method = "GET", .path = url, .accept = accept, .fd = -1};
    return send_once(s, url, &rq, a);
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
static int answer_challenge(img_session *s, const img_answer *denied, const char *url)
{
    const char *challenge = denied->challenge;
    if (strncasecmp(challenge, "Basic", 5) == 0) {
        if (!s->userpwd[0])
            return act_error_set(s->err, EACCES,
                                 "registry %s: %s needs a username and password; add the "
                                 "registry to the auth file (%s)",
                                 s->ref.registry, url,
                                 s->options && s->options->auth_file ? s->options->auth_file
                                                                     : "RegistryAuthFile=");
        unsigned char encoded[1500];
        EVP_EncodeBlock(encoded, (const unsigned char *)s->userpwd, (int)strlen(s->userpwd));
        snprintf(s->authorization, sizeof(s->authorization), "Authorization: Basic %s", encoded);
        return 0;
    }
    char realm[1024], service[256] = "", scope[512] = "";
    if (strncasecmp(challenge, "Bearer", 6) != 0 ||
        !challenge_param(challenge, "realm", realm, sizeof(realm)))
        return act_error_set(s->err, EACCES,
                             "registry %s: %s refused (HTTP 401) with a challenge this activator "
                             "does not answer (\"%s\")",
                             s->ref.registry, url, challenge[0] ? challenge : "none");
    challenge_param(challenge, "service", service, sizeof(service));
    if (!challenge_param(challenge, "scope", scope, sizeof(scope)))
        snprintf(scope, sizeof(scope), "repository:%s:pull", s->ref.repository);
    _cleanup_free_ char *service_q = curl_easy_escape(s->easy, service, 0);
    _cleanup_free_ char *scope_q = curl_easy_escape(s->easy, scope, 0);
    char token_url[2048];
    snprintf(token_url, sizeof(token_url), "%s%sservice=%s&scope=%s", realm,
             strchr(realm, '?') ? "&" : "?", service_q ? service_q : "", scope_q ? scope_q : "");
    img_answer token = {.fd = -1, .max = 1u << 20};
    s->authorization[0] = '\0';
    if (s->userpwd[0]) {
        unsigned char encoded[1500];
        EVP_EncodeBlock(encoded, (const unsigned char *)s->userpwd, (int)strlen(s->userpwd));
        snprintf(s->authorization, sizeof(s->authorization), "Authorization: Basic %s", encoded);
    }
    long status = get_once(s, token_url, NULL, &token);
    s->authorization[0] = '\0';
    if (status < 0) {
        free(token.body);
        return (int)status;
    }
    json_object *root = NULL, *value;
    if (status != 200 ||
        img_parse_json(s->ref.registry, "the token", token.body ? token.body : "", token.len, &root,
                       s->err) < 0 ||
        !((json_object_object_get_ex(root, "token", &value) ||
           json_object_object_get_ex(root, "access_token", &value)) &&
          json_object_is_type(value, json_type_string))) {
        json_object_put(root);
        free(token.body);
        return act_error_set(s->err, EACCES,
                             "registry %s: its token service %s gave no token (HTTP %ld)%s",
                             s->ref.registry, realm, status,
                             s->userpwd[0] ? "; check the credentials in the auth file"
                                           : "; add the registry to the auth file");
    }
    snprintf(s->authorization, sizeof(s->authorization), "Authorization: Bearer %s",
             json_object_get_string(value));
    json_object_put(root);
    free(token.body);
    return 0;
}

long img_session_send(img_session *s, const img_request *rq, img_answer *a)
{
    char url[2600];
    request_url(s, rq, url, sizeof(url));
    long status = send_once(s, url, rq, a);
    if (status != 401)
        return status;
    if (a->fd >= 0 && (lseek(a->fd, 0, SEEK_SET) < 0 || ftruncate(a->fd, 0) < 0))
        return act_error_set(s->err, errno, "cannot rewind a blob's file: %s", strerror(errno));
    if (a->fd >= 0) {
        EVP_MD_CTX_reset(a->sha);
        EVP_DigestInit_ex(a->sha, EVP_sha256(), NULL);
    }
    int r = answer_challenge(s, a, url);
    if (r < 0)
        return r;
    status = send_once(s, url, rq, a);
    if (status == 401 || status == 403)
        return act_error_set(s->err, EACCES,
                             "registry %s: %s refused (HTTP %ld) with the credentials given; "
                             "check the registry's entry in the auth file",
                             s->ref.registry, url, status);
    return status;
}

long img_session_get(img_session *s, const char *path, const char *accept, img_answer *a)
{
    img_request rq = {.method = "GET", .path = path, .accept = accept, .fd = -1};
    return img_session_send(s, &rq, a);
}

static bool registry_is_insecure(const img_registry_options *options, const char *registry)
{
    for (size_t i = 0; options && i < options->n_insecure; i++)
        if (strcmp(options->insecure[i], registry) == 0)
            return true;
    return false;
}

int img_session_open(img_session *s, const char *reference, const img_registry_options *options,
                     act_error *err)
{
    *s = (img_session){.options = options, .err = err};
    int r = img_parse_registry_reference(reference, &s->ref, err);
    if (r < 0)
        return r;
    snprintf(s->base, sizeof(s->base), "%s://%s",
             registry_is_insecure(options, s->ref.registry) ? "http" : "https", s->ref.registry);
    r = read_credentials(options, s->ref.registry, s->userpwd, sizeof(s->userpwd), err);
    if (r < 0)
        return r;
    s->easy = curl_easy_init();
    if (!s->easy)
        return act_error_set(err, ENOMEM, "out of memory");
    return 0;
}

void img_session_close(img_session *s)
{
    if (s->easy)
        curl_easy_cleanup(s->easy);
    s->easy = NULL;
}
