/* See etcd_client.h. */
#include "claims/etcd_client.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/cleanup_json.h"
#include "common/clock.h"

#define MAX_GLUES 4

struct etcd_client {
    char *endpoints[CLAIMS_URL_ENDPOINTS_MAX];
    size_t n_endpoints;
    size_t preferred; /* the endpoint that answered last (at first a random one);
                       * calls start there */
    /* Told when a call that started on one endpoint was answered by
     * another: the first stopped answering (etcd_client_on_moved). */
    void (*moved)(size_t from, size_t to, void *userdata);
    void *moved_userdata;
    int timeout_ms;
    bool tls;
    char *ca_file, *cert_file, *key_file, *username, *password;
    char *token;
    curl_glue *glues[MAX_GLUES];
    etcd_call *calls; /* every call in flight, for cancellation */
    /* What each gateway path cost, for the daemon's metrics. */
    claims_store_traffic traffic[ETCD_TRAFFIC_PATHS];
    size_t n_traffic;
};

struct etcd_call {
    curl_glue_job job;
    etcd_client *client;
    curl_glue *glue;
    etcd_call *next;
    char *path;
    char *body;
    struct curl_slist *headers;
    char *response;
    size_t response_len;
    size_t response_cap;
    /* A stream: how much of the unfinished message in response is known
     * to hold no newline, so each chunk is scanned once. */
    size_t scanned;
    bool oversized;   /* the answer passed ETCD_ANSWER_MAX: not retried */
    size_t endpoint;  /* index into client->endpoints */
    size_t first_endpoint; /* where it started */
    size_t attempted;      /* endpoints tried so far in this round */
    unsigned rounds;       /* rounds over every endpoint started so far, less one */
    bool unavailable;      /* an endpoint of this round said the cluster is in transition */
    size_t answered; /* the last endpoint that said so: it answers, the next round starts there */
    sd_event_source *retry; /* the pause before the next round */
    uint64_t deadline_usec;
    char errbuf[CURL_ERROR_SIZE];
    char failures[512]; /* what each endpoint tried so far said */
    bool reauthenticated;
    bool streamed; /* a streaming call got its first message: no failover after that */
    etcd_call_done_fn done;
    etcd_stream_fn stream;
    void *userdata;
    etcd_call *waiting; /* for an auth call: the call to send once a token arrived */
};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int etcd_client_new(const claims_url *url, const claims_store_options *options,
                    etcd_client **out, act_error *err)
{
    assert(url && url->kind == CLAIMS_URL_ETCD && url->n_endpoints > 0);
    assert(options);
    assert(out);
    _cleanup_(etcd_client_freep) etcd_client *client = calloc(1, sizeof(*client));
    if (!client)
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    for (size_t i = 0; i < url->n_endpoints; i++) {
        client->endpoints[i] = strdup(url->endpoints[i]);
        if (!client->endpoints[i])
            return act_error_set(err, ENOMEM, "etcd: out of memory");
        client->n_endpoints++;
    }
    client->timeout_ms = options->timeout_ms;
    /* Each client starts on a random member, so a fleet's boxes spread
     * over the cluster instead of all loading the first endpoint. */
    client->preferred = act_draw_below(client->n_endpoints);
    client->tls = options->ca_file || options->cert_file;
    client->ca_file = dup_or_null(options->ca_file);
    client->cert_file = dup_or_null(options->cert_file);
    client->key_file = dup_or_null(options->key_file);
    client->username = dup_or_null(options->username);
    client->password = dup_or_null(options->password);
    *out = TAKE_PTR(client);
    return 0;
}

static void call_free(etcd_call *call)
{
    for (etcd_call **p = &call->client->calls; *p; p = &(*p)->next) {
        if (*p == call) {
            *p = call->next;
            break;
        }
    }
    sd_event_source_disable_unref(call->retry);
    if (call->job.easy)
        curl_easy_cleanup(call->job.easy);
    curl_slist_free_all(call->headers);
    free(call->path);
    free(call->body);
    free(call->response);
    free(call);
}

void etcd_call_cancel(etcd_call *call)
{
    if (!call)
        return;
    /* An auth call started for this one would otherwise resume a freed call. */
    for (etcd_call *other = call->client->calls; other; other = other->next) {
        if (other->waiting == call) {
            etcd_call_cancel(other);
            break;
        }
    }
    if (call->job.easy)
        curl_glue_remove(call->glue, &call->job);
    call_free(call);
}

