#include "activator/listen/listen.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

static int parse_port(const char *text, const char *where, const char *spec, uint16_t *port,
                      act_error *err)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || !*text || *end || value < 1 || value > 65535)
        return act_error_set(err, EINVAL, "%s: \"%s\" has no valid port (use 1-65535)", where,
                             spec);
    *port = (uint16_t)value;
    return 0;
}

int lsn_parse(const char *spec, const char *where, lsn_address *out, act_error *err)
{
    assert(spec);
    assert(where);
    assert(out);
    lsn_address address = {0};
    if (spec[0] == '/') {
        if (strlen(spec) >= sizeof(address.addr.un.sun_path))
            return act_error_set(err, ENAMETOOLONG, "%s: unix path \"%s\" is longer than %zu bytes",
                                 where, spec, sizeof(address.addr.un.sun_path) - 1);
        address.addr.un.sun_family = AF_UNIX;
        strcpy(address.addr.un.sun_path, spec);
        address.len = sizeof(address.addr.un);
        *out = address;
        return 0;
    }

    char host[INET6_ADDRSTRLEN + 2];
    const char *port_text;
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof(host))
            return act_error_set(err, EINVAL, "%s: \"%s\" is not [IPv6]:PORT", where, spec);
        memcpy(host, spec + 1, (size_t)(close - spec - 1));
        host[close - spec - 1] = '\0';
        port_text = close + 2;
    } else {
        const char *colon = strrchr(spec, ':');
        if (!colon || (size_t)(colon - spec) >= sizeof(host))
            return act_error_set(err, EINVAL,
                                 "%s: \"%s\" is not ADDRESS:PORT, [IPv6]:PORT or an absolute unix "
                                 "path",
                                 where, spec);
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = '\0';
        port_text = colon + 1;
    }
    uint16_t port;
    int r = parse_port(port_text, where, spec, &port, err);
    if (r < 0)
        return r;
    if (inet_pton(AF_INET, host, &address.addr.in4.sin_addr) == 1) {
        address.addr.in4.sin_family = AF_INET;
        address.addr.in4.sin_port = htons(port);
        address.len = sizeof(address.addr.in4);
    } else if (inet_pton(AF_INET6, host, &address.addr.in6.sin6_addr) == 1) {
        address.addr.in6.sin6_family = AF_INET6;
        address.addr.in6.sin6_port = htons(port);
        address.len = sizeof(address.addr.in6);
    } else {
        return act_error_set(err, EINVAL,
                             "%s: \"%s\" is not a numeric IPv4 or IPv6 address (host names are not "
                             "resolved)",
                             where, host);
    }
    *out = address;
    return 0;
}

/* systemd's test for IPv6 on a box: the kernel lists IPv6 addresses. */
static bool ipv6_supported(void)
{
    return access("/proc/net/if_inet6", F_OK) == 0;
}

int lsn_parse_stream(const char *spec, const char *where, lsn_address *out, act_error *err)
{
    assert(spec && where && out);
    bool bare_port = spec[0] != '\0' && strspn(spec, "0123456789") == strlen(spec);
    if (!bare_port && spec[0] != '/' && !strchr(spec, ':'))
        return act_error_set(err, EINVAL,
                             "%s: \"%s\" is not PORT, ADDRESS:PORT, [IPv6]:PORT or an absolute "
                             "unix path",
                             where, spec);
    if (!bare_port)
        return lsn_parse(spec, where, out, err);
    uint16_t port;
    int r = parse_port(spec, where, spec, &port, err);
    if (r < 0)
        return r;
    lsn_address address = {0};
    if (ipv6_supported()) {
        address.addr.in6 = (struct sockaddr_in6){.sin6_family = AF_INET6,
                                                 .sin6_port = htons(port),
                                                 .sin6_addr = IN6ADDR_ANY_INIT};
        address.len = sizeof(address.addr.in6);
        address.dual_stack = true;
    } else {
        address.addr.in4 = (struct sockaddr_in){.sin_family = AF_INET,
                                                .sin_port = htons(port),
                                                .sin_addr.s_addr = htonl(INADDR_ANY)};
        address.len = sizeof(address.addr.in4);
    }
    *out = address;
    return 0;
}

void lsn_format(const lsn_address *address, char *out, size_t out_size)
{
    assert(address);
    assert(out);
    assert(out_size > 0);
    char host[INET6_ADDRSTRLEN];
    switch (address->addr.sa.sa_family) {
    case AF_UNIX:
        snprintf(out, out_size, "%s", address->addr.un.sun_path);
        break;
    case AF_INET:
        inet_ntop(AF_INET, &address->addr.in4.sin_addr, host, sizeof(host));
        snprintf(out, out_size, "%s:%u", host, ntohs(address->addr.in4.sin_port));
        break;
    case AF_INET6:
        inet_ntop(AF_INET6, &address->addr.in6.sin6_addr, host, sizeof(host));
        snprintf(out, out_size, "[%s]:%u", host, ntohs(address->addr.in6.sin6_port));
        break;
    default:
        snprintf(out, out_size, "(unknown family %d)", address->addr.sa.sa_family);
    }
}

