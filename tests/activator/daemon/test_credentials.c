/* Who may drive the real daemon: root, and with ControlGroup= the members of
 * that group; anyone else is refused, whether the socket's file mode stops
 * them (no ControlGroup=) or the daemon's own peer check does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int main(void)
{
    int r = dh_check_can_run("daemon-credentials", DH_STORE_DIR);
    if (r)
        return r;
    const struct CMUnitTest tests[] = {
        DH_TEST(test_unprivileged_user_is_refused),
        DH_TEST(test_control_group_members_are_admitted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