void etcd_client_free(etcd_client *client)
{
    if (!client)
        return;
    while (client->calls)
        etcd_call_cancel(client->calls);
    for (size_t i = 0; i < MAX_GLUES; i++)
        curl_glue_free(client->glues[i]);
    for (size_t i = 0; i < client->n_endpoints; i++)
        free(client->endpoints[i]);
    free(client->ca_file);
    free(client->cert_file);
    free(client->key_file);
    free(client->username);
    free(client->password);
    free(client->token);
    free(client);
}

int etcd_client_glue(etcd_client *client, sd_event *event, curl_glue **out, act_error *err)
{
    assert(client);
    assert(event);
    assert(out);
    size_t i;
    for (i = 0; i < MAX_GLUES && client->glues[i]; i++) {
        if (curl_glue_event(client->glues[i]) == event) {
            *out = client->glues[i];
            return 0;
        }
    }
    if (i == MAX_GLUES)
        return act_error_set(err, EBUSY, "etcd: store used from more than %d event loops",
                             MAX_GLUES);
    int r = curl_glue_new(event, &client->glues[i]);
    if (r < 0)
        return act_error_set(err, -r, "etcd: cannot set up libcurl on the event loop");
    *out = client->glues[i];
    return 0;
}

void etcd_client_on_moved(etcd_client *client,
                          void (*moved)(size_t from, size_t to, void *userdata), void *userdata)
{
    client->moved = moved;
    client->moved_userdata = userdata;
}

size_t etcd_client_answering(const etcd_client *client)
{
    return client->preferred;
}

size_t etcd_call_endpoint_index(const etcd_call *call)
{
    return call->endpoint;
}

const char *etcd_call_endpoint(const etcd_call *call)
{
    assert(call);
    return call->client->endpoints[call->endpoint];
}

/* The counters of path ("/v3/kv/range" counts as "kv/range"), made on
 * first use; NULL past ETCD_TRAFFIC_PATHS distinct paths. */
static claims_store_traffic *traffic_of(etcd_client *client, const char *path)
{
    const char *name = strncmp(path, "/v3/", 4) == 0 ? path + 4 : path;
    for (size_t i = 0; i < client->n_traffic; i++)
        if (strcmp(client->traffic[i].operation, name) == 0)
            return &client->traffic[i];
    if (client->n_traffic == ETCD_TRAFFIC_PATHS)
        return NULL;
    claims_store_traffic *t = &client->traffic[client->n_traffic++];
    snprintf(t->operation, sizeof(t->operation), "%s", name);
    return t;
}

size_t etcd_client_traffic(const etcd_client *client, claims_store_traffic *out, size_t max)
{
    size_t n = client->n_traffic < max ? client->n_traffic : max;
    memcpy(out, client->traffic, n * sizeof(*out));
    return n;
}

/* The most one answer, or one message of a stream, may hold: a claim is at
 * most 64 KiB (about 87 KiB in etcd's base64), so this holds a box's list
 * of thousands of claims at their limit, and what passes it is not an
 * answer to anything we asked. */
#define ETCD_ANSWER_MAX ((size_t)256 * 1024 * 1024)

/* Room for n more bytes and a NUL, growing by doubling so that an answer
 * of many chunks is copied a bounded number of times. */
