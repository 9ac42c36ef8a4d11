/* The per-generation notify socket counts datagrams only from its cgroup. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "activator/notify/notify.h"
#include "common/cleanup.h"

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

static void open_in_tmpdir(sd_event *loop, const char *cgroup_path, received *got,
                           ntf_socket **notify, char *dir)
{
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/g-1", dir);
    act_error err = {0};
    assert_int_equal(ntf_open(loop, path, cgroup_path, on_message, got, notify, &err), 0);
    assert_int_equal(setenv("NOTIFY_SOCKET", ntf_socket_path(*notify), 1), 0);
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
    assert_int_equal(access(dir, F_OK), 0);
    assert_int_equal(rmdir(dir), 0); /* the socket file is gone with it */
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
    assert_int_equal(rmdir(dir), 0);
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
    assert_int_equal(ntf_open(loop, path, "/x", on_message, NULL, &notify, &err), -ENAMETOOLONG);
    assert_non_null(strstr(err.message, "RuntimeDirectory"));
    assert_null(notify);
    sd_event_unref(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sender_in_cgroup_is_heard),
        cmocka_unit_test(sender_outside_cgroup_is_refused),
        cmocka_unit_test(too_long_path_is_a_clear_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
