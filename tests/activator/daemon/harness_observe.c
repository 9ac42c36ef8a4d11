/* What the tests look at besides the daemon's own answers: the claim store,
 * the app over HTTP, the apps' markers, cgroup leaves, records, and other
 * programs' exit codes and output. */
#include "harness.h"
#include "harness_internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

bool dh_claim_get(dh_daemon *d, const char *host, claim *out)
{
    act_error err = {0};
    int r = claims_read(d->store, host, out, &err);
    DH_CHECK(d, r >= 0, "reading the claim of %s: %s", host, err.message);
    return r == 1;
}

uint64_t dh_claim_put(dh_daemon *d, const claim *c)
{
    for (int i = 0; i < 20; i++) {
        claim current;
        uint64_t expected = dh_claim_get(d, c->host, &current) ? current.revision : 0;
        uint64_t revision = 0;
        act_error err = {0};
        int r = claims_cas(d->store, c->host, expected, c, &revision, NULL, &err);
        if (r == 0)
            return revision;
        DH_CHECK(d, r == CLAIMS_CHANGED, "writing the claim of %s: %s", c->host, err.message);
    }
    fail_msg("writing the claim of %s: it kept changing under the test", c->host);
    return 0;
}

void dh_claim_assigned(const char *host, const char *box, claim *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->host, sizeof(out->host), "%s", host);
    snprintf(out->op.id, sizeof(out->op.id), "e2e");
    out->op.kind = CLAIM_OP_SERVING;
    snprintf(out->op.phase, sizeof(out->op.phase), "assigned");
    snprintf(out->op.exec, sizeof(out->op.exec), "%s", box);
}

void dh_marker_path(dh_daemon *d, const char *host, char *out, size_t size)
{
    snprintf(out, size, "%s/marker-%s", d->dir, host);
}

int dh_http_get(int port, char *buf, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval timeout = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char request[] = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    size_t used = 0;
    ssize_t n;
    while (used < size - 1 && (n = recv(fd, buf + used, size - 1 - used, 0)) > 0)
        used += (size_t)n;
    close(fd);
    buf[used] = '\0';
    const char *body = strstr(buf, "\r\n\r\n");
    if (!body)
        return -EPROTO;
    body += 4;
    size_t body_len = strlen(body);
    memmove(buf, body, body_len + 1);
    return (int)body_len;
}

size_t dh_marker_pids(dh_daemon *d, const char *host, pid_t *pids, size_t max)
{
    char path[PATH_MAX];
    dh_marker_path(d, host, path, sizeof(path));
    char *text = dh_read_text(path);
    if (!text)
        return 0;
    size_t n = 0;
    for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n"))
        pids[n++] = (pid_t)atoi(line);
    free(text);
    return n;
}

bool dh_marker_wait(dh_daemon *d, const char *host, size_t count, int timeout_ms)
{
    uint64_t deadline = dh_now_ms() + (uint64_t)timeout_ms;
    pid_t pids[64];
    while (dh_marker_pids(d, host, pids, 64) < count) {
        if (dh_now_ms() >= deadline)
            return false;
        dh_sleep_ms(10);
    }
    return true;
}

bool dh_leaf_exists(dh_daemon *d, const char *host, const char *leaf)
{
    char path[PATH_MAX + 160];
    snprintf(path, sizeof(path), "%s/hosts/%s/%s", d->cgroup_path, host, leaf);
    return access(path, F_OK) == 0;
}

static size_t count_subdirs(const char *path, bool dirs)
{
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (entry->d_name[0] != '.' && (!dirs || entry->d_type == DT_DIR))
            count++;
    closedir(dir);
    return count;
}

size_t dh_leaf_count(dh_daemon *d, const char *host)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof(path), "%s/hosts/%s", d->cgroup_path, host);
    return count_subdirs(path, true);
}

size_t dh_generation_records(dh_daemon *d, const char *host)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hosts/%s/generations", d->state_dir, host);
    return count_subdirs(path, false);
}

int dh_run(char *const argv[], char *out, size_t out_size)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: NNG is not fork-safe. */
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    /* Read to the end even past out_size, so the child never blocks on a
     * full pipe; what does not fit is dropped. */
    size_t used = 0;
    char overflow[4096];
    for (;;) {
        bool room = used < out_size - 1;
        ssize_t n = room ? read(fds[0], out + used, out_size - 1 - used)
                         : read(fds[0], overflow, sizeof(overflow));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (room)
            used += (size_t)n;
    }
    out[used] = '\0';
    close(fds[0]);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}
