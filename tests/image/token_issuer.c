/* The test registry's token service (token_issuer.h). */
#include "tests/image/token_issuer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <microhttpd.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

struct token_issuer {
    struct MHD_Daemon *mhd;
    EVP_PKEY *key;
    char x5c[4096]; /* the certificate, DER in standard base64 */
    char user[64], password[64];
    atomic_uint given, refused;
};

/* base64url without padding, as JOSE writes it. */
static void b64url(const unsigned char *data, size_t len, char *out, size_t size)
{
    char plain[8192];
    if (4 * ((len + 2) / 3) + 1 > sizeof(plain) || size == 0) {
        if (size)
            out[0] = '\0';
        return;
    }
    int n = EVP_EncodeBlock((unsigned char *)plain, data, (int)len);
    size_t o = 0;
    for (int i = 0; i < n && o + 1 < size; i++) {
        char c = plain[i];
        if (c == '=')
            break;
        out[o++] = c == '+' ? '-' : c == '/' ? '_' : c;
    }
    out[o] = '\0';
}

/* ES256: the SHA-256 ECDSA signature as JOSE wants it, R and S of 32
 * bytes each, not DER. */
static int sign_es256(EVP_PKEY *key, const char *input, unsigned char out[64])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char der[128];
    size_t der_len = sizeof(der);
    int ok = ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
             EVP_DigestSign(ctx, der, &der_len, (const unsigned char *)input, strlen(input)) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return -1;
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (!sig)
        return -1;
    const BIGNUM *r, *s;
    ECDSA_SIG_get0(sig, &r, &s);
    ok = BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(s, out + 32, 32) == 32;
    ECDSA_SIG_free(sig);
    return ok ? 0 : -1;
}

typedef struct scopes {
    json_object *access;
} scopes;

/* "repository:NAME:ACTION,ACTION" into an access entry granting them. */
static enum MHD_Result on_argument(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    scopes *want = cls;
    if (strcmp(key, "scope") != 0 || !value)
        return MHD_YES;
    const char *first = strchr(value, ':');
    const char *last = strrchr(value, ':');
    if (!first || first == last)
        return MHD_YES;
    json_object *entry = json_object_new_object(), *actions = json_object_new_array();
    json_object_object_add(entry, "type", json_object_new_string_len(value, (int)(first - value)));
    json_object_object_add(entry, "name",
                           json_object_new_string_len(first + 1, (int)(last - first - 1)));
    char list[256];
    snprintf(list, sizeof(list), "%s", last + 1);
    for (char *save = NULL, *action = strtok_r(list, ",", &save); action;
         action = strtok_r(NULL, ",", &save))
        json_object_array_add(actions, json_object_new_string(action));
    json_object_object_add(entry, "actions", actions);
    json_object_array_add(want->access, entry);
    return MHD_YES;
}

static char *make_token(token_issuer *issuer, json_object *access)
{
    json_object *header = json_object_new_object(), *x5c = json_object_new_array();
    json_object_object_add(header, "typ", json_object_new_string("JWT"));
    json_object_object_add(header, "alg", json_object_new_string("ES256"));
    json_object_array_add(x5c, json_object_new_string(issuer->x5c));
    json_object_object_add(header, "x5c", x5c);
    time_t now = time(NULL);
    char jti[32];
    snprintf(jti, sizeof(jti), "%ld-%u", (long)now, atomic_load(&issuer->given));
    json_object *claims = json_object_new_object();
    json_object_object_add(claims, "iss", json_object_new_string(TOKEN_ISSUER_NAME));
    json_object_object_add(claims, "sub", json_object_new_string(issuer->user));
    json_object_object_add(claims, "aud", json_object_new_string(TOKEN_ISSUER_SERVICE));
    json_object_object_add(claims, "exp", json_object_new_int64(now + 300));
    json_object_object_add(claims, "nbf", json_object_new_int64(now - 10));
    json_object_object_add(claims, "iat", json_object_new_int64(now));
    json_object_object_add(claims, "jti", json_object_new_string(jti));
    json_object_object_add(claims, "access", json_object_get(access));
    const char *h = json_object_to_json_string_ext(header, JSON_C_TO_STRING_PLAIN);
    const char *c = json_object_to_json_string_ext(claims, JSON_C_TO_STRING_PLAIN);
    char h64[8192], c64[8192], input[16400], s64[128];
    b64url((const unsigned char *)h, strlen(h), h64, sizeof(h64));
    b64url((const unsigned char *)c, strlen(c), c64, sizeof(c64));
    snprintf(input, sizeof(input), "%s.%s", h64, c64);
    json_object_put(header);
    json_object_put(claims);
    unsigned char sig[64];
    if (sign_es256(issuer->key, input, sig) < 0)
        return NULL;
    b64url(sig, sizeof(sig), s64, sizeof(s64));
    char *token = NULL;
    return asprintf(&token, "%s.%s", input, s64) < 0 ? NULL : token;
}

