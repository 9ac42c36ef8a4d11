/* Listening sockets: parsing, binding, recognising an fd from the FD store. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/listen/listen.h"
#include "common/cleanup.h"

static void parses_the_three_forms(void **state)
{
    (void)state;
    lsn_address address;
    act_error err = {0};
    char shown[128];
    assert_int_equal(lsn_parse("127.0.0.1:8080", "t", &address, &err), 0);
    lsn_format(&address, shown, sizeof(shown));
    assert_string_equal(shown, "127.0.0.1:8080");
    assert_int_equal(lsn_parse("[::1]:9", "t", &address, &err), 0);
    lsn_format(&address, shown, sizeof(shown));
    assert_string_equal(shown, "[::1]:9");
    assert_int_equal(lsn_parse("/run/web1.sock", "t", &address, &err), 0);
    lsn_format(&address, shown, sizeof(shown));
    assert_string_equal(shown, "/run/web1.sock");
}

static void refuses_bad_specs_saying_where(void **state)
{
    (void)state;
    const char *bad[] = {"8080", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "localhost:80",
                         "[::1:80", "[::1]80", "relative/path", "1.2.3.4:80x", ""};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        lsn_address address;
        act_error err = {0};
        assert_true(lsn_parse(bad[i], "web1.conf:7: ListenStream", &address, &err) < 0);
        assert_non_null(strstr(err.message, "web1.conf:7: ListenStream"));
    }
}

static void binds_tcp_and_recognises_it(void **state)
{
    (void)state;
    lsn_address address;
    act_error err = {0};
    /* Port 0 is refused by the parser, so find a free port by binding one. */
    _cleanup_close_ int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(any);
    assert_int_equal(bind(probe, (struct sockaddr *)&any, sizeof(any)), 0);
    assert_int_equal(getsockname(probe, (struct sockaddr *)&any, &len), 0);
    char spec[64];
    snprintf(spec, sizeof(spec), "127.0.0.1:%u", ntohs(any.sin_port));
    close(TAKE_FD(probe));

    assert_int_equal(lsn_parse(spec, "t", &address, &err), 0);
    _cleanup_close_ int fd = lsn_bind(&address, 16, &err);
    assert_true(fd >= 0);
    assert_true(lsn_fd_matches(fd, &address));

    lsn_address other = address;
    other.addr.in4.sin_port = htons((uint16_t)(ntohs(address.addr.in4.sin_port) ^ 1));
    assert_false(lsn_fd_matches(fd, &other));

    /* The port is ours: a second bind says who is in the way. */
    assert_int_equal(lsn_bind(&address, 16, &err), -EADDRINUSE);
    assert_non_null(strstr(err.message, "another program listens there"));
}

/* A port nothing listens on now, found by binding port 0 on family. */
static uint16_t free_port(int family)
{
    _cleanup_close_ int probe = socket(family, SOCK_STREAM, 0);
    lsn_address any = {0};
    any.addr.sa.sa_family = (sa_family_t)family;
    any.len = family == AF_INET ? sizeof(any.addr.in4) : sizeof(any.addr.in6);
    assert_int_equal(bind(probe, &any.addr.sa, any.len), 0);
    assert_int_equal(getsockname(probe, &any.addr.sa, &any.len), 0);
    return ntohs(family == AF_INET ? any.addr.in4.sin_port : any.addr.in6.sin6_port);
}

static bool ipv6_on_this_box(void)
{
    return access("/proc/net/if_inet6", F_OK) == 0;
}

/* ListenStream=PORT, as systemd.socket(5): every address, IPv6 and IPv4 on
 * one socket. The plain parser (Ready=tcp:, MetricsListen=) takes no bare
 * port. */
static void stream_bare_port_takes_ipv4_and_ipv6(void **state)
{
    (void)state;
    lsn_address address;
    act_error err = {0};
    assert_int_equal(lsn_parse("8080", "t", &address, &err), -EINVAL);
    const char *bad[] = {"0", "65536", "99999999999", "-1"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_true(lsn_parse_stream(bad[i], "t", &address, &err) < 0);
    assert_int_equal(lsn_parse_stream("localhost", "t", &address, &err), -EINVAL);
    assert_non_null(strstr(err.message, "is not PORT, ADDRESS:PORT"));
    assert_int_equal(lsn_parse_stream("127.0.0.1:80", "t", &address, &err), 0);
    assert_false(address.dual_stack);
    if (!ipv6_on_this_box()) {
        assert_int_equal(lsn_parse_stream("8080", "t", &address, &err), 0);
        assert_int_equal(address.addr.sa.sa_family, AF_INET);
        skip();
    }

    char spec[16], shown[64];
    snprintf(spec, sizeof(spec), "%u", free_port(AF_INET6));
    assert_int_equal(lsn_parse_stream(spec, "t", &address, &err), 0);
    assert_true(address.dual_stack);
    lsn_format(&address, shown, sizeof(shown));
    assert_true(strncmp(shown, "[::]:", 5) == 0);
    _cleanup_close_ int fd = lsn_bind(&address, 16, &err);
    if (fd < 0)
        fail_msg("%s", err.message);
    assert_true(lsn_fd_matches(fd, &address));
    lsn_address v6only = address;
    v6only.dual_stack = false;
    assert_false(lsn_fd_matches(fd, &v6only)); /* a kept socket must take IPv4 too */

    /* An IPv4 client reaches it. */
    _cleanup_close_ int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in loopback = {.sin_family = AF_INET,
                                   .sin_port = address.addr.in6.sin6_port,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(client, (struct sockaddr *)&loopback, sizeof(loopback)), 0);

    /* An explicit [::]:PORT stays IPv6 only, beside 0.0.0.0:PORT. */
    snprintf(spec, sizeof(spec), "[::]:%u", free_port(AF_INET6));
    assert_int_equal(lsn_parse_stream(spec, "t", &v6only, &err), 0);
    assert_false(v6only.dual_stack);
    _cleanup_close_ int v6_fd = lsn_bind(&v6only, 16, &err);
    assert_true(v6_fd >= 0);
    lsn_address v4 = {.addr.in4 = {.sin_family = AF_INET,
                                   .sin_port = v6only.addr.in6.sin6_port,
                                   .sin_addr.s_addr = htonl(INADDR_ANY)},
                      .len = sizeof(struct sockaddr_in)};
    _cleanup_close_ int v4_fd = lsn_bind(&v4, 16, &err);
    assert_true(v4_fd >= 0);
}

static void unix_socket_replaces_only_stale_sockets(void **state)
{
    (void)state;
    char dir[] = "/tmp/act-listen-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/web.sock", dir);
    lsn_address address;
    act_error err = {0};
    assert_int_equal(lsn_parse(path, "t", &address, &err), 0);

    int first = lsn_bind(&address, 0, &err);
    assert_true(first >= 0);
    close(first); /* leaves a stale socket file, as a crashed daemon would */
    _cleanup_close_ int second = lsn_bind(&address, 0, &err);
    assert_true(second >= 0);
    assert_true(lsn_fd_matches(second, &address));
    unlink(path);

    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fclose(file);
    assert_int_equal(lsn_bind(&address, 0, &err), -EEXIST);
    assert_non_null(strstr(err.message, "is not a socket"));
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* not deleted */
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_the_three_forms),
        cmocka_unit_test(refuses_bad_specs_saying_where),
        cmocka_unit_test(binds_tcp_and_recognises_it),
        cmocka_unit_test(stream_bare_port_takes_ipv4_and_ipv6),
        cmocka_unit_test(unix_socket_replaces_only_stale_sockets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
