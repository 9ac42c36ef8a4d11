/* See etcd_harness.h. */
#include "etcd_harness.h"

#ifndef ACT_TLS_CERTS_SCRIPT
#error "ACT_TLS_CERTS_SCRIPT must name tests/tls/make-certs.sh"
#endif

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

bool etcd_harness_available(void)
{
    return access(ETCD_HARNESS_BINARY, X_OK) == 0;
}

int etcd_harness_require(const char *who)
{
    if (etcd_harness_available())
        return 0;
    fprintf(stderr, "%s: %s is not installed (Debian package etcd-server)\n", who,
            ETCD_HARNESS_BINARY);
    return 77;
}

/* The kernel hands out a free port for port 0; closing it right away leaves a
 * tiny window for someone else to take it, which a retry of the whole start
 * covers. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    close(fd);
    return ntohs(addr.sin_port);
}

static size_t collect(char *data, size_t size, size_t nmemb, void *userdata)
{
    char **buf = userdata;
    size_t old = *buf ? strlen(*buf) : 0, n = size * nmemb;
    char *grown = realloc(*buf, old + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + old, data, n);
    grown[old + n] = '\0';
    *buf = grown;
    return n;
}

/* A POST of body, or a GET when body is NULL. */
static long request(const etcd_harness *h, const char *path, const char *body, const char *token,
                    char **response)
{
    CURL *easy = curl_easy_init();
    if (!easy)
        return -ENOMEM;
    char url[256], auth[1024];
    snprintf(url, sizeof(url), "%s://%s%s", h->tls ? "https" : "http", h->endpoint, path);
    if (h->tls) {
        curl_easy_setopt(easy, CURLOPT_CAINFO, h->ca_file);
        curl_easy_setopt(easy, CURLOPT_SSLCERT, h->cert_file);
        curl_easy_setopt(easy, CURLOPT_SSLKEY, h->key_file);
    }
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: %s", token);
        headers = curl_slist_append(headers, auth);
    }
    char *buf = NULL;
    curl_easy_setopt(easy, CURLOPT_URL, url);
    if (body)
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    CURLcode code = curl_easy_perform(easy);
    long status = -EIO;
    if (code == CURLE_OK)
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    if (response)
        *response = buf;
    else
        free(buf);
    return status;
}

long etcd_harness_post(const etcd_harness *h, const char *path, const char *body, const char *token,
                       char **response)
{
    return request(h, path, body, token, response);
}

double etcd_harness_metric(const char *text, const char *metric, const char *label)
{
    double sum = 0;
    size_t metric_len = strlen(metric);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line += !!line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len <= metric_len || strncmp(line, metric, metric_len) != 0)
            continue;
        const char *value = line + metric_len;
        if (*value == '{') {
            const char *labels_end = memchr(line, '}', len);
            if (!labels_end)
                continue;
            char labels[512];
            snprintf(labels, sizeof(labels), "%.*s", (int)(labels_end - line), line);
            if (label && !strstr(labels, label))
                continue;
            value = labels_end + 1;
        } else if (*value != ' ' || label) {
            continue;
        }
        sum += strtod(value, NULL);
    }
    return sum;
}

char *etcd_harness_metrics(const etcd_harness *h)
{
    char *metrics = NULL;
    long status = request(h, "/metrics", NULL, NULL, &metrics);
    if (status != 200) {
        free(metrics);
        return NULL;
    }
    return metrics;
}

long long etcd_harness_grpc_calls(const etcd_harness *h, const char *method)
{
    char *metrics = etcd_harness_metrics(h);
    char label[128];
    if (method)
        snprintf(label, sizeof(label), "grpc_method=\"%s\"", method);
    long long calls = metrics ? (long long)etcd_harness_metric(metrics, "grpc_server_started_total",
                                                               method ? label : NULL)
                              : -1;
    free(metrics);
    return calls;
}

