/* Requests on the daemon's control socket (NNG REQ) and small JSON readers. */
#include "tests/driver/daemon_driver.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>

int dd_request_nng(const char *url, const void *body, size_t len, int timeout_ms, char **reply)
{
    nng_socket req;
    int rv = nng_req0_open(&req);
    if (rv != 0)
        return rv;
    /* One send only: a resend would run a wake or a swap twice. */
    nng_socket_set_ms(req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(req, NNG_OPT_SENDTIMEO, timeout_ms);
    nng_socket_set_size(req, NNG_OPT_RECVMAXSZ, 16 * 1024 * 1024);
    /* One request per socket: no reconnect after the server drops the
     * connection (an oversized request). NNG 1.5.2 can leak the dialer and
     * its pipe when a socket closes while such a reconnect is under way. */
    nng_socket_set_ms(req, NNG_OPT_RECONNMINT, 3600 * 1000);
    nng_socket_set_ms(req, NNG_OPT_RECONNMAXT, 3600 * 1000);
    rv = nng_dial(req, url, NULL, 0);
    if (rv == 0)
        rv = nng_send(req, (void *)body, len, 0);
    nng_msg *msg = NULL;
    if (rv == 0)
        rv = nng_recvmsg(req, &msg, 0);
    if (rv == 0) {
        *reply = strndup(nng_msg_body(msg), nng_msg_len(msg));
        nng_msg_free(msg);
        if (!*reply)
            rv = NNG_ENOMEM;
    }
    if (!dd_nng_close_bounded(req))
        fprintf(stderr,
                "driver: closing a request socket to %s did not return within %d ms (NNG "
                "1.5.2's close can hang); left behind\n",
                url, DD_NNG_CLOSE_TIMEOUT_MS);
    return rv;
}

static int request_text(dd_daemon *d, int timeout_ms, const char *body, json_object **reply,
                        act_error *err)
{
    *reply = NULL;
    char *text = NULL;
    int rv = dd_request_nng(d->control_url, body, strlen(body), timeout_ms, &text);
    if (rv != 0)
        return act_error_set(err, rv == NNG_ETIMEDOUT ? ETIMEDOUT : EIO, "request %s to %s: %s",
                             body, d->control_url, nng_strerror(rv));
    json_object *parsed = json_tokener_parse(text);
    if (!parsed || !json_object_is_type(parsed, json_type_object)) {
        int r = act_error_set(err, EBADMSG, "request %s: the reply is not a JSON object: %s", body,
                              text);
        json_object_put(parsed);
        free(text);
        return r;
    }
    free(text);
    *reply = parsed;
    return 0;
}

int dd_request_json(dd_daemon *d, int timeout_ms, json_object **reply, act_error *err,
                    const char *fmt, ...)
{
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    return request_text(d, timeout_ms, body, reply, err);
}

int dd_request(dd_daemon *d, int timeout_ms, json_object **result, act_error *err, const char *fmt,
               ...)
{
    char body[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    if (result)
        *result = NULL;
    json_object *reply = NULL;
    int r = request_text(d, timeout_ms, body, &reply, err);
    if (r < 0)
        return r;
    if (!dd_reply_ok(reply)) {
        json_object *error = NULL;
        json_object_object_get_ex(reply, "error", &error);
        r = act_error_set(err, EPROTO, "request %s refused: %s: %s", body,
                          dd_json_str(error, "code"), dd_json_str(error, "message"));
        json_object_put(reply);
        return r;
    }
    json_object *found = dd_reply_result(reply);
    if (result && found)
        *result = json_object_get(found);
    json_object_put(reply);
    return 0;
}

int dd_stage(dd_daemon *d, const char *host, const char *version, const char *path, bool promote,
             act_error *err)
{
    return dd_request(
        d, 60000, NULL, err,
        "{\"v\":1,\"op\":\"stage\",\"host\":\"%s\",\"version\":\"%s\",\"path\":\"%s\","
        "\"promote\":%s}",
        host, version, path, promote ? "true" : "false");
}

int dd_wait_state(dd_daemon *d, const char *host, const char *state, int timeout_ms, int poll_ms,
                  act_error *err)
{
    uint64_t deadline = dd_now_ms() + (uint64_t)timeout_ms;
    char last[32] = "";
    for (;;) {
        json_object *status = NULL;
        int r =
            dd_request(d, 10000, &status, err, "{\"v\":1,\"op\":\"status\",\"host\":\"%s\"}", host);
        if (r < 0)
            return r;
        snprintf(last, sizeof(last), "%s", dd_json_str(status, "state"));
        json_object_put(status);
        if (strcmp(last, state) == 0)
            return 0;
        if (dd_now_ms() >= deadline)
            return act_error_set(err, ETIME, "host %s is %s, not %s, after %d ms", host, last,
                                 state, timeout_ms);
        dd_sleep_ms(poll_ms);
    }
}

bool dd_reply_ok(json_object *reply)
{
    json_object *ok = NULL;
    return json_object_object_get_ex(reply, "ok", &ok) && json_object_get_boolean(ok);
}

const char *dd_reply_code(json_object *reply)
{
    if (dd_reply_ok(reply))
        return "ok";
    json_object *error = NULL;
    if (!json_object_object_get_ex(reply, "error", &error))
        return "(no error object)";
    const char *code = dd_json_str(error, "code");
    return code[0] ? code : "(no code)";
}

json_object *dd_reply_result(json_object *reply)
{
    json_object *result = NULL;
    json_object_object_get_ex(reply, "result", &result);
    return result;
}

const char *dd_json_str(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &value) ||
        !json_object_is_type(value, json_type_string))
        return "";
    return json_object_get_string(value);
}

uint64_t dd_json_u64(json_object *obj, const char *key)
{
    json_object *value = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &value) ||
        !json_object_is_type(value, json_type_int))
        return 0;
    return json_object_get_uint64(value);
}
