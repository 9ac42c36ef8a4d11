/* Who may drive the real daemon, as real unprivileged users: root; with
 * ControlGroup= its members, as operators; with ViewerGroup= its members,
 * who may only read and watch; anyone else is refused, whether the socket
 * file keeps them out or the daemon's own role check does. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "harness.h"

#ifndef DH_ACTIVATORCTL
#error "DH_ACTIVATORCTL must name the activatorctl executable"
#endif

/* Runs `activatorctl ARGS...` (status when args is NULL) as uid:gid with gid
 * as its only group; returns its exit status with its output in out. */
static int ctl_as_run(dh_daemon *d, uid_t uid, gid_t gid, const char *const *args, char *out,
                      size_t size)
{
    const char *argv[16] = {DH_ACTIVATORCTL, "--connect", d->drv.control_url, "--no-color"};
    size_t n = 4;
    for (const char *const *a = args ? args : (const char *const[]){"status", NULL}; *a && n < 15;
         a++)
        argv[n++] = *a;
    argv[n] = NULL;
    return dh_run_as((char *const *)argv, uid, gid, out, size);
}

static int ctl_as(dh_daemon *d, uid_t uid, gid_t gid, char *out, size_t size)
{
    return ctl_as_run(d, uid, gid, NULL, out, size);
}

/* The temp dirs are 0700; others need to pass through to reach the socket. */
static void open_path_to_socket(dh_daemon *d)
{
    chmod(d->drv.dir, 0711);
    chmod(d->drv.runtime_dir, 0711);
}

static void test_unprivileged_user_is_refused(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, NULL);
    dh_write_app_host(d, "demo", dh_free_port(), NULL, NULL);
    dh_start(d, NULL);
    open_path_to_socket(d);
    char out[4096];
    int status = ctl_as(d, 65534, 65534, out, sizeof(out));
    DH_CHECK(d, status > 0 && status != DD_RUN_SETUP_FAILED && status != DD_RUN_EXEC_FAILED,
             "activatorctl as uid 65534 exited %d: %s", status, out);
    DH_CHECK(d, strstr(out, "Permission denied") || strstr(out, "forbidden"),
             "the refusal does not say why: %s", out);
    DH_CHECK(d, ctl_as(d, 0, 0, out, sizeof(out)) == 0, "root is refused: %s", out);
    dh_stop_and_check_clean(d);
}

static void test_control_group_members_are_admitted(void **state)
{
    dh_daemon *d = *state;
    dh_setup(d, DH_STORE_DIR, "ControlGroup=65534\n");
    dh_write_app_host(d, "demo", dh_free_port(), NULL, NULL);
    dh_start(d, NULL);
    open_path_to_socket(d);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s", d->drv.control_url + strlen("ipc://"));
    struct stat st;
    DH_CHECK(d, stat(path, &st) == 0 && st.st_gid == 65534 && (st.st_mode & 0777) == 0660,
             "control socket %s: gid %u mode %o, expected 65534 and 660", path,
             (unsigned)st.st_gid, (unsigned)(st.st_mode & 0777));
    char out[4096];
    int status = ctl_as(d, 65534, 65534, out, sizeof(out));
    DH_CHECK(d, status == 0 && strstr(out, "demo"), "a member of ControlGroup= exited %d: %s",
             status, out);
    /* A member may not make the root daemon read a file for it: staging is
     * root's (the daemon would copy, say, /etc/shadow into a world-readable
     * build). activatorctl checks the path as its user first, so the file
     * here is one the member can read: the daemon refuses all the same. */
    char readable[PATH_MAX];
    snprintf(readable, sizeof(readable), "%s/readable-build", d->drv.dir);
    FILE *f = fopen(readable, "we");
    DH_CHECK(d, f, "cannot write %s: %s", readable, strerror(errno));
    fputs("#!/bin/sh\n", f);
    fclose(f);
    chmod(readable, 0755);
    status = ctl_as_run(d, 65534, 65534,
                        (const char *const[]){"stage", "demo", "v9", readable, NULL}, out,
                        sizeof(out));
    DH_CHECK(d, status == 1 && strstr(out, "only root may stage"),
             "a member's stage was not refused (exit %d): %s", status, out);
    char staged[PATH_MAX];
    snprintf(staged, sizeof(staged), "%s/releases/demo/v9", d->drv.state_dir);
    DH_CHECK(d, access(staged, F_OK) < 0, "%s exists after a refused stage", staged);

    /* Outside the group: the file mode lets no one else in. */
    status = ctl_as(d, 65533, 65533, out, sizeof(out));
    DH_CHECK(d, status != 0 && (strstr(out, "Permission denied") || strstr(out, "forbidden")),
             "a user outside ControlGroup= exited %d: %s", status, out);
    dh_stop_and_check_clean(d);
}

