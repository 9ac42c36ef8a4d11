/* Requests on the daemon's control socket (NNG REQ) and small JSON readers. */
#include "harness.h"
#include "harness_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/req.h>

int dh_request_raw(const char *url, const void *body, size_t len, int timeout_ms, char **reply)
{
    nng_socket req;
    int rv = nng_req0_open(&req);
    if (rv != 0)
        return rv;
    /* One send only: a resend would run a wake twice. */
    nng_socket_set_ms(req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(req, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_size(req, NNG_OPT_RECVMAXSZ, 4 * 1024 * 1024);
    rv = nng_dial(req, url, NULL, 0);
    if (rv == 0)
        rv = nng_send(req, (void *)body, len, 0);
    nng_msg *msg = NULL;
    if (rv == 0)
        rv = nng_recvmsg(req, &msg, 0);
    if (rv == 0) {
        *reply = strndup(nng_msg_body(msg), nng_msg_len(msg));
        nng_msg_free(msg);
    }
    nng_close(req);
    return rv;
}

static json_object *request_text(dh_daemon *d, int timeout_ms, const char *body)
{
    char *text = NULL;
    int rv = dh_request_raw(d->control_url, body, strlen(body), timeout_ms, &text);
    DH_CHECK(d, rv == 0, "request %s to %s: %s", body, d->control_url, nng_strerror(rv));
    json_object *reply = json_tokener_parse(text);
    DH_CHECK(d, reply && json_object_is_type(reply, json_type_object),
             "request %s: the reply is not a JSON object: %s", body, text);
    free(text);
    return reply;
}

json_object *dh_request(dh_daemon *d, int timeout_ms, const char *fmt, ...)
{
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    return request_text(d, timeout_ms, body);
}

struct dh_async {
    pthread_t thread;
    char url[160];
    char body[4096];
    int timeout_ms;
    int rv;
    char *reply;
};

static void *async_request(void *arg)
{
    dh_async *async = arg;
    async->rv = dh_request_raw(async->url, async->body, strlen(async->body), async->timeout_ms,
                               &async->reply);
    return NULL;
}

dh_async *dh_request_start(dh_daemon *d, int timeout_ms, const char *fmt, ...)
{
    dh_async *async = calloc(1, sizeof(*async));
    assert_non_null(async);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(async->body, sizeof(async->body), fmt, ap);
    va_end(ap);
    snprintf(async->url, sizeof(async->url), "%s", d->control_url);
    async->timeout_ms = timeout_ms;
    if (pthread_create(&async->thread, NULL, async_request, async) != 0)
        fail_msg("cannot start the request thread");
    return async;
}

json_object *dh_request_finish(dh_daemon *d, dh_async *async)
{
    pthread_join(async->thread, NULL);
    int rv = async->rv;
    char *text = async->reply;
    char body[4096];
    snprintf(body, sizeof(body), "%s", async->body);
    free(async);
    DH_CHECK(d, rv == 0, "request %s: %s", body, nng_strerror(rv));
    json_object *reply = json_tokener_parse(text);
    DH_CHECK(d, reply && json_object_is_type(reply, json_type_object),
             "request %s: the reply is not a JSON object: %s", body, text);
    free(text);
    return reply;
}

bool dh_reply_ok(json_object *reply)
{
    json_object *ok = NULL;
    return json_object_object_get_ex(reply, "ok", &ok) && json_object_get_boolean(ok);
}

const char *dh_reply_code(json_object *reply)
{
    if (dh_reply_ok(reply))
        return "ok";
    json_object *error = NULL;
    if (!json_object_object_get_ex(reply, "error", &error))
        return "(no error object)";
    const char *code = dh_json_str(error, "code");
    return code[0] ? code : "(no code)";
}

json_object *dh_reply_result(json_object *reply)
{
    json_object *result = NULL;
    json_object_object_get_ex(reply, "result", &result);
    return result;
}

json_object *dh_status(dh_daemon *d, const char *host)
{
    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"status\",\"host\":\"%s\"}", host);
    DH_CHECK(d, dh_reply_ok(reply), "status %s: %s", host, json_object_to_json_string(reply));
    json_object *result = json_object_get(dh_reply_result(reply));
    json_object_put(reply);
    return result;
}

bool dh_wait_state(dh_daemon *d, const char *host, const char *state, int timeout_ms)
{
    uint64_t deadline = dh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        json_object *status = dh_status(d, host);
        bool reached = strcmp(dh_json_str(status, "state"), state) == 0;
        json_object_put(status);
        if (reached)
            return true;
        if (dh_now_ms() >= deadline)
            return false;
        dh_sleep_ms(20);
    }
}

const char *dh_json_str(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &value) ||
        !json_object_is_type(value, json_type_string))
        return "";
    return json_object_get_string(value);
}

uint64_t dh_json_u64(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &value) ||
        !json_object_is_type(value, json_type_int))
        return 0;
    return json_object_get_uint64(value);
}