/* Only a socket file is ours to replace: a path that names a regular file or
 * a directory is a configuration mistake, reported rather than deleted. */
static int remove_stale_unix_socket(const char *path, act_error *err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : act_error_set(err, errno, "cannot inspect %s: %s", path,
                                                   strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return act_error_set(err, EEXIST,
                             "%s exists and is not a socket; remove it or choose another "
                             "ListenStream= path",
                             path);
    if (unlink(path) < 0)
        return act_error_set(err, errno, "cannot replace stale socket %s: %s", path,
                             strerror(errno));
    return 0;
}

static int bind_failed(const char *shown, act_error *err)
{
    return act_error_set(err, errno, "cannot bind %s: %s%s", shown, strerror(errno),
                         errno == EADDRINUSE ? " (another program listens there)" : "");
}

/* Bound first, and the path inspected only when it is taken: a look-up
 * before every bind is one more walk of a directory that may hold the
 * sockets of 10,000 hosts. */
static int bind_unix(int fd, const lsn_address *address, const char *shown, act_error *err)
{
    if (bind(fd, &address->addr.sa, address->len) == 0)
        return 0;
    if (errno != EADDRINUSE)
        return bind_failed(shown, err);
    int r = remove_stale_unix_socket(address->addr.un.sun_path, err);
    if (r < 0)
        return r;
    return bind(fd, &address->addr.sa, address->len) == 0 ? 0 : bind_failed(shown, err);
}

int lsn_bind(const lsn_address *address, int backlog, act_error *err)
{
    assert(address);
    char shown[160];
    lsn_format(address, shown, sizeof(shown));
    int family = address->addr.sa.sa_family;
    _cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return act_error_set(err, errno, "cannot create a socket for %s: %s", shown,
                             strerror(errno));
    if (family == AF_UNIX) {
        int r = bind_unix(fd, address, shown, err);
        if (r < 0)
            return r;
    } else {
        int on = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0)
            return act_error_set(err, errno, "cannot set SO_REUSEADDR on %s: %s", shown,
                                 strerror(errno));
        /* Set either way, not left to net.ipv6.bindv6only: [::]:80 takes
         * IPv6 only, so it does not clash with 0.0.0.0:80; a bare port takes
         * both. */
        int v6only = !address->dual_stack;
        if (family == AF_INET6 &&
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) < 0)
            return act_error_set(err, errno, "cannot set IPV6_V6ONLY on %s: %s", shown,
                                 strerror(errno));
        if (bind(fd, &address->addr.sa, address->len) < 0)
            return bind_failed(shown, err);
    }
    if (listen(fd, backlog > 0 ? backlog : SOMAXCONN) < 0)
        return act_error_set(err, errno, "cannot listen on %s: %s", shown, strerror(errno));
    return TAKE_FD(fd);
}

bool lsn_address_equal(const lsn_address *a, const lsn_address *b)
{
    assert(a && b);
    return a->len == b->len && memcmp(&a->addr, &b->addr, a->len) == 0;
}

/* Whether an IPv6 socket refuses IPv4 connections: a kept socket must take
 * the families the configuration now asks for. */
static bool ipv6_only(int fd)
{
    int v6only = 0;
    socklen_t size = sizeof(v6only);
    return getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &size) == 0 && v6only;
}

bool lsn_fd_matches(int fd, const lsn_address *address)
{
    assert(address);
    int listening = 0, type = 0;
    socklen_t size = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) < 0 || !listening)
        return false;
    size = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) < 0 || type != SOCK_STREAM)
        return false;
    lsn_address bound = {0};
    bound.len = sizeof(bound.addr);
    if (getsockname(fd, &bound.addr.sa, &bound.len) < 0)
        return false;
    if (bound.addr.sa.sa_family != address->addr.sa.sa_family)
        return false;
    switch (address->addr.sa.sa_family) {
    case AF_UNIX:
        return strcmp(bound.addr.un.sun_path, address->addr.un.sun_path) == 0;
    case AF_INET:
        return bound.addr.in4.sin_port == address->addr.in4.sin_port &&
               bound.addr.in4.sin_addr.s_addr == address->addr.in4.sin_addr.s_addr;
    case AF_INET6:
        return bound.addr.in6.sin6_port == address->addr.in6.sin6_port &&
               memcmp(&bound.addr.in6.sin6_addr, &address->addr.in6.sin6_addr,
                      sizeof(struct in6_addr)) == 0 &&
               ipv6_only(fd) == !address->dual_stack;
    }
    return false;
}
