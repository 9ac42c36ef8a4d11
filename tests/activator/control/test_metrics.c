/* Metrics: the registry renders valid Prometheus text (checked by a small
 * parser here), and the HTTP server (libmicrohttpd on the event loop) serves
 * it: a counter moves between two scrapes, only GET /metrics is answered
 * 200, the connection limits (per address and in all) refuse and count,
 * idle connections are closed after the timeout, and accept() failing for
 * want of fds pauses accepting instead of spinning the loop. Real sockets;
 * this thread runs the loop, as the daemon's would. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <systemd/sd-event.h>

#include "activator/metrics/daemon_metrics.h"
#include "activator/metrics/server.h"
#include "tests/common/prometheus.h"

static void test_registry_renders_valid_text(void **state)
{
    met_registry *m = met_new();
    met_daemon_metrics d;
    act_error err = {0};
    assert_int_equal(met_daemon_metrics_register(m, &d, &err), 0);
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("serving", "none"), 1), 0);
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("refused", "not_owner"), 2), 0);
    assert_int_equal(met_metric_observe(d.wake_duration, NULL, 0.2), 0);
    assert_int_equal(met_metric_observe(d.wake_duration, NULL, 500), 0);
    assert_int_equal(met_metric_set(d.host_memory_current, MET_LABELS("we\"ird\\host\n"), 1e6), 0);
    assert_int_equal(met_metric_set(d.hosts, MET_LABELS("serving"), 3), 0);
    for (int i = 0; i < 1000; i++) { /* many series: the hash table grows */
        char host[16];
        snprintf(host, sizeof(host), "h%d", i);
        assert_int_equal(met_metric_set(d.host_pids_current, MET_LABELS(host), i), 0);
    }
    assert_int_equal(met_metric_remove(d.host_pids_current, MET_LABELS("h7")), 0);
    assert_true(met_metric_get(d.host_pids_current, MET_LABELS("h999")) == 999);
    assert_true(met_metric_get(d.host_pids_current, MET_LABELS("h7")) == 0);

    /* Misuse is refused. */
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("serving"), 1), -EINVAL);
    assert_int_equal(met_metric_add(d.wakes, MET_LABELS("a", "b"), -1), -EINVAL);
    assert_int_equal(met_metric_add(d.wake_duration, NULL, 1), -EINVAL);
    assert_int_equal(met_metric_set(d.generations_started, NULL, 5), 0);
    assert_int_equal(met_metric_set(d.generations_started, NULL, 4), -EINVAL);
    assert_true(met_add_family(m, MET_METRIC_COUNTER, "bad-name", "", NULL, NULL, 0, NULL, &err) <
                0);
    assert_true(met_add_family(m, MET_METRIC_COUNTER, "activator_hosts", "", NULL, NULL, 0, NULL,
                               &err) < 0);

    char *text;
    size_t len;
    assert_int_equal(met_render(m, &text, &len), 0);
    char why[256] = "";
    double value = -1;
    if (!parse_prometheus(text, "activator_wakes_total{outcome=\"refused\",reason=\"not_owner\"}",
                          &value, why, sizeof(why)))
        fail_msg("%s\n%s", why, text);
    assert_true(value == 2);
    assert_true(parse_prometheus(text, "activator_wake_duration_seconds_bucket{le=\"+Inf\"}",
                                 &value, why, sizeof(why)));
    assert_true(value == 2);
    assert_true(parse_prometheus(text, "activator_wake_duration_seconds_bucket{le=\"0.25\"}",
                                 &value, why, sizeof(why)));
    assert_true(value == 1);
    assert_non_null(strstr(text, "{host=\"we\\\"ird\\\\host\\n\"} 1000000\n"));
    assert_non_null(strstr(text, "activator_generations_retired_total 0\n"));
    /* The parser itself rejects broken text. */
    assert_false(parse_prometheus("x{a=\"1} 2\n", NULL, NULL, why, sizeof(why)));
    assert_false(parse_prometheus("# TYPE x counter\nx two\n", NULL, NULL, why, sizeof(why)));
    assert_false(parse_prometheus("y 1\n", NULL, NULL, why, sizeof(why)));
    free(text);
    met_free(m);
}

