/* The soak's own sockets to each box, open for the whole run: one NNG REQ
 * socket for every control request the soak makes (a context per request,
 * so two threads may ask at once) and one SUB socket reading the box's
 * events into its hosts' histories. Both redial by themselves when a box
 * is killed, handed over or restarted, so nothing is closed on the way.
 *
 * Why not a socket per request, as the tests' driver opens: NNG 1.5.2's
 * close can wait for good when it meets a pipe being set up or torn down
 * (nanomsg/nng#1499, fixed after 1.5.2), and a soak restarts a box every
 * half minute: closes left behind by the hundred. Here the only closes are
 * at the end, while every daemon still runs.
 *
 * A link can stop reaching its box for good: NNG 1.5.2's dialer gives up
 * redialing after some connect errors (dialer_connect_cb takes NNG_ECLOSED
 * as "no further action"). A request the link could not even hand to a
 * connection is then asked again on a fresh socket, as activatorctl asks;
 * if that one is answered, the daemon was there all along and the link is
 * left for fresh sockets (said once, and counted in the summary). A
 * request that did reach a connection is never asked twice: it may have
 * run. */
#include "soak.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/pubsub0/sub.h>
#include <nng/protocol/reqrep0/req.h>

/* How soon a link dials again after its box went away, at first and at
 * most: a restarted box is back within a second. */
#define REDIAL_MIN_MS 50
#define REDIAL_MAX_MS 500
/* How long the events thread waits for one before it looks at the stop
 * flag again. */
#define EVENT_POLL_MS 200

typedef struct events_arg {
    soak *s;
    size_t box;
} events_arg;

static events_arg events_args[FL_BOXES_MAX];

static void *events_run(void *arg)
{
    events_arg *a = arg;
    soak_link *link = &a->s->links[a->box];
    while (!atomic_load(&a->s->stop_events)) {
        nng_msg *msg = NULL;
        int rv = nng_recvmsg(link->sub, &msg, 0);
        if (rv == NNG_ETIMEDOUT)
            continue;
        if (rv != 0)
            break; /* closed */
        dd_event event;
        act_error err = {0};
        if (dd_event_parse(nng_msg_body(msg), nng_msg_len(msg), &event, &err) == 0)
            soak_history_event(a->s, a->box, &event);
        else
            fprintf(stderr, "soak: %s sent an event that does not parse: %s\n", fl_box_name(a->box),
                    err.message);
        nng_msg_free(msg);
    }
    return NULL;
}

static int redial_options(nng_socket socket)
{
    int rv = nng_socket_set_ms(socket, NNG_OPT_RECONNMINT, REDIAL_MIN_MS);
    if (rv == 0)
        rv = nng_socket_set_ms(socket, NNG_OPT_RECONNMAXT, REDIAL_MAX_MS);
    return rv;
}

