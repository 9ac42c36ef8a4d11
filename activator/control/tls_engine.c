/* The mbed TLS engine of tls_engine.h, which keeps each peer certificate's CN.
 * Written by hand: NNG 1.5.2 (Debian 12) cannot tell a pipe's peer certificate.
 * NNG 1.6.0's NNG_OPT_TLS_PEER_CN (Debian 13 ships 1.10.1) would remove this file. */
#include "activator/control/tls_engine.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <mbedtls/asn1.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crl.h>
#include <mbedtls/x509_crt.h>
#include <nng/supplemental/tls/engine.h>

#include "activator/control/nng_errno.h"
#include "common/names.h"

/* A certificate and key this side presents; own_cert may name several. */
typedef struct own_cert {
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    struct own_cert *next;
} own_cert;

/* NNG allocates and zeroes both structs (their sizes are in the ops) and
 * hands them to the ops below. */
struct nng_tls_engine_config {
    mbedtls_ssl_config ssl;
    mbedtls_x509_crt ca;
    mbedtls_x509_crl crl;
    own_cert *own;
    char *server_name;
};

struct nng_tls_engine_conn {
    void *tls; /* NNG's side of the connection, for nng_tls_engine_send/recv */
    mbedtls_ssl_context ssl;
    bool handshake_done;
    bool cn_ok; /* cn holds the verified peer certificate's CN */
    char cn[ACT_CN_MAX + 1];
};

/* What the connection whose verified op runs on this thread leaves for
 * ctrl_tls_peer_cn (see tls_engine.h). */
static _Thread_local struct {
    bool armed, answered, cn_ok;
    char cn[ACT_CN_MAX + 1];
} probe;