static bool reserve(etcd_call *call, size_t n)
{
    size_t need = call->response_len + n + 1;
    if (need <= call->response_cap)
        return true;
    size_t cap = call->response_cap ? call->response_cap : 4096;
    while (cap < need)
        cap *= 2;
    if (cap > ETCD_ANSWER_MAX + 1)
        cap = ETCD_ANSWER_MAX + 1;
    char *grown = realloc(call->response, cap);
    if (!grown)
        return false;
    call->response = grown;
    call->response_cap = cap;
    return true;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
    etcd_call *call = userdata;
    size_t n = size * nmemb;
    if (call->response_len + n > ETCD_ANSWER_MAX) {
        call->oversized = true;
        return 0;
    }
    if (!reserve(call, n))
        return 0;
    memcpy(call->response + call->response_len, data, n);
    call->response_len += n;
    call->response[call->response_len] = '\0';
    claims_store_traffic *traffic = traffic_of(call->client, call->path);
    if (traffic)
        traffic->bytes_received += n;
    if (!call->stream)
        return n;
    /* The gateway streams one JSON message per line; what was scanned of
     * an unfinished one is not scanned again. */
    char *start = call->response, *newline;
    char *from = call->response + call->scanned;
    while ((newline = memchr(from, '\n', call->response_len - (size_t)(from - call->response)))) {
        *newline = '\0';
        json_object *message = json_tokener_parse(start);
        start = from = newline + 1;
        if (!message)
            continue;
        call->streamed = true;
        bool keep = call->stream(call, message, call->userdata);
        json_object_put(message);
        if (!keep)
            return 0;
    }
    size_t rest = call->response_len - (size_t)(start - call->response);
    memmove(call->response, start, rest);
    call->response_len = rest;
    call->response[rest] = '\0';
    call->scanned = rest;
    return n;
}

/* What to check, from how the last attempt failed: a TLS failure or a
 * connection the server dropped at once usually means certificates that do
 * not fit (or plain http to an https etcd), not an etcd that is down. */
static const char *failure_hint(const etcd_client *client, CURLcode result)
{
    switch (result) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
        return "check the CA (it must have signed etcd's certificate), the client certificate "
               "and its key";
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2: /* over TLS curl speaks HTTP/2, where a refused certificate shows */
        return client->tls ? "etcd dropped the connection: check that its --trusted-ca-file "
                             "signed this client certificate"
                           : "etcd dropped the connection: if it serves https, give the store "
                             "a CA (and a client certificate)";
    default:
        return "is etcd running and reachable?";
    }
}

static void on_transfer_done(curl_glue_job *job, CURLcode result);
static int call_start(etcd_client *client, curl_glue *glue, const char *path, char *body,
                      etcd_call_done_fn done, etcd_stream_fn stream, void *userdata,
                      etcd_call *waiting, etcd_call **out, act_error *err);
static int send_call(etcd_call *call, act_error *err);

static void finish(etcd_call *call, int result, json_object *response, const act_error *err)
{
    etcd_client *client = call->client;
    if (result >= 0) {
        client->preferred = call->endpoint;
        if (call->endpoint != call->first_endpoint && client->moved && !call->waiting)
            client->moved(call->first_endpoint, call->endpoint, client->moved_userdata);
    }
    call->done(call, result, response, err, call->userdata);
    call_free(call);
}

static void finish_error(etcd_call *call, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish_error(etcd_call *call, int errnum, const char *fmt, ...)
{
    act_error err = {.errnum = errnum};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.message, sizeof(err.message), fmt, ap);
    va_end(ap);
    finish(call, -errnum, NULL, &err);
}

static int64_t remaining_ms(const etcd_call *call)
{
    uint64_t now = act_now_usec();
    return now >= call->deadline_usec ? 0 : (int64_t)((call->deadline_usec - now) / 1000);
}

/* The pause before another round over every endpoint: a leader election
 * (etcd's election timeout is 1 s by default, randomized up to twice that)
 * ends within a few of them. */
#define ROUND_PAUSE_FIRST_MS 50
#define ROUND_PAUSE_MAX_MS 400

static int on_round_pause_over(sd_event_source *source, uint64_t usec, void *userdata)
{
    (void)source;
    (void)usec;
    etcd_call *call = userdata;
    call->retry = sd_event_source_disable_unref(call->retry);
    act_error err = {0};
    if (send_call(call, &err) < 0)
        finish(call, -err.errnum, NULL, &err);
    return 0;
}

/* Every endpoint was tried and at least one answered that the cluster is in
 * transition (no leader, leader changed, member stopping): the answer may
 * change within the budget, so another round starts after a pause, with
 * the budget left shared among the endpoints again. A call is idempotent
 * by construction (reads, compare-and-swaps whose own landed write is
 * recognized by the claim layer, lease grants whose extra lease expires),
 * so sending it again is what a first attempt on another member already
 * does. */