static int open_request_socket(soak_link *link, const char *url)
{
    int rv = nng_req0_open(&link->req);
    if (rv != 0)
        return rv;
    link->req_open = true;
    /* Never sent twice: a resend would run a wake or a swap again. A
     * request whose connection drops fails (NNG_ECONNRESET). */
    rv = nng_socket_set_ms(link->req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    if (rv == 0)
        rv = nng_socket_set_size(link->req, NNG_OPT_RECVMAXSZ, 16 * 1024 * 1024);
    if (rv == 0)
        rv = redial_options(link->req);
    /* Non-blocking: the first dial happens in the background and is
     * retried until the box answers. */
    if (rv == 0)
        rv = nng_dial(link->req, url, NULL, NNG_FLAG_NONBLOCK);
    return rv;
}

static int open_subscriber(soak_link *link, const char *url)
{
    int rv = nng_sub0_open(&link->sub);
    if (rv != 0)
        return rv;
    link->sub_open = true;
    rv = nng_socket_set(link->sub, NNG_OPT_SUB_SUBSCRIBE, "", 0);
    if (rv == 0)
        rv = nng_socket_set_int(link->sub, NNG_OPT_RECVBUF, 8192);
    if (rv == 0)
        rv = nng_socket_set_ms(link->sub, NNG_OPT_RECVTIMEO, EVENT_POLL_MS);
    if (rv == 0)
        rv = redial_options(link->sub);
    if (rv == 0)
        rv = nng_dial(link->sub, url, NULL, NNG_FLAG_NONBLOCK);
    return rv;
}

int soak_links_open(soak *s)
{
    atomic_store(&s->stop_events, false);
    for (size_t b = 0; b < s->n_boxes; b++) {
        soak_link *link = &s->links[b];
        const dd_daemon *d = &s->fleet.boxes[b].drv;
        int rv = open_request_socket(link, d->control_url);
        if (rv != 0) {
            fprintf(stderr, "soak: a request socket to %s: %s\n", d->control_url, nng_strerror(rv));
            return -1;
        }
        rv = open_subscriber(link, d->events_url);
        if (rv != 0) {
            fprintf(stderr, "soak: a subscriber to %s: %s\n", d->events_url, nng_strerror(rv));
            return -1;
        }
        events_args[b] = (events_arg){.s = s, .box = b};
        if (pthread_create(&link->events_thread, NULL, events_run, &events_args[b]) != 0)
            abort();
        link->events_running = true;
    }
    return 0;
}

void soak_links_close(soak *s)
{
    atomic_store(&s->stop_events, true);
    for (size_t b = 0; b < s->n_boxes; b++) {
        soak_link *link = &s->links[b];
        if (link->events_running)
            pthread_join(link->events_thread, NULL);
        link->events_running = false;
        if (link->sub_open && !dd_nng_close_bounded(link->sub))
            fprintf(stderr, "soak: closing the subscriber to %s did not return in time\n",
                    fl_box_name(b));
        if (link->req_open && !dd_nng_close_bounded(link->req))
            fprintf(stderr, "soak: closing the request socket to %s did not return in time\n",
                    fl_box_name(b));
        link->sub_open = link->req_open = false;
    }
}

/* Runs one step of a request (a send or a receive) on aio and waits for
 * it, within what is left until deadline_ms. */
static int aio_step(nng_aio *aio, uint64_t deadline_ms, void (*step)(nng_ctx, nng_aio *),
                    nng_ctx ctx)
{
    uint64_t now = soak_now_ms();
    if (now >= deadline_ms)
        return NNG_ETIMEDOUT;
    nng_aio_set_timeout(aio, (nng_duration)(deadline_ms - now));
    step(ctx, aio);
    nng_aio_wait(aio);
    return nng_aio_result(aio);
}

/* How long the fresh socket is given once the link failed. */
#define FRESH_TIMEOUT_MS 5000

static int link_request(soak *s, size_t box, int timeout_ms, const char *body, size_t len,
                        char **reply, bool *sent)
{
    *reply = NULL;
    *sent = false;
    uint64_t deadline = soak_now_ms() + (uint64_t)timeout_ms;
    nng_ctx ctx;
    int rv = nng_ctx_open(&ctx, s->links[box].req);
    if (rv != 0)
        return rv;
    nng_aio *aio = NULL;
    nng_msg *msg = NULL;
    rv = nng_aio_alloc(&aio, NULL, NULL);
    if (rv == 0)
        rv = nng_msg_alloc(&msg, 0);
    if (rv == 0)
        rv = nng_msg_append(msg, body, len);
    if (rv == 0) {
        nng_aio_set_msg(aio, msg);
        rv = aio_step(aio, deadline, nng_ctx_send, ctx);
        if (rv == 0) {
            msg = NULL; /* sent: NNG owns it now */
            *sent = true;
        }
    }
    if (rv == 0)
        rv = aio_step(aio, deadline, nng_ctx_recv, ctx);
    if (rv == 0) {
        nng_msg *answer = nng_aio_get_msg(aio);
        *reply = strndup(nng_msg_body(answer), nng_msg_len(answer));
        nng_msg_free(answer);
        if (!*reply)
            rv = NNG_ENOMEM;
    }
    if (msg)
        nng_msg_free(msg);
    if (aio)
        nng_aio_free(aio);
    nng_ctx_close(ctx);
    return rv;
}

int soak_link_request(soak *s, size_t box, int timeout_ms, const char *body, size_t len,
                      char **reply)
{
    soak_link *link = &s->links[box];
    const char *url = s->fleet.boxes[box].drv.control_url;
    if (atomic_load(&link->stuck))
        return dd_request_nng(url, body, len, timeout_ms, reply);
    bool sent;
    int rv = link_request(s, box, timeout_ms, body, len, reply, &sent);
    if (rv == 0 || sent)
        return rv;
    int fresh = dd_request_nng(url, body, len, FRESH_TIMEOUT_MS, reply);
    if (fresh != 0)
        return rv;
    if (!atomic_exchange(&link->stuck, true)) {
        link->stuck_at_ms = soak_now_ms();
        fprintf(stderr,
                "soak: +%.3f s: the request link to %s could not reach it (%s) while a fresh "
                "socket was answered: NNG's dialer gave up; fresh sockets from here on\n",
                (double)(link->stuck_at_ms - s->start_ms) / 1000.0, fl_box_name(box),
                nng_strerror(rv));
        fflush(stdout);
    }
    return 0;
}
