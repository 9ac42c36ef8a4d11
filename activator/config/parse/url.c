#include "activator/config/parse/url.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/paths.h"
#include "common/text.h"

/* "HOST:PORT" or "[V6]:PORT" at text; returns the position after the port or
 * NULL. */
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

static void describe_allowed(unsigned allowed, char *out, size_t out_size)
{
    snprintf(out, out_size, "%s%s%s%s%s", (allowed & CFG_URL_IPC) ? "ipc:///PATH" : "",
             (allowed & CFG_URL_IPC) && (allowed & ~CFG_URL_IPC) ? " or " : "",
             (allowed & CFG_URL_TCP) ? "tcp://ADDR:PORT" : "",
             (allowed & CFG_URL_TCP) && (allowed & CFG_URL_TLS_TCP) ? " or " : "",
             (allowed & CFG_URL_TLS_TCP) ? "tls+tcp://ADDR:PORT" : "");
}

int cfg_parse_nng_url(const char *text, unsigned allowed, act_error *err)
{
    char shown[ACT_TEXT_SHOW_MAX], forms[96];
    act_text_show(text, shown, sizeof(shown));
    describe_allowed(allowed, forms, sizeof(forms));
    if (strncmp(text, "ipc://", 6) == 0 && (allowed & CFG_URL_IPC)) {
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
    if (strncmp(text, "tcp://", 6) == 0 && (allowed & CFG_URL_TCP))
        host_port = text + 6;
    else if (strncmp(text, "tls+tcp://", 10) == 0 && (allowed & CFG_URL_TLS_TCP))
        host_port = text + 10;
    if (!host_port)
        return act_error_set(err, EINVAL, "\"%s\" is not a URL this key takes (write %s)", shown,
                             forms);
    const char *rest = skip_host_port(host_port);
    if (!rest || *rest != '\0')
        return act_error_set(err, EINVAL, "\"%s\" has no valid ADDR:PORT (write %s)", shown, forms);
    return 0;
}