static int random_bytes(void *unused, unsigned char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = getrandom(buf, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- configuration ------------------------------------------------------- */

static void config_fini(nng_tls_engine_config *config)
{
    while (config->own) {
        own_cert *own = config->own;
        config->own = own->next;
        mbedtls_x509_crt_free(&own->crt);
        mbedtls_pk_free(&own->key);
        free(own);
    }
    mbedtls_x509_crt_free(&config->ca);
    mbedtls_x509_crl_free(&config->crl);
    mbedtls_ssl_config_free(&config->ssl);
    free(config->server_name);
    config->server_name = NULL;
}

static int config_init(nng_tls_engine_config *config, nng_tls_mode mode)
{
    bool server = mode == NNG_TLS_MODE_SERVER;
    mbedtls_ssl_config_init(&config->ssl);
    mbedtls_x509_crt_init(&config->ca);
    mbedtls_x509_crl_init(&config->crl);
    int rv = mbedtls_ssl_config_defaults(&config->ssl,
                                         server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
                                         MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (rv != 0) {
        config_fini(config); /* NNG frees a configuration whose init failed without fini */
        return NNG_ENOMEM;
    }
    /* NNG's defaults: a server asks for no certificate until told to, a
     * client verifies the server's. TLS 1.2, the newest mbed TLS 2 speaks. */
    mbedtls_ssl_conf_authmode(&config->ssl,
                              server ? MBEDTLS_SSL_VERIFY_NONE : MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_min_version(&config->ssl, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_max_version(&config->ssl, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_rng(&config->ssl, random_bytes, NULL);
    return 0;
}

static int config_server(nng_tls_engine_config *config, const char *name)
{
    char *copy = strdup(name);
    if (!copy)
        return NNG_ENOMEM;
    free(config->server_name);
    config->server_name = copy;
    return 0;
}

static int config_auth(nng_tls_engine_config *config, nng_tls_auth_mode mode)
{
    switch (mode) {
    case NNG_TLS_AUTH_MODE_NONE:
        mbedtls_ssl_conf_authmode(&config->ssl, MBEDTLS_SSL_VERIFY_NONE);
        return 0;
    case NNG_TLS_AUTH_MODE_OPTIONAL:
        mbedtls_ssl_conf_authmode(&config->ssl, MBEDTLS_SSL_VERIFY_OPTIONAL);
        return 0;
    case NNG_TLS_AUTH_MODE_REQUIRED:
        mbedtls_ssl_conf_authmode(&config->ssl, MBEDTLS_SSL_VERIFY_REQUIRED);
        return 0;
    }
    return NNG_EINVAL;
}

/* PEM text, with the terminating NUL mbed TLS wants counted. */
static int parse_pem_certs(mbedtls_x509_crt *chain, const char *pem)
{
    return mbedtls_x509_crt_parse(chain, (const unsigned char *)pem, strlen(pem) + 1) == 0
               ? 0
               : NNG_EINVAL;
}

static int config_ca_chain(nng_tls_engine_config *config, const char *certs, const char *crl)
{
    int rv = parse_pem_certs(&config->ca, certs);
    if (rv != 0)
        return rv;
    if (crl && mbedtls_x509_crl_parse(&config->crl, (const unsigned char *)crl,
                                      strlen(crl) + 1) != 0)
        return NNG_EINVAL;
    mbedtls_ssl_conf_ca_chain(&config->ssl, &config->ca, crl ? &config->crl : NULL);
    return 0;
}

static int config_own_cert(nng_tls_engine_config *config, const char *cert, const char *key,
                           const char *pass)
{
    own_cert *own = calloc(1, sizeof(*own));
    if (!own)
        return NNG_ENOMEM;
    mbedtls_x509_crt_init(&own->crt);
    mbedtls_pk_init(&own->key);
    int rv = parse_pem_certs(&own->crt, cert);
    if (rv == 0 &&
        mbedtls_pk_parse_key(&own->key, (const unsigned char *)key, strlen(key) + 1,
                             (const unsigned char *)pass, pass ? strlen(pass) : 0) != 0)
        rv = NNG_EINVAL;
    if (rv == 0 && mbedtls_ssl_conf_own_cert(&config->ssl, &own->crt, &own->key) != 0)
        rv = NNG_ENOMEM;
    if (rv != 0) {
        mbedtls_x509_crt_free(&own->crt);
        mbedtls_pk_free(&own->key);
        free(own);
        return rv;
    }
    own->next = config->own;
    config->own = own;
    return 0;
}

/* TLS 1.2 is all this engine speaks; a range without it cannot be served. */
static int config_version(nng_tls_engine_config *config, nng_tls_version min,
                          nng_tls_version max)
{
    if (min > max)
        return NNG_EINVAL;
    return min <= NNG_TLS_1_2 && max >= NNG_TLS_1_2 ? 0 : NNG_ENOTSUP;
}

/* ---- connections --------------------------------------------------------- */

static int bio_send(void *tls, const unsigned char *buf, size_t len)
{
    size_t n = len < INT_MAX ? len : INT_MAX;
    int rv = nng_tls_engine_send(tls, buf, &n);
    if (rv == 0)
        return (int)n;
    return rv == NNG_EAGAIN ? MBEDTLS_ERR_SSL_WANT_WRITE : MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bio_recv(void *tls, unsigned char *buf, size_t len)
{
    size_t n = len < INT_MAX ? len : INT_MAX;
    int rv = nng_tls_engine_recv(tls, buf, &n);
    if (rv == 0)
        return (int)n;
    if (rv == NNG_EAGAIN)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return rv == NNG_ECLOSED ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
}

static int conn_init(nng_tls_engine_conn *conn, void *tls, nng_tls_engine_config *config)
{
    conn->tls = tls;
    mbedtls_ssl_init(&conn->ssl);
    int rv = mbedtls_ssl_setup(&conn->ssl, &config->ssl);
    if (rv == 0 && config->server_name)
        rv = mbedtls_ssl_set_hostname(&conn->ssl, config->server_name);
    if (rv != 0) {
        /* Freeing zeroes the context, so the fini NNG may still call is
         * harmless. */
        mbedtls_ssl_free(&conn->ssl);
        return rv == MBEDTLS_ERR_SSL_ALLOC_FAILED ? NNG_ENOMEM : NNG_ECRYPTO;
    }
    mbedtls_ssl_set_bio(&conn->ssl, tls, bio_send, bio_recv, NULL);
    return 0;
}

static void conn_fini(nng_tls_engine_conn *conn)
{
    mbedtls_ssl_free(&conn->ssl);
}

static void conn_close(nng_tls_engine_conn *conn)
{
    (void)mbedtls_ssl_close_notify(&conn->ssl);
}

/* Keeps the subject CN of the verified peer certificate: exactly one CN of
 * printable ASCII, or none (two CNs would leave it to guess which names the
 * client). */
static void keep_peer_cn(nng_tls_engine_conn *conn)
{
    conn->cn_ok = false;
    const mbedtls_x509_crt *peer = mbedtls_ssl_get_peer_cert(&conn->ssl);
    if (!peer || mbedtls_ssl_get_verify_result(&conn->ssl) != 0)
        return;
    const mbedtls_x509_buf *found = NULL;
    for (const mbedtls_x509_name *name = &peer->subject; name; name = name->next) {
        if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &name->oid) != 0)
            continue;
        if (found)
            return;
        found = &name->val;
    }
    if (!found || !act_cn_is_valid((const char *)found->p, found->len))
        return;
    memcpy(conn->cn, found->p, found->len);
    conn->cn[found->len] = '\0';
    conn->cn_ok = true;
}

static int handshake_error(int rv)
{
    switch (rv) {
    case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED:
    case MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE:
    case MBEDTLS_ERR_SSL_CA_CHAIN_REQUIRED:
    case MBEDTLS_ERR_SSL_PEER_VERIFY_FAILED:
    case MBEDTLS_ERR_SSL_NO_USABLE_CIPHERSUITE:
        return NNG_EPEERAUTH;
    case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
    case MBEDTLS_ERR_NET_CONN_RESET:
        return NNG_ECLOSED;
    case MBEDTLS_ERR_SSL_ALLOC_FAILED:
        return NNG_ENOMEM;
    }
    return NNG_ECRYPTO;
}

static int conn_handshake(nng_tls_engine_conn *conn)
{
    int rv = mbedtls_ssl_handshake(&conn->ssl);
    if (rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE)
        return NNG_EAGAIN;
    if (rv != 0)
        return handshake_error(rv);
    conn->handshake_done = true;
    keep_peer_cn(conn);
    return 0;
}

static int conn_recv(nng_tls_engine_conn *conn, uint8_t *buf, size_t *len)
{
    int rv = mbedtls_ssl_read(&conn->ssl, buf, *len);
    if (rv > 0) {
        *len = (size_t)rv;
        return 0;
    }
    if (rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE)
        return NNG_EAGAIN;
    if (rv == 0 || rv == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || rv == MBEDTLS_ERR_NET_CONN_RESET)
        return NNG_ECLOSED;
    return NNG_ECRYPTO;
}

static int conn_send(nng_tls_engine_conn *conn, const uint8_t *buf, size_t *len)
{
    int rv = mbedtls_ssl_write(&conn->ssl, buf, *len);
    if (rv >= 0) {
        *len = (size_t)rv;
        return 0;
    }
    if (rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE)
        return NNG_EAGAIN;
    return rv == MBEDTLS_ERR_NET_CONN_RESET ? NNG_ECLOSED : NNG_ECRYPTO;
}

static bool conn_verified(nng_tls_engine_conn *conn)
{
    bool verified = conn->handshake_done && mbedtls_ssl_get_verify_result(&conn->ssl) == 0;
    if (probe.armed) {
        probe.answered = true;
        probe.cn_ok = verified && conn->cn_ok;
        memcpy(probe.cn, conn->cn, sizeof(probe.cn));
    }
    return verified;
}

static nng_tls_engine_config_ops config_ops = {
    .size = sizeof(nng_tls_engine_config),
    .init = config_init,
    .fini = config_fini,
    .server = config_server,
    .auth = config_auth,
    .ca_chain = config_ca_chain,
    .own_cert = config_own_cert,
    .version = config_version,
};

static nng_tls_engine_conn_ops conn_ops = {
    .size = sizeof(nng_tls_engine_conn),
    .init = conn_init,
    .fini = conn_fini,
    .close = conn_close,
    .handshake = conn_handshake,
    .recv = conn_recv,
    .send = conn_send,
    .verified = conn_verified,
};

static const nng_tls_engine engine = {
    .version = NNG_TLS_ENGINE_VERSION,
    .config_ops = &config_ops,
    .conn_ops = &conn_ops,
    .name = "mbed",
    .description = "mbed TLS " MBEDTLS_VERSION_STRING ", keeping the peer certificate's CN",
    .fips_mode = false,
};

int ctrl_tls_engine_install(act_error *err)
{
    int rv = nng_tls_engine_register(&engine);
    if (rv == 0 && strcmp(nng_tls_engine_description(), engine.description) != 0)
        rv = NNG_ENOTSUP;
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv),
                             "cannot install the TLS engine that reads client certificates' "
                             "CNs into NNG (%s): %s",
                             nng_tls_engine_description(), nng_strerror(rv));
    return 0;
}

int ctrl_tls_peer_cn(nng_pipe pipe, char *cn, size_t size)
{
    probe.armed = true;
    probe.answered = false;
    probe.cn_ok = false;
    bool verified = false;
    int rv = nng_pipe_get_bool(pipe, NNG_OPT_TLS_VERIFIED, &verified);
    probe.armed = false;
    if (rv != 0)
        return -ctrl_nng_errno(rv);
    if (!probe.answered)
        return -ENOTSUP;
    if (!verified)
        return -EPERM;
    if (!probe.cn_ok)
        return -EBADMSG;
    size_t len = strlen(probe.cn);
    if (len >= size)
        return -ENOBUFS;
    memcpy(cn, probe.cn, len + 1);
    return 0;
}
