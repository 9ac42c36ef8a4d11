#include "activator/control/control.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/tls/tls.h>

#include "activator/control/handoff.h"
#include "activator/control/ipc_heal.h"
#include "activator/control/nng_errno.h"
#include "activator/control/peer.h"
#include "activator/control/tls_engine.h"
#include "common/clock.h"
#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/fileio.h"
#include "common/log.h"

typedef enum slot_state {
    SLOT_RECV, /* NNG is receiving into the context */
    SLOT_LOOP, /* a request is with the loop (queued or awaiting a reply) */
    SLOT_SEND, /* NNG is sending the reply */
} slot_state;

/* One REP context. Its address is the reply handle the daemon holds. */
struct ctrl_reply {
    ctrl_handoff_node node; /* first, so a node pointer is a slot pointer */
    ctrl_server *control;
    nng_ctx ctx;
    nng_aio *aio;
    nng_msg *msg; /* the request while with the loop; reused for the reply */
    slot_state state;
    ctrl_peer peer; /* who sent the request */
    ctrl_op op;
    const char *op_name;
    uint64_t received_usec;
};

/* One connected pipe and its peer, judged when it connected. */
typedef struct pipe_peer {
    uint32_t pipe_id;
    ctrl_peer peer;
} pipe_peer;

struct ctrl_server {
    nng_socket socket;
    bool socket_open;
    nng_listener tls_listener; /* zeroed (id -1) without ControlListen= */
    bool have_tls;
    /* The connected pipes' peers: NNG threads add and remove them as pipes
     * come and go, and look them up as requests arrive. */
    pthread_mutex_t peers_lock;
    pipe_peer *peers;
    size_t n_peers, cap_peers;
    nng_tls_config *tls_config;
    ipc_heal *heal; /* the Control= listener, probed and healed (ipc_heal.h) */
    ctrl_handoff *handoff;
    ctrl_options options;
    char *url;
    unsigned n_slots;
    ctrl_reply *slots;
};

static void start_recv(ctrl_reply *slot)
{
    slot->state = SLOT_RECV;
    nng_ctx_recv(slot->ctx, slot->aio);
}

static bool is_tls_pipe(const ctrl_server *control, nng_pipe pipe)
{
    int tls_id = nng_listener_id(control->tls_listener);
    return tls_id > 0 && nng_listener_id(nng_pipe_listener(pipe)) == tls_id;
}

/* NNG thread: a pipe connects (before it can deliver a request) or goes.
 * Its peer is judged once, now: a local peer's groups are read while the
 * process that connected is there to read them (peer.h). */
static void on_pipe(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    ctrl_server *control = arg;
    uint32_t id = (uint32_t)nng_pipe_id(pipe);
    if (ev == NNG_PIPE_EV_REM_POST) {
        ipc_heal_note_pipe_gone(control->heal, pipe);
        pthread_mutex_lock(&control->peers_lock);
        for (size_t i = 0; i < control->n_peers; i++)
            if (control->peers[i].pipe_id == id) {
                control->peers[i] = control->peers[--control->n_peers];
                break;
            }
        pthread_mutex_unlock(&control->peers_lock);
        return;
    }
    pipe_peer entry = {.pipe_id = id};
    if (is_tls_pipe(control, pipe)) {
        /* The listener requires a client certificate signed by
         * TLSClientCA=, so a pipe there is authenticated: its CN says who. */
        char cn[ACT_CN_MAX + 1];
        int r = ctrl_tls_peer_cn(pipe, cn, sizeof(cn));
        if (r == 0 || r == -EBADMSG)
            ctrl_peer_judge_cn(&control->options.access, r == 0 ? cn : NULL, &entry.peer);
        else
            entry.peer = (ctrl_peer){.kind = CTRL_PEER_UNKNOWN};
    } else {
        /* The healer's probe (the daemon itself) is judged like any peer:
         * it sends nothing, and goes within the probe's timeout. */
        ipc_heal_note_pipe(control->heal, pipe);
        ctrl_peer_of_ipc_pipe(&control->options.access, pipe, &entry.peer);
    }
    pthread_mutex_lock(&control->peers_lock);
    bool added = false;
    if (control->n_peers == control->cap_peers) {
        size_t cap = control->cap_peers ? 2 * control->cap_peers : 16;
        pipe_peer *grown = realloc(control->peers, cap * sizeof(*grown));
        if (grown) {
            control->peers = grown;
            control->cap_peers = cap;
        }
    }
    if (control->n_peers < control->cap_peers) {
        control->peers[control->n_peers++] = entry;
        added = true;
    }
    pthread_mutex_unlock(&control->peers_lock);
    if (!added) /* a pipe whose peer we cannot remember could never be answered fairly */
        nng_pipe_close(pipe);
}