static bool start_round_later(etcd_call *call)
{
    int64_t pause_ms = ROUND_PAUSE_FIRST_MS << (call->rounds < 3 ? call->rounds : 3);
    if (pause_ms > ROUND_PAUSE_MAX_MS)
        pause_ms = ROUND_PAUSE_MAX_MS;
    if (!call->unavailable || call->streamed || remaining_ms(call) < 2 * pause_ms)
        return false;
    sd_event *event = curl_glue_event(call->glue);
    uint64_t now = 0;
    if (sd_event_now(event, CLOCK_MONOTONIC, &now) < 0 ||
        sd_event_add_time(event, &call->retry, CLOCK_MONOTONIC, now + (uint64_t)pause_ms * 1000, 0,
                          on_round_pause_over, call) < 0)
        return false;
    call->rounds++;
    call->attempted = 0;
    call->unavailable = false;
    call->endpoint = call->answered;
    return true;
}

/* Records why this endpoint failed and arranges the next attempt: at once
 * on the next endpoint, or after a pause when a round over every endpoint
 * met a cluster in transition. False when nothing is left to try or the
 * budget is spent; then the call is the caller's to finish. */
static bool try_elsewhere(etcd_call *call, const char *why)
{
    size_t used = strlen(call->failures);
    if (used && call->attempted == 1)
        used = 0; /* a new round: keep what its endpoints said */
    snprintf(call->failures + used, sizeof(call->failures) - used, "%s%s: %s",
             used ? "; " : "", etcd_call_endpoint(call), why);
    if (call->streamed || remaining_ms(call) < 1)
        return false;
    if (call->attempted >= call->client->n_endpoints)
        return start_round_later(call);
    call->endpoint = (call->endpoint + 1) % call->client->n_endpoints;
    act_error err = {0};
    if (send_call(call, &err) < 0)
        finish(call, -err.errnum, NULL, &err);
    return true;
}

static int errno_for_curl(CURLcode code)
{
    switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
        return ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
        return EHOSTUNREACH;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
        return EPROTO;
    default:
        return EIO;
    }
}

static void on_auth_done(etcd_call *auth, int result, json_object *response,
                         const act_error *err, void *userdata)
{
    etcd_call *waiting = userdata;
    etcd_client *client = auth->client;
    json_object *token;
    act_error send_err = {0};
    if (result < 0) {
        finish_error(waiting, err->errnum, "%s", err->message);
        return;
    }
    if (!json_object_object_get_ex(response, "token", &token)) {
        finish_error(waiting, EACCES,
                     "etcd endpoint %s: authentication as user %s returned no token; is auth "
                     "enabled on the cluster?",
                     etcd_call_endpoint(auth), client->username);
        return;
    }
    free(client->token);
    client->token = strdup(json_object_get_string(token));
    waiting->endpoint = auth->endpoint;
    if (send_call(waiting, &send_err) < 0)
        finish(waiting, -send_err.errnum, NULL, &send_err);
}

static int start_auth(etcd_call *waiting, act_error *err)
{
    etcd_client *client = waiting->client;
    json_object *body = json_object_new_object();
    json_object_object_add(body, "name", json_object_new_string(client->username));
    json_object_object_add(body, "password",
                           json_object_new_string(client->password ? client->password : ""));
    char *text = strdup(json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN));
    json_object_put(body);
    return call_start(client, waiting->glue, "/v3/auth/authenticate", text, on_auth_done, NULL,
                      waiting, waiting, NULL, err);
}

/* The gateway answers a failed call with {"error","message","code"} (gRPC
 * codes); decides between auth retry, failover and a final error. */