typedef struct fetch {
    char url[128];
    const char *method; /* NULL: GET; "HEAD"; or another, sent with a body */
    const char *from;   /* the local address to connect from; NULL: any */
    atomic_bool done;
    CURLcode rc;
    long status;
    char *body;
    size_t len;
    char headers[4096];
    size_t headers_len;
} fetch;

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
    fetch *f = userdata;
    char *grown = realloc(f->body, f->len + size * n + 1);
    if (!grown)
        return 0;
    f->body = grown;
    memcpy(f->body + f->len, data, size * n);
    f->len += size * n;
    f->body[f->len] = '\0';
    return size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
    fetch *f = userdata;
    size_t len = size * n;
    if (f->headers_len + len < sizeof(f->headers)) {
        memcpy(f->headers + f->headers_len, data, len);
        f->headers_len += len;
        f->headers[f->headers_len] = '\0';
    }
    return len;
}

static void *fetch_thread(void *arg)
{
    fetch *f = arg;
    CURL *curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, f->url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    if (f->from)
        curl_easy_setopt(curl, CURLOPT_INTERFACE, f->from);
    if (f->method && strcmp(f->method, "HEAD") == 0) {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (f->method) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, f->method);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "a body nobody wants");
    }
    f->rc = curl_easy_perform(curl);
    if (f->rc == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &f->status);
    curl_easy_cleanup(curl);
    atomic_store(&f->done, true);
    return NULL;
}

/* Fetches host:port/path (method NULL: GET) from the local address from
 * (NULL: any) while this thread runs the loop, as the daemon's would. */
static void request(sd_event *event, const char *host, int port, const char *path,
                    const char *method, const char *from, fetch *f)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->url, sizeof(f->url), "http://%s:%d%s", host, port, path);
    f->method = method;
    f->from = from;
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, fetch_thread, f), 0);
    while (!atomic_load(&f->done))
        assert_true(sd_event_run(event, 50 * 1000) >= 0);
    pthread_join(thread, NULL);
}

static void scrape(sd_event *event, int port, const char *path, fetch *f)
{
    request(event, "127.0.0.1", port, path, NULL, NULL, f);
}

/* A header of the answer, case as the server sent it. */
static bool has_header(const fetch *f, const char *line)
{
    return strstr(f->headers, line) != NULL;
}

static unsigned refreshes;

static void on_refresh(met_registry *m, void *userdata)
{
    /* Runs on the loop thread before each render, where the daemon copies
     * live values in. */
    refreshes++;
    met_daemon_metrics *d = userdata;
    met_metric_set(d->host_memory_current, MET_LABELS("web1"), 4096.0 * refreshes);
}

typedef struct served {
    sd_event *event;
    met_registry *metrics;
    met_daemon_metrics families;
    met_server *server;
    int port;
} served;

/* A server of the daemon's families on listen, refusals counted. */
static void serve(served *s, const char *listen)
{
    assert_int_equal(sd_event_new(&s->event), 0);
    s->metrics = met_new();
    act_error err = {0};
    assert_int_equal(met_daemon_metrics_register(s->metrics, &s->families, &err), 0);
    if (met_server_new(s->event, listen, s->metrics, on_refresh, &s->families, &s->server, &err) <
        0)
        fail_msg("metrics server on %s: %s", listen, err.message);
    met_server_count_refusals(s->server, s->families.metrics_refused);
    s->port = met_server_port(s->server);
    assert_true(s->port > 0);
}

static void unserve(served *s)
{
    met_server_free(s->server);
    met_free(s->metrics);
    sd_event_unref(s->event);
}