/* NNG thread: the peer of the pipe a request came in on. */
static void peer_of_request(ctrl_server *control, nng_msg *msg, ctrl_peer *out)
{
    uint32_t id = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));
    *out = (ctrl_peer){.kind = CTRL_PEER_UNKNOWN};
    pthread_mutex_lock(&control->peers_lock);
    for (size_t i = 0; i < control->n_peers; i++)
        if (control->peers[i].pipe_id == id) {
            *out = control->peers[i].peer;
            break;
        }
    pthread_mutex_unlock(&control->peers_lock);
}

static void on_aio(void *arg)
{
    ctrl_reply *slot = arg;
    int rv = nng_aio_result(slot->aio);

    if (slot->state == SLOT_SEND) {
        if (rv != 0) /* a failed send leaves the message with us */
            nng_msg_free(nng_aio_get_msg(slot->aio));
        if (rv == NNG_ECLOSED)
            return;
        start_recv(slot);
        return;
    }

    if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
        return;
    if (rv != 0) {
        start_recv(slot);
        return;
    }
    slot->msg = nng_aio_get_msg(slot->aio);
    nng_aio_set_msg(slot->aio, NULL);
    peer_of_request(slot->control, slot->msg, &slot->peer);
    slot->received_usec = act_now_usec();
    slot->state = SLOT_LOOP;
    ctrl_handoff_push(slot->control->handoff, &slot->node);
}

static int send_reply(ctrl_reply *slot, const char *outcome, const char *json, size_t len)
{
    if (slot->state != SLOT_LOOP) {
        act_log(LOG_ERR, "control: a reply was sent twice for one request; the second is dropped");
        return -EALREADY;
    }
    ctrl_server *control = slot->control;
    nng_msg *msg = TAKE_PTR(slot->msg);
    nng_msg_clear(msg);
    int rv = nng_msg_append(msg, json, len);
    if (rv != 0) {
        nng_msg_free(msg);
        /* The client waits for a reply it will not get; its timeout ends it. */
        act_log(LOG_ERR, "control: out of memory building a %zu-byte reply", len);
        start_recv(slot);
        return -ENOMEM;
    }
    if (control->options.observe)
        control->options.observe(slot->op_name, outcome, act_now_usec() - slot->received_usec,
                                 control->options.userdata);
    slot->state = SLOT_SEND;
    nng_aio_set_msg(slot->aio, msg);
    nng_ctx_send(slot->ctx, slot->aio);
    return 0;
}

/* Sends reply as plain JSON text; code names the outcome for the observer. */
static int send_json(ctrl_reply *slot, const char *code, json_object *reply)
{
    size_t len;
    const char *json = json_object_to_json_string_length(reply, JSON_C_TO_STRING_PLAIN, &len);
    return send_reply(slot, code, json, len);
}

