/* Who may drive the real daemon, as real unprivileged users: root; with
 * ControlGroup= its members, as operators; with ViewerGroup= its members,
 * who may only read and watch; anyone else is refused, whether the socket
 * file keeps them out or the daemon's own role check does. A role is what
 * the kernel recorded at the peer's connect: a pid reused after it lends
 * nothing. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
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

/* The daemon with ControlGroup= and ViewerGroup= and one host, demo (its
 * port returned), its sockets reachable by the groups' members. */
static int start_with_both_groups(dh_daemon *d)
{
    char conf[128];
    snprintf(conf, sizeof(conf), "ControlGroup=%d\nViewerGroup=%d\n", OPERATOR_GID, VIEWER_GID);
    dh_setup(d, DH_STORE_DIR, conf);
    int port = dh_add_app_host(d, "demo", NULL, NULL);
    dh_start(d, NULL);
    open_path_to_socket(d);
    return port;
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
    int port = start_with_both_groups(d);
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

/* ---- the peer-group race, driven ---- */

static bool read_exactly(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}

/* One request over a raw connection to the control socket, as a REQ peer,
 * in NNG 1.5.2's IPC framing: an 8-byte header each way ("\0SP\0", the
 * protocol, two zeros), then messages of a type byte (1) and a 64-bit
 * big-endian length, and for REQ/REP a 32-bit request id with its top bit
 * set before the body. The reply's body goes into reply. */
static bool raw_request(int fd, const char *body, char *reply, size_t size)
{
    static const unsigned char req_header[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0};
    unsigned char rep_header[8];
    if (write(fd, req_header, 8) != 8 || !read_exactly(fd, rep_header, 8) || rep_header[5] != 0x31)
        return false;
    unsigned char frame[13] = {1};
    uint64_t length = htobe64(strlen(body) + 4);
    uint32_t id = htobe32(0x80000001u);
    memcpy(frame + 1, &length, 8);
    memcpy(frame + 9, &id, 4);
    if (write(fd, frame, sizeof(frame)) != (ssize_t)sizeof(frame) ||
        write(fd, body, strlen(body)) != (ssize_t)strlen(body) || !read_exactly(fd, frame, 13))
        return false;
    memcpy(&length, frame + 1, 8);
    size_t n = be64toh(length) - 4;
    if (frame[0] != 1 || n >= size || !read_exactly(fd, reply, n))
        return false;
    reply[n] = '\0';
    return true;
}

/* Forks a process of uid 65534 with groups; with path, it connects there
 * and hands the connection back over to_parent before it exits; without,
 * it waits to be killed. Only system calls after the fork: this process
 * runs NNG's threads. */
static pid_t fork_user(const gid_t *groups, size_t n, const char *path, int to_parent)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (setgroups(n, groups) < 0 || setresgid(65534, 65534, 65534) < 0 ||
        setresuid(65534, 65534, 65534) < 0)
        _exit(2);
    if (!path)
        for (;;)
            pause();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof(address.sun_path), "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0)
        _exit(3);
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control = {0};
    struct iovec iov = {.iov_base = "f", .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buffer,
                         .msg_controllen = sizeof(control.buffer)};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    _exit(sendmsg(to_parent, &msg, 0) == 1 ? 0 : 4);
}

static int receive_fd(int from)
{
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    char c;
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = control.buffer,
                         .msg_controllen = sizeof(control.buffer)};
    if (recvmsg(from, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) != 1 || !CMSG_FIRSTHDR(&msg))
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
    return fd;
}

/* Whether /proc/PID/status lists gid among its groups. */
static bool status_lists_group(pid_t pid, gid_t gid)
{
    char path[64], wanted[32];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *text = dh_read_text(path);
    const char *groups = text ? strstr(text, "\nGroups:") : NULL;
    snprintf(wanted, sizeof(wanted), "%u", (unsigned)gid);
    const char *end = groups ? strchr(groups + 1, '\n') : NULL;
    const char *at = groups ? strstr(groups, wanted) : NULL;
    bool listed = at && (!end || at < end);
    free(text);
    return listed;
}

/* A viewer connects to the control socket, holds back its handshake, and
 * exits; an operator of the same uid and gid is made to get its pid (the
 * test sets the next pid through /proc/sys/kernel/ns_last_pid). Then the
 * viewer's connection, kept alive by the test, sends its handshake and
 * asks to park a host. Its role is what the kernel recorded at its connect
 * (viewer): /proc/PID/status now shows the operator's groups, which is
 * what a check that read it would have granted (checked first: the race
 * is really set up). */
static void test_a_reused_pid_lends_no_groups(void **state)
{
    dh_daemon *d = *state;
    start_with_both_groups(d);
    dh_wake(d, "demo");
    const char *path = d->drv.control_url + strlen("ipc://");

    int pair[2];
    DH_CHECK(d, socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) == 0, "socketpair: %s",
             strerror(errno));
    pid_t viewer = fork_user(viewer_groups, 2, path, pair[1]);
    int status = -1;
    waitpid(viewer, &status, 0);
    int connection = receive_fd(pair[0]);
    DH_CHECK(d, connection >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "the viewer could not connect (status %d)", status);
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));

    pid_t lender = -1;
    for (int attempt = 0; attempt < 200 && lender != viewer; attempt++) {
        if (lender > 0) {
            kill(lender, SIGKILL);
            waitpid(lender, NULL, 0);
        }
        FILE *last = fopen("/proc/sys/kernel/ns_last_pid", "we");
        DH_CHECK(d, last, "cannot open ns_last_pid: %s", strerror(errno));
        fprintf(last, "%d", (int)viewer - 1);
        fclose(last);
        lender = fork_user(operator_groups, 2, NULL, -1);
    }
    DH_CHECK(d, lender == viewer, "no process got the viewer's pid %d in 200 tries", (int)viewer);
    /* The positive control: a check that read /proc/<pid> now sees the
     * operator's groups under the viewer's connection. */
    bool lent = false;
    for (int i = 0; i < 100 && !lent; i++) {
        lent = status_lists_group(lender, OPERATOR_GID);
        if (!lent)
            dd_sleep_ms(10);
    }
    DH_CHECK(d, lent, "pid %d does not show ControlGroup=%d: the race is not set up", (int)lender,
             OPERATOR_GID);

    char reply[4096];
    bool answered = raw_request(connection, "{\"v\":1,\"op\":\"park\",\"host\":\"demo\"}", reply,
                                sizeof(reply));
    kill(lender, SIGKILL);
    waitpid(lender, NULL, 0);
    close(connection);
    close(pair[0]);
    close(pair[1]);
    DH_CHECK(d, answered, "no answer to the viewer's request: %s", strerror(errno));
    print_message("the viewer's park, asked under a reused pid: %s\n", reply);
    DH_CHECK(d, strstr(reply, "forbidden") && strstr(reply, "viewer"),
             "the viewer's park under the operator's pid was not refused as a viewer's: %s", reply);
    json_object *demo = dh_status(d, "demo");
    bool serving = strcmp(dh_json_str(demo, "state"), "serving") == 0;
    json_object_put(demo);
    DH_CHECK(d, serving, "demo was parked");
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
        DH_TEST(test_a_reused_pid_lends_no_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
