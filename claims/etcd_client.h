/* An etcd v3 JSON-gateway client on curl_glue: endpoints with failover, a
 * per-call time budget, optional TLS and a user/password auth token. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "claims/claims.h"
#include "claims/curl_glue.h"

typedef struct etcd_client etcd_client;
typedef struct etcd_call etcd_call;

/* Called once when a call ends: result 0 with the response object (owned by
 * the call, valid during the callback), or negative with err naming the
 * endpoint(s). The call is freed after the callback returns. */
typedef void (*etcd_call_done_fn)(etcd_call *call, int result, json_object *response,
                                  const act_error *err, void *userdata);
/* For a streaming call (watch): called from inside curl's write callback for
 * each message, so it must only record; false aborts the stream. */
typedef bool (*etcd_stream_fn)(etcd_call *call, json_object *message, void *userdata);

/* A client of url's endpoints (an etcd URL claims_parse_url accepted). */
int etcd_client_new(const claims_url *url, const claims_store_options *options,
                    etcd_client **out, act_error *err);
/* Cancels every call in flight without callbacks, then frees. */
void etcd_client_free(etcd_client *client);
DEFINE_TRIVIAL_CLEANUP_FUNC(etcd_client *, etcd_client_free)
/* The glue for a loop, created on first use. */
int etcd_client_glue(etcd_client *client, sd_event *event, curl_glue **out, act_error *err);

/* Posts body (taken over) to path on the client's current endpoint, failing
 * over to the others on transport errors within the time budget. stream may
 * be NULL; a streaming call has no overall timeout, only a connect timeout. */
int etcd_call_start(etcd_client *client, curl_glue *glue, const char *path, char *body,
                    etcd_call_done_fn done, etcd_stream_fn stream, void *userdata,
                    etcd_call **out, act_error *err);
/* Stops a call without its callback. Not from inside an etcd_stream_fn. */
void etcd_call_cancel(etcd_call *call);
/* The endpoint the call is on now, for messages. */
const char *etcd_call_endpoint(const etcd_call *call);
/* Gateway paths whose traffic is counted apart; more share nothing. */
#define ETCD_TRAFFIC_PATHS 16
/* Copies up to max of the client's counters, one per gateway path used so
 * far; returns how many. */
size_t etcd_client_traffic(const etcd_client *client, claims_store_traffic *out, size_t max);
/* The endpoint that answered last, where calls start. */
size_t etcd_client_answering(const etcd_client *client);
/* Its index among the client's endpoints. */
size_t etcd_call_endpoint_index(const etcd_call *call);
/* moved is told (on the loop, before the call's callback) whenever a call
 * that started on endpoint from was answered by endpoint to: from stopped
 * answering. One per client; NULL stops it. */
void etcd_client_on_moved(etcd_client *client,
                          void (*moved)(size_t from, size_t to, void *userdata), void *userdata);