static void test_http_scrape_and_counter_moves(void **state)
{
    served s;
    serve(&s, "127.0.0.1:0");
    met_daemon_metrics *d = &s.families;

    fetch f;
    scrape(s.event, s.port, "/metrics", &f);
    assert_int_equal(f.status, 200);
    if (!has_header(&f, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        fail_msg("the exposition's content type is not 0.0.4's:\n%s", f.headers);
    /* One request per connection: the server closes it. */
    if (!has_header(&f, "Connection: close\r\n"))
        fail_msg("the answer does not close its connection:\n%s", f.headers);
    char why[256];
    double before = -1, after = -1;
    if (!parse_prometheus(f.body, "activator_control_requests_total{op=\"status\",outcome=\"ok\"}",
                          &before, why, sizeof(why))) {
        /* No request yet: the labelled series does not exist. */
        assert_true(parse_prometheus(f.body, NULL, NULL, why, sizeof(why)));
        before = 0;
    }
    free(f.body);

    met_metric_add(d->control_requests, MET_LABELS("status", "ok"), 1);
    met_metric_add(d->generations_started, NULL, 1);
    scrape(s.event, s.port, "/metrics?debug=1", &f); /* a query string is no other path */
    assert_int_equal(f.status, 200);
    if (!parse_prometheus(f.body, "activator_control_requests_total{op=\"status\",outcome=\"ok\"}",
                          &after, why, sizeof(why)))
        fail_msg("%s\n%s", why, f.body);
    assert_true(after == before + 1);
    double started = 0, memory = 0;
    assert_true(parse_prometheus(f.body, "activator_generations_started_total", &started, why,
                                 sizeof(why)));
    assert_true(started == 1);
    assert_true(parse_prometheus(f.body, "activator_host_memory_current_bytes{host=\"web1\"}",
                                 &memory, why, sizeof(why)));
    assert_true(memory == 4096.0 * refreshes); /* refreshed on the loop before each render */
    free(f.body);

    unserve(&s);
}

/* Only GET /metrics is answered with the metrics. */
static void test_other_paths_and_methods(void **state)
{
    served s;
    serve(&s, "127.0.0.1:0");
    static const struct {
        const char *path, *method;
        long status;
    } cases[] = {
        {"/other", NULL, 404},       {"/", NULL, 404},          {"/metrics/", NULL, 404},
        {"/other", "POST", 404},     {"/metrics", "POST", 405}, {"/metrics", "PUT", 405},
        {"/metrics", "DELETE", 405}, {"/metrics", "HEAD", 405},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fetch f;
        request(s.event, "127.0.0.1", s.port, cases[i].path, cases[i].method, NULL, &f);
        if (f.rc != CURLE_OK || f.status != cases[i].status)
            fail_msg("%s %s: %s, HTTP %ld; expected %ld", cases[i].method ? cases[i].method : "GET",
                     cases[i].path, curl_easy_strerror(f.rc), f.status, cases[i].status);
        if (f.status == 405 && !has_header(&f, "Allow: GET\r\n"))
            fail_msg("a 405 without Allow: GET:\n%s", f.headers);
        if (f.body && strstr(f.body, "# TYPE"))
            fail_msg("%s %s was answered with the metrics", cases[i].method, cases[i].path);
        free(f.body);
    }
    /* Still answering, and none of these was a refusal. */
    fetch f;
    scrape(s.event, s.port, "/metrics", &f);
    assert_int_equal(f.status, 200);
    free(f.body);
    assert_int_equal(met_server_refused(s.server), 0);
    unserve(&s);
}

/* ---- raw connections, with this thread running the loop ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A TCP connection to 127.0.0.1:port from the address from (the loopback
 * answers for all of 127/8). The kernel completes it from the backlog,
 * before the server takes it. */
static int connect_from(const char *from, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in local = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, from, &local.sin_addr), 1);
    if (bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0)
        fail_msg("bind to %s: %s", from, strerror(errno));
    struct sockaddr_in server = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&server, sizeof(server)) < 0)
        fail_msg("connect from %s to port %d: %s", from, port, strerror(errno));
    return fd;
}

typedef bool (*condition_fn)(served *s, const void *arg);

/* Runs the loop until done says so, failing after timeout_ms. */
static void run_until(served *s, condition_fn done, const void *arg, int timeout_ms,
                      const char *what)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (!done(s, arg)) {
        if (now_ms() > deadline)
            fail_msg("%s: not within %d ms (%u connections open, %llu refused)", what, timeout_ms,
                     met_server_connections(s->server),
                     (unsigned long long)met_server_refused(s->server));
        assert_true(sd_event_run(s->event, 10 * 1000) >= 0);
    }
}

static bool connections_are(served *s, const void *arg)
{
    return met_server_connections(s->server) == *(const unsigned *)arg;
}

static bool refused_are(served *s, const void *arg)
{
    return met_server_refused(s->server) == *(const uint64_t *)arg;
}