static void handle_http_error(etcd_call *call, long status, json_object *response)
{
    etcd_client *client = call->client;
    json_object *message_obj = NULL, *code_obj = NULL;
    const char *message = "no error message";
    int code = 0;
    if (response && json_object_object_get_ex(response, "message", &message_obj))
        message = json_object_get_string(message_obj);
    else if (response && json_object_object_get_ex(response, "error", &message_obj) &&
             json_object_is_type(message_obj, json_type_string))
        message = json_object_get_string(message_obj);
    if (response && json_object_object_get_ex(response, "code", &code_obj))
        code = json_object_get_int(code_obj);

    bool is_auth_call = call->waiting != NULL;
    if (is_auth_call || strstr(message, "authentication failed")) {
        finish_error(call, EACCES,
                     "etcd endpoint %s: authentication as user %s failed (%s); check the claim "
                     "store's username and password",
                     etcd_call_endpoint(call), client->username ? client->username : "(none)",
                     message);
        return;
    }
    /* 16 = Unauthenticated: the token expired or auth was just enabled. */
    if ((code == 16 || strstr(message, "token") || strstr(message, "user name is empty")) &&
        client->username && !call->reauthenticated) {
        call->reauthenticated = true;
        free(client->token);
        client->token = NULL;
        act_error err = {0};
        if (start_auth(call, &err) < 0)
            finish(call, -err.errnum, NULL, &err);
        return;
    }
    if (code == 7 || code == 16 || status == 401 || status == 403 ||
        strstr(message, "user name is empty") || strstr(message, "permission denied")) {
        finish_error(call, EACCES,
                     "etcd endpoint %s: permission denied (%s); %s", etcd_call_endpoint(call),
                     message,
                     client->username ? "grant the user access to the claim prefix"
                                      : "the cluster has auth enabled; configure a username");
        return;
    }
    /* 14 = Unavailable (no leader, member stopping): another member may answer. */
    char why[256];
    snprintf(why, sizeof(why), "HTTP %ld: %s", status, message);
    bool transition = code == 14 || status >= 500;
    if (transition) {
        call->unavailable = true;
        call->answered = call->endpoint;
        if (try_elsewhere(call, why))
            return;
        finish_error(call, EIO, "etcd: every endpoint failed%s: %s", call->rounds ? " again" : "",
                     call->failures);
    } else
        finish_error(call, EIO, "etcd endpoint %s: %s %s refused (HTTP %ld): %s",
                     etcd_call_endpoint(call), call->path, call->stream ? "stream" : "call",
                     status, message);
}

static void on_transfer_done(curl_glue_job *job, CURLcode result)
{
    etcd_call *call = (etcd_call *)job;
    long status = 0;
    curl_easy_getinfo(job->easy, CURLINFO_RESPONSE_CODE, &status);
    if (result == CURLE_WRITE_ERROR && call->oversized) {
        /* Another member would send the same: no other attempt. */
        finish_error(call, EMSGSIZE,
                     "etcd endpoint %s: the answer to %s passed %zu MiB, far more than any "
                     "answer asked for; look for keys under the claim prefix that are not "
                     "claims",
                     etcd_call_endpoint(call), call->path, ETCD_ANSWER_MAX >> 20);
        return;
    }
    if (result != CURLE_OK) {
        int errnum = errno_for_curl(result);
        char why[320];
        if (errnum == ETIMEDOUT)
            snprintf(why, sizeof(why), "no answer within the time budget (%s)", call->errbuf);
        else
            snprintf(why, sizeof(why), "%s", call->errbuf[0] ? call->errbuf
                                                             : curl_easy_strerror(result));
        if (try_elsewhere(call, why))
            return;
        if (call->stream && call->streamed)
            finish_error(call, errnum, "etcd endpoint %s: watch stream ended (%s); start a new "
                                       "watch from the last revision seen + 1",
                         etcd_call_endpoint(call), why);
        else
            finish_error(call, errnum, "etcd: no endpoint answered within %d ms: %s; %s",
                         call->client->timeout_ms, call->failures,
                         failure_hint(call->client, result));
        return;
    }
    _cleanup_(json_object_putp) json_object *response =
        call->response_len ? json_tokener_parse(call->response) : NULL;
    if (status != 200)
        handle_http_error(call, status, response);
    else if (call->stream)
        /* A stream that ends cleanly still ends: the server went away. */
        finish_error(call, ECONNRESET, "etcd endpoint %s: watch stream closed by the server; "
                                       "start a new watch from the last revision seen + 1",
                     etcd_call_endpoint(call));
    else if (!response || !json_object_is_type(response, json_type_object))
        finish_error(call, EPROTO, "etcd endpoint %s: %s answered with something that is not "
                                   "JSON; is this an etcd v3 gateway?",
                     etcd_call_endpoint(call), call->path);
    else
        finish(call, 0, response, NULL);
}