int ctrl_reply_ok(ctrl_reply *slot, json_object *result_arg)
{
    _cleanup_(json_object_putp) json_object *result = result_arg;
    _cleanup_(json_object_putp) json_object *reply = json_object_new_object();
    if (!reply)
        return ctrl_reply_error(slot, "internal", "out of memory building the reply");
    json_object_object_add(reply, "ok", json_object_new_boolean(1));
    json_object_object_add(reply, "result", TAKE_PTR(result));
    return send_json(slot, "ok", reply);
}

static int reply_error_message(ctrl_reply *slot, const char *code, const char *message,
                               json_object *details_arg)
{
    _cleanup_(json_object_putp) json_object *details = details_arg;
    _cleanup_(json_object_putp) json_object *reply = json_object_new_object();
    _cleanup_(json_object_putp) json_object *error = json_object_new_object();
    if (!reply || !error) {
        static const char fallback[] =
            "{\"ok\":false,\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        return send_reply(slot, "internal", fallback, sizeof(fallback) - 1);
    }
    json_object_object_add(error, "code", json_object_new_string(code));
    json_object_object_add(error, "message", json_object_new_string(message));
    if (details && json_object_is_type(details, json_type_object)) {
        json_object_object_foreach(details, key, value)
            json_object_object_add(error, key, json_object_get(value));
    }
    json_object_object_add(reply, "ok", json_object_new_boolean(0));
    json_object_object_add(reply, "error", TAKE_PTR(error));
    return send_json(slot, code, reply);
}

static int reply_error_v(ctrl_reply *slot, const char *code, json_object *details,
                         const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));
static int reply_error_v(ctrl_reply *slot, const char *code, json_object *details,
                         const char *fmt, va_list ap)
{
    char message[1024];
    vsnprintf(message, sizeof(message), fmt, ap);
    return reply_error_message(slot, code, message, details);
}

int ctrl_reply_error(ctrl_reply *slot, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = reply_error_v(slot, code, NULL, fmt, ap);
    va_end(ap);
    return r;
}

int ctrl_reply_error_details(ctrl_reply *slot, const char *code, json_object *details,
                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = reply_error_v(slot, code, details, fmt, ap);
    va_end(ap);
    return r;
}

ctrl_op ctrl_reply_op(const ctrl_reply *slot)
{
    return slot->op;
}

/* Refuses op (NULL: not known) to the peer, saying what role it needs,
 * what the peer is and how to get the role. */
static void refuse(ctrl_reply *slot, const ctrl_op_spec *op)
{
    char message[1024];
    ctrl_peer_refusal(&slot->control->options.access, &slot->peer, op, message, sizeof(message));
    act_log(LOG_NOTICE, "control: refused: %s", message);
    reply_error_message(slot, CTRL_REQ_FORBIDDEN, message, NULL);
}

/* Loop thread: one received request. */
static void on_request(ctrl_handoff_node *node, void *userdata)
{
    ctrl_reply *slot = (ctrl_reply *)node;
    ctrl_server *control = userdata;
    slot->op_name = "none";

    /* Parsed before a peer without a role is refused, so that the refusal
     * can name the op; a request that does not parse names none. */
    ctrl_request request;
    ctrl_request_error parse_err;
    bool parsed = ctrl_request_parse(nng_msg_body(slot->msg), nng_msg_len(slot->msg), &request,
                                     &parse_err) == 0;
    const ctrl_op_spec *spec = parsed ? ctrl_op_spec_of(request.op) : NULL;
    if (parsed) {
        slot->op = request.op;
        slot->op_name = ctrl_op_name(request.op);
    }
    if (!slot->peer.has_role || (spec && slot->peer.role < spec->role)) {
        refuse(slot, spec);
        return;
    }
    if (!parsed) {
        reply_error_message(slot, parse_err.code, parse_err.error.message, NULL);
        return;
    }
    control->options.dispatch(&request, slot, control->options.userdata);
}

const char *ctrl_tls_engine(void)
{
    return nng_tls_engine_name();
}

