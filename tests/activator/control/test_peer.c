/* The roles of peers (activator/control/peer.h): the groups a connection
 * was made with, which role credentials and CNs get, and the sentences
 * that refuse an op. The sockets themselves are tested with real users in
 * test_control.c and against the daemon in tests/activator/daemon. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/control/peer.h"
#include "common/fileio.h"

/* Groups as the kernel recorded them at connect: this process connects to
 * a socket of its own, in two groups, then leaves one of them; the
 * accepted end still holds both. A path that is not the socket's finds no
 * connection. Needs root to set the groups. */
static void groups_come_from_the_connection(void **state)
{
    if (geteuid() != 0)
        skip();
    gid_t saved[64];
    int n_saved = getgroups(64, saved);
    assert_true(n_saved >= 0);
    char dir[] = "/tmp/act-peer-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof(address.sun_path), "%s/s", dir);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(listener, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(listen(listener, 4), 0);
    const gid_t two[] = {60011, 60012};
    assert_int_equal(setgroups(2, two), 0);
    int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(client, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(setgroups(1, two), 0);
    int accepted = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(accepted >= 0);

    const gid_t wanted[] = {60012, 60013};
    bool held[2] = {false, true};
    assert_int_equal(ctrl_peer_groups_from_sockets(address.sun_path, getpid(), geteuid(), getegid(),
                                                   wanted, held, 2),
                     0);
    assert_true(held[0]);  /* left after the connect: the connection keeps it */
    assert_false(held[1]); /* never held */
    assert_int_equal(ctrl_peer_groups_from_sockets("/nonexistent", getpid(), geteuid(), getegid(),
                                                   wanted, held, 2),
                     -ENOENT);
    assert_int_equal(ctrl_peer_groups_from_sockets(address.sun_path, getpid() + 1, geteuid(),
                                                   getegid(), wanted, held, 2),
                     -ENOENT);
    close(accepted);
    assert_int_equal(ctrl_peer_groups_from_sockets(address.sun_path, getpid(), geteuid(), getegid(),
                                                   wanted, held, 2),
                     -ENOENT);
    close(client);
    close(listener);
    unlink(address.sun_path);
    rmdir(dir);
    assert_int_equal(setgroups((size_t)n_saved, saved), 0);
}

static const ctrl_access both = {
    .control_group = "activator",
    .control_gid = 60002,
    .viewer_group = "activator-view",
    .viewer_gid = 60001,
};

static void local_roles(void **state)
{
    ctrl_peer peer;
    ctrl_peer_judge_local(&both, 0, 0, false, false, &peer);
    assert_true(peer.has_role);
    assert_int_equal(peer.role, CTRL_ROLE_ROOT);

    ctrl_peer_judge_local(&both, 1001, 1001, false, true, &peer);
    assert_true(peer.has_role);
    assert_int_equal(peer.role, CTRL_ROLE_VIEWER);
    assert_string_equal(peer.grant, "ViewerGroup=activator-view");

    /* In both groups: the larger role. The primary group counts too. */
    ctrl_peer_judge_local(&both, 1001, 1001, true, true, &peer);
    assert_int_equal(peer.role, CTRL_ROLE_OPERATOR);
    assert_string_equal(peer.grant, "ControlGroup=activator");
    ctrl_peer_judge_local(&both, 1001, 60002, false, false, &peer);
    assert_int_equal(peer.role, CTRL_ROLE_OPERATOR);

    ctrl_peer_judge_local(&both, 1001, 1001, false, false, &peer);
    assert_false(peer.has_role);

    /* Without the keys the gids mean nothing, whatever the peer holds. */
    ctrl_access none = {0};
    ctrl_peer_judge_local(&none, 1001, 0, true, true, &peer);
    assert_false(peer.has_role);
}

static void certificate_roles(void **state)
{
    char *operators[] = {"ops-1", "activator test client", NULL};
    char *viewers[] = {"viewer-1", NULL};
    ctrl_access access = {.operators = operators, .viewers = viewers};
    ctrl_peer peer;
    ctrl_peer_judge_cn(&access, "activator test client", &peer);
    assert_true(peer.has_role);
    assert_int_equal(peer.role, CTRL_ROLE_OPERATOR);
    ctrl_peer_judge_cn(&access, "viewer-1", &peer);
    assert_int_equal(peer.role, CTRL_ROLE_VIEWER);
    assert_string_equal(peer.cn, "viewer-1");
    /* CNs compare exactly. */
    ctrl_peer_judge_cn(&access, "Viewer-1", &peer);
    assert_false(peer.has_role);
    assert_string_equal(peer.cn, "Viewer-1");
    ctrl_peer_judge_cn(&access, NULL, &peer);
    assert_false(peer.has_role);
    assert_string_equal(peer.cn, "");
    ctrl_peer_judge_cn(&access, "ops-1\n", &peer);
    assert_false(peer.has_role);
}

static void refusals_name_the_op_and_the_role(void **state)
{
    char message[1024];
    ctrl_peer peer;
    ctrl_peer_judge_local(&both, 1001, 1001, false, true, &peer);
    ctrl_peer_refusal(&both, &peer, ctrl_op_spec_of(CTRL_OP_PARK), message, sizeof(message));
    assert_string_equal(message, "op park needs the operator role; this peer (uid 1001) is a "
                                 "viewer (ViewerGroup=activator-view); operators are root and "
                                 "the members of ControlGroup=activator");

    ctrl_peer_judge_local(&both, 1001, 1001, true, false, &peer);
    ctrl_peer_refusal(&both, &peer, ctrl_op_spec_of(CTRL_OP_STAGE), message, sizeof(message));
    assert_non_null(strstr(message, "op stage needs the root role"));
    assert_non_null(strstr(message, "only root may stage"));
    assert_non_null(strstr(message, "this peer (uid 1001) is an operator (ControlGroup=activator)"));

    ctrl_peer_judge_local(&both, 1001, 1001, false, false, &peer);
    peer.groups_unread = true;
    ctrl_peer_refusal(&both, &peer, ctrl_op_spec_of(CTRL_OP_STATUS), message, sizeof(message));
    assert_non_null(strstr(message, "op status needs the viewer role; this peer (uid 1001) has "
                                    "no role here: only root, members of "
                                    "ControlGroup=activator (operators) and of "
                                    "ViewerGroup=activator-view (viewers) have one"));
    assert_non_null(strstr(message, "could not be read"));

    /* A request that did not parse names no op. */
    ctrl_peer_refusal(&both, &peer, NULL, message, sizeof(message));
    assert_true(strncmp(message, "this peer (uid 1001) has no role here", 37) == 0);

    char *viewers[] = {"viewer-1", NULL};
    ctrl_access tls = {.viewers = viewers};
    ctrl_peer_judge_cn(&tls, "stranger-1", &peer);
    ctrl_peer_refusal(&tls, &peer, ctrl_op_spec_of(CTRL_OP_CLAIM_ASSIGN), message,
                      sizeof(message));
    assert_non_null(strstr(message, "op claim.assign needs the operator role; this peer (the TLS "
                                    "client CN=stranger-1) has no role here: its CN is in "
                                    "neither ControlOperators="));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(groups_come_from_the_connection),
        cmocka_unit_test(local_roles),
        cmocka_unit_test(certificate_roles),
        cmocka_unit_test(refusals_name_the_op_and_the_role),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