static int send_call(etcd_call *call, act_error *err)
{
    etcd_client *client = call->client;
    if (client->username && !client->token && !call->waiting)
        return start_auth(call, err);

    if (call->job.easy)
        curl_easy_reset(call->job.easy);
    else
        call->job.easy = curl_easy_init();
    CURL *easy = call->job.easy;
    if (!easy)
        return act_error_set(err, ENOMEM, "etcd: cannot create a libcurl handle");
    call->attempted++;
    claims_store_traffic *traffic = traffic_of(client, call->path);
    if (traffic) {
        traffic->requests++;
        traffic->bytes_sent += strlen(call->body);
    }
    free(call->response);
    call->response = NULL;
    call->response_len = call->response_cap = call->scanned = 0;
    call->oversized = false;
    call->errbuf[0] = '\0';

    char url[512];
    snprintf(url, sizeof(url), "%s://%s%s", client->tls ? "https" : "http",
             etcd_call_endpoint(call), call->path);
    curl_slist_free_all(call->headers);
    call->headers = curl_slist_append(NULL, "Content-Type: application/json");
    /* libcurl asks for "100 Continue" before bodies over 1 KiB and waits up
     * to a second for it; a claim txn is just over that, and the wait would
     * dominate every CAS. */
    call->headers = curl_slist_append(call->headers, "Expect:");
    if (client->token && !call->waiting) {
        char header[1024];
        snprintf(header, sizeof(header), "Authorization: %s", client->token);
        call->headers = curl_slist_append(call->headers, header);
    }
    /* The budget left is shared among the endpoints not tried yet, so that
     * a member that hangs (accepts, then says nothing) is left in time for
     * another to answer; the last one tried gets all that is left. */
    size_t untried =
        client->n_endpoints > call->attempted - 1 ? client->n_endpoints - (call->attempted - 1) : 1;
    /* Once a member said the cluster is in transition, another round will
     * follow: a member that hangs gets no more than its share of a round,
     * so that one is left for the round after. */
    if (call->unavailable || call->rounds)
        untried = client->n_endpoints;
    int64_t budget = remaining_ms(call) / (int64_t)untried;
    if (budget < 1)
        budget = 1;
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, call->body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)strlen(call->body));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, call->headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, call);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, call->errbuf);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)budget);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, client->tls ? "https" : "http");
    if (call->stream)
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    else
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)budget);
    if (client->ca_file)
        curl_easy_setopt(easy, CURLOPT_CAINFO, client->ca_file);
    if (client->cert_file)
        curl_easy_setopt(easy, CURLOPT_SSLCERT, client->cert_file);
    if (client->key_file)
        curl_easy_setopt(easy, CURLOPT_SSLKEY, client->key_file);
    call->job.done = on_transfer_done;
    int r = curl_glue_add(call->glue, &call->job);
    if (r < 0)
        return act_error_set(err, -r, "etcd: cannot start a request on the event loop");
    return 0;
}

/* waiting is set for an auth call: it is sent without a token, on the
 * waiting call's endpoint, and resumes that call when it completes. */
static int call_start(etcd_client *client, curl_glue *glue, const char *path, char *body,
                      etcd_call_done_fn done, etcd_stream_fn stream, void *userdata,
                      etcd_call *waiting, etcd_call **out, act_error *err)
{
    if (!body)
        return act_error_set(err, ENOMEM, "etcd: out of memory building a request");
    etcd_call *call = calloc(1, sizeof(*call));
    if (!call) {
        free(body);
        return act_error_set(err, ENOMEM, "etcd: out of memory");
    }
    call->client = client;
    call->glue = glue;
    call->path = strdup(path);
    call->body = body;
    call->done = done;
    call->stream = stream;
    call->userdata = userdata;
    call->endpoint = waiting ? waiting->endpoint : client->preferred;
    call->first_endpoint = call->endpoint;
    call->waiting = waiting;
    call->deadline_usec = act_now_usec() + (uint64_t)client->timeout_ms * 1000;
    call->next = client->calls;
    client->calls = call;
    int r = send_call(call, err);
    if (r < 0) {
        call_free(call);
        return r;
    }
    if (out)
        *out = call;
    return 0;
}

int etcd_call_start(etcd_client *client, curl_glue *glue, const char *path, char *body,
                    etcd_call_done_fn done, etcd_stream_fn stream, void *userdata,
                    etcd_call **out, act_error *err)
{
    assert(client);
    assert(glue);
    assert(path);
    assert(done);
    return call_start(client, glue, path, body, done, stream, userdata, NULL, out, err);
}