static int read_pem(const char *what, const char *path, char **out, act_error *err)
{
    size_t len;
    int r = act_read_file(AT_FDCWD, path, 1024 * 1024, out, &len, err);
    if (r < 0)
        return act_error_prefix(err, "%s %s", what, path);
    return 0;
}

static int setup_tls(ctrl_server *control, act_error *err)
{
    const ctrl_options *o = &control->options;
    if (!o->tls_certificate || !o->tls_key || !o->tls_client_ca)
        return act_error_set(err, EINVAL,
                             "ControlListen=%s needs TLSCertificate=, TLSKey= and TLSClientCA=; "
                             "set all three",
                             o->tls_url);
    if (strncmp(o->tls_url, "tls+tcp://", 10) != 0)
        return act_error_set(err, EINVAL,
                             "ControlListen=%s is not a tls+tcp://ADDR:PORT URL; the remote "
                             "listener is TLS only",
                             o->tls_url);

    /* The listener's configuration is of the engine in force when it is
     * allocated: ours, which tells the client certificate's CN. */
    int r = ctrl_tls_engine_install(err);
    if (r < 0)
        return act_error_prefix(err, "ControlListen=%s", o->tls_url);
    int rv = nng_tls_config_alloc(&control->tls_config, NNG_TLS_MODE_SERVER);
    if (rv == NNG_ENOTSUP)
        return act_error_set(err, EOPNOTSUPP,
                             "ControlListen=%s: this build of NNG has no TLS support (engine "
                             "\"%s\"); remove ControlListen= or install an NNG built with TLS",
                             o->tls_url, nng_tls_engine_name());
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv), "TLS configuration: %s", nng_strerror(rv));

    _cleanup_free_ char *cert = NULL, *key = NULL;
    r = read_pem("TLSCertificate=", o->tls_certificate, &cert, err);
    if (r < 0)
        return r;
    r = read_pem("TLSKey=", o->tls_key, &key, err);
    if (r < 0)
        return r;
    rv = nng_tls_config_own_cert(control->tls_config, cert, key, NULL);
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv),
                             "TLSCertificate=%s / TLSKey=%s: %s; check both are PEM and belong "
                             "together",
                             o->tls_certificate, o->tls_key, nng_strerror(rv));
    rv = nng_tls_config_ca_file(control->tls_config, o->tls_client_ca);
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv),
                             "TLSClientCA=%s: %s; name a PEM file of CA certificates",
                             o->tls_client_ca, nng_strerror(rv));
    rv = nng_tls_config_auth_mode(control->tls_config, NNG_TLS_AUTH_MODE_REQUIRED);
    if (rv == 0)
        rv = nng_listener_create(&control->tls_listener, control->socket, o->tls_url);
    if (rv == 0)
        rv = nng_listener_set_ptr(control->tls_listener, NNG_OPT_TLS_CONFIG, control->tls_config);
    if (rv == 0)
        rv = nng_listener_start(control->tls_listener, 0);
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv),
                             "ControlListen=%s: %s; check the address is local and free",
                             o->tls_url, nng_strerror(rv));
    control->have_tls = true;
    return 0;
}

static int listen_local(ctrl_server *control, act_error *err)
{
    const char *url = control->options.url;
    if (strncmp(url, "ipc://", 6) != 0)
        /* Only ipc:// tells us the peer's uid; anything else would be open to
         * whoever can reach the address. */
        return act_error_set(err, EINVAL,
                             "Control=%s is not an ipc:// URL; the local control socket must "
                             "be ipc:// (use ControlListen=tls+tcp://... for remote access)",
                             url);
    ipc_heal_options heal = {
        .what = "Control",
        .socket = control->socket,
        .url = url,
        .mode = ctrl_ipc_socket_mode(control->options.ipc_permissions, &control->options.access),
        .access = &control->options.access,
        .peer_protocol = 0x30, /* REQ v0 */
    };
    /* Set before the listener starts: the pipe callback reads it. */
    int r = ipc_heal_new(&heal, &control->heal, err);
    if (r < 0)
        return r;
    return ipc_heal_listen(control->heal, true, err);
}

