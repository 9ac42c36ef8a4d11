/* Requests on the daemon's control socket (NNG REQ) and small JSON readers. */
#include "harness.h"
#include "harness_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_fields.h"

int dh_request_raw(const char *url, const void *body, size_t len, int timeout_ms, char **reply)
{
    return dd_request_nng(url, body, len, timeout_ms, reply);
}

static json_object *request_text(dh_daemon *d, int timeout_ms, const char *body)
{
    json_object *reply = NULL;
    act_error err = {0};
    dh_waiting_for("box %s's reply to %.200s (up to %d ms)", d->box, body, timeout_ms);
    int r = dd_request_json(&d->drv, timeout_ms, &reply, &err, "%s", body);
    DH_CHECK(d, r == 0, "%s", err.message);
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
    async->rv = dd_request_nng(async->url, async->body, strlen(async->body), async->timeout_ms,
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
    snprintf(async->url, sizeof(async->url), "%s", d->drv.control_url);
    async->timeout_ms = timeout_ms;
    if (pthread_create(&async->thread, NULL, async_request, async) != 0)
        fail_msg("cannot start the request thread");
    return async;
}

uint64_t dh_open_claim_waits(dh_daemon *d)
{
    json_object *reply = dh_request(d, 5000, "{\"v\":1,\"op\":\"stats\"}");
    uint64_t n = act_json_u64_or(dh_reply_result(reply), "claim_waits", UINT64_MAX);
    json_object_put(reply);
    return n;
}

int dh_request_finish_nng(dh_async *async)
{
    pthread_join(async->thread, NULL);
    int rv = async->rv;
    free(async->reply);
    free(async);
    return rv;
}

json_object *dh_request_finish(dh_daemon *d, dh_async *async)
{
    dh_waiting_for("box %s's reply to %.200s (up to %d ms)", d->box, async->body,
                   async->timeout_ms);
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

/* How long a wake that waits for ready may take here: far above a healthy
 * one (well under a second); it only bounds a broken one. */
#define WAKE_TIMEOUT_MS 30000

/* The one wake request of the tests; no_wait: the daemon replies once the
 * wake has started. */
static void wake_body(const char *host, bool no_wait, char *out, size_t size)
{
    snprintf(out, size, "{\"v\":1,\"op\":\"wake\",\"host\":\"%s\"%s}", host,
             no_wait ? ",\"no_wait\":true" : "");
}

json_object *dh_wake_reply(dh_daemon *d, const char *host, int timeout_ms)
{
    char body[256];
    wake_body(host, false, body, sizeof(body));
    return request_text(d, timeout_ms, body);
}

dh_served dh_wake(dh_daemon *d, const char *host)
{
    json_object *reply = dh_wake_reply(d, host, WAKE_TIMEOUT_MS);
    DH_CHECK(d, dh_reply_ok(reply), "wake %s: %s", host, json_object_to_json_string(reply));
    json_object *result = dh_reply_result(reply);
    dh_served served = {.generation = dh_json_u64(result, "generation"),
                        .pid = (pid_t)dh_json_u64(result, "pid")};
    json_object_put(reply);
    return served;
}

dh_async *dh_wake_start(dh_daemon *d, const char *host, int timeout_ms)
{
    char body[256];
    wake_body(host, false, body, sizeof(body));
    return dh_request_start(d, timeout_ms, "%s", body);
}

void dh_wake_started(dh_daemon *d, const char *host)
{
    char body[256];
    wake_body(host, true, body, sizeof(body));
    json_object *reply = request_text(d, WAKE_TIMEOUT_MS, body);
    DH_CHECK(d, dh_reply_ok(reply), "wake %s --no-wait: %s", host,
             json_object_to_json_string(reply));
    json_object_put(reply);
}

void dh_park(dh_daemon *d, const char *host)
{
    /* A park retires the generation with proof, within its StopTimeoutSec. */
    json_object *reply =
        dh_request(d, 30000, "{\"v\":1,\"op\":\"park\",\"host\":\"%s\"}", host);
    DH_CHECK(d, dh_reply_ok(reply), "park %s: %s", host, json_object_to_json_string(reply));
    json_object_put(reply);
}

bool dh_reply_ok(json_object *reply)
{
    return dd_reply_ok(reply);
}

void dh_swap_fails_to(dh_daemon *d, const char *host, const char *version,
                      const char *fallback)
{
    json_object *reply = dh_request(
        d, 60000, "{\"v\":1,\"op\":\"swap\",\"host\":\"%s\",\"version\":\"%s\"}", host,
        version);
    DH_CHECK(d, !dh_reply_ok(reply), "a swap of %s to the failing %s served: %s", host, version,
             json_object_to_json_string(reply));
    json_object_put(reply);
    claim c;
    DH_CHECK(d, dh_claim_get(d, host, &c), "no claim of %s", host);
    DH_CHECK(d,
             c.has_pin && strcmp(c.pin.version, version) == 0 && c.pin.failure_reason[0] &&
                 strcmp(c.pin.fallback_version, fallback) == 0,
             "the failed pin is %s (\"%s\") with fallback \"%s\"; expected %s failed, "
             "fallback %s",
             c.has_pin ? c.pin.version : "(none)", c.pin.failure_reason, c.pin.fallback_version,
             version, fallback);
}

const char *dh_reply_code(json_object *reply)
{
    return dd_reply_code(reply);
}

json_object *dh_reply_result(json_object *reply)
{
    return dd_reply_result(reply);
}

json_object *dh_status(dh_daemon *d, const char *host)
{
    json_object *reply = dh_request(d, 10000, "{\"v\":1,\"op\":\"status\",\"host\":\"%s\"}", host);
    DH_CHECK(d, dh_reply_ok(reply), "status %s: %s", host, json_object_to_json_string(reply));
    json_object *result = json_object_get(dh_reply_result(reply));
    json_object_put(reply);
    return result;
}

void dh_expect_parked_for(dh_daemon *d, const char *host, const char *reason, uint64_t streak)
{
    json_object *status = dh_status(d, host);
    bool as_expected = strcmp(dh_json_str(status, "state"), "parked") == 0 &&
                       strcmp(dh_json_str(status, "reason"), reason) == 0 &&
                       dh_json_u64(status, "failure_streak") == streak;
    char text[1024];
    snprintf(text, sizeof(text), "%s", json_object_to_json_string(status));
    json_object_put(status);
    DH_CHECK(d, as_expected, "status should say %s parked, reason %s, streak %" PRIu64 ": %s", host,
             reason[0] ? reason : "(none)", streak, text);
}

bool dh_wait_state(dh_daemon *d, const char *host, const char *state, int timeout_ms)
{
    act_error err = {0};
    dh_waiting_for("box %s to say host %s is %s (up to %d ms)", d->box, host, state, timeout_ms);
    int r = dd_wait_state(&d->drv, host, state, timeout_ms, 20, &err);
    DH_CHECK(d, r == 0 || r == -ETIME, "status %s: %s", host, err.message);
    return r == 0;
}

const char *dh_json_str(json_object *obj, const char *key)
{
    return dd_json_str(obj, key);
}

uint64_t dh_json_u64(json_object *obj, const char *key)
{
    return dd_json_u64(obj, key);
}