static enum MHD_Result reply(struct MHD_Connection *connection, unsigned status, const char *body)
{
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(response, "Content-Type", "application/json");
    enum MHD_Result r = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    token_issuer *issuer = cls;
    if (strcmp(method, "GET") != 0 || strcmp(url, "/token") != 0)
        return reply(connection, MHD_HTTP_NOT_FOUND, "{\"errors\":[\"no such path\"]}");
    char *password = NULL;
    char *user = MHD_basic_auth_get_username_password(connection, &password);
    bool known = user && password && strcmp(user, issuer->user) == 0 &&
                 strcmp(password, issuer->password) == 0;
    MHD_free(user);
    MHD_free(password);
    const char *service = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "service");
    if (!known || !service || strcmp(service, TOKEN_ISSUER_SERVICE) != 0) {
        atomic_fetch_add(&issuer->refused, 1);
        return reply(connection, MHD_HTTP_UNAUTHORIZED,
                     "{\"errors\":[\"unknown user, or another service\"]}");
    }
    scopes want = {.access = json_object_new_array()};
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, on_argument, &want);
    char *token = make_token(issuer, want.access);
    json_object_put(want.access);
    if (!token)
        return reply(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, "{\"errors\":[\"signing\"]}");
    char body[20000];
    snprintf(body, sizeof(body), "{\"token\":\"%s\",\"expires_in\":300}", token);
    free(token);
    atomic_fetch_add(&issuer->given, 1);
    return reply(connection, MHD_HTTP_OK, body);
}

static int fail(act_error *err, const char *what)
{
    return act_error_set(err, EIO, "token issuer: %s", what);
}

/* The key and certificate, made by the openssl tool; the certificate's DER
 * kept for x5c. */
static int make_key(token_issuer *issuer, const char *dir, act_error *err)
{
    char command[2048], path[1024];
    snprintf(command, sizeof(command),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
             "-subj /CN=" TOKEN_ISSUER_NAME " -keyout %s/issuer.key -out %s/issuer.crt "
             ">/dev/null 2>&1",
             dir, dir);
    if (system(command) != 0)
        return fail(err, "openssl could not make a key and a certificate");
    snprintf(path, sizeof(path), "%s/issuer.key", dir);
    FILE *f = fopen(path, "r");
    issuer->key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    snprintf(path, sizeof(path), "%s/issuer.crt", dir);
    f = fopen(path, "r");
    X509 *cert = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    unsigned char *der = NULL;
    int der_len = cert ? i2d_X509(cert, &der) : -1;
    X509_free(cert);
    if (!issuer->key || der_len <= 0 || 4 * ((der_len + 2) / 3) + 1 > (int)sizeof(issuer->x5c)) {
        OPENSSL_free(der);
        return fail(err, "cannot read the key or the certificate back");
    }
    EVP_EncodeBlock((unsigned char *)issuer->x5c, der, der_len);
    OPENSSL_free(der);
    return 0;
}

int token_issuer_start(const char *dir, const char *user, const char *password, token_issuer **out,
                       char *realm, size_t realm_size, act_error *err)
{
    token_issuer *issuer = calloc(1, sizeof(*issuer));
    if (!issuer)
        return act_error_set(err, ENOMEM, "out of memory");
    snprintf(issuer->user, sizeof(issuer->user), "%s", user);
    snprintf(issuer->password, sizeof(issuer->password), "%s", password);
    if (make_key(issuer, dir, err) < 0) {
        token_issuer_stop(issuer);
        return -EIO;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    issuer->mhd =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                         on_request, issuer, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        issuer->mhd ? MHD_get_daemon_info(issuer->mhd, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    if (!info || !info->port) {
        token_issuer_stop(issuer);
        return fail(err, "libmicrohttpd could not listen on loopback");
    }
    snprintf(realm, realm_size, "http://127.0.0.1:%u/token", (unsigned)info->port);
    *out = issuer;
    return 0;
}

unsigned token_issuer_given(const token_issuer *issuer)
{
    return atomic_load(&issuer->given);
}

unsigned token_issuer_refused(const token_issuer *issuer)
{
    return atomic_load(&issuer->refused);
}

void token_issuer_stop(token_issuer *issuer)
{
    if (!issuer)
        return;
    if (issuer->mhd)
        MHD_stop_daemon(issuer->mhd);
    EVP_PKEY_free(issuer->key);
    free(issuer);
}