void ctrl_free(ctrl_server *control)
{
    if (!control)
        return;
    ipc_heal_stop(control->heal);
    if (control->socket_open)
        nng_close(control->socket); /* cancels every context's operation */
    /* After the socket: its pipe callback notes the healer's probe. */
    ipc_heal_free(control->heal);
    for (unsigned i = 0; control->slots && i < control->n_slots; i++) {
        ctrl_reply *slot = &control->slots[i];
        if (slot->aio)
            nng_aio_free(slot->aio); /* waits for a running callback */
        if (slot->msg)
            nng_msg_free(slot->msg);
    }
    ctrl_handoff_free(control->handoff);
    if (control->tls_config)
        nng_tls_config_free(control->tls_config);
    pthread_mutex_destroy(&control->peers_lock);
    free(control->peers);
    free(control->slots);
    free(control->url);
    free(control);
}

int ctrl_new(sd_event *event, const ctrl_options *options, ctrl_server **out, act_error *err)
{
    if (!options->url || !options->dispatch)
        return act_error_set(err, EINVAL, "control: a URL and a dispatch callback are required");

    _cleanup_(ctrl_freep) ctrl_server *control = calloc(1, sizeof(*control));
    if (!control)
        return act_error_set(err, ENOMEM, "out of memory for the control server");
    control->options = *options;
    pthread_mutex_init(&control->peers_lock, NULL);
    control->url = strdup(options->url);
    control->options.url = control->url;
    control->n_slots = options->contexts ? options->contexts : CTRL_DEFAULT_CONTEXTS;
    control->slots = calloc(control->n_slots, sizeof(*control->slots));
    if (!control->url || !control->slots)
        return act_error_set(err, ENOMEM, "out of memory for the control server");

    int r = ctrl_handoff_new(event, on_request, control, &control->handoff, err);
    if (r < 0)
        return r;

    int rv = nng_rep0_open(&control->socket);
    if (rv != 0)
        return act_error_set(err, ctrl_nng_errno(rv), "control: opening a REP socket: %s",
                             nng_strerror(rv));
    control->socket_open = true;
    nng_socket_set_size(control->socket, NNG_OPT_RECVMAXSZ, CTRL_RECV_MAX_BYTES);
    if ((rv = nng_pipe_notify(control->socket, NNG_PIPE_EV_ADD_PRE, on_pipe, control)) != 0 ||
        (rv = nng_pipe_notify(control->socket, NNG_PIPE_EV_REM_POST, on_pipe, control)) != 0)
        return act_error_set(err, ctrl_nng_errno(rv), "control: watching connections: %s",
                             nng_strerror(rv));

    for (unsigned i = 0; i < control->n_slots; i++) {
        ctrl_reply *slot = &control->slots[i];
        slot->control = control;
        rv = nng_ctx_open(&slot->ctx, control->socket);
        if (rv == 0)
            rv = nng_aio_alloc(&slot->aio, on_aio, slot);
        if (rv != 0)
            return act_error_set(err, ctrl_nng_errno(rv), "control: opening context %u: %s", i,
                                 nng_strerror(rv));
    }

    /* TLS first: the pipe callbacks of the local listener read which
     * listener is the TLS one, so it must be set before any pipe comes. */
    if (options->tls_url && (r = setup_tls(control, err)) < 0)
        return r;
    r = listen_local(control, err);
    if (r < 0)
        return r;

    for (unsigned i = 0; i < control->n_slots; i++)
        start_recv(&control->slots[i]);
    *out = TAKE_PTR(control);
    return 0;
}

int ctrl_tls_port(const ctrl_server *control)
{
    int port;
    if (!control->have_tls ||
        nng_listener_get_int(control->tls_listener, NNG_OPT_TCP_BOUND_PORT, &port) != 0)
        return -1;
    return port;
}
