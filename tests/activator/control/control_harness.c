#include "control_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <nng/nng.h>

#include "tests/driver/daemon_driver.h"

typedef struct slow_wake {
    harness *h;
    ctrl_reply *reply;
    sd_event_source *timer;
    char host[ACT_NAME_MAX + 1];
} slow_wake;

static int on_slow_wake_done(sd_event_source *s, uint64_t usec, void *userdata)
{
    slow_wake *wake = userdata;
    json_object *result = json_object_new_object();
    json_object_object_add(result, "host", json_object_new_string(wake->host));
    json_object_object_add(result, "state", json_object_new_string("serving"));
    json_object_object_add(result, "generation", json_object_new_int(7));
    ctrl_reply_ok(wake->reply, result);
    atomic_fetch_sub(&wake->h->slow_wakes, 1);
    sd_event_source_disable_unref(wake->timer);
    free(wake);
    return 0;
}

/* The stand-in daemon: status answers at once; "wake slow" answers after 1.5 s
 * from a timer (as a wake waiting for ready would); other wakes are refused. */
static void dispatch(const ctrl_request *request, ctrl_reply *reply, void *userdata)
{
    harness *h = userdata;
    switch (request->op) {
    case CTRL_OP_STATUS: {
        h->status_count++;
        json_object *hosts = json_object_new_array();
        json_object *web1 = json_object_new_object();
        json_object_object_add(web1, "host", json_object_new_string("web1"));
        json_object_object_add(web1, "state", json_object_new_string("serving"));
        json_object_object_add(web1, "generation", json_object_new_int(3));
        json_object_object_add(web1, "version", json_object_new_string("v2"));
        json_object_object_add(web1, "memory_current", json_object_new_int64(12582912));
        json_object_array_add(hosts, web1);
        json_object *result = json_object_new_object();
        json_object_object_add(result, "hosts", hosts);
        ctrl_reply_ok(reply, result);
        return;
    }
    case CTRL_OP_WAKE:
        if (strcmp(request->host, "slow") == 0) {
            slow_wake *wake = calloc(1, sizeof(*wake));
            wake->h = h;
            wake->reply = reply;
            atomic_fetch_add(&h->slow_wakes, 1);
            snprintf(wake->host, sizeof(wake->host), "%s", request->host);
            sd_event_add_time_relative(h->event, &wake->timer, CLOCK_MONOTONIC, 1500 * 1000, 0,
                                       on_slow_wake_done, wake);
            return;
        }
        ctrl_reply_error(reply, "not_owner",
                         "host %s: claim names box b2 as executor, this box is b1", request->host);
        return;
    case CTRL_OP_VERSION: {
        json_object *result = json_object_new_object();
        json_object_object_add(result, "version", json_object_new_string("0.1.0"));
        json_object_object_add(result, "box", json_object_new_string("box-1"));
        ctrl_reply_ok(reply, result);
        return;
    }
    default:
        ctrl_reply_error(reply, "unsupported", "op %s is not in the test dispatcher",
                         ctrl_op_name(request->op));
    }
}

static int on_stop(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
    return sd_event_exit(sd_event_source_get_event(s), 0);
}

static void *server_thread(void *arg)
{
    harness *h = arg;
    sd_event *event = NULL;
    ctrl_server *control = NULL;
    act_error err = {0};
    int r = sd_event_new(&event);
    h->event = event;
    if (r >= 0)
        r = sd_event_add_io(event, NULL, h->stop_fd[0], EPOLLIN, on_stop, h);
    if (r >= 0)
        r = ctrl_new(event, &h->options, &control, &err);
    h->start_result = r;
    snprintf(h->start_error, sizeof(h->start_error), "%s", err.message);
    char ready = 1;
    (void)!write(h->ready_fd[1], &ready, 1);
    if (r >= 0)
        sd_event_loop(event);
    ctrl_free(control);
    /* Timers of slow wakes still pending own their memory. */
    sd_event_unref(event);
    return NULL;
}

int harness_start(harness *h, const ctrl_options *overrides)
{
    memset(h, 0, sizeof(*h));
    snprintf(h->dir, sizeof(h->dir), "/tmp/act-control-XXXXXX");
    if (!mkdtemp(h->dir))
        return -errno;
    /* Other uids must reach the socket file for the credential tests; the
     * socket's own mode decides who may connect. */
    chmod(h->dir, 0755);
    snprintf(h->url, sizeof(h->url), "ipc://%s/control.ipc", h->dir);
    if (overrides)
        h->options = *overrides;
    h->options.url = h->url;
    h->options.dispatch = dispatch;
    h->options.userdata = h;
    if (pipe2(h->stop_fd, O_CLOEXEC) < 0 || pipe2(h->ready_fd, O_CLOEXEC) < 0)
        return -errno;
    pthread_t *thread = calloc(1, sizeof(pthread_t));
    h->thread = thread;
    if (pthread_create(thread, NULL, server_thread, h) != 0)
        return -EAGAIN;
    char ready;
    (void)!read(h->ready_fd[0], &ready, 1);
    if (h->start_result < 0) {
        harness_stop(h);
        return -1;
    }
    return 0;
}

bool harness_wait_slow_wakes(harness *h, unsigned count, int timeout_ms)
{
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    while (atomic_load(&h->slow_wakes) < count) {
        if (dd_now_ms() >= deadline)
            return false;
        dd_sleep_ms(1);
    }
    return true;
}

void harness_stop(harness *h)
{
    if (h->thread) {
        char stop = 1;
        (void)!write(h->stop_fd[1], &stop, 1);
        pthread_join(*(pthread_t *)h->thread, NULL);
        free(h->thread);
        h->thread = NULL;
    }
    for (int i = 0; i < 2; i++) {
        close(h->stop_fd[i]);
        close(h->ready_fd[i]);
    }
    char path[200];
    snprintf(path, sizeof(path), "%s/control.ipc", h->dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/events.ipc", h->dir);
    unlink(path);
    rmdir(h->dir);
}
