/* The roles of peers (activator/control/peer.h) without sockets: reading
 * /proc/PID/status, which role credentials and CNs get, and the sentences
 * that refuse an op. The sockets themselves are tested with real users in
 * test_control.c and against the daemon in tests/activator/daemon. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "activator/control/peer.h"
#include "common/fileio.h"

static const char status_text[] = "Name:\tactivatorctl\n"
                                  "Umask:\t0022\n"
                                  "State:\tR (running)\n"
                                  "Uid:\t1001\t1002\t1002\t1002\n"
                                  "Gid:\t1001\t2000\t2000\t2000\n"
                                  "FDSize:\t64\n"
                                  "Groups:\t27 60001 4000000000 \n"
                                  "NStgid:\t4242\n";

static void parses_effective_ids_and_groups(void **state)
{
    uid_t euid;
    gid_t egid;
    gid_t wanted[] = {60001, 60002, 4000000000u};
    bool held[3];
    assert_int_equal(ctrl_peer_parse_status(status_text, &euid, &egid, wanted, held, 3), 0);
    assert_int_equal(euid, 1002);
    assert_int_equal(egid, 2000);
    assert_true(held[0]);
    assert_false(held[1]);
    assert_true(held[2]);

    /* No supplementary groups at all. */
    static const char none[] = "Uid:\t0\t5\t5\t5\nGid:\t0\t6\t6\t6\nGroups:\t\n";
    held[0] = true;
    assert_int_equal(ctrl_peer_parse_status(none, &euid, &egid, wanted, held, 1), 0);
    assert_int_equal(euid, 5);
    assert_int_equal(egid, 6);
    assert_false(held[0]);
}

static void refuses_what_is_not_a_status(void **state)
{
    static const char *const bad[] = {
        "",
        "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n",          /* no Groups: */
        "Uid:\t1\nGid:\t1\t1\t1\t1\nGroups:\t\n",        /* no effective uid */
        "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\tx\n", /* not a number */
        "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t99999999999\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uid_t euid;
        gid_t egid;
        gid_t wanted = 1;
        bool held;
        if (ctrl_peer_parse_status(bad[i], &euid, &egid, &wanted, &held, 1) != -EBADMSG)
            fail_msg("status %zu was accepted: %s", i, bad[i]);
    }
}

/* The kernel's own status of this process parses, and shows our ids. */
static void parses_this_process(void **state)
{
    char *text = NULL;
    size_t len;
    assert_int_equal(act_read_file(AT_FDCWD, "/proc/self/status", 1 << 20, &text, &len, NULL), 0);
    uid_t euid;
    gid_t egid;
    gid_t wanted = getegid();
    bool held;
    assert_int_equal(ctrl_peer_parse_status(text, &euid, &egid, &wanted, &held, 1), 0);
    assert_int_equal(euid, geteuid());
    assert_int_equal(egid, getegid());
    free(text);
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
        cmocka_unit_test(parses_effective_ids_and_groups),
        cmocka_unit_test(refuses_what_is_not_a_status),
        cmocka_unit_test(parses_this_process),
        cmocka_unit_test(local_roles),
        cmocka_unit_test(certificate_roles),
        cmocka_unit_test(refusals_name_the_op_and_the_role),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
