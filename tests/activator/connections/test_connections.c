/* Connection counting through sock_diag, against real sockets. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/connections/connections.h"
#include "common/cleanup.h"

static uint64_t count_on(const lsn_address *address)
{
    uint64_t count = 99;
    act_error err = {0};
    assert_int_equal(conn_count(address, 1, &count, &err), 0);
    return count;
}

static int connect_to(const lsn_address *address)
{
    int fd = socket(address->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, &address->addr.sa, address->len), 0);
    return fd;
}

/* Binds a listener on a free loopback port and returns its address. */
static int tcp_listener(lsn_address *address)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *address = (lsn_address){0};
    address->addr.in4.sin_family = AF_INET;
    address->addr.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address->len = sizeof(address->addr.in4);
    assert_int_equal(bind(fd, &address->addr.sa, address->len), 0);
    assert_int_equal(getsockname(fd, &address->addr.sa, &address->len), 0);
    assert_int_equal(listen(fd, 16), 0);
    return fd;
}

static void counts_tcp_connections_accepted_or_not(void **state)
{
    (void)state;
    lsn_address address;
    _cleanup_close_ int listener = tcp_listener(&address);
    assert_int_equal(count_on(&address), 0);

    int clients[3];
    for (int i = 0; i < 3; i++)
        clients[i] = connect_to(&address);
    int accepted[2];
    for (int i = 0; i < 2; i++)
        accepted[i] = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    /* Two accepted, one still in the backlog: all three are clients. Our
     * own client ends have other local ports and are not counted. */
    assert_int_equal(count_on(&address), 3);

    /* A listener on another port sees none of them. */
    lsn_address other;
    int other_listener = tcp_listener(&other);
    assert_int_equal(count_on(&other), 0);
    close(other_listener);

    /* The server closes first: its ends wait in FIN_WAIT for the clients,
     * but the app is done with them, so they are not counted. */
    for (int i = 0; i < 2; i++)
        close(accepted[i]);
    int pending = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    close(pending);
    assert_int_equal(count_on(&address), 0);
    for (int i = 0; i < 3; i++)
        close(clients[i]);
}

static void counts_unix_connections_by_path(void **state)
{
    (void)state;
    char dir[] = "/tmp/act-conn-XXXXXX";
    assert_non_null(mkdtemp(dir));
    lsn_address address;
    act_error err = {0};
    char path[128];
    snprintf(path, sizeof(path), "%s/web.sock", dir);
    assert_int_equal(lsn_parse(path, "test", &address, &err), 0);
    _cleanup_close_ int listener = lsn_bind(&address, 8, &err);
    assert_true(listener >= 0);
    assert_int_equal(count_on(&address), 0);

    int client = connect_to(&address);
    int server = -1;
    for (int tries = 0; server < 0 && tries < 100; tries++)
        server = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(server >= 0);
    assert_int_equal(count_on(&address), 1);
    close(server);
    close(client);
    assert_int_equal(count_on(&address), 0);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counts_tcp_connections_accepted_or_not),
        cmocka_unit_test(counts_unix_connections_by_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
