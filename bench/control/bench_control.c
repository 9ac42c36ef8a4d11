/* bench-control: the status round trip through ctrl_server (NNG REP
 * contexts -> hand-off to an sd-event loop -> JSON parse and validation ->
 * dispatch -> JSON reply) against a bare NNG REQ/REP echo over the same ipc
 * transport, measured in the same run. Target: p50 and p99 ratio <= 1.5. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "activator/control/control.h"
#include "common/clock.h"

#define ROUNDS 9
#define TRIPS 3000

static const char status_request[] = "{\"v\":1,\"op\":\"status\"}";

/* What the real daemon would answer for a few hosts; the bare echo server
 * sends the same bytes so both sides move the same amount of data. */
static char status_reply[1024];
static size_t status_reply_len;

static void dispatch(const ctrl_request *request, ctrl_reply *reply, void *userdata)
{
    json_object *hosts = json_object_new_array();
    for (int i = 0; i < 3; i++) {
        json_object *host = json_object_new_object();
        char name[16];
        snprintf(name, sizeof(name), "web%d", i);
        json_object_object_add(host, "host", json_object_new_string(name));
        json_object_object_add(host, "state", json_object_new_string("serving"));
        json_object_object_add(host, "generation", json_object_new_int(3));
        json_object_array_add(hosts, host);
    }
    json_object *result = json_object_new_object();
    json_object_object_add(result, "hosts", hosts);
    ctrl_reply_ok(reply, result);
}

typedef struct server {
    char url[128];
    int stop_fd[2];
    int ready_fd[2];
    pthread_t thread;
} server;

static int on_stop(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
    return sd_event_exit(sd_event_source_get_event(s), 0);
}

static void *control_thread(void *arg)
{
    server *srv = arg;
    sd_event *event;
    ctrl_server *control = NULL;
    act_error err = {0};
    sd_event_new(&event);
    sd_event_add_io(event, NULL, srv->stop_fd[0], EPOLLIN, on_stop, NULL);
    ctrl_options options = {.url = srv->url, .dispatch = dispatch};
    if (ctrl_new(event, &options, &control, &err) < 0) {
        fprintf(stderr, "bench-control: %s\n", err.message);
        exit(1);
    }
    char ready = 1;
    (void)!write(srv->ready_fd[1], &ready, 1);
    sd_event_loop(event);
    ctrl_free(control);
    sd_event_unref(event);
    return NULL;
}

static nng_socket bare_rep;

static void *bare_thread(void *arg)
{
    for (;;) {
        nng_msg *msg;
        if (nng_recvmsg(bare_rep, &msg, 0) != 0)
            return NULL;
        nng_msg_clear(msg);
        nng_msg_append(msg, status_reply, status_reply_len);
        if (nng_sendmsg(bare_rep, msg, 0) != 0)
            nng_msg_free(msg);
    }
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One round of TRIPS status round trips; p50 and p99 in microseconds. */
static void measure(nng_socket req, uint64_t *p50, uint64_t *p99)
{
    static uint64_t samples[TRIPS];
    for (int i = 0; i < TRIPS; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        nng_msg *msg;
        if (nng_send(req, (void *)status_request, sizeof(status_request) - 1, 0) != 0 ||
            nng_recvmsg(req, &msg, 0) != 0) {
            fprintf(stderr, "bench-control: round trip failed\n");
            exit(1);
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        samples[i] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - t0;
        nng_msg_free(msg);
    }
    qsort(samples, TRIPS, sizeof(samples[0]), compare_u64);
    *p50 = samples[TRIPS / 2];
    *p99 = samples[TRIPS * 99 / 100];
}

static nng_socket dial(const char *url)
{
    nng_socket req;
    if (nng_req0_open(&req) != 0 || nng_dial(req, url, NULL, 0) != 0) {
        fprintf(stderr, "bench-control: cannot dial %s\n", url);
        exit(1);
    }
    nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, 5000);
    return req;
}

static uint64_t median(uint64_t *values, int n)
{
    qsort(values, (size_t)n, sizeof(values[0]), compare_u64);
    return values[n / 2];
}

int main(void)
{
    char dir[] = "/tmp/bench-control-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    server srv;
    snprintf(srv.url, sizeof(srv.url), "ipc://%s/control.ipc", dir);
    char bare_url[128];
    snprintf(bare_url, sizeof(bare_url), "ipc://%s/bare.ipc", dir);
    if (pipe2(srv.stop_fd, O_CLOEXEC) < 0 || pipe2(srv.ready_fd, O_CLOEXEC) < 0)
        return 1;
    pthread_create(&srv.thread, NULL, control_thread, &srv);
    char ready;
    (void)!read(srv.ready_fd[0], &ready, 1);

    nng_socket control_req = dial(srv.url);
    /* Take the real reply's bytes for the bare echo. */
    nng_msg *msg;
    nng_send(control_req, (void *)status_request, sizeof(status_request) - 1, 0);
    if (nng_recvmsg(control_req, &msg, 0) != 0)
        return 1;
    status_reply_len = nng_msg_len(msg) < sizeof(status_reply) ? nng_msg_len(msg) : 0;
    memcpy(status_reply, nng_msg_body(msg), status_reply_len);
    nng_msg_free(msg);

    nng_rep0_open(&bare_rep);
    nng_listen(bare_rep, bare_url, NULL, 0);
    pthread_t bare;
    pthread_create(&bare, NULL, bare_thread, NULL);
    nng_socket bare_req = dial(bare_url);

    uint64_t c50[ROUNDS], c99[ROUNDS], b50[ROUNDS], b99[ROUNDS];
    uint64_t warm50, warm99;
    measure(control_req, &warm50, &warm99);
    measure(bare_req, &warm50, &warm99);
    /* Interleaved rounds so drift in machine load hits both sides alike. */
    for (int r = 0; r < ROUNDS; r++) {
        measure(bare_req, &b50[r], &b99[r]);
        measure(control_req, &c50[r], &c99[r]);
    }
    double control50 = (double)median(c50, ROUNDS) / 1000, control99 = (double)median(c99, ROUNDS) / 1000;
    double bare50 = (double)median(b50, ROUNDS) / 1000, bare99 = (double)median(b99, ROUNDS) / 1000;
    printf("bench-control: %d rounds x %d status round trips over ipc, reply %zu bytes\n", ROUNDS,
           TRIPS, status_reply_len);
    printf("  bare NNG req/rep echo   p50 %8.1f us   p99 %8.1f us\n", bare50, bare99);
    printf("  ctrl_server status      p50 %8.1f us   p99 %8.1f us\n", control50, control99);
    printf("  RATIO p50 %.2f  p99 %.2f  (target <= 1.5)\n", control50 / bare50,
           control99 / bare99);

    nng_close(control_req);
    nng_close(bare_req);
    nng_close(bare_rep);
    pthread_join(bare, NULL);
    char stop = 1;
    (void)!write(srv.stop_fd[1], &stop, 1);
    pthread_join(srv.thread, NULL);
    char path[200];
    snprintf(path, sizeof(path), "%s/control.ipc", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/bare.ipc", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}