/* The server's end of fd is closed: EOF, or a reset. */
static bool closed_by_server(served *s, const void *arg)
{
    int fd = *(const int *)arg;
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
    if (n > 0)
        fail_msg("a connection that sent nothing was sent something");
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Sends text on fd, then reads the answer until the server closes. */
static void exchange(served *s, int fd, const char *text, size_t len, char *out, size_t size)
{
    size_t sent = 0;
    int64_t deadline = now_ms() + 10000;
    size_t used = 0;
    out[0] = '\0';
    for (;;) {
        if (sent < len) {
            ssize_t n = send(fd, text + sent, len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN)
                sent = len; /* the server answered and closed early */
        }
        ssize_t n = recv(fd, out + used, size - 1 - used, MSG_DONTWAIT);
        if (n > 0) {
            used += (size_t)n;
            out[used] = '\0';
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            return;
        }
        if (used + 1 >= size)
            return;
        if (now_ms() > deadline)
            fail_msg("no whole answer within 10 s; so far: %.200s", out);
        assert_true(sd_event_run(s->event, 10 * 1000) >= 0);
    }
}

/* Connections from one address cannot take what another needs, the total
 * is bounded, each refusal is counted, and idle connections are closed
 * after the timeout. */
static void test_connection_limits_and_timeout(void **state)
{
    served s;
    serve(&s, "127.0.0.1:0");
    int held[MET_MAX_CONNECTIONS];
    unsigned n = 0;

    /* One address's limit. */
    for (int i = 0; i < MET_MAX_CONNECTIONS_PER_ADDRESS; i++)
        held[n++] = connect_from("127.0.0.1", s.port);
    run_until(&s, connections_are, &n, 10000, "the server takes one address's connections");
    int over = connect_from("127.0.0.1", s.port);
    uint64_t refused = 1;
    run_until(&s, refused_are, &refused, 10000, "a connection over one address's limit refused");
    run_until(&s, closed_by_server, &over, 10000, "the refused connection closed");
    close(over);
    assert_int_equal(met_server_connections(s.server), n);

    /* Another address is served meanwhile, and sees the refusal counted. */
    fetch f;
    request(s.event, "127.0.0.1", s.port, "/metrics", NULL, "127.0.0.2", &f);
    if (f.rc != CURLE_OK || f.status != 200)
        fail_msg("a scrape from 127.0.0.2 while 127.0.0.1 holds its limit: %s, HTTP %ld",
                 curl_easy_strerror(f.rc), f.status);
    assert_non_null(strstr(f.body, "\nactivator_metrics_connections_refused_total 1\n"));
    free(f.body);
    run_until(&s, connections_are, &n, 10000, "the scrape's connection closed");

    /* The total: other addresses, each up to its limit. */
    char from[32];
    for (int a = 2; n < MET_MAX_CONNECTIONS; a++)
        for (int i = 0; i < MET_MAX_CONNECTIONS_PER_ADDRESS && n < MET_MAX_CONNECTIONS; i++) {
            snprintf(from, sizeof(from), "127.0.0.%d", a);
            held[n++] = connect_from(from, s.port);
        }
    run_until(&s, connections_are, &n, 10000, "the server takes connections up to the total");
    over = connect_from("127.0.0.200", s.port);
    refused = 2;
    run_until(&s, refused_are, &refused, 10000, "a connection over the total refused");
    run_until(&s, closed_by_server, &over, 10000, "the refused connection closed");
    close(over);
    assert_true(met_metric_get(s.families.metrics_refused, NULL) == 2);

    /* None of them sent anything: each is closed once idle for the timeout
     * (a generous deadline: the machine's speed decides when). */
    for (unsigned i = 0; i < n; i++) {
        run_until(&s, closed_by_server, &held[i], (MET_CONNECTION_TIMEOUT_SEC + 25) * 1000,
                  "an idle connection closed after the timeout");
        close(held[i]);
    }
    unsigned none = 0;
    run_until(&s, connections_are, &none, 10000, "no connection left");
    /* The slots are free again. */
    request(s.event, "127.0.0.1", s.port, "/metrics", NULL, "127.0.0.1", &f);
    assert_int_equal(f.status, 200);
    free(f.body);
    unserve(&s);
}

/* A request head larger than a connection may hold is refused with a 4xx,
 * not served, and the server goes on. */
static void test_oversized_request(void **state)
{
    served s;
    serve(&s, "127.0.0.1:0");
    size_t big = MET_CONNECTION_MEMORY + 4096;
    char *text = malloc(big + 128);
    assert_non_null(text);
    int len = snprintf(text, big + 128, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(text + len, 'a', big);
    memcpy(text + len + big, "\r\n\r\n", 4);
    int fd = connect_from("127.0.0.1", s.port);
    char answer[4096];
    exchange(&s, fd, text, (size_t)len + big + 4, answer, sizeof(answer));
    close(fd);
    free(text);
    if (strncmp(answer, "HTTP/1.1 4", 10) != 0)
        fail_msg("an oversized request head was answered: %.300s", answer);

    fetch f;
    scrape(s.event, s.port, "/metrics", &f);
    assert_int_equal(f.status, 200);
    free(f.body);
    unserve(&s);
}

/* accept() failing for want of fds (EMFILE) pauses accepting: the loop
 * does not spin, nothing is counted as refused, and the connection waiting
 * in the backlog is served once fds are free. */
static void test_accept_failure_does_not_spin(void **state)
{
    served s;
    serve(&s, "127.0.0.1:0");
    int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(client >= 0);

    /* Every fd the limit allows taken, the limit lowered first so that
     * this takes a handful. */
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(probe >= 0);
    struct rlimit low = {.rlim_cur = (rlim_t)probe + 8, .rlim_max = saved.rlim_max};
    close(probe);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fillers[16];
    int n_fillers = 0;
    while (n_fillers < 16) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            assert_int_equal(errno, EMFILE);
            break;
        }
        fillers[n_fillers++] = fd;
    }
    assert_true(n_fillers < 16);

    struct sockaddr_in server = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port)};
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(client, (struct sockaddr *)&server, sizeof(server)), 0);

    /* Non-blocking passes of the loop: a level-triggered listener whose
     * accept() fails would be dispatched on every one. */
    int dispatched = 0;
    for (int i = 0; i < 200; i++) {
        int r = sd_event_run(s.event, 0);
        assert_true(r >= 0);
        dispatched += r > 0;
    }
    for (int i = 0; i < n_fillers; i++)
        close(fillers[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    if (dispatched > 10)
        fail_msg("200 passes of the loop dispatched %d events while accept() failed: it spins",
                 dispatched);
    assert_int_equal(met_server_refused(s.server), 0);

    /* With fds free again, the waiting connection is taken and answered. */
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    char answer[256 * 1024];
    exchange(&s, client, get, sizeof(get) - 1, answer, sizeof(answer));
    close(client);
    if (strncmp(answer, "HTTP/1.1 200", 12) != 0)
        fail_msg("the connection that waited out the pause: %.300s", answer);
    unserve(&s);
}

/* An IPv6 address is bound as given. */
static void test_ipv6_listen(void **state)
{
    int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 loopback = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ipv6 = probe >= 0 && bind(probe, (struct sockaddr *)&loopback, sizeof(loopback)) == 0;
    if (probe >= 0)
        close(probe);
    if (!ipv6) {
        fprintf(stderr, "skipped: this machine has no IPv6 loopback (::1)\n");
        skip();
    }
    served s;
    serve(&s, "[::1]:0");
    fetch f;
    request(s.event, "[::1]", s.port, "/metrics", NULL, NULL, &f);
    if (f.rc != CURLE_OK || f.status != 200)
        fail_msg("GET http://[::1]:%d/metrics: %s, HTTP %ld", s.port, curl_easy_strerror(f.rc),
                 f.status);
    free(f.body);
    /* Bound to ::1 exactly: not on IPv4. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port)};
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(connect(fd, (struct sockaddr *)&v4, sizeof(v4)) < 0);
    close(fd);
    unserve(&s);
}

static void test_bad_listen(void **state)
{
    sd_event *event;
    assert_int_equal(sd_event_new(&event), 0);
    met_registry *m = met_new();
    met_server *server;
    act_error err = {0};
    assert_true(met_server_new(event, "127.0.0.1:99999", m, NULL, NULL, &server, &err) < 0);
    assert_non_null(strstr(err.message, "MetricsListen=127.0.0.1:99999"));
    assert_true(met_server_new(event, "/tmp/x", m, NULL, NULL, &server, &err) < 0);

    /* A port another socket listens on: what, where and what to do. */
    int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(address);
    assert_int_equal(bind(taken, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(listen(taken, 1), 0);
    assert_int_equal(getsockname(taken, (struct sockaddr *)&address, &len), 0);
    char listen_at[32], expected[64];
    snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%d", ntohs(address.sin_port));
    snprintf(expected, sizeof(expected), "MetricsListen=%s: ", listen_at);
    assert_true(met_server_new(event, listen_at, m, NULL, NULL, &server, &err) < 0);
    if (strncmp(err.message, expected, strlen(expected)) != 0 ||
        !strstr(err.message, "Address already in use") || !strstr(err.message, "choose"))
        fail_msg("a port in use: %s", err.message);
    close(taken);
    met_free(m);
    sd_event_unref(event);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_renders_valid_text),
        cmocka_unit_test(test_http_scrape_and_counter_moves),
        cmocka_unit_test(test_other_paths_and_methods),
        cmocka_unit_test(test_connection_limits_and_timeout),
        cmocka_unit_test(test_oversized_request),
        cmocka_unit_test(test_accept_failure_does_not_spin),
        cmocka_unit_test(test_ipv6_listen),
        cmocka_unit_test(test_bad_listen),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return failed;
}
