/* The daemon's events (NNG SUB): "host.<host>.<event> <json>" messages,
 * received and parsed. */
#include "tests/driver/daemon_driver.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/protocol/pubsub0/sub.h>

#include "common/clock.h"

int dd_events_connect(dd_daemon *d, act_error *err)
{
    dd_events_close(d);
    int rv = nng_sub0_open(&d->sub);
    if (rv != 0)
        return act_error_set(err, EIO, "nng_sub0_open: %s", nng_strerror(rv));
    d->sub_open = true;
    nng_socket_set(d->sub, NNG_OPT_SUB_SUBSCRIBE, "", 0);
    nng_socket_set_int(d->sub, NNG_OPT_RECVBUF, 8192);
    /* No redial once the daemon is gone: each start connects a subscriber
     * of its own, and NNG 1.5.2's nng_close can hang for good when it meets
     * a dial in progress (its endpoint close is asynchronous; fixed after
     * 1.5.2, nanomsg/nng#1499), which a daemon that just exited would leave
     * behind every 100 ms. */
    nng_socket_set_ms(d->sub, NNG_OPT_RECONNMINT, 3600 * 1000);
    nng_socket_set_ms(d->sub, NNG_OPT_RECONNMAXT, 3600 * 1000);
    rv = nng_dial(d->sub, d->events_url, NULL, 0);
    if (rv != 0)
        return act_error_set(err, EIO, "cannot subscribe to %s: %s", d->events_url,
                             nng_strerror(rv));
    return 0;
}

void dd_events_close(dd_daemon *d)
{
    if (d->sub_open && !dd_nng_close_bounded(d->sub))
        fprintf(stderr,
                "driver: closing the event subscriber of %s did not return within %d "
                "ms (NNG 1.5.2's close can hang); left behind\n",
                d->events_url, DD_NNG_CLOSE_TIMEOUT_MS);
    d->sub_open = false;
}

static void copy_json_string(json_object *obj, const char *key, char *out, size_t size)
{
    snprintf(out, size, "%s", dd_json_str(obj, key));
}

int dd_event_parse(const char *data, size_t len, dd_event *out, act_error *err)
{
    const char *space = memchr(data, ' ', len);
    if (!space)
        return act_error_set(err, EBADMSG, "an event without a space between topic and JSON: %.*s",
                             (int)len, data);
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return act_error_set(err, ENOMEM, "out of memory");
    json_object *obj =
        json_tokener_parse_ex(tok, space + 1, (int)(len - (size_t)(space + 1 - data)));
    json_tokener_free(tok);
    if (!obj)
        return act_error_set(err, EBADMSG, "an event whose JSON does not parse: %.*s", (int)len,
                             data);
    memset(out, 0, sizeof(*out));
    out->seq = dd_json_u64(obj, "seq");
    out->time_usec = dd_json_u64(obj, "time_usec");
    out->generation = dd_json_u64(obj, "generation");
    out->pid = (int64_t)dd_json_u64(obj, "pid");
    copy_json_string(obj, "event", out->name, sizeof(out->name));
    copy_json_string(obj, "host", out->host, sizeof(out->host));
    copy_json_string(obj, "box", out->box, sizeof(out->box));
    copy_json_string(obj, "version", out->version, sizeof(out->version));
    copy_json_string(obj, "reason", out->reason, sizeof(out->reason));
    /* The topic must say the same as the body: host.<host>.<event>. */
    char topic[160];
    snprintf(topic, sizeof(topic), "host.%s.%s", out->host, out->name);
    int r = 0;
    if (strlen(topic) != (size_t)(space - data) || memcmp(topic, data, strlen(topic)) != 0)
        r = act_error_set(err, EBADMSG, "event topic %.*s does not match its body %s",
                          (int)(space - data), data, json_object_to_json_string(obj));
    json_object_put(obj);
    return r;
}

int dd_event_recv(dd_daemon *d, int timeout_ms, dd_event *out, act_error *err)
{
    if (!d->sub_open)
        return act_error_set(err, ENOTCONN, "the event subscriber is not connected");
    nng_msg *msg = NULL;
    int rv;
    if (timeout_ms <= 0) {
        rv = nng_recvmsg(d->sub, &msg, NNG_FLAG_NONBLOCK);
    } else {
        nng_socket_set_ms(d->sub, NNG_OPT_RECVTIMEO, timeout_ms);
        rv = nng_recvmsg(d->sub, &msg, 0);
    }
    if (rv == NNG_EAGAIN || rv == NNG_ETIMEDOUT)
        return 0;
    if (rv != 0)
        return act_error_set(err, EIO, "receiving events: %s", nng_strerror(rv));
    int r = dd_event_parse(nng_msg_body(msg), nng_msg_len(msg), out, err);
    nng_msg_free(msg);
    return r < 0 ? r : 1;
}

void dd_events_drain(dd_daemon *d)
{
    nng_msg *msg = NULL;
    while (d->sub_open && nng_recvmsg(d->sub, &msg, NNG_FLAG_NONBLOCK) == 0)
        nng_msg_free(msg);
}

bool dd_event_wait(dd_daemon *d, const char *host, const char *name, int timeout_ms,
                   void (*seen)(const dd_event *event, void *userdata), void *userdata,
                   dd_event *out)
{
    uint64_t deadline = act_now_usec() + (uint64_t)timeout_ms * 1000;
    for (;;) {
        uint64_t now = act_now_usec();
        if (now >= deadline)
            return false;
        dd_event event;
        act_error err = {0};
        int r = dd_event_recv(d, (int)((deadline - now) / 1000 + 1), &event, &err);
        if (r == -EBADMSG)
            continue;
        if (r <= 0)
            return false;
        if (seen)
            seen(&event, userdata);
        if (strcmp(event.host, host) == 0 && strcmp(event.name, name) == 0) {
            if (out)
                *out = event;
            return true;
        }
    }
}
