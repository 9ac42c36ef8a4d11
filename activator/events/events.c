#include "activator/events/events.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/pubsub0/pub.h>

#include "activator/control/ipc_heal.h"
#include "activator/control/nng_errno.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/names.h"

/* Longest message we publish; a longer reason is cut to fit. */
#define EVENT_MAX_BYTES 2048

static const char *const kind_names[] = {
    [EV_EVENT_WAKING] = "waking",
    [EV_EVENT_ADMITTED] = "admitted",
    [EV_EVENT_RESTORING] = "restoring",
    [EV_EVENT_EXEC] = "exec",
    [EV_EVENT_READY] = "ready",
    [EV_EVENT_PUBLISHED] = "published",
    [EV_EVENT_SERVING] = "serving",
    [EV_EVENT_PARKING] = "parking",
    [EV_EVENT_PARKED] = "parked",
    [EV_EVENT_RETIRING] = "retiring",
    [EV_EVENT_RETIRED] = "retired",
    [EV_EVENT_FAILED] = "failed",
    [EV_EVENT_REFUSED] = "refused",
    [EV_EVENT_SWAP_STARTED] = "swap.started",
    [EV_EVENT_SWAP_DONE] = "swap.done",
    [EV_EVENT_SWAP_FAILED] = "swap.failed",
    [EV_EVENT_CLAIM_CHANGED] = "claim.changed",
    [EV_EVENT_PROVEN] = "proven",
    [EV_EVENT_PIN_FALLBACK] = "pin.fallback",
    [EV_EVENT_MOVE_DRAINING] = "move.draining",
    [EV_EVENT_MOVE_CHECKPOINTED] = "move.checkpointed",
    [EV_EVENT_MOVE_MOVING] = "move.moving",
    [EV_EVENT_MOVE_PROBING] = "move.probing",
    [EV_EVENT_MOVE_DONE] = "move.done",
    [EV_EVENT_MOVE_ROLLED_BACK] = "move.rolled_back",
    [EV_EVENT_FROZEN] = "frozen",
    [EV_EVENT_THAWED] = "thawed",
    [EV_EVENT_STAGE_PROGRESS] = "stage.progress",
    [EV_EVENT_STATE_OTHER_BUILD] = "state.other_build",
    [EV_EVENT_REPLICA_EXITED] = "replica.exited",
    [EV_EVENT_REPLICA_RESTARTED] = "replica.restarted",
    [EV_EVENT_FENCED] = "fenced",
    [EV_EVENT_UNFENCED] = "unfenced",
    [EV_EVENT_TAKEN_OVER] = "taken_over",
};
/* ev_event_kind_from_name compares against every entry. */
static_assert(ARRAY_SIZE(kind_names) == EV_EVENT__COUNT, "an event kind without a name");

struct ev_publisher {
    nng_socket socket;
    /* One send aio for every event, reused: nng_send would allocate (and
     * seed, and free) an aio per message, which cost more than the whole
     * formatting of the event. The publisher is the loop's alone. */
    nng_aio *send;
    uint64_t sequence;
    char box[ACT_NAME_MAX + 1];
    /* box as a JSON value, rendered once. */
    char box_json[2 * (ACT_NAME_MAX + 1) + 8];
    size_t box_json_len;
    ctrl_access access;
    char *url;
    /* The listener, probed and healed: a new subscriber is as much at the
     * mercy of NNG 1.5.2's IPC listener wedge as a control client. */
    ipc_heal *heal;
};

const char *ev_event_kind_name(ev_event_kind kind)
{
    if ((unsigned)kind >= EV_EVENT__COUNT)
        return NULL;
    return kind_names[kind];
}

int ev_event_kind_from_name(const char *name)
{
    assert(name);
    for (int i = 0; i < EV_EVENT__COUNT; i++)
        if (strcmp(kind_names[i], name) == 0)
            return i;
    return -1;
}

