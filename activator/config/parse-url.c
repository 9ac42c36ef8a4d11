#include "activator/config/parse-url.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/paths.h"
#include "common/text.h"

/* "HOST:PORT" or "[V6]:PORT" up to the end of text or the first '/';
 * returns the position after the port or NULL. */
static const char *skip_host_port(const char *text)
{
    const char *p = text;
    if (*p == '[') {
        size_t len = strspn(p + 1, "0123456789abcdefABCDEF:.");
        if (len == 0 || p[1 + len] != ']')
            return NULL;
        p += len + 2;
    } else {
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
        if (len == 0)
            return NULL;
        p += len;
    }
    if (*p != ':')
        return NULL;
    p++;
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || digits > 5)
        return NULL;
    long port = strtol(p, NULL, 10);
    if (port < 1 || port > 65535)
        return NULL;
    return p + digits;
}

int act_parse_store_url(const char *text, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX];
    act_text_show(text, shown, sizeof(shown));
    if (strncmp(text, "dir://", 6) == 0) {
        act_error path_err = {0};
        if (act_path_check_absolute(text + 6, &path_err) < 0)
            return act_error_set(err, EINVAL,
                                 "\"%s\" does not name an absolute directory: %s (write "
                                 "dir:///var/lib/activator/claims)",
                                 shown, path_err.message);
        return 0;
    }
    if (strncmp(text, "etcd://", 7) == 0) {
        const char *rest = skip_host_port(text + 7);
        if (!rest)
            return act_error_set(err, EINVAL,
                                 "\"%s\" has no HOST:PORT after etcd:// (write "
                                 "etcd://127.0.0.1:2379/activator)",
                                 shown);
        if (*rest != '\0' &&
            (rest[0] != '/' ||
             strspn(rest, "/abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                 strlen(rest)))
            return act_error_set(err, EINVAL,
                                 "\"%s\" has a key prefix with characters outside A-Z a-z 0-9 . _ "
                                 "- / (write etcd://HOST:PORT/PREFIX)",
                                 shown);
        return 0;
    }
    return act_error_set(err, EINVAL,
                         "\"%s\" is not a claim store URL (write dir:///PATH for the embedded "
                         "store or etcd://HOST:PORT/PREFIX)",
                         shown);
}

static void describe_allowed(unsigned allowed, char *out, size_t out_size)
{
    snprintf(out, out_size, "%s%s%s%s%s", (allowed & ACT_URL_IPC) ? "ipc:///PATH" : "",
             (allowed & ACT_URL_IPC) && (allowed & ~ACT_URL_IPC) ? " or " : "",
             (allowed & ACT_URL_TCP) ? "tcp://ADDR:PORT" : "",
             (allowed & ACT_URL_TCP) && (allowed & ACT_URL_TLS_TCP) ? " or " : "",
             (allowed & ACT_URL_TLS_TCP) ? "tls+tcp://ADDR:PORT" : "");
}

int act_parse_nng_url(const char *text, unsigned allowed, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX], forms[96];
    act_text_show(text, shown, sizeof(shown));
    describe_allowed(allowed, forms, sizeof(forms));
    if (strncmp(text, "ipc://", 6) == 0 && (allowed & ACT_URL_IPC)) {
        const char *path = text + 6;
        act_error path_err = {0};
        if (act_path_check_absolute(path, &path_err) < 0)
            return act_error_set(err, EINVAL,
                                 "\"%s\" does not name an absolute socket path (write %s)", shown,
                                 forms);
        if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
            return act_error_set(err, ENAMETOOLONG,
                                 "the socket path of \"%s\" is longer than %zu bytes (choose a "
                                 "shorter path)",
                                 shown, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        return 0;
    }
    const char *host_port = NULL;
    if (strncmp(text, "tcp://", 6) == 0 && (allowed & ACT_URL_TCP))
        host_port = text + 6;
    else if (strncmp(text, "tls+tcp://", 10) == 0 && (allowed & ACT_URL_TLS_TCP))
        host_port = text + 10;
    if (!host_port)
        return act_error_set(err, EINVAL, "\"%s\" is not a URL this key takes (write %s)", shown,
                             forms);
    const char *rest = skip_host_port(host_port);
    if (!rest || *rest != '\0')
        return act_error_set(err, EINVAL, "\"%s\" has no valid ADDR:PORT (write %s)", shown, forms);
    return 0;
}