/* A login of uid 65534 in the groups of one role: its primary group is
 * 65534, the role's group a supplementary one. */
#define VIEWER_GID 60001
#define OPERATOR_GID 60002
static const gid_t viewer_groups[] = {65534, VIEWER_GID};
static const gid_t operator_groups[] = {65534, OPERATOR_GID};

/* Runs `activatorctl ARGS...` as uid with the n groups (gid the primary). */
static int ctl_in_groups(dh_daemon *d, uid_t uid, gid_t gid, const gid_t *groups, size_t n,
                         const char *const *args, char *out, size_t size)
{
    const char *argv[16] = {DH_ACTIVATORCTL, "--connect", d->drv.control_url, "--no-color"};
    size_t argc = 4;
    for (; *args && argc < 15; args++)
        argv[argc++] = *args;
    argv[argc] = NULL;
    return dd_run_as_groups((char *const *)argv, uid, gid, groups, n, out, size);
}

/* The socket at url (ipc://PATH) belongs to gid, with mode 0660 and an ACL
 * that lets one more group in. */
static void expect_socket_for_both_groups(dh_daemon *d, const char *url)
{
    const char *path = url + strlen("ipc://");
    struct stat st;
    DH_CHECK(d, stat(path, &st) == 0 && st.st_gid == OPERATOR_GID && (st.st_mode & 0777) == 0660,
             "%s: gid %u mode %o, expected %u and 660", path, (unsigned)st.st_gid,
             (unsigned)(st.st_mode & 0777), (unsigned)OPERATOR_GID);
    DH_CHECK(d, getxattr(path, "system.posix_acl_access", NULL, 0) > 0,
             "%s has no ACL for ViewerGroup=: %s", path, strerror(errno));
}

/* `activatorctl watch` as a viewer for a few seconds, on a thread, while the
 * test makes the daemon publish. */
typedef struct watcher {
    dh_daemon *d;
    char activatorctl[PATH_MAX]; /* a copy the viewer can reach */
    char out[16384];
    int status;
    atomic_bool done;
} watcher;

static void *run_watcher(void *arg)
{
    watcher *w = arg;
    /* INT after 3 s ends the watch; a watch that does not end on it is
     * killed 5 s later, and its status (137) fails the test instead of
     * hanging it. */
    char *const argv[] = {(char *)"/usr/bin/timeout", (char *)"--preserve-status",
                          (char *)"-k",              (char *)"5",
                          (char *)"-s",              (char *)"INT",
                          (char *)"3",               w->activatorctl,
                          (char *)"--connect",       w->d->drv.control_url,
                          (char *)"--no-color",      (char *)"watch",
                          NULL};
    w->status = dd_run_as_groups(argv, 65534, 65534, viewer_groups, 2, w->out, sizeof(w->out));
    atomic_store(&w->done, true);
    return NULL;
}

