/* The claim store URL grammar (see claims_parse_url in claims.h): the one
 * parser behind Store= in the configuration and claims_store_open. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims/claims.h"
#include "common/names.h"
#include "common/paths.h"
#include "common/text.h"

#define DIR_SCHEME "dir://"
#define ETCD_SCHEME "etcd://"
#define DIR_FORM "dir:///var/lib/activator/claims"
#define ETCD_SHAPE "etcd://HOST:PORT[,HOST:PORT...]/PREFIX"
#define ETCD_FORM ETCD_SHAPE ", like etcd://10.0.0.5:2379/activator"
#define DNS_NAME_MAX 253

/* Fills err with "claim store URL "<shown>" <what> (write <form>)". */
static int bad_url(act_error *err, int errnum, const char *shown, const char *form, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

static int bad_url(act_error *err, int errnum, const char *shown, const char *form, const char *fmt,
                   ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return act_error_set(err, errnum, "claim store URL \"%s\" %s (write %s)", shown, what, form);
}

static int parse_dir(const char *path, const char *shown, claims_url *url, act_error *err)
{
    act_error why = {0};
    if (act_path_check_absolute(path, &why) < 0)
        return bad_url(err, why.errnum, shown, DIR_FORM, "does not name a directory: %s",
                       why.message);
    url->kind = CLAIMS_URL_DIR;
    act_copy_string(url->path, sizeof(url->path), path);
    return 0;
}

/* A DNS name or an IPv4 address: letters, digits, '-' and '.', starting and
 * ending with a letter or digit. */
static bool host_name_ok(const char *host, size_t len)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (len == 0 || len > DNS_NAME_MAX || !strchr(alnum, host[0]) || !strchr(alnum, host[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!strchr(alnum, host[i]) && host[i] != '-' && host[i] != '.')
            return false;
    return true;
}

/* "[V6]" with a valid IPv6 address inside. */
static bool host_ipv6_ok(const char *host, size_t len)
{
    char address[INET6_ADDRSTRLEN];
    struct in6_addr parsed;
    if (len < 3 || host[0] != '[' || host[len - 1] != ']' || len - 2 >= sizeof(address))
        return false;
    memcpy(address, host + 1, len - 2);
    address[len - 2] = '\0';
    return inet_pton(AF_INET6, address, &parsed) == 1;
}

/* 1 to 65535 in digits only. */
static bool port_ok(const char *port)
{
    size_t digits = strspn(port, "0123456789");
    if (digits == 0 || digits > 5 || port[digits] != '\0')
        return false;
    long value = strtol(port, NULL, 10);
    return value >= 1 && value <= 65535;
}

/* One "HOST:PORT" of the endpoint list, len bytes at text. */
static int parse_endpoint(const char *text, size_t len, const char *shown, claims_url *url,
                          act_error *err)
{
    char endpoint[CLAIMS_URL_ENDPOINT_SIZE], endpoint_shown[ACT_TEXT_SHOW_MAX];
    if (len == 0)
        return bad_url(err, EINVAL, shown, ETCD_FORM,
                       "has an empty endpoint (a ',' too many, or none before the '/')");
    if (url->n_endpoints == CLAIMS_URL_ENDPOINTS_MAX)
        return bad_url(err, EINVAL, shown, ETCD_FORM, "names more than %d endpoints",
                       CLAIMS_URL_ENDPOINTS_MAX);
    snprintf(endpoint, sizeof(endpoint), "%.*s", (int)len, text);
    act_text_show(endpoint, endpoint_shown, sizeof(endpoint_shown));
    /* A host has no ':' except inside an [IPv6] address, so the port follows
     * the last one. */
    const char *colon = strrchr(endpoint, ':');
    if (len >= sizeof(endpoint) || !colon || (endpoint[0] == '[' && colon[-1] != ']'))
        return bad_url(err, EINVAL, shown, ETCD_FORM, "has endpoint \"%s\", which is not HOST:PORT",
                       endpoint_shown);
    size_t host_len = (size_t)(colon - endpoint);
    if (!host_name_ok(endpoint, host_len) && !host_ipv6_ok(endpoint, host_len))
        return bad_url(err, EINVAL, shown, ETCD_FORM,
                       "has endpoint \"%s\", whose host is not a DNS name, an IPv4 address or "
                       "an [IPv6] address",
                       endpoint_shown);
    if (!port_ok(colon + 1))
        return bad_url(err, EINVAL, shown, ETCD_FORM,
                       "has endpoint \"%s\", whose port is not a number from 1 to 65535",
                       endpoint_shown);
    memcpy(url->endpoints[url->n_endpoints++], endpoint, len + 1);
    return 0;
}

/* The key prefix: '/' then names separated by '/', trailing slashes dropped. */
static int parse_prefix(const char *text, const char *shown, claims_url *url, act_error *err)
{
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] == '/')
        len--;
    if (len == 0)
        return bad_url(err, EINVAL, shown, ETCD_FORM,
                       "has no key prefix after its endpoints (the claims need a place of their "
                       "own in etcd)");
    if (len >= sizeof(url->prefix))
        return bad_url(err, ENAMETOOLONG, shown, ETCD_FORM,
                       "has a key prefix longer than %zu characters", sizeof(url->prefix) - 1);
    snprintf(url->prefix, sizeof(url->prefix), "%.*s", (int)len, text);
    for (const char *part = url->prefix + 1; part;) {
        const char *slash = strchr(part, '/');
        char name[CLAIMS_URL_PREFIX_SIZE];
        snprintf(name, sizeof(name), "%.*s", slash ? (int)(slash - part) : (int)strlen(part), part);
        if (!act_name_is_valid(name)) {
            char name_shown[ACT_TEXT_SHOW_MAX];
            return bad_url(err, EINVAL, shown, ETCD_FORM,
                           "has \"%s\" in its key prefix, which is not a name (1 to %d of "
                           "A-Z a-z 0-9 . _ -, not starting with '.')",
                           act_text_show(name, name_shown, sizeof(name_shown)), ACT_NAME_MAX);
        }
        part = slash ? slash + 1 : NULL;
    }
    return 0;
}

static int parse_etcd(const char *rest, const char *shown, claims_url *url, act_error *err)
{
    url->kind = CLAIMS_URL_ETCD;
    size_t list_len = strcspn(rest, "/");
    for (size_t at = 0;;) {
        size_t len = strcspn(rest + at, ",/");
        int r = parse_endpoint(rest + at, len, shown, url, err);
        if (r < 0)
            return r;
        at += len;
        if (at == list_len)
            break;
        at++; /* the ',' */
    }
    return parse_prefix(rest + list_len, shown, url, err);
}

int claims_parse_url(const char *text, claims_url *out, act_error *err)
{
    assert(text && out);
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(text, shown, sizeof(shown));
    *out = (claims_url){0};
    int r;
    if (strncmp(text, DIR_SCHEME, strlen(DIR_SCHEME)) == 0)
        r = parse_dir(text + strlen(DIR_SCHEME), shown, out, err);
    else if (strncmp(text, ETCD_SCHEME, strlen(ETCD_SCHEME)) == 0)
        r = parse_etcd(text + strlen(ETCD_SCHEME), shown, out, err);
    else
        r = bad_url(err, EINVAL, shown,
                    "dir:///PATH for one machine, or " ETCD_SHAPE " for a fleet",
                    "is neither dir:// nor etcd://");
    if (r < 0)
        *out = (claims_url){0};
    return r;
}