/* Fresh certificates in <dir>/certs for this run. */
static int make_certs(etcd_harness *h, act_error *err)
{
    char command[PATH_MAX * 2 + 64];
    snprintf(command, sizeof(command), "'%s' '%s/certs'", ACT_TLS_CERTS_SCRIPT, h->dir);
    int status = system(command);
    if (status != 0)
        return act_error_set(err, EIO, "etcd harness: %s failed (status %d); is openssl "
                                       "installed?", command, status);
    snprintf(h->ca_file, sizeof(h->ca_file), "%s/certs/ca.crt", h->dir);
    snprintf(h->cert_file, sizeof(h->cert_file), "%s/certs/client.crt", h->dir);
    snprintf(h->key_file, sizeof(h->key_file), "%s/certs/client.key", h->dir);
    snprintf(h->other_ca_file, sizeof(h->other_ca_file), "%s/certs/other-ca.crt", h->dir);
    snprintf(h->other_cert_file, sizeof(h->other_cert_file), "%s/certs/other-client.crt",
             h->dir);
    snprintf(h->other_key_file, sizeof(h->other_key_file), "%s/certs/other-client.key", h->dir);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* Starts etcd without waiting for it to answer. */
static int launch(etcd_harness *h, act_error *err)
{
    char data[PATH_MAX + 8], log[PATH_MAX + 16], client[64], peer[64], cluster[96];
    char server_cert[PATH_MAX + 24], server_key[PATH_MAX + 24];
    snprintf(server_cert, sizeof(server_cert), "%s/certs/server.crt", h->dir);
    snprintf(server_key, sizeof(server_key), "%s/certs/server.key", h->dir);
    snprintf(data, sizeof(data), "%s/data", h->dir);
    snprintf(log, sizeof(log), "%s/etcd.log", h->dir);
    snprintf(client, sizeof(client), "%s://127.0.0.1:%d", h->tls ? "https" : "http",
             h->client_port);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", h->peer_port);
    snprintf(cluster, sizeof(cluster), "default=%s", peer);
    const char *name = h->name[0] ? h->name : "default";
    const char *members = h->cluster[0] ? h->cluster : cluster;
    pid_t pid = fork();
    if (pid < 0)
        return act_error_set(err, errno, "etcd harness: fork: %m");
    if (pid == 0) {
        /* Only async-signal-safe calls until exec. A test that dies must not
         * leave etcd behind, hence the parent-death signal. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        char *const argv[] = {ETCD_HARNESS_BINARY, "--name", (char *)name, "--data-dir", data,
                              "--listen-client-urls", client, "--advertise-client-urls", client,
                              "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                              "--initial-cluster", (char *)members, "--log-level", "error",
                              /* With TLS, these end the list early otherwise. */
                              h->tls ? "--cert-file" : NULL, server_cert, "--key-file", server_key,
                              "--trusted-ca-file", h->ca_file, "--client-cert-auth", NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    h->pid = pid;
    return 0;
}

/* Waits until it answers; etcd takes about a second to elect itself (a
 * cluster's member, until a quorum of members runs). */
static int wait_answering(etcd_harness *h, act_error *err)
{
    char log[PATH_MAX + 16];
    snprintf(log, sizeof(log), "%s/etcd.log", h->dir);
    pid_t pid = h->pid;
    for (int i = 0; i < 400; i++) {
        long status = etcd_harness_post(h, "/v3/kv/range", "{\"key\":\"AA==\"}", NULL, NULL);
        if (status == 200)
            return 0;
        int wstatus;
        if (waitpid(pid, &wstatus, WNOHANG) == pid) {
            h->pid = 0;
            return act_error_set(err, EIO, "etcd harness: etcd exited during start; see %s",
                                 log);
        }
        struct timespec pause = {.tv_nsec = 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    etcd_harness_stop(h);
    return act_error_set(err, ETIMEDOUT, "etcd harness: etcd did not answer on %s within 20 s; "
                                         "see %s", h->endpoint, log);
}

static int spawn(etcd_harness *h, act_error *err)
{
    int r = launch(h, err);
    return r < 0 ? r : wait_answering(h, err);
}

/* A cleared harness with its temp dir made. */
static int prepare(etcd_harness *h, bool tls, act_error *err)
{
    memset(h, 0, sizeof(*h));
    h->tls = tls;
    if (!etcd_harness_available())
        return act_error_set(err, ENOENT, "%s is not installed (Debian package etcd-server)",
                             ETCD_HARNESS_BINARY);
    snprintf(h->dir, sizeof(h->dir), "/tmp/act-etcd-XXXXXX");
    if (!mkdtemp(h->dir))
        return act_error_set(err, errno, "etcd harness: mkdtemp: %m");
    return 0;
}

static int start(etcd_harness *h, bool tls, act_error *err)
{
    int prepared = prepare(h, tls, err);
    if (prepared < 0)
        return prepared;
    if (tls) {
        int r = make_certs(h, err);
        if (r < 0)
            return r;
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        h->client_port = free_port();
        h->peer_port = free_port();
        if (h->client_port <= 0 || h->peer_port <= 0 || h->client_port == h->peer_port)
            continue;
        snprintf(h->endpoint, sizeof(h->endpoint), "127.0.0.1:%d", h->client_port);
        snprintf(h->url_prefix, sizeof(h->url_prefix), "etcd://%s", h->endpoint);
        /* A start that lost its port race leaves a half-bootstrapped member
         * behind; the next try must start from an empty data dir. */
        char data[PATH_MAX + 8];
        snprintf(data, sizeof(data), "%s/data", h->dir);
        nftw(data, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        int r = spawn(h, err);
        if (r != -EIO)
            return r;
    }
    return -EIO;
}

int etcd_harness_start(etcd_harness *h, act_error *err)
{
    return start(h, false, err);
}

int etcd_harness_start_tls(etcd_harness *h, act_error *err)
{
    return start(h, true, err);
}

void etcd_harness_stop(etcd_harness *h)
{
    if (h->pid <= 0)
        return;
    kill(h->pid, SIGTERM);
    int status;
    for (int i = 0; i < 200; i++) {
        if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
            h->pid = 0;
            return;
        }
        struct timespec pause = {.tv_nsec = 25 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    kill(h->pid, SIGKILL);
    waitpid(h->pid, &status, 0);
    h->pid = 0;
}

int etcd_harness_start_cluster(etcd_harness *members, size_t n, act_error *err)
{
    char cluster[sizeof(members->cluster)] = "";
    for (size_t i = 0; i < n; i++) {
        etcd_harness *h = &members[i];
        int r = prepare(h, false, err);
        if (r < 0)
            return r;
        h->client_port = free_port();
        h->peer_port = free_port();
        snprintf(h->name, sizeof(h->name), "m%u", (unsigned)(i % 100));
        snprintf(h->endpoint, sizeof(h->endpoint), "127.0.0.1:%d", h->client_port);
        snprintf(h->url_prefix, sizeof(h->url_prefix), "etcd://%s", h->endpoint);
        size_t used = strlen(cluster);
        snprintf(cluster + used, sizeof(cluster) - used, "%sm%u=http://127.0.0.1:%d",
                 used ? "," : "", (unsigned)(i % 100), h->peer_port);
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(members[i].cluster, sizeof(members[i].cluster), "%s", cluster);
        int r = launch(&members[i], err);
        if (r < 0)
            return r;
    }
    for (size_t i = 0; i < n; i++) {
        int r = wait_answering(&members[i], err);
        if (r < 0)
            return r;
    }
    return 0;
}

int etcd_harness_restart(etcd_harness *h, act_error *err)
{
    etcd_harness_stop(h);
    return spawn(h, err);
}

void etcd_harness_destroy(etcd_harness *h)
{
    etcd_harness_stop(h);
    if (h->dir[0])
        nftw(h->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    h->dir[0] = '\0';
}
