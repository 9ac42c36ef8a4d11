/* The control server: NNG REP on the control socket, JSON requests in, JSON
 * replies out, every request handed to the daemon's event loop.
 *
 * NNG receives on its own threads through several REP contexts, so a request
 * whose reply waits (a wake waiting for ready) occupies one context while the
 * others keep answering (status stays fast). A received message is only
 * queued for the loop there, with the role of the peer that sent it (judged
 * once, when the peer connected: activator/control/peer.h); the loop thread
 * parses and validates it (activator/control/request.h), refuses an op whose
 * role the peer lacks (activator/control/ops.h) and calls the dispatch
 * callback with a reply handle. The daemon answers
 * through the handle at once or later, exactly once, always on the loop
 * thread.
 *
 * Wire format:
 *   request  {"v":1,"op":"wake","host":"web1"}
 *   success  {"ok":true,"result":<any JSON>}
 *   failure  {"ok":false,"error":{"code":"not_owner","message":"host web1: ..."}}
 * Replies the daemon's dispatcher is expected to give (activatorctl renders
 * these; unknown extra fields are shown generically):
 *   status    {"hosts":[{"host","state","generation","version","digest","pid",
 *              "since_usec","memory_current","pids_current","reason"}]}
 *   wake/park/swap/promote/claim.*  {"host","state","generation","version",...}
 *   stage     {"host","version","digest","live":bool}
 *   releases  {"host","live":"v2","releases":[{"version","digest","size","staged_usec"}]}
 *   claim.show {"claim":{...the claim...}}
 *   stats     {"<name>":<number>,...}
 *   version   {"version":"0.1.0","box":"box-1"} */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "activator/control/peer.h"
#include "activator/control/request.h"
#include "common/cleanup.h"
#include "common/error.h"

/* Concurrent requests the server holds at once when options do not say. */
#define CTRL_DEFAULT_CONTEXTS 16

/* Messages above this are cut off by NNG's transport (the connection is
 * dropped). Below it, anything above CTRL_REQUEST_MAX_BYTES still gets a
 * "too_large" error reply, so a 1 MiB body is answered, not just dropped. */
#define CTRL_RECV_MAX_BYTES (2 * 1024 * 1024)

typedef struct ctrl_server ctrl_server;

/* One request in flight; valid from dispatch until it is replied to. */
typedef struct ctrl_reply ctrl_reply;

/* Loop thread. request is valid only during the call: copy what outlives it. */
typedef void (*ctrl_dispatch_fn)(const ctrl_request *request, ctrl_reply *reply, void *userdata);

/* Loop thread, after every reply is handed to NNG: op is the op's wire name
 * ("none" for a request refused before its op was known), outcome "ok" or the
 * error code. For the "control requests by op and outcome" metric. */
typedef void (*ctrl_observe_fn)(const char *op, const char *outcome, uint64_t duration_usec,
                                void *userdata);

typedef struct ctrl_options {
    const char *url;        /* Control=, e.g. "ipc:///run/activator/control.ipc" */
    int ipc_permissions;    /* mode of an ipc:// socket file; 0: ctrl_ipc_socket_mode */
    ctrl_access access;     /* who gets which role; its strings must outlive the server */
    const char *tls_url;    /* ControlListen=tls+tcp://ADDR:PORT, or NULL */
    const char *tls_certificate; /* TLSCertificate= (PEM) */
    const char *tls_key;         /* TLSKey= (PEM) */
    const char *tls_client_ca;   /* TLSClientCA= (PEM); client certificates are required */
    unsigned contexts;           /* 0 means CTRL_DEFAULT_CONTEXTS */
    ctrl_dispatch_fn dispatch;
    ctrl_observe_fn observe;        /* optional */
    void *userdata;                 /* passed to dispatch and observe */
} ctrl_options;

/* Loop thread. Listens on options->url (and options->tls_url) and starts
 * receiving. Fails with a sentence naming the URL or file that was wrong. */
int ctrl_new(sd_event *event, const ctrl_options *options, ctrl_server **out, act_error *err);

/* Loop thread. Closes the sockets; reply handles not yet answered become
 * invalid and must not be used afterwards. */
void ctrl_free(ctrl_server *control);
DEFINE_TRIVIAL_CLEANUP_FUNC(ctrl_server *, ctrl_free)

/* The TCP port the TLS listener is bound to (useful with port 0), or -1. */
int ctrl_tls_port(const ctrl_server *control);

/* Loop thread. Sends {"ok":true,"result":result} and takes ownership of
 * result (NULL sends null). The handle is invalid afterwards. */
int ctrl_reply_ok(ctrl_reply *reply, json_object *result);

/* Loop thread. Sends {"ok":false,"error":{"code":code,"message":...}}; code is
 * a stable identifier (a reason code such as "not_owner"). */
int ctrl_reply_error(ctrl_reply *reply, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The op of the request a handle answers. */
ctrl_op ctrl_reply_op(const ctrl_reply *reply);

/* The TLS engine NNG was built with ("mbed" or "none"), for error messages. */
const char *ctrl_tls_engine(void);
