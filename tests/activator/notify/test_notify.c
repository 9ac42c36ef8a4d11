/* The per-generation notify socket counts datagrams only from its cgroup;
 * fds a sender pushes (a socket whose close lingers, as a tenant would push
 * to stall the daemon) never make the loop wait, read or still queued when
 * the socket is freed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "activator/notify/notify.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "tests/common/lingering.h"

typedef struct received {
    int count;
    bool ready;
    bool stopping;
    bool watchdog;
    bool watchdog_trigger;
    char status[64];
    int32_t sender;
} received;

static void on_message(ntf_socket *notify, const ntf_message *message, void *userdata)
{
    received *got = userdata;
    got->count++;
    got->ready = got->ready || message->ready;
    got->stopping = got->stopping || message->stopping;
    got->watchdog = got->watchdog || message->watchdog;
    got->watchdog_trigger = got->watchdog_trigger || message->watchdog_trigger;
    got->sender = message->sender_pid;
    if (message->status)
        snprintf(got->status, sizeof(got->status), "%s", message->status);
}

/* Runs the loop until nothing is pending, so every datagram sent before has
 * been handled. */
static void drain(sd_event *loop)
{
    for (int i = 0; i < 10; i++)
        sd_event_run(loop, 10 * 1000);
}

/* Opens the socket of options in <dir>/web1 (dir made from its template)
 * and names it in NOTIFY_SOCKET for sd_notify. */
static void open_in(sd_event *loop, ntf_options *options, received *got, ntf_socket **notify,
                    char *dir)
{
    assert_non_null(mkdtemp(dir));
    char directory[256];
    snprintf(directory, sizeof(directory), "%s/web1", dir);
    options->directory = directory;
    act_error err = {0};
    assert_int_equal(ntf_open(loop, options, on_message, got, notify, &err), 0);
    options->directory = NULL;
    assert_int_equal(setenv("NOTIFY_SOCKET", ntf_socket_path(*notify), 1), 0);
}

/* The socket as the daemon makes it: <dir>/web1/g-1, the directory handed
 * to owner (ourselves when not root). */
static void open_as(sd_event *loop, const char *cgroup_path, uint64_t cgroup_id, uid_t owner,
                    received *got, ntf_socket **notify, char *dir)
{
    ntf_options options = {
        .name = "g-1",
        .uid = owner,
        .gid = owner,
        .cgroup_path = cgroup_path,
        .cgroup_id = cgroup_id,
        .label = "host web1: generation 1",
    };
    open_in(loop, &options, got, notify, dir);
}

static void open_in_tmpdir(sd_event *loop, const char *cgroup_path, received *got,
                           ntf_socket **notify, char *dir)
{
    open_as(loop, cgroup_path, 0, getuid(), got, notify, dir);
}

static void remove_tmpdir(const char *dir)
{
    char directory[256];
    snprintf(directory, sizeof(directory), "%s/web1", dir);
    assert_int_equal(rmdir(directory), 0); /* the socket file is gone with it */
    assert_int_equal(rmdir(dir), 0);
}

static void sender_in_cgroup_is_heard(void **state)
{
    (void)state;
    char own[4096];
    assert_int_equal(ntf_pid_cgroup(getpid(), own, sizeof(own)), 0);

    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    received got = {0};
    ntf_socket *notify = NULL;
    char dir[] = "/tmp/act-notify-XXXXXX";
    open_in_tmpdir(loop, own, &got, &notify, dir);

    assert_true(sd_notify(0, "READY=1\nSTATUS=serving 3 clients") > 0);
    drain(loop);
    assert_int_equal(got.count, 1);
    assert_true(got.ready);
    assert_string_equal(got.status, "serving 3 clients");
    assert_int_equal(got.sender, getpid());
    assert_int_equal(ntf_refused_count(notify), 0);
    assert_false(got.watchdog || got.watchdog_trigger || got.stopping);

    /* The watchdog's keep-alive, its trigger, and the stop notice. */
    assert_true(sd_notify(0, "WATCHDOG=1") > 0);
    drain(loop);
    assert_true(got.watchdog);
    assert_false(got.watchdog_trigger);
    assert_true(sd_notify(0, "WATCHDOG=trigger\nSTOPPING=1") > 0);
    drain(loop);
    assert_int_equal(got.count, 3);
    assert_true(got.watchdog_trigger && got.stopping);

    ntf_free(notify);
    remove_tmpdir(dir);
    sd_event_unref(loop);
}

static void sender_outside_cgroup_is_refused(void **state)
{
    (void)state;
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    received got = {0};
    ntf_socket *notify = NULL;
    char dir[] = "/tmp/act-notify-XXXXXX";
    open_in_tmpdir(loop, "/activator-test/hosts/other/g-9", &got, &notify, dir);

    assert_true(sd_notify(0, "READY=1") > 0);
    drain(loop);
    assert_int_equal(got.count, 0);
    assert_false(got.ready);
    assert_int_equal(ntf_refused_count(notify), 1);

    ntf_free(notify);
    remove_tmpdir(dir);
    sd_event_unref(loop);
}