int ev_host_prefix(const char *host, char *buf, size_t size)
{
    assert(buf);
    if (!act_name_is_valid(host))
        return -EINVAL;
    int n = snprintf(buf, size, "host.%s.", host);
    return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

int ev_split(const char *msg, size_t len, size_t *topic_len, const char **json)
{
    assert(msg);
    assert(topic_len);
    assert(json);
    const char *space = memchr(msg, ' ', len);
    if (!space)
        return -EINVAL;
    *topic_len = (size_t)(space - msg);
    *json = space + 1;
    return 0;
}

/* A bounded buffer writer: formatting never allocates and never overruns;
 * on overflow the event is cut (only a long reason can cause it). */
typedef struct writer {
    char *buf;
    size_t len, cap;
} writer;

static void put(writer *w, const char *s, size_t n)
{
    if (n > w->cap - w->len)
        n = w->cap - w->len;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

#define PUT_LITERAL(w, s) put((w), (s), sizeof(s) - 1)

static void put_u64(writer *w, uint64_t value)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[sizeof(digits) - 1 - n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    put(w, digits + sizeof(digits) - n, n);
}

/* JSON string or null. Leaves room for the closing brace so a cut reason
 * still yields a valid object. Non-ASCII bytes become '?': the values are
 * our own names and sentences, and a subscriber must never get bad UTF-8. */
static void put_string(writer *w, const char *s)
{
    if (!s) {
        PUT_LITERAL(w, "null");
        return;
    }
    static const char hex[] = "0123456789abcdef";
    size_t limit = w->cap - 16; /* "...\"}" and slack */
    put(w, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        /* Copy runs of plain characters at once: names and digests are
         * nothing but, and per-byte puts would dominate the publish cost. */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
            p++;
        if (p > run) {
            size_t n = (size_t)(p - run);
            size_t room = w->len < limit ? limit - w->len : 0;
            put(w, (const char *)run, n < room ? n : room);
        }
        if (w->len >= limit) {
            PUT_LITERAL(w, "...");
            break;
        }
        if (!*p)
            break;
        unsigned char c = *p++;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            put(w, esc, 2);
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(w, esc, 6);
        } else {
            put(w, "?", 1);
        }
    }
    put(w, "\"", 1);
}

int ev_publish(ev_publisher *events, const ev_event *event)
{
    assert(events);
    assert(event);
    const char *kind = ev_event_kind_name(event->kind);
    if (!kind || !act_name_is_valid(event->host))
        return -EINVAL;

    char buf[EVENT_MAX_BYTES];
    writer w = {buf, 0, sizeof(buf)};
    uint64_t sequence = events->sequence + 1;
    size_t host_len = strlen(event->host);

    PUT_LITERAL(&w, "host.");
    put(&w, event->host, host_len);
    put(&w, ".", 1);
    put(&w, kind, strlen(kind));
    PUT_LITERAL(&w, " {\"seq\":");
    put_u64(&w, sequence);
    PUT_LITERAL(&w, ",\"time_usec\":");
    put_u64(&w, act_wallclock_usec());
    PUT_LITERAL(&w, ",\"box\":");
    put(&w, events->box_json, events->box_json_len);
    PUT_LITERAL(&w, ",\"event\":\"");
    put(&w, kind, strlen(kind));
    PUT_LITERAL(&w, "\",\"host\":\"");
    put(&w, event->host, host_len);
    PUT_LITERAL(&w, "\",\"generation\":");
    if (event->generation)
        put_u64(&w, event->generation);
    else
        PUT_LITERAL(&w, "null");
    PUT_LITERAL(&w, ",\"version\":");
    put_string(&w, event->version);
    PUT_LITERAL(&w, ",\"digest\":");
    put_string(&w, event->digest);
    PUT_LITERAL(&w, ",\"pid\":");
    if (event->pid > 0)
        put_u64(&w, (uint64_t)event->pid);
    else
        PUT_LITERAL(&w, "null");
    PUT_LITERAL(&w, ",\"reason\":");
    put_string(&w, event->reason);
    PUT_LITERAL(&w, "}");

    /* PUB never blocks: a subscriber whose queue is full loses this message
     * (and sees the gap in seq), the loop never waits for it. The aio's
     * zero timeout says so too; the wait returns at once. */
    nng_msg *msg = NULL;
    int rv = nng_msg_alloc(&msg, w.len);
    if (rv != 0)
        return -ctrl_nng_errno(rv);
    memcpy(nng_msg_body(msg), buf, w.len);
    nng_aio_set_msg(events->send, msg);
    nng_send_aio(events->socket, events->send);
    nng_aio_wait(events->send);
    if ((rv = nng_aio_result(events->send)) != 0) {
        nng_msg_free(nng_aio_get_msg(events->send));
        return -ctrl_nng_errno(rv);
    }
    events->sequence = sequence;
    return 0;
}

uint64_t ev_sequence(const ev_publisher *events)
{
    assert(events);
    return events->sequence;
}

/* NNG thread, before a pipe joins the socket: every role of the control
 * socket may watch. Closing the pipe here keeps it from ever seeing a
 * message. And after a pipe left, for the listener's healer. */
static void on_pipe(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    ev_publisher *events = arg;
    if (ev == NNG_PIPE_EV_REM_POST) {
        ipc_heal_note_pipe_gone(events->heal, pipe);
        return;
    }
    /* The healer's probe (the daemon itself) subscribes to nothing and goes
     * within the probe's timeout; it is no subscriber to judge or log. */
    if (ipc_heal_note_pipe(events->heal, pipe))
        return;
    ctrl_peer peer;
    ctrl_peer_of_ipc_pipe(&events->access, pipe, &peer);
    if (peer.has_role)
        return;
    char message[1024];
    ctrl_peer_refusal(&events->access, &peer, NULL, message, sizeof(message));
    act_log(LOG_NOTICE, "events: refused a subscriber: %s", message);
    nng_pipe_close(pipe);
}

int ev_new(const ev_options *options, ev_publisher **out, act_error *err)
{
    assert(options);
    assert(out);
    if (!options->url || strncmp(options->url, "ipc://", 6) != 0)
        return act_error_set(err, EINVAL,
                             "Events=%s is not an ipc:// URL; use ipc:///path/events.ipc",
                             options->url ? options->url : "(unset)");
    if (options->box && !act_name_is_valid(options->box))
        return act_error_set(err, EINVAL, "events: box id \"%s\" is not a valid name",
                             options->box);

    ev_publisher *events = calloc(1, sizeof(*events));
    if (!events)
        return act_error_set(err, ENOMEM, "out of memory for the events publisher");
    if (options->box)
        snprintf(events->box, sizeof(events->box), "%s", options->box);
    writer box_json = {events->box_json, 0, sizeof(events->box_json)};
    put_string(&box_json, options->box ? events->box : NULL);
    events->box_json_len = box_json.len;
    events->access = options->access;

    events->url = strdup(options->url);
    if (!events->url) {
        free(events);
        return act_error_set(err, ENOMEM, "out of memory for the events publisher");
    }
    int rv = nng_pub0_open(&events->socket);
    if (rv != 0) {
        free(events->url);
        free(events);
        return act_error_set(err, ctrl_nng_errno(rv), "events: opening a PUB socket: %s",
                             nng_strerror(rv));
    }
    int buffer = options->send_buffer ? options->send_buffer : 1024;
    if ((rv = nng_aio_alloc(&events->send, NULL, NULL)) == 0)
        nng_aio_set_timeout(events->send, NNG_DURATION_ZERO);
    if (rv != 0 || (rv = nng_socket_set_int(events->socket, NNG_OPT_SENDBUF, buffer)) != 0 ||
        (rv = nng_pipe_notify(events->socket, NNG_PIPE_EV_ADD_PRE, on_pipe, events)) != 0 ||
        (rv = nng_pipe_notify(events->socket, NNG_PIPE_EV_REM_POST, on_pipe, events)) != 0) {
        int r = act_error_set(err, ctrl_nng_errno(rv), "Events=%s: %s", options->url,
                              nng_strerror(rv));
        ev_free(events);
        return r;
    }
    ipc_heal_options heal = {
        .what = "Events",
        .socket = events->socket,
        .url = events->url,
        .mode = ctrl_ipc_socket_mode(options->ipc_permissions, &options->access),
        .access = &events->access,
        .peer_protocol = 0x21, /* SUB v0 */
    };
    /* Set before the listener starts: the pipe callback reads it. */
    int r = ipc_heal_new(&heal, &events->heal, err);
    if (r == 0)
        r = ipc_heal_listen(events->heal, options->probe_listener, err);
    if (r < 0) {
        ev_free(events);
        return r;
    }
    *out = events;
    return 0;
}

void ev_free(ev_publisher *events)
{
    if (!events)
        return;
    ipc_heal_stop(events->heal);
    nng_close(events->socket);
    if (events->send)
        nng_aio_free(events->send);
    /* After the socket: its pipe callback notes the healer's probe. */
    ipc_heal_free(events->heal);
    free(events->url);
    free(events);
}
