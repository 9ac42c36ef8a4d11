/* The test registry (registry_harness.h). */
#include "tests/image/registry_harness.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "tests/image/token_issuer.h"

#ifndef ACT_TLS_CERTS_SCRIPT
#error "ACT_TLS_CERTS_SCRIPT must name tests/tls/make-certs.sh"
#endif

bool reg_harness_available(void)
{
    return access(REG_HARNESS_BINARY, X_OK) == 0 && system("command -v skopeo >/dev/null") == 0;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int write_text(const char *path, const char *text, mode_t mode, act_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return act_error_set(err, errno, "cannot write %s: %s", path, strerror(errno));
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len;
    close(fd);
    return ok ? 0 : act_error_set(err, EIO, "cannot write %s", path);
}

static int run(act_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(act_error *err, const char *fmt, ...)
{
    char command[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(command, sizeof(command), fmt, ap);
    va_end(ap);
    int status = system(command);
    return status == 0 ? 0 : act_error_set(err, EIO, "command failed (%d): %s", status, command);
}

/* The htpasswd line of the user, bcrypt as the registry requires. */
static int write_htpasswd(const reg_harness *h, const char *path, act_error *err)
{
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data data = {0};
    if (!crypt_gensalt_rn("$2b$", 5, NULL, 0, salt, sizeof(salt)))
        return act_error_set(err, EIO, "crypt_gensalt: %s", strerror(errno));
    const char *hash = crypt_r(REG_HARNESS_PASSWORD, salt, &data);
    if (!hash || hash[0] == '*')
        return act_error_set(err, EIO, "crypt: no bcrypt");
    char line[256];
    snprintf(line, sizeof(line), "%s:%s\n", REG_HARNESS_USER, hash);
    return write_text(path, line, 0644, err);
}

/* The auth file the puller reads: base64 of "user:password". */
static int write_auth_file(reg_harness *h, act_error *err)
{
    char userpwd[128];
    unsigned char encoded[256];
    snprintf(userpwd, sizeof(userpwd), "%s:%s", REG_HARNESS_USER, REG_HARNESS_PASSWORD);
    EVP_EncodeBlock(encoded, (const unsigned char *)userpwd, (int)strlen(userpwd));
    char text[512];
    snprintf(text, sizeof(text), "{\"auths\":{\"%s\":{\"auth\":\"%s\"}}}\n", h->address, encoded);
    return write_text(h->auth_file, text, 0600, err);
}

static long probe(const reg_harness *h)
{
    CURL *easy = curl_easy_init();
    char url[128];
    snprintf(url, sizeof(url), "%s://%s/v2/", h->tls ? "https" : "http", h->address);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    long status = 0;
    if (curl_easy_perform(easy) == CURLE_OK)
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(easy);
    return status;
}

int reg_harness_start(reg_harness *h, bool tls, bool auth, act_error *err)
{
    return reg_harness_start_with(h, tls, auth, true, err);
}

static int start(reg_harness *h, bool tls, bool auth, bool token, bool deletes, act_error *err);
static int launch(reg_harness *h, act_error *err);

int reg_harness_start_with(reg_harness *h, bool tls, bool auth, bool deletes, act_error *err)
{
    return start(h, tls, auth, false, deletes, err);
}

int reg_harness_start_token(reg_harness *h, act_error *err)
{
    return start(h, false, true, true, true, err);
}

static int start(reg_harness *h, bool tls, bool auth, bool token, bool deletes, act_error *err)
{
    *h = (reg_harness){.tls = tls, .auth = auth};
    snprintf(h->dir, sizeof(h->dir), "/tmp/act-registry-XXXXXX");
    if (!mkdtemp(h->dir))
        return act_error_set(err, errno, "mkdtemp: %s", strerror(errno));
    h->port = free_port();
    if (h->port < 0)
        return act_error_set(err, EADDRNOTAVAIL, "no free port");
    snprintf(h->address, sizeof(h->address), "127.0.0.1:%d", h->port);
    snprintf(h->certs_dir, sizeof(h->certs_dir), "%s/certs.d", h->dir);
    snprintf(h->auth_file, sizeof(h->auth_file), "%s/auth.json", h->dir);
    snprintf(h->storage, sizeof(h->storage), "%s/data", h->dir);
    char config[4096] = "", tls_part[1024] = "", auth_part[1024] = "";
    if (tls) {
        if (run(err, "%s %s/tls && mkdir -p %s/%s && cp %s/tls/ca.crt %s/%s/ca.crt",
                ACT_TLS_CERTS_SCRIPT, h->dir, h->certs_dir, h->address, h->dir, h->certs_dir,
                h->address) < 0)
            return -EIO;
        snprintf(tls_part, sizeof(tls_part),
                 "  tls:\n    certificate: %s/tls/server.crt\n    key: %s/tls/server.key\n", h->dir,
                 h->dir);
    }
    if (token) {
        char realm[128];
        if (token_issuer_start(h->dir, REG_HARNESS_USER, REG_HARNESS_PASSWORD, &h->token, realm,
                               sizeof(realm), err) < 0 ||
            write_auth_file(h, err) < 0)
            return -EIO;
        snprintf(auth_part, sizeof(auth_part),
                 "auth:\n  token:\n    realm: %s\n    service: " TOKEN_ISSUER_SERVICE
                 "\n    issuer: " TOKEN_ISSUER_NAME "\n    rootcertbundle: %s/issuer.crt\n",
                 realm, h->dir);
    } else if (auth) {
        char htpasswd[128];
        snprintf(htpasswd, sizeof(htpasswd), "%s/htpasswd", h->dir);
        if (write_htpasswd(h, htpasswd, err) < 0 || write_auth_file(h, err) < 0)
            return -EIO;
        snprintf(auth_part, sizeof(auth_part),
                 "auth:\n  htpasswd:\n    realm: activator-test\n    path: %s\n", htpasswd);
    }
    snprintf(config, sizeof(config),
             "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n"
             "  delete:\n    enabled: %s\nhttp:\n  addr: %s\n%s%s",
             h->storage, deletes ? "true" : "false", h->address, tls_part, auth_part);
    char config_path[128];
    snprintf(config_path, sizeof(config_path), "%s/config.yml", h->dir);
    if (write_text(config_path, config, 0644, err) < 0)
        return -EIO;
    return launch(h, err);
}

/* Starts docker-registry on the harness's configuration and waits until it
 * answers. */
static int launch(reg_harness *h, act_error *err)
{
    char config_path[128], log_path[128];
    snprintf(config_path, sizeof(config_path), "%s/config.yml", h->dir);
    snprintf(log_path, sizeof(log_path), "%s/registry.log", h->dir);
    pid_t pid = fork();
    if (pid < 0)
        return act_error_set(err, errno, "fork: %s", strerror(errno));
    if (pid == 0) {
        int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (log >= 0) {
            dup2(log, 1);
            dup2(log, 2);
        }
        execl(REG_HARNESS_BINARY, REG_HARNESS_BINARY, "serve", config_path, (char *)NULL);
        _exit(127);
    }
    h->pid = pid;
    /* Until it answers, at most 30 s (it starts in well under a second). */
    for (int waited = 0; waited < 30000; waited += 20) {
        long status = probe(h);
        if (status == 200 || status == 401)
            return 0;
        int wstatus;
        if (waitpid(pid, &wstatus, WNOHANG) == pid) {
            h->pid = 0;
            return act_error_set(err, EIO, "docker-registry exited at start; see %s", log_path);
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return act_error_set(err, ETIMEDOUT, "docker-registry did not answer in 30 s; see %s",
                         log_path);
}

int reg_harness_push(const reg_harness *h, const char *layout, const char *tag,
                     const char *repository, act_error *err)
{
    return reg_harness_push_with(h, layout, tag, repository, NULL, err);
}

int reg_harness_push_with(const reg_harness *h, const char *layout, const char *tag,
                          const char *repository, const char *extra_args, act_error *err)
{
    char tls[512], creds[128] = "";
    if (h->tls)
        snprintf(tls, sizeof(tls), "--dest-cert-dir %s/%s", h->certs_dir, h->address);
    else
        snprintf(tls, sizeof(tls), "--dest-tls-verify=false");
    if (h->auth)
        snprintf(creds, sizeof(creds), "--dest-creds %s:%s", REG_HARNESS_USER,
                 REG_HARNESS_PASSWORD);
    return run(err, "skopeo copy --quiet %s %s %s oci:%s:%s docker://%s/%s:%s >/dev/null", tls,
               creds, extra_args ? extra_args : "", layout, tag, h->address, repository, tag);
}

void reg_harness_pause(reg_harness *h)
{
    if (h->pid > 0) {
        kill(h->pid, SIGTERM);
        waitpid(h->pid, NULL, 0);
        h->pid = 0;
    }
}

int reg_harness_resume(reg_harness *h, act_error *err)
{
    if (h->pid > 0)
        return 0;
    return launch(h, err);
}

void reg_harness_stop(reg_harness *h)
{
    if (h->pid > 0) {
        kill(h->pid, SIGTERM);
        waitpid(h->pid, NULL, 0);
        h->pid = 0;
    }
    token_issuer_stop(h->token);
    h->token = NULL;
    if (h->dir[0]) {
        char command[128];
        snprintf(command, sizeof(command), "rm -rf %s", h->dir);
        if (system(command) != 0)
            fprintf(stderr, "registry harness: cannot remove %s\n", h->dir);
        h->dir[0] = '\0';
    }
}