/* Our own cgroup's id, through the path /proc/self/cgroup names. */
static uint64_t own_cgroup_id(char *own, size_t size)
{
    assert_int_equal(ntf_pid_cgroup(getpid(), own, size), 0);
    char path[4200];
    /* A hybrid host mounts cgroup2 at /sys/fs/cgroup/unified. */
    struct statfs fs;
    bool hybrid = statfs("/sys/fs/cgroup/unified", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
    snprintf(path, sizeof(path), "/sys/fs/cgroup%s%s", hybrid ? "/unified" : "",
             strcmp(own, "/") == 0 ? "" : own);
    uint64_t id = 0;
    assert_int_equal(ntf_cgroup_id(path, &id), 0);
    assert_true(id != 0);
    return id;
}

/* The same rule through the sender's pidfd and the leaf's id, the path a
 * kernel with SO_PASSPIDFD and PIDFD_GET_INFO takes; a wrong id refuses
 * even though the path would match. */
static void sender_checked_by_pidfd(void **state)
{
    (void)state;
    if (!ntf_kernel_passes_pidfd())
        skip();
    char own[4096];
    uint64_t id = own_cgroup_id(own, sizeof(own));
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    received got = {0};
    ntf_socket *notify = NULL;
    char dir[] = "/tmp/act-notify-XXXXXX";
    open_as(loop, own, id, getuid(), &got, &notify, dir);
    assert_true(sd_notify(0, "READY=1") > 0);
    drain(loop);
    assert_int_equal(got.count, 1);
    ntf_free(notify);
    remove_tmpdir(dir);

    received other = {0};
    char dir2[] = "/tmp/act-notify-XXXXXX";
    open_as(loop, own, id + 1, getuid(), &other, &notify, dir2);
    assert_true(sd_notify(0, "READY=1") > 0);
    drain(loop);
    assert_int_equal(other.count, 0);
    assert_int_equal(ntf_refused_count(notify), 1);
    ntf_free(notify);
    remove_tmpdir(dir2);
    sd_event_unref(loop);
}

/* The host's user owns the directory (0700) and the socket; any other user
 * is refused by the file system before the daemon ever reads a byte. */
static void other_user_cannot_send(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    char own[4096];
    assert_int_equal(ntf_pid_cgroup(getpid(), own, sizeof(own)), 0);
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    received got = {0};
    ntf_socket *notify = NULL;
    char dir[] = "/tmp/act-notify-XXXXXX";
    open_as(loop, own, 0, 65534, &got, &notify, dir);
    assert_int_equal(chmod(dir, 0755), 0);
    char directory[300];
    snprintf(directory, sizeof(directory), "%s/web1", dir);
    struct stat st;
    assert_int_equal(stat(directory, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(lstat(ntf_socket_path(notify), &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(st.st_mode & 0077, 0);

    /* errno of a send as uid, as the child's exit status. */
    int results[2];
    const uid_t uids[2] = {65533, 65534};
    for (int i = 0; i < 2; i++) {
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            if (setgroups(0, NULL) < 0 || setgid(uids[i]) < 0 || setuid(uids[i]) < 0)
                _exit(100);
            int r = sd_notify(0, "READY=1");
            _exit(r > 0 ? 0 : -r);
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        results[i] = WEXITSTATUS(status);
    }
    assert_int_equal(results[0], EACCES);
    assert_int_equal(results[1], 0);
    drain(loop);
    /* The host's user got through the file system; its datagram counts
     * because it came from our cgroup (the child's). */
    assert_int_equal(got.count + (int)ntf_refused_count(notify), 1);
    ntf_free(notify);
    remove_tmpdir(dir);
    sd_event_unref(loop);
}

/* A flood is read a burst per loop iteration: the loop gets back to its
 * other sources between bursts, and the rest waits in the socket. */
static void flood_is_read_a_burst_per_iteration(void **state)
{
    (void)state;
    char own[4096];
    assert_int_equal(ntf_pid_cgroup(getpid(), own, sizeof(own)), 0);
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    received got = {0};
    ntf_socket *notify = NULL;
    char dir[] = "/tmp/act-notify-XXXXXX";
    /* Few datagrams: without systemd's sysctl, a socket queues 10. */
    ntf_options options = {
        .name = "g-1", .uid = getuid(), .gid = getgid(), .cgroup_path = own, .burst = 3};
    open_in(loop, &options, &got, &notify, dir);
    for (int i = 0; i < 8; i++)
        assert_true(sd_notify(0, "WATCHDOG=1") > 0);
    assert_true(sd_event_run(loop, 100 * 1000) > 0);
    assert_int_equal(got.count, 3);
    drain(loop);
    assert_int_equal(got.count, 8);
    ntf_free(notify);
    remove_tmpdir(dir);
    sd_event_unref(loop);
}

/* A flood is read a window's worth at a time: past it the socket is not
 * read until the window ends, whatever is queued, so the daemon's cost has
 * a ceiling however fast the sender sends. */
static void flood_is_read_a_window_at_a_time(void **state)
{
    (void)state;
    char own[4096];
    assert_int_equal(ntf_pid_cgroup(getpid(), own, sizeof(own)), 0);
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    received got = {0};
    ntf_socket *notify = NULL;
    char dir[] = "/tmp/act-notify-XXXXXX";
    ntf_options options = {.name = "g-1",
                           .uid = getuid(),
                           .gid = getgid(),
                           .cgroup_path = own,
                           .per_window = 4,
                           .window_usec = 300 * 1000};
    open_in(loop, &options, &got, &notify, dir);
    for (int i = 0; i < 8; i++)
        assert_true(sd_notify(0, "WATCHDOG=1") > 0);
    uint64_t start = 0;
    assert_true(sd_event_now(loop, CLOCK_MONOTONIC, &start) >= 0);
    /* Well inside the window: only its worth is read. */
    for (int i = 0; i < 5; i++)
        sd_event_run(loop, 5 * 1000);
    assert_int_equal(got.count, 4);
    /* The window ends, and the rest is read. */
    for (int i = 0; i < 50 && got.count < 8; i++)
        sd_event_run(loop, 10 * 1000);
    assert_int_equal(got.count, 8);
    uint64_t end = 0;
    assert_true(sd_event_now(loop, CLOCK_MONOTONIC, &end) >= 0);
    assert_true(end - start >= options.window_usec - 2000);
    ntf_free(notify);
    remove_tmpdir(dir);
    sd_event_unref(loop);
}

#define LINGER_SEC 3
/* Far above a loop pass on a loaded machine, below the linger. */
#define QUICK_USEC (LINGER_SEC * 1000 * 1000 / 2)

/* Sends a lingering socket with FDSTORE=1 and drops our copy: the one in
 * the datagram is then the last. The peer goes into peers. */
static void push_lingering(int *peers, size_t *n_peers)
{
    int fd = lingering_socket(LINGER_SEC, &peers[(*n_peers)++]);
    assert_true(fd >= 0);
    assert_true(sd_pid_notify_with_fds(0, 0, "FDSTORE=1", &fd, 1) > 0);
    close(fd);
}

static void pushed_fds_never_make_the_loop_wait(void **state)
{
    (void)state;
    char own[4096];
    assert_int_equal(ntf_pid_cgroup(getpid(), own, sizeof(own)), 0);
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    received got = {0};
    ntf_socket *notify = NULL;
    char dir[] = "/tmp/act-notify-XXXXXX";
    open_in_tmpdir(loop, own, &got, &notify, dir);
    int peers[4];
    size_t n_peers = 0;

    push_lingering(peers, &n_peers);
    uint64_t start = act_now_usec();
    drain(loop);
    uint64_t took = act_now_usec() - start;
    assert_int_equal(got.count, 1);
    if (took >= QUICK_USEC)
        fail_msg("reading a datagram that carried a lingering socket took %llu ms",
                 (unsigned long long)(took / 1000));

    /* Still queued when the socket goes (its generation retired). */
    push_lingering(peers, &n_peers);
    push_lingering(peers, &n_peers);
    start = act_now_usec();
    ntf_free(notify);
    took = act_now_usec() - start;
    if (took >= QUICK_USEC)
        fail_msg("freeing a socket with lingering sockets queued took %llu ms",
                 (unsigned long long)(took / 1000));
    for (size_t i = 0; i < n_peers; i++)
        close(peers[i]);
    remove_tmpdir(dir);
    sd_event_unref(loop);
}

static void too_long_path_is_a_clear_error(void **state)
{
    (void)state;
    sd_event *loop = NULL;
    assert_int_equal(sd_event_new(&loop), 0);
    char path[200];
    memset(path, 'a', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    ntf_socket *notify = NULL;
    act_error err = {0};
    ntf_options options = {.directory = path, .name = "g-1", .cgroup_path = "/x"};
    assert_int_equal(ntf_open(loop, &options, on_message, NULL, &notify, &err), -ENAMETOOLONG);
    assert_non_null(strstr(err.message, "RuntimeDirectory"));
    assert_null(notify);
    sd_event_unref(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sender_in_cgroup_is_heard),
        cmocka_unit_test(sender_outside_cgroup_is_refused),
        cmocka_unit_test(sender_checked_by_pidfd),
        cmocka_unit_test(other_user_cannot_send),
        cmocka_unit_test(flood_is_read_a_burst_per_iteration),
        cmocka_unit_test(flood_is_read_a_window_at_a_time),
        cmocka_unit_test(too_long_path_is_a_clear_error),
        cmocka_unit_test(pushed_fds_never_make_the_loop_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