static void test_viewer_group_members_may_only_read(void **state)
{
    dh_daemon *d = *state;
    char conf[128];
    snprintf(conf, sizeof(conf), "ControlGroup=%d\nViewerGroup=%d\n", OPERATOR_GID, VIEWER_GID);
    dh_setup(d, DH_STORE_DIR, conf);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    open_path_to_socket(d);
    expect_socket_for_both_groups(d, d->drv.control_url);
    expect_socket_for_both_groups(d, d->drv.events_url);
    dh_wake(d, "demo");

    char out[4096];
    int status = ctl_in_groups(d, 65534, 65534, viewer_groups, 2,
                               (const char *const[]){"status", NULL}, out, sizeof(out));
    DH_CHECK(d, status == 0 && strstr(out, "demo") && strstr(out, "serving"),
             "status as a ViewerGroup= member exited %d:\n%s", status, out);
    status = ctl_in_groups(d, 65534, 65534, viewer_groups, 2,
                           (const char *const[]){"park", "demo", NULL}, out, sizeof(out));
    DH_CHECK(d,
             status == 1 &&
                 strstr(out, "op park needs the operator role; this peer (uid 65534) is a "
                             "viewer (ViewerGroup=60001)") &&
                 strstr(out, "[forbidden]"),
             "park as a ViewerGroup= member: exit %d (expected 1, refused):\n%s", status, out);
    char body[512];
    DH_CHECK(d, dh_http_get(port, body, sizeof(body)) > 0, "demo stopped serving after a viewer's "
                                                           "refused park");

    /* A viewer watches the events. */
    watcher w = {.d = d};
    snprintf(w.activatorctl, sizeof(w.activatorctl), "%s/activatorctl", d->drv.dir);
    act_error err = {0};
    DH_CHECK(d, dd_copy_file(DH_ACTIVATORCTL, w.activatorctl, 0755, &err) == 0, "%s",
             err.message);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, run_watcher, &w), 0);
    claim beacon;
    dh_claim_beacon(d, DH_OTHER_BOX, &beacon);
    /* A beacon every 50 ms or so: enough for the watch to see some, and
     * few enough that its whole output (and whatever it says on stderr as
     * it exits) fits what dd_run keeps. Back to back, they filled it with
     * 16 KiB of beacons, and a watch that exited -1 under that flood
     * (once in a full run here) left nothing saying why. */
    while (!atomic_load(&w.done)) {
        dh_claim_put(d, &beacon);
        dh_event_wait(d, DH_BEACON_HOST, "claim.changed", 100, NULL);
        dd_sleep_ms(50);
    }
    pthread_join(thread, NULL);
    DH_CHECK(d, w.status == 0 && strstr(w.out, "claim.changed") && strstr(w.out, DH_BEACON_HOST),
             "activatorctl watch as a ViewerGroup= member exited %d without the beacon's "
             "events:\n%s",
             w.status, w.out);

    /* An operator parks it. */
    status = ctl_in_groups(d, 65534, 65534, operator_groups, 2,
                           (const char *const[]){"park", "demo", NULL}, out, sizeof(out));
    DH_CHECK(d, status == 0, "park as a ControlGroup= member exited %d:\n%s", status, out);
    DH_CHECK(d, dh_wait_state(d, "demo", "parked", 10000), "demo is not parked after park");

    /* In neither group: the kernel refuses the connection to either socket. */
    static const gid_t neither[] = {65533};
    status = ctl_in_groups(d, 65533, 65533, neither, 1, (const char *const[]){"status", NULL}, out,
                           sizeof(out));
    DH_CHECK(d, status == 3 && strstr(out, "Permission denied") && strstr(out, "ViewerGroup="),
             "status in neither group: exit %d (expected 3, permission denied):\n%s", status,
             out);
    status = ctl_in_groups(d, 65533, 65533, neither, 1, (const char *const[]){"watch", NULL}, out,
                           sizeof(out));
    DH_CHECK(d, status == 3 && strstr(out, "Permission denied"),
             "watch in neither group: exit %d (expected 3, permission denied):\n%s", status, out);
    dh_stop_and_check_clean(d);
}

int main(void)
{
    int r = dh_check_can_run("daemon-credentials", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_unprivileged_user_is_refused),
        DH_TEST(test_control_group_members_are_admitted),
        DH_TEST(test_viewer_group_members_may_only_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
